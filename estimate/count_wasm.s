//go:build gc && !noasm

#include "go_asm.h"
#include "textflag.h"
#include "scan_wasm.h"

// EXIT, in HEX, leaves the block of an escape's reading for "anything else"
// (HEX's If, Else If, then that block).
#define EXIT Br $2

// spansUnits of count_generic.go: the features of TextFeatures (count.go)
// of each span, weighed as they are counted. Registers: R0 the address of
// s, R1 the span's end, R2 the read position i, R3 the units counted, R4 the word x of up to 8
// bytes at i, R5 how many of its bytes n are read (the low ones), R7 the
// high bit of each of the n bytes, R8 x with the high bits set, R9 the
// bytes past ASCII, R10 letters, R11 digits, R12 1 if the span has
// escapes, R13 and R14 scratch; R6 and R15 whether the byte before i is a letter, a digit (0x80
// if it is, else 0).

#define HIGH $0x8080808080808080
#define LOW7 $0x7f7f7f7f7f7f7f7f

// ZERO_BYTES(r) replaces r by the high bit of each of its bytes that is 0,
// exactly (count.go's zeroBytes).
#define ZERO_BYTES(r) \
	Get r; I64Const LOW7; I64And; I64Const LOW7; I64Add; Get r; I64Or; I64Const LOW7; I64Or; \
	I64Const $-1; I64Xor; Set r

// ADD_UNITS(r, w) adds w times the number of bits set in r to the units.
#define ADD_UNITS(r, w) Get R3; Get r; I64Popcnt; I64Const w; I64Mul; I64Add; Set R3

// ADD(w) adds w units.
#define ADD(w) Get R3; I64Const w; I64Add; Set R3

// SPANS pushes the address of spans.
#define SPANS I64Load spans+16(FP); I32WrapI64

