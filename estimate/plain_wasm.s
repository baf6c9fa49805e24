//go:build gc && !noasm

#include "go_asm.h"
#include "textflag.h"
#include "scan_wasm.h"
#include "count_wasm.h"

// plainTurns of plain_generic.go. Registers, besides those of scan_wasm.h:
// R3 the bytes the escapes of a string save (after a key, its length), R7
// to R10 SKIP_VALUE's (R8 the deepest nesting, set before each, as
// plain_generic.go's), R11 the text of the message being read, R12 1 in
// the message's parts (else 0), R13 the state (plain_generic.go's atMember
// and so on), R14 the start of the string being read, R15 1 if it is text
// that counts (2 a tool call); R4 is s[i] (0 at the end of s) where a step
// starts (SKIP_SPACE leaves it there); F17 the units of the message being
// read, F18 the spans noted with it, F19 spans.n (int64s in f64 locals).
// With spans, a string that counts is weighed as it is scanned
// (WEIGHED_STRING), with other uses of the registers, and a tool call's
// JSON noted in spans. The results are kept in their slots of the frame,
// and first in its own, so that EXIT only returns.

#define EXIT RET

// EXPECT(c) returns unless s[i], in R4, is c, then moves past it and
// whitespace.
#define EXPECT(c) \
	Get R4; I64Const c; I64Ne; If; EXIT; End; \
	ADVANCE; \
	SKIP_SPACE

// LOAD32(off) pushes the 4 bytes at s[R14+off].
#define LOAD32(off) Get R0; Get R14; I64Add; I32WrapI64; I64Load32U off

// IF_KEY(n, w0, off, w1) runs what follows, to End, if the key just read
// (from R14, R3 bytes long) is n bytes long, its 4 bytes at 0 are w0 and
// its 4 bytes at off are w1 (every byte of it when n is at most 8);
// IF_KEY8 compares 8-byte words (a key of 8 to 16 bytes compared whole).
#define IF_KEY(n, w0, off, w1) \
	Get R3; I64Const n; I64Eq; If; \
	LOAD32($0); I64Const w0; I64Eq; LOAD32(off); I64Const w1; I64Eq; I32And; If
#define IF_KEY8(n, w0, off, w1) \
	Get R3; I64Const n; I64Eq; If; \
	LOAD64($0); I64Const w0; I64Eq; LOAD64(off); I64Const w1; I64Eq; I32And; If

// LOAD64(off) pushes the 8 bytes at s[R14+off].
#define LOAD64(off) Get R0; Get R14; I64Add; I32WrapI64; I64Load off

// EXIT_IF_KEY(n, w0, off, w1) returns if the key just read is the one
// IF_KEY(n, w0, off, w1) tells; TEXT_IF_KEY sets R15 to 1 (text that
// counts) if it is; TOOL_IF_KEY and TOOL8_IF_KEY (IF_KEY8's) to 2 (a tool
// call).
#define EXIT_IF_KEY(n, w0, off, w1) IF_KEY(n, w0, off, w1); EXIT; End; End
#define TEXT_IF_KEY(n, w0, off, w1) IF_KEY(n, w0, off, w1); I64Const $1; Set R15; End; End
#define TOOL_IF_KEY(n, w0, off, w1) IF_KEY(n, w0, off, w1); I64Const $2; Set R15; End; End
#define TOOL8_IF_KEY(n, w0, off, w1) IF_KEY8(n, w0, off, w1); I64Const $2; Set R15; End; End

// STATE(state) sets the state the next step starts from.
#define STATE(state) I64Const state; Set R13

// OPEN_STRING moves past a string's opening quote, noting where its
// content starts in R14, with no escapes counted yet in R3.
#define OPEN_STRING ADVANCE; Get R2; Set R14; I64Const $0; Set R3

