//go:build gc

#include "go_asm.h"
#include "textflag.h"
#include "scan_wasm.h"

// plainTurns of plain_generic.go. Registers, besides those of scan_wasm.h:
// R3 the bytes the escapes of a string save, R7 first, R8 end, R9 n, R10 text, R11 the
// text of the message being read, R12 1 in a part (else 0, in the message),
// R13 where the member loop is (1 at an object's start, 0 after a comma, 2
// after a value), R14 the start of the string just read, R15 1 if the value
// read is text that counts.

// EXIT returns end, n and text: the messages read so far.
#define EXIT \
	Get SP; Get R8; I64Store end+40(FP); \
	Get SP; Get R9; I64Store n+48(FP); \
	Get SP; Get R10; I64Store text+56(FP); \
	RET

// EXPECT(c) returns unless s[i] is c, then moves past it and whitespace.
#define EXPECT(c) \
	LOADC; Get R4; I64Const c; I64Ne; If; EXIT; End; \
	Get R2; I64Const $1; I64Add; Set R2; \
	SKIP_SPACE

// LOAD32(off) pushes the 4 bytes at s[R14+off].
#define LOAD32(off) Get R0; Get R14; I64Add; I32WrapI64; I64Load32U off

// func plainTurns(s string, i int, first bool, simple *[256]bool) (end, n int, text int64)
TEXT ·plainTurns(SB), NOSPLIT, $0-64
	I64Load s_base+0(FP)
	Set R0
	I64Load s_len+8(FP)
	Set R1
	I64Load i+16(FP)
	Set R8
	I64Load8U first+24(FP)
	Set R7
	I64Load simple+32(FP)
	Set R6
	I64Const $0
	Set R9
	I64Const $0
	Set R10

	Loop // one message per iteration
		Get R8
		Set R2
		SKIP_SPACE
		Get R7
		I64Eqz
		If
			EXPECT($44) // ','
		End
		EXPECT($123) // '{'
		I64Const $0
		Set R11
		I64Const $0
		Set R12
		I64Const $1
		Set R13

		Block // the message is read
		Loop // one member per iteration
			Block // an object is closed
			Block // after a value
				Get R13
				I64Const $2
				I64Eq
				BrIf $0 // -> after a value
				LOADC
				Get R13
				I64Const $1
				I64Eq
				Get R4
				I64Const $125 // '}'
				I64Eq
				I32And
				If
					Get R2
					I64Const $1
					I64Add
					Set R2
					Br $2 // -> an object is closed
				End

				// The key: a string without escapes.
				Get R4
				I64Const $34 // '"'
				I64Ne
				If
					EXIT
				End
				Get R2
				I64Const $1
				I64Add
				Tee R2
				Set R14
				I64Const $0
				Set R3
				SCAN
				LOADC
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

				// Its kind.
				I64Const $0
				Set R15
				Get R12
				I64Eqz
				If // in the message: "content" and "parts" count
					Get R2
					Get R14
					I64Sub
					I64Const $7
					I64Eq
					If
						LOAD32($0)
						I64Const $const_wordCont
						I64Eq
						LOAD32($3)
						I64Const $const_wordTent
						I64Eq
						I32And
						If
							I64Const $1
							Set R15
						End
					End
					Get R2
					Get R14
					I64Sub
					I64Const $5
					I64Eq
					If
						LOAD32($0)
						I64Const $const_wordPart
						I64Eq
						LOAD32($1)
						I64Const $const_wordArts
						I64Eq
						I32And
						If
							I64Const $1
							Set R15
						End
					End
				Else // in a part: "text" counts, "content" is the walker's
					Get R2
					Get R14
					I64Sub
					I64Const $4
					I64Eq
					If
						LOAD32($0)
						I64Const $const_wordText
						I64Eq
						If
							I64Const $1
							Set R15
						End
					End
					Get R2
					Get R14
					I64Sub
					I64Const $7
					I64Eq
					If
						LOAD32($0)
						I64Const $const_wordCont
						I64Eq
						LOAD32($3)
						I64Const $const_wordTent
						I64Eq
						I32And
						If
							EXIT
						End
					End
				End
				Get R2
				I64Const $1
				I64Add
				Set R2
				SKIP_SPACE
				EXPECT($58) // ':'

				// The value: a string ...
				LOADC
				Get R4
				I64Const $34
				I64Eq
				If
					Get R2
					I64Const $1
					I64Add
					Tee R2
					Set R14
					I64Const $0
					Set R3
					Block // the string's end
					Loop
						SCAN
						LOADC
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
					Get R15
					I64Const $1
					I64Eq
					If // text: its decoded length
						Get R11
						Get R2
						Get R14
						I64Sub
						Get R3
						I64Sub
						I64Add
						Set R11
					End
					Get R2
					I64Const $1
					I64Add
					Set R2
					Br $1 // -> after a value
				End

				// ... or the message's array of parts.
				Get R4
				I64Const $91 // '['
				I64Ne
				Get R15
				I64Const $1
				I64Ne
				I32Or
				Get R12
				I64Const $0
				I64Ne
				I32Or
				If
					EXIT
				End
				Get R2
				I64Const $1
				I64Add
				Set R2
				SKIP_SPACE
				LOADC
				Get R4
				I64Const $93 // ']'
				I64Eq
				If // no parts
					Get R2
					I64Const $1
					I64Add
					Set R2
					Br $1 // -> after a value
				End
				EXPECT($123) // '{'
				I64Const $1
				Set R12
				I64Const $1
				Set R13
				Br $2 // -> the part's first member
			End

			// After a value: a comma and a member, or the object's end.
			SKIP_SPACE
			LOADC
			Get R4
			I64Const $44 // ','
			I64Eq
			If
				Get R2
				I64Const $1
				I64Add
				Set R2
				SKIP_SPACE
				I64Const $0
				Set R13
				Br $2 // -> the next member
			End
			LOADC
			Get R4
			I64Const $125 // '}'
			I64Ne
			If
				EXIT
			End
			Get R2
			I64Const $1
			I64Add
			Set R2
		End

		// An object is closed: the message ...
		Get R12
		I64Eqz
		BrIf $1 // -> the message is read
		// ... or a part, then a comma and a part, or the parts' end.
		SKIP_SPACE
		LOADC
		Get R4
		I64Const $44
		I64Eq
		If
			Get R2
			I64Const $1
			I64Add
			Set R2
			SKIP_SPACE
			EXPECT($123)
			I64Const $1
			Set R13
			Br $1 // -> the part's first member
		End
		LOADC
		Get R4
		I64Const $93
		I64Ne
		If
			EXIT
		End
		Get R2
		I64Const $1
		I64Add
		Set R2
		I64Const $0
		Set R12
		I64Const $2
		Set R13
		Br $0 // -> after the message's parts
		End
		End

		// A plain message is read: count it.
		Get R2
		Set R8
		Get R9
		I64Const $1
		I64Add
		Set R9
		Get R10
		Get R11
		I64Add
		Set R10
		I64Const $0
		Set R7
		Br $0 // the next message
	End
	EXIT
