//go:build gc && !noasm

#include "go_asm.h"
#include "textflag.h"
#include "scan_wasm.h"
#include "count_wasm.h"

// EXIT, in HEX, leaves the block of an escape's reading for "anything else"
// (HEX's If, Else If, then that block).
#define EXIT Br $2

// spansUnits of count_generic.go: the features of TextFeatures (count.go)
// of each span, weighed as they are counted (count_wasm.h's WEIGH_SPAN).
// Registers: R0 the address of s, R1 the span's end, R2 the read position
// i, R3 the units counted, R4 the word x of up to 8 bytes at i, R5 how many
// of its bytes n are read (the low ones), R7 the high bit of each of the n
// bytes, R8 to R11 WEIGH's scratch, R12 1 if the span has escapes; R6 and
// R15 whether the byte before i is a letter, a digit (0x80 if it is, else
// 0).

// WEIGH_SPAN(esc, u, cl, cd, a, b, l, d) adds to u the weight of s[i:e]
// (R2 is i, R1 is e, which it leaves R2 at), as count_generic.go's
// spanUnits weighs it: a word of 8 bytes at a time (the bytes left in the
// span at its end, read as 8 bytes while s has them), up to the first
// backslash if esc is not 0; an escape as WEIGH_RUNE weighs a \u escape
// with 4 hex digits, anything else as one other ASCII byte, the next word
// starting anew. Registers: R4 the word, R5 its bytes n, R7 their VALID
// mask, and WEIGH's; HEX's EXIT must leave the block of the escape (Br $2).
#define WEIGH_SPAN(esc, u, cl, cd, a, b, l, d) \
	I64Const $0; Set cl; I64Const $0; Set cd; \
	Block; Loop; \
		Get R2; Get R1; I64GeU; BrIf $1; \
		Get R2; I64Const $8; I64Add; Get R1; I64LeU; \
		If; \
			Get R0; Get R2; I64Add; I32WrapI64; I64Load $0; Set R4; \
			I64Const $8; Set R5; \
			I64Const HIGH; Set R7; \
		Else; \
			Get R2; I64Const $8; I64Add; I64Load s_len+8(FP); I64LeU; \
			If; \
				Get R0; Get R2; I64Add; I32WrapI64; I64Load $0; Set R4; \
				Get R1; Get R2; I64Sub; Set R5; \
				VALID(R7, R5); \
			Else; \
				Get R1; Get R2; I64Sub; Set R5; \
				LOAD_LAST(a); \
			End; \
		End; \
		/* Up to the first backslash, if the span has escapes: the lowest */ \
		/* byte flagged is one (a borrow flags a byte only above a 0). */ \
		Get esc; I64Eqz; I32Eqz; If; \
			Get R4; I64Const $0x5c5c5c5c5c5c5c5c; I64Xor; Tee a; \
			I64Const $0x0101010101010101; I64Sub; Get a; I64Const $-1; I64Xor; I64And; \
			Get R7; I64And; Tee a; I64Eqz; I32Eqz; If; \
				Get a; I64Ctz; I64Const $3; I64ShrU; Set R5; \
				VALID(R7, R5); \
			End; \
		End; \
		Get R5; I64Eqz; I32Eqz; If; \
			WEIGH(R4, R5, R7, u, cl, cd, a, b, l, d); \
			Get R2; Get R5; I64Add; Set R2; \
			Br $1; /* -> the next word */ \
		End; \
		/* An escape at i: a \u escape with 4 hex digits counts as its */ \
		/* character, anything else as one other ASCII byte. */ \
		I64Const $0; Set cl; I64Const $0; Set cd; \
		Block; /* -> anything else */ \
			Get R2; I64Const $6; I64Add; Get R1; I64GtU; BrIf $0; \
			Get R0; Get R2; I64Add; I32WrapI64; I64Load8U $1; I64Const $117; I64Ne; BrIf $0; \
			I64Const $0; Set R5; \
			HEX($2); HEX($3); HEX($4); HEX($5); \
			Get R2; I64Const $6; I64Add; Set R2; \
			WEIGH_RUNE(R5, u); \
			Br $1; /* -> the next word */ \
		End; \
		ADD(u, $const_weightOther); \
		Get R2; I64Const $2; I64Add; Get R1; I64GtU; \
		If; /* a backslash at the end of the span */ \
			Get R1; Set R2; \
		Else; \
			Get R2; I64Const $2; I64Add; Set R2; \
		End; \
		Br $0; \
	End; End

// SPANS pushes the address of spans.
#define SPANS I64Load spans+16(FP); I32WrapI64

// func spansUnits(s string, spans *textSpans) int64
TEXT ·spansUnits(SB), NOSPLIT, $0-32
	I64Load s_base+0(FP)
	Set R0
	I64Const $0
	Set R3
	Get SP
	I64Const $0
	I64Store ret+24(FP) // k, the span, until the result is stored

	Block // the spans' end
	Loop // a span per iteration: R2 its start, R1 its end, R12 1 if it has escapes
		I64Load ret+24(FP)
		SPANS
		I64Load $textSpans_n
		I64GeU
		BrIf $1
		SPANS
		I64Load ret+24(FP)
		I64Const $4
		I64Shl
		I32WrapI64
		I32Add
		I64Load $textSpans_at
		Set R2
		SPANS
		I64Load ret+24(FP)
		I64Const $4
		I64Shl
		I32WrapI64
		I32Add
		I64Load $(textSpans_at+8)
		Set R1
		SPANS
		I64Load $textSpans_escaped
		I64Load ret+24(FP)
		I64ShrU
		I64Const $1
		I64And
		Set R12

		WEIGH_SPAN(R12, R3, R6, R15, R8, R9, R10, R11)

		Get SP
		I64Load ret+24(FP)
		I64Const $1
		I64Add
		I64Store ret+24(FP)
		Br $0 // the next span
	End
	End

	Get SP
	Get R3
	I64Store ret+24(FP)
	RET