// WEIGHED_STRING reads the content of a string that counts, from i (after
// its opening quote) to its closing quote, and weighs it as it goes: a word
// of 8 bytes at a time (the bytes left in s at its end) up to the first
// quote, backslash or control character, as SCAN finds it, weighed by
// count_wasm.h's WEIGH; an escape as spansUnits weighs it (WEIGH_RUNE for a
// \u escape), each escape starting the next word anew; it returns (EXIT)
// where plain_generic.go's plainString would not read the string (a control
// character, an escape that is neither a two-byte one nor a \u escape of a
// character that is not a surrogate, no closing quote). It adds to R3 the
// bytes the escapes save, and to F17 the string's units. Registers while it
// runs: R4 the word x, R5 how many of its bytes n are text, R7 their VALID
// mask, R15 the string's units, R6 and R14 whether the byte before i is a
// letter, a digit (WEIGH's cl and cd), R8 to R10 and R13 WEIGH's scratch;
// the string's start is kept in F16, and R6 and R14 are restored after.
#define WEIGHED_STRING \
	Get R14; F64ReinterpretI64; Set F16; \
	I64Const $0; Set R6; I64Const $0; Set R14; I64Const $0; Set R15; \
	Block; Loop; \
		/* x: 8 bytes, or the bytes left in s (none: the string is cut short). */ \
		Get R2; I64Const $8; I64Add; Get R1; I64LeU; \
		If; \
			Get R0; Get R2; I64Add; I32WrapI64; I64Load $0; Set R4; \
			I64Const HIGH; Set R7; \
		Else; \
			Get R1; Get R2; I64Sub; Tee R5; I64Eqz; If; EXIT; End; \
			LOAD_LAST(R8); \
		End; \
		/* n: the bytes before the first quote, backslash or control character. */ \
		Get R4; I64Const $0x2020202020202020; I64Sub; Get R4; I64Const $-1; I64Xor; I64And; \
		Get R4; I64Const $0x2222222222222222; I64Xor; Tee R5; I64Const $0x0101010101010101; I64Sub; Get R5; I64Const $-1; I64Xor; I64And; I64Or; \
		Get R4; I64Const $0x5c5c5c5c5c5c5c5c; I64Xor; Tee R5; I64Const $0x0101010101010101; I64Sub; Get R5; I64Const $-1; I64Xor; I64And; I64Or; \
		Get R7; I64And; Tee R5; \
		I64Eqz; \
		If; \
			Get R7; I64Const HIGH; I64Ne; If; EXIT; End; \
			I64Const $8; Set R5; \
		Else; \
			Get R5; I64Ctz; I64Const $3; I64ShrU; Set R5; \
			VALID(R7, R5); \
		End; \
		Get R5; I64Eqz; I32Eqz; \
		If; \
			WEIGH(R4, R5, R7, R15, R6, R14, R8, R9, R10, R13); \
			Get R2; Get R5; I64Add; Set R2; \
			Get R5; I64Const $8; I64Eq; BrIf $1; /* -> the next word */ \
		End; \
		/* A quote ends the string; a control character is not plain. */ \
		Get R0; Get R2; I64Add; I32WrapI64; I64Load8U $0; Tee R4; \
		I64Const $34; I64Eq; BrIf $1; \
		Get R4; I64Const $92; I64Ne; If; EXIT; End; \
		/* An escape: the next word starts anew. */ \
		I64Const $0; Set R6; I64Const $0; Set R14; \
		Get R2; I64Const $1; I64Add; Get R1; I64GeU; If; EXIT; End; \
		Get R0; Get R2; I64Add; I32WrapI64; I64Load8U $1; Tee R4; \
		I64Const $117; I64Eq; /* 'u' */ \
		If; \
			/* A \u escape of a character that is not a surrogate. */ \
			Get R2; I64Const $6; I64Add; Get R1; I64GtU; If; EXIT; End; \
			I64Const $0; Set R5; \
			HEX($2); HEX($3); HEX($4); HEX($5); \
			Get R5; I64Const $0xd800; I64Sub; I64Const $0x800; I64LtU; If; EXIT; End; \
			/* It saves 6 bytes less its UTF-8 length. */ \
			Get R3; I64Const $3; I64Add; Set R3; \
			Get R5; I64Const $0x800; I64LtU; If; Get R3; I64Const $1; I64Add; Set R3; End; \
			Get R5; I64Const $0x80; I64LtU; If; Get R3; I64Const $1; I64Add; Set R3; End; \
			WEIGH_RUNE(R5, R15); \
			Get R2; I64Const $6; I64Add; Set R2; \
			Br $1; /* -> the next word */ \
		End; \
		/* A two-byte escape, one other ASCII byte. */ \
		I64Load simple+32(FP); Get R4; I64Add; I32WrapI64; I32Load8U $0; I32Eqz; If; EXIT; End; \
		Get R3; I64Const $1; I64Add; Set R3; \
		ADD(R15, $const_weightOther); \
		Get R2; I64Const $2; I64Add; Set R2; \
		Br $0; \
	End; End; \
	Get F17; I64ReinterpretF64; Get R15; I64Add; F64ReinterpretI64; Set F17; \
	Get F16; I64ReinterpretF64; Set R14; \
	I64Load simple+32(FP); Set R6