// VALID sets R7 to the high bit of each of the low n bytes: HIGH >> (64 - 8n).
#define VALID I64Const HIGH; I64Const $64; Get R5; I64Const $3; I64Shl; I64Sub; I64ShrU; Set R7

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
		I64Load $0
		I64GeU
		BrIf $1
		SPANS
		I64Load ret+24(FP)
		I64Const $4
		I64Shl
		I32WrapI64
		I32Add
		I64Load $24
		Set R2
		SPANS
		I64Load ret+24(FP)
		I64Const $4
		I64Shl
		I32WrapI64
		I32Add
		I64Load $32
		Set R1
		SPANS
		I64Load $16
		I64Load ret+24(FP)
		I64ShrU
		I64Const $1
		I64And
		Set R12
		I64Const $0
		Set R6
		I64Const $0
		Set R15

	Block // the span's end
	Loop // a word, or an escape, per iteration
		Get R2
		Get R1
		I64GeU
		BrIf $1

		// x, n: 8 bytes, or the bytes left in the span (read as 8 bytes
		// while s has them).
		Get R2
		I64Const $8
		I64Add
		Get R1
		I64LeU
		If
			Get R0
			Get R2
			I64Add
			I32WrapI64
			I64Load $0
			Set R4
			I64Const $8
			Set R5
			I64Const HIGH
			Set R7
		Else
			Get R2
			I64Const $8
			I64Add
			I64Load s_len+8(FP)
			I64LeU
			If
				Get R0
				Get R2
				I64Add
				I32WrapI64
				I64Load $0
				Set R4
				Get R1
				Get R2
				I64Sub
				Set R5
				VALID
			Else
				Get R1
				Get R2
				I64Sub
				Tee R5
				Set R8 // k, from n down to 1
				I64Const $0
				Set R4
				Block
				Loop
					Get R8
					I64Eqz
					BrIf $1
					Get R8
					I64Const $1
					I64Sub
					Set R8
					Get R4
					I64Const $8
					I64Shl
					Get R0
					Get R2
					I64Add
					Get R8
					I64Add
					I32WrapI64
					I64Load8U $0
					I64Or
					Set R4
					Br $0
				End
				End
				VALID
			End
		End

		// Up to the first backslash, if the span has escapes.
		Get R12
		I64Eqz
		I32Eqz
		If
			Get R4
			I64Const $0x5c5c5c5c5c5c5c5c
			I64Xor
			Set R8
			ZERO_BYTES(R8)
			Get R8
			Get R7
			I64And
			Tee R8
			I64Eqz
			I32Eqz
			If
				Get R8
				I64Ctz
				I64Const $3
				I64ShrU
				Set R5
				VALID
			End
		End

		Get R5
		I64Eqz
		I32Eqz
		If // the features of n bytes
			// Each byte as another ASCII byte: each feature below adds its
			// weight less that of the class it is counted in here.
			Get R3
			Get R5
			I64Const $const_weightOther
			I64Mul
			I64Add
			Set R3

			// Letters, digits, spaces (and controls, below 0x21).
			Get R4
			I64Const HIGH
			I64Or
			Set R8
			Get R4
			I64Const $-1
			I64Xor
			Get R7
			I64And
			Set R13 // ASCII bytes
			Get R8
			I64Const $0x4141414141414141
			I64Sub
			Get R13
			I64And
			Set R10
			ADD_UNITS(R10, $(const_weightLetter-const_weightOther))
			Get R8
			I64Const $0x3030303030303030
			I64Sub
			Get R8
			I64Const $0x3a3a3a3a3a3a3a3a
			I64Sub
			I64Const $-1
			I64Xor
			I64And
			Get R13
			I64And
			Set R11
			Get R8
			I64Const $0x2121212121212121
			I64Sub
			I64Const $-1
			I64Xor
			Get R13
			I64And
			Set R14
			ADD_UNITS(R14, $(const_weightSpace-const_weightOther))

			// Bytes past ASCII, if any: continuation bytes, then lead
			// bytes (R13), of 3-byte characters (R13), of 4-byte ones
			// (R14), and of 3-byte ones below U+3000 (0xE0–0xE2).
			Get R4
			Get R7
			I64And
			Tee R9
			I64Eqz
			I32Eqz
			If
				ADD_UNITS(R9, $(const_weightCont-const_weightOther))
				Get R9
				Get R4
				I64Const $1
				I64Shl
				I64And
				Set R13
				ADD_UNITS(R13, $(const_weightLead2-const_weightCont))
				Get R13
				Get R4
				I64Const $2
				I64Shl
				I64And
				Set R13
				ADD_UNITS(R13, $(const_weightLead3-const_weightLead2))
				Get R13
				Get R4
				I64Const $3
				I64Shl
				I64And
				Set R14
				ADD_UNITS(R14, $(const_weightLead4-const_weightLead3))
				Get R4
				I64Const $3
				I64Shl
				Get R4
				I64Const $4
				I64Shl
				I64Or
				Get R4
				I64Const $5
				I64Shl
				I64Or
				Get R4
				I64Const $6
				I64Shl
				Get R4
				I64Const $7
				I64Shl
				I64And
				I64Or
				I64Const $-1
				I64Xor
				Get R13
				I64And
				Set R13
				ADD_UNITS(R13, $(const_weightLead3Low-const_weightLead3))
			End

			// The starts of runs of letters and of digits.
			Get R10
			Get R10
			I64Const $8
			I64Shl
			Get R6
			I64Or
			I64Const $-1
			I64Xor
			I64And
			Set R13
			ADD_UNITS(R13, $const_weightWord)
			Get R11
			I64Eqz
			I32Eqz
			If // digits, rarer than letters
				Get R11
				Get R11
				I64Const $8
				I64Shl
				Get R15
				I64Or
				I64Const $-1
				I64Xor
				I64And
				Set R13
				ADD_UNITS(R13, $const_weightNumber)
			End

			// The flags of the last byte; i moves past the n bytes.
			Get R5
			I64Const $3
			I64Shl
			I64Const $8
			I64Sub
			Set R13 // 8n - 8
			Get R10
			Get R13
			I64ShrU
			Set R6
			Get R11
			Get R13
			I64ShrU
			Set R15
			Get R2
			Get R5
			I64Add
			Set R2
			Br $1 // the next word
		End

		// An escape at i: a \u escape with 4 hex digits counts as its
		// character, anything else as one other ASCII byte.
		I64Const $0
		Set R6
		I64Const $0
		Set R15
		Block // -> anything else
			Get R2
			I64Const $6
			I64Add
			Get R1
			I64GtU
			BrIf $0
			Get R0
			Get R2
			I64Add
			I32WrapI64
			I64Load8U $1
			I64Const $117 // 'u'
			I64Ne
			BrIf $0
			// The code point (R5) of 4 hex digits (scan_wasm.h's HEX, whose
			// EXIT leaves this block: anything else).
			I64Const $0
			Set R5
			HEX($2)
			HEX($3)
			HEX($4)
			HEX($5)
			Get R2
			I64Const $6
			I64Add
			Set R2

			// Its character's bytes.
			Get R5
			I64Const $0x80
			I64LtU
			If // ASCII, after nothing
				Get R5
				I64Const $0x41
				I64GeU
				If
					ADD($(const_weightLetter+const_weightWord))
					Br $3 // the next word
				End
				Get R5
				I64Const $0x30
				I64Sub
				I64Const $10
				I64LtU
				If
					ADD($(const_weightOther+const_weightNumber))
					Br $3
				End
				Get R5
				I64Const $0x21
				I64LtU
				If
					ADD($const_weightSpace)
					Br $3
				End
				ADD($const_weightOther)
				Br $2
			End
			Get R5
			I64Const $0x800
			I64LtU
			If
				ADD($(const_weightLead2+const_weightCont))
				Br $2
			End
			Get R5
			I64Const $0x3000
			I64LtU
			If
				ADD($(const_weightLead3Low+2*const_weightCont))
				Br $2
			End
			Get R5
			I64Const $0xd800
			I64Sub
			I64Const $0x400
			I64LtU
			If // the first half of a surrogate pair
				ADD($(const_weightLead4+3*const_weightCont))
				Br $2
			End
			Get R5
			I64Const $0xdc00
			I64Sub
			I64Const $0x400
			I64LtU
			BrIf $1 // the second half: nothing
			ADD($(const_weightLead3+2*const_weightCont))
			Br $1
		End
		ADD($const_weightOther)
		Get R2
		I64Const $2
		I64Add
		Get R1
		I64GtU
		If // a backslash at the end of s
			Get R1
			Set R2
		Else
			Get R2
			I64Const $2
			I64Add
			Set R2
		End
		Br $0
	End
	End

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
