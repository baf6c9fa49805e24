//go:build gc

#include "textflag.h"
#include "scan_wasm.h"

// skipValue of skip_generic.go. Registers, besides those of scan_wasm.h: R3
// the escapes SCAN counts (unused), R7 the bit set of the open containers
// that are objects (bit d for depth d), R8 the deepest nesting allowed, R9
// the depth, R10 the byte that opened the container (then 1 if the
// container is an object).

// EXIT returns ok = false: the walker reads the value itself.
#define EXIT \
	Get SP; I64Const $0; I64Store end+40(FP); \
	Get SP; I64Const $0; I64Store8 ok+48(FP); \
	RET

// STRING skips the rest of a valid string, after its opening quote: every
// escape a two-byte one or a \u with four hex digits.
#define STRING \
	Block; Loop; \
		SCAN; LOADC; \
		Get R4; I64Const $34; I64Eq; If; Get R2; I64Const $1; I64Add; Set R2; Br $2; End; \
		Get R4; I64Const $92; I64Ne; If; EXIT; End; \
		Get R2; I64Const $6; I64Add; Get R1; I64GtU; If; EXIT; End; \
		Get R0; Get R2; I64Add; I32WrapI64; I64Load8U $1; I64Const $117; I64Ne; If; EXIT; End; \
		HEX($2); HEX($3); HEX($4); HEX($5); \
		Get R2; I64Const $6; I64Add; Set R2; \
		Br $0; \
	End; End

// KEY skips a key and the colon after it.
#define KEY \
	LOADC; Get R4; I64Const $34; I64Ne; If; EXIT; End; \
	Get R2; I64Const $1; I64Add; Set R2; \
	STRING; \
	SKIP_SPACE; \
	LOADC; Get R4; I64Const $58; I64Ne; If; EXIT; End; \
	Get R2; I64Const $1; I64Add; Set R2

// DIGITS skips one digit or more.
#define DIGITS \
	LOADC; Get R4; I64Const $48; I64Sub; I64Const $10; I64GeU; If; EXIT; End; \
	Block; Loop; \
		Get R2; I64Const $1; I64Add; Set R2; \
		LOADC; Get R4; I64Const $48; I64Sub; I64Const $10; I64LtU; BrIf $0; \
	End; End

// LITERAL(n, word) skips the literal of n bytes at i whose first 4 bytes are
// word (little-endian).
#define LITERAL(n, word) \
	Get R2; I64Const n; I64Add; Get R1; I64GtU; If; EXIT; End; \
	Get R0; Get R2; I64Add; I32WrapI64; I64Load32U $0; I64Const word; I64Ne; If; EXIT; End; \
	Get R2; I64Const n; I64Add; Set R2