// SPANS pushes the address of spans; IF_SPANS runs what follows, to End,
// when spans is not nil; AT_R15 pushes the address of spans.at[R15] less
// textSpans_at.
#define SPANS I64Load spans+40(FP); I32WrapI64
#define IF_SPANS I64Load spans+40(FP); I64Eqz; I32Eqz; If
#define AT_R15 SPANS; Get R15; I64Const $4; I64Shl; I32WrapI64; I32Add

// func plainTurns(s string, i int, first bool, simple *[256]bool, spans *textSpans) (end, n int, text, units int64)
TEXT ·plainTurns(SB), NOSPLIT, $0-80
	I64Load s_base+0(FP)
	Set R0
	I64Load s_len+8(FP)
	Set R1
	I64Load simple+32(FP)
	Set R6
	Get SP
	I64Load i+16(FP)
	I64Store end+48(FP)
	Get SP
	I64Const $0
	I64Store n+56(FP)
	Get SP
	I64Const $0
	I64Store text+64(FP)
	Get SP
	I64Const $0
	I64Store units+72(FP)
	I64Const $0 // spans.n, kept in F19 (the spans of the messages read)
	F64ReinterpretI64
	Set F19
	IF_SPANS
		SPANS
		I64Load $textSpans_n
		F64ReinterpretI64
		Set F19
	End

	Loop // one message per iteration
		I64Load end+48(FP)
		Set R2
		SKIP_SPACE
		I64Load8U first+24(FP)
		I64Eqz
		If
			EXPECT($44) // ','
		End
		EXPECT($123) // '{'
		I64Const $0
		Set R11
		I64Const $0
		F64ReinterpretI64
		Set F17
		Get F19
		Set F18
		I64Const $0
		Set R12
		STATE($const_atObjectStart)

		Block // the message is read
		Loop // one step per iteration
			Block // -> after a part
			Block // -> at a part
			Block // -> after a value
				Get R13
				I64Const $const_afterValue
				I64Eq
				BrIf $0
				Get R13
				I64Const $const_atPart
				I64Eq
				BrIf $1
				Get R13
				I64Const $const_afterPart
				I64Eq
				BrIf $2

				// At a member (at an object's start, '}' may come).
				Get R13
				I64Const $const_atObjectStart
				I64Eq
				Get R4
				I64Const $125 // '}'
				I64Eq
				I32And
				If
					Br $1 // -> after a value, which closes the object
				End

				// The key: a string without escapes.
				Get R4
				I64Const $34 // '"'
				I64Ne
				If
					EXIT
				End
				OPEN_STRING
				SCAN
				Get R4
				I64Const $34
				I64Ne
				Get R3
				I64Const $0
				I64Ne
				I32Or
				If
					EXIT
				End

				// Whether its value counts (R15): 1 as text, 2 as a tool
				// call or result (a string as text, anything else by its
				// JSON). R3 is the key's length (no escapes: 0 above).
				Get R2
				Get R14
				I64Sub
				Set R3
				I64Const $0
				Set R15
				Get R12
				I64Eqz
				If // a member of the message: "content" and "parts", tool calls; reasoning is the walker's
					EXIT_IF_KEY($7, $const_wordSumm, $3, $const_wordMary)
					EXIT_IF_KEY($17, $const_wordEncr, $13, $const_wordTent)
					TEXT_IF_KEY($7, $const_wordCont, $3, $const_wordTent)
					TEXT_IF_KEY($5, $const_wordPart, $1, $const_wordArts)
					TOOL8_IF_KEY($10, $const_word8ToolCal, $2, $const_word8OlCalls)
					TOOL8_IF_KEY($13, $const_word8Function, $5, $const_word8IonCall)
					TOOL8_IF_KEY($9, $const_word8Argument, $1, $const_word8Rguments)
					TOOL_IF_KEY($6, $const_wordOutp, $2, $const_wordTput)
				Else // a member of a part: "text", tool calls; "content", reasoning, images by reference and inline data are the walker's
					EXIT_IF_KEY($8, $const_wordThin, $4, $const_wordKing)
					EXIT_IF_KEY($9, $const_wordSign, $5, $const_wordTure)
					EXIT_IF_KEY($4, $const_wordData, $0, $const_wordData)
					EXIT_IF_KEY($16, $const_wordThou, $12, $const_wordTure)
					EXIT_IF_KEY($17, $const_wordThou, $13, $const_wordTure)
					EXIT_IF_KEY($9, $const_wordImag, $5, $const_wordUrlE)
					EXIT_IF_KEY($7, $const_wordFile, $3, $const_wordEId)
					EXIT_IF_KEY($6, $const_wordSour, $2, $const_wordUrce)
					EXIT_IF_KEY($8, $const_wordFile, $4, $const_wordCapD)
					EXIT_IF_KEY($9, $const_wordFile, $5, $const_wordData)
					EXIT_IF_KEY($4, $const_wordFile, $0, $const_wordFile)
					EXIT_IF_KEY($11, $const_wordInpu, $7, $const_wordUdio)
					EXIT_IF_KEY($10, $const_wordInli, $6, $const_wordCapD)
					EXIT_IF_KEY($11, $const_wordInli, $7, $const_wordData)
					EXIT_IF_KEY($5, $const_wordImag, $1, $const_wordMage)
					EXIT_IF_KEY($5, $const_wordAudi, $1, $const_wordUdio)
					EXIT_IF_KEY($5, $const_wordVide, $1, $const_wordIdeo)
					EXIT_IF_KEY($8, $const_wordDocu, $4, $const_wordMent)
					TEXT_IF_KEY($4, $const_wordText, $0, $const_wordText)
					TOOL_IF_KEY($5, $const_wordInpu, $1, $const_wordNput)
					TOOL8_IF_KEY($12, $const_word8Function, $4, $const_word8TionCall)
					TOOL8_IF_KEY($16, $const_word8Function, $8, $const_word8Response)
					EXIT_IF_KEY($7, $const_wordCont, $3, $const_wordTent)
				End
				ADVANCE
				SKIP_SPACE
				EXPECT($58) // ':'

				// The value: a string that counts ...
				Get R15
				I64Eqz
				I32Eqz
				Get R4
				I64Const $34
				I64Eq
				I32And
				If
					OPEN_STRING
					I64Load spans+40(FP)
					I64Eqz
					I32Eqz
					If
						WEIGHED_STRING
					Else
					Block // the string's end
					Loop
						SCAN
						Get R4
						I64Const $34
						I64Eq
						BrIf $1 // -> the string's end
						// A \u escape of a character that is not a
						// surrogate; else return.
						Get R4
						I64Const $92
						I64Ne
						Get R2
						I64Const $6
						I64Add
						Get R1
						I64GtU
						I32Or
						If
							EXIT
						End
						Get R0
						Get R2
						I64Add
						I32WrapI64
						I64Load8U $1
						I64Const $117 // 'u'
						I64Ne
						If
							EXIT
						End
						I64Const $0
						Set R5
						HEX($2)
						HEX($3)
						HEX($4)
						HEX($5)
						Get R5
						I64Const $0xd800
						I64GeU
						Get R5
						I64Const $0xdfff
						I64LeU
						I32And
						If
							EXIT
						End
						// It saves 6 bytes less its UTF-8 length.
						Get R3
						I64Const $3
						I64Add
						Set R3
						Get R5
						I64Const $0x800
						I64LtU
						If
							Get R3
							I64Const $1
							I64Add
							Set R3
						End
						Get R5
						I64Const $0x80
						I64LtU
						If
							Get R3
							I64Const $1
							I64Add
							Set R3
						End
						Get R2
						I64Const $6
						I64Add
						Set R2
						Br $0
					End
					End
					End
					// Its decoded length.
					Get R11
					Get R2
					Get R14
					I64Sub
					Get R3
					I64Sub
					I64Add
					Set R11
					ADVANCE
					Br $1 // -> after a value
				End

				// ... or the message's parts ...
				Get R15
				I64Const $1
				I64Eq
				Get R12
				I64Eqz
				I32And
				Get R4
				I64Const $91 // '['
				I64Eq
				I32And
				If
					ADVANCE
					SKIP_SPACE
					Get R4
					I64Const $93 // ']'
					I64Eq
					If // none
						ADVANCE
						Br $2 // -> after a value
					End
					I64Const $1
					Set R12
					STATE($const_atPart)
					Br $4 // -> the next step
				End

				// ... or anything else, skipped: a string (that does not
				// count) to its end, any other value as deep as the
				// walker skips a message's member, or a part's (a tool
				// call counts by its JSON, from R14 to i).
				Get R4
				I64Const $34
				I64Eq
				If
					ADVANCE
					STRING
					Br $1 // -> after a value
				End
				I64Const $(const_MaxDepth-const_plainMessageDepth)
				Get R12
				I64Const $1
				I64Shl
				I64Sub
				Set R8
				Get R2
				Set R14
				SKIP_VALUE
				Get R15
				I64Const $2
				I64Eq
				If
					Get R11
					Get R2
					Get R14
					I64Sub
					I64Add
					Set R11
					IF_SPANS // noted at F18, the next span, to weigh as the walker weighs it: with escapes
						Get F18
						I64ReinterpretF64
						Tee R15
						I64Const $const_maxTextSpans
						I64Eq
						If // no room: the message is the walker's
							EXIT
						End
						AT_R15
						Get R14
						I64Store $textSpans_at
						AT_R15
						Get R2
						I64Store $(textSpans_at+8)
						SPANS
						SPANS
						I64Load $textSpans_escaped
						I64Const $1
						Get R15
						I64Shl
						I64Or
						I64Store $textSpans_escaped
						Get R15
						I64Const $1
						I64Add
						F64ReinterpretI64
						Set F18
					End
				End
			End

			// After a value: a comma and a member, or the object's end.
			STATE($const_afterValue)
			SKIP_SPACE
			Get R4
			I64Const $44 // ','
			I64Eq
			If
				ADVANCE
				SKIP_SPACE
				STATE($const_atMember)
				Br $3 // -> the next step
			End
			Get R4
			I64Const $125 // '}'
			I64Ne
			If
				EXIT
			End
			ADVANCE
			Get R12
			I64Eqz
			BrIf $3 // -> the message is read
			STATE($const_afterPart)
			Br $2 // -> the next step
			End

			// At a part: an object, or anything else, skipped.
			Get R4
			I64Const $123 // '{'
			I64Eq
			If
				ADVANCE
				SKIP_SPACE
				STATE($const_atObjectStart)
				Br $2 // -> the next step
			End
			I64Const $(const_MaxDepth-const_plainMessageDepth-1)
			Set R8
			SKIP_VALUE
			STATE($const_afterPart)
			Br $1 // -> the next step
			End

			// After a part: a comma and a part, or the end of the parts.
			SKIP_SPACE
			Get R4
			I64Const $44
			I64Eq
			If
				ADVANCE
				SKIP_SPACE
				STATE($const_atPart)
				Br $1 // -> the next step
			End
			Get R4
			I64Const $93 // ']'
			I64Ne
			If
				EXIT
			End
			ADVANCE
			I64Const $0
			Set R12
			STATE($const_afterValue)
			Br $0 // -> the next step
		End
		End

		// A plain message is read: count it.
		Get SP
		Get R2
		I64Store end+48(FP)
		Get SP
		I64Load n+56(FP)
		I64Const $1
		I64Add
		I64Store n+56(FP)
		Get SP
		I64Load text+64(FP)
		Get R11
		I64Add
		I64Store text+64(FP)
		Get SP
		I64Load units+72(FP)
		Get F17
		I64ReinterpretF64
		I64Add
		I64Store units+72(FP)
		Get F18 // its spans, if it noted any
		I64ReinterpretF64
		Get F19
		I64ReinterpretF64
		I64Ne
		If
			Get F18
			Set F19
			SPANS
			Get F19
			I64ReinterpretF64
			I64Store $textSpans_n
		End
		Get SP
		I64Const $0
		I64Store8 first+24(FP)
		Br $0 // the next message
	End
	RET