// func skipValue(s string, i, maxNest int, simple *[256]bool) (end int, ok bool)
TEXT ·skipValue(SB), NOSPLIT, $0-49
	I64Load s_base+0(FP)
	Set R0
	I64Load s_len+8(FP)
	Set R1
	I64Load i+16(FP)
	Set R2
	I64Load maxNest+24(FP)
	Set R8
	I64Load simple+32(FP)
	Set R6
	// At most 63 levels, for the bits of R7.
	Get R8
	I64Const $63
	I64GtS
	If
		I64Const $63
		Set R8
	End
	I64Const $0
	Set R7
	I64Const $0
	Set R9

	Loop // at a value
		Block // after a value
			SKIP_SPACE
			LOADC
			// An object or an array.
			Get R4
			I64Const $123 // '{'
			I64Eq
			Get R4
			I64Const $91 // '['
			I64Eq
			I32Or
			If
				Get R4
				Set R10
				Get R9
				I64Const $1
				I64Add
				Tee R9
				Get R8
				I64GtS
				If
					EXIT
				End
				// Bit R9 of R7 = bit 5 of the byte: '{' is 0x7b, '[' 0x5b.
				Get R7
				I64Const $1
				Get R9
				I64Shl
				I64Const $-1
				I64Xor
				I64And
				Get R10
				I64Const $5
				I64ShrU
				I64Const $1
				I64And
				Get R9
				I64Shl
				I64Or
				Set R7
				Get R2
				I64Const $1
				I64Add
				Set R2
				SKIP_SPACE
				LOADC
				Get R4
				Get R10
				I64Const $2 // '}' or ']'
				I64Add
				I64Eq
				If // empty
					Get R2
					I64Const $1
					I64Add
					Set R2
					Get R9
					I64Const $1
					I64Sub
					Set R9
					Br $2 // -> after a value
				End
				Get R10
				I64Const $123
				I64Eq
				If
					KEY
				End
				Br $2 // -> at a value
			End
			// A string.
			Get R4
			I64Const $34
			I64Eq
			If
				Get R2
				I64Const $1
				I64Add
				Set R2
				STRING
				Br $1 // -> after a value
			End
			// A literal.
			Get R4
			I64Const $116 // 't'
			I64Eq
			If
				LITERAL($4, $0x65757274) // "true"
				Br $1
			End
			Get R4
			I64Const $110 // 'n'
			I64Eq
			If
				LITERAL($4, $0x6c6c756e) // "null"
				Br $1
			End
			Get R4
			I64Const $102 // 'f'
			I64Eq
			If
				Get R2
				I64Const $5
				I64Add
				Get R1
				I64GtU
				If
					EXIT
				End
				Get R0
				Get R2
				I64Add
				I32WrapI64
				I64Load8U $4
				I64Const $101 // 'e'
				I64Ne
				If
					EXIT
				End
				LITERAL($5, $0x736c6166) // "fals", then the 'e'
				Br $1
			End
			// A number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
			Get R4
			I64Const $45 // '-'
			I64Eq
			If
				Get R2
				I64Const $1
				I64Add
				Set R2
			End
			LOADC
			Get R4
			I64Const $48 // '0'
			I64Eq
			If
				Get R2
				I64Const $1
				I64Add
				Set R2
			Else
				DIGITS
			End
			LOADC
			Get R4
			I64Const $46 // '.'
			I64Eq
			If
				Get R2
				I64Const $1
				I64Add
				Set R2
				DIGITS
			End
			LOADC
			Get R4
			I64Const $32
			I64Or
			I64Const $101 // 'e' or 'E'
			I64Eq
			If
				Get R2
				I64Const $1
				I64Add
				Set R2
				LOADC
				Get R4
				I64Const $43 // '+'
				I64Eq
				Get R4
				I64Const $45 // '-'
				I64Eq
				I32Or
				If
					Get R2
					I64Const $1
					I64Add
					Set R2
				End
				DIGITS
			End
		End

		// After a value: the end of the outermost value, or a comma and
		// the next member or element, or the end of the container.
		Loop
			Get R9
			I64Eqz
			If
				Get SP
				Get R2
				I64Store end+40(FP)
				Get SP
				I64Const $1
				I64Store8 ok+48(FP)
				RET
			End
			SKIP_SPACE
			LOADC
			Get R7
			Get R9
			I64ShrU
			I64Const $1
			I64And
			Set R10 // 1 in an object
			Get R4
			I64Const $44 // ','
			I64Eq
			If
				Get R2
				I64Const $1
				I64Add
				Set R2
				Get R10
				I64Eqz
				I32Eqz
				If
					SKIP_SPACE
					KEY
				End
				Br $2 // -> at a value
			End
			// ']' (0x5d) in an array, '}' (0x7d) in an object.
			Get R4
			I64Const $93
			Get R10
			I64Const $5
			I64Shl
			I64Add
			I64Ne
			If
				EXIT
			End
			Get R2
			I64Const $1
			I64Add
			Set R2
			Get R9
			I64Const $1
			I64Sub
			Set R9
			Br $0
		End
	End
	EXIT
