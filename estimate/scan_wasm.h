// Macros of the WASM assembly of this package. Registers: R0 the address of
// the body s, R1 len(s), R2 the read position i; R4 and R5 are scratch; R6
// the address of simpleEscape.

// ADVANCE moves i past one byte.
#define ADVANCE Get R2; I64Const $1; I64Add; Set R2

// LOADC sets R4 to s[i], or to 0 at the end of s.
#define LOADC \
	I64Const $0; Set R4; \
	Get R2; Get R1; I64LtU; \
	If; Get R0; Get R2; I64Add; I32WrapI64; I64Load8U $0; Set R4; End

// SKIP_SPACE moves i past JSON whitespace, leaving s[i] in R4 (0 at the
// end of s), as LOADC does.
#define SKIP_SPACE \
	Block; Loop; \
		Get R2; Get R1; I64GeU; If; I64Const $0; Set R4; Br $2; End; \
		Get R0; Get R2; I64Add; I32WrapI64; I64Load8U $0; Tee R4; \
		I64Const $32; I64GtU; BrIf $1; \
		Get R4; I64Const $32; I64Eq; \
		Get R4; I64Const $9; I64Eq; I32Or; \
		Get R4; I64Const $10; I64Eq; I32Or; \
		Get R4; I64Const $13; I64Eq; I32Or; \
		I32Eqz; BrIf $1; \
		ADVANCE; \
		Br $0; \
	End; End

// SCAN moves i, in the content of a string, to the first quote, backslash
// or control character, or to the end of s, skipping the two-byte escapes
// (a backslash and a byte b with simpleEscape[b]), whose number it adds to
// R3, and leaves that byte in R4 (0 at the end of s). It is scanString of
// scan_generic.go: 8 bytes at a time, flagging in R5 the high bit of each
// byte that is below 0x20, or 0x22 ('"'), or 0x5c ('\\'); the lowest flagged
// byte of each mask is exact (a false positive only ever sits above a true
// one), so the lowest of them all is too, and is where it stops. The last
// bytes of s, fewer than 8, one at a time.
#define SCAN \
	Block; Loop; \
		Block; /* -> at the byte to stop at, in R4 */ \
			Block; Loop; \
				Get R2; I64Const $8; I64Add; Get R1; I64GtU; BrIf $1; \
				Get R0; Get R2; I64Add; I32WrapI64; I64Load $0; Set R4; \
				Get R4; I64Const $0x2020202020202020; I64Sub; Get R4; I64Const $-1; I64Xor; I64And; \
				Get R4; I64Const $0x2222222222222222; I64Xor; Tee R5; I64Const $0x0101010101010101; I64Sub; Get R5; I64Const $-1; I64Xor; I64And; I64Or; \
				Get R4; I64Const $0x5c5c5c5c5c5c5c5c; I64Xor; Tee R5; I64Const $0x0101010101010101; I64Sub; Get R5; I64Const $-1; I64Xor; I64And; I64Or; \
				I64Const $0x8080808080808080; I64And; Tee R5; \
				I64Eqz; If; Get R2; I64Const $8; I64Add; Set R2; Br $1; End; \
				Get R5; I64Ctz; I64Const $3; I64ShrU; Tee R5; Get R2; I64Add; Set R2; \
				Get R4; Get R5; I64Const $3; I64Shl; I64ShrU; I64Const $0xff; I64And; Set R4; \
				Br $2; \
			End; End; \
			Block; Loop; \
				Get R2; Get R1; I64GeU; If; I64Const $0; Set R4; Br $5; End; \
				Get R0; Get R2; I64Add; I32WrapI64; I64Load8U $0; Tee R4; \
				I64Const $34; I64Eq; BrIf $1; \
				Get R4; I64Const $92; I64Eq; BrIf $1; \
				Get R4; I64Const $32; I64LtU; BrIf $1; \
				ADVANCE; \
				Br $0; \
			End; End; \
		End; \
		Get R4; I64Const $92; I64Ne; BrIf $1; \
		Get R2; I64Const $1; I64Add; Get R1; I64GeU; BrIf $1; \
		Get R6; Get R0; Get R2; I64Add; I32WrapI64; I64Load8U $1; I64Add; I32WrapI64; I32Load8U $0; I32Eqz; BrIf $1; \
		Get R2; I64Const $2; I64Add; Set R2; \
		Get R3; I64Const $1; I64Add; Set R3; \
		Br $0; \
	End; End

// HEX(off) shifts the hex digit at s[i+off] into R5, or returns (EXIT) if
// it is not one.
#define HEX(off) \
	Get R0; Get R2; I64Add; I32WrapI64; I64Load8U off; Set R4; \
	Get R4; I64Const $48; I64Sub; I64Const $10; I64LtU; \
	If; \
		Get R4; I64Const $48; I64Sub; Set R4; \
	Else; \
		Get R4; I64Const $32; I64Or; I64Const $97; I64Sub; I64Const $6; I64LtU; \
		If; Get R4; I64Const $32; I64Or; I64Const $87; I64Sub; Set R4; Else; EXIT; End; \
	End; \
	Get R5; I64Const $4; I64Shl; Get R4; I64Or; Set R5

// STRING skips the rest of a valid string, after its opening quote: every
// escape a two-byte one or a \u with four hex digits.
#define STRING \
	Block; Loop; \
		SCAN; \
		Get R4; I64Const $34; I64Eq; If; ADVANCE; Br $2; End; \
		Get R4; I64Const $92; I64Ne; If; EXIT; End; \
		Get R2; I64Const $6; I64Add; Get R1; I64GtU; If; EXIT; End; \
		Get R0; Get R2; I64Add; I32WrapI64; I64Load8U $1; I64Const $117; I64Ne; If; EXIT; End; \
		HEX($2); HEX($3); HEX($4); HEX($5); \
		Get R2; I64Const $6; I64Add; Set R2; \
		Br $0; \
	End; End

// KEY skips a key and the colon after it, at s[i], in R4.
#define KEY \
	Get R4; I64Const $34; I64Ne; If; EXIT; End; \
	ADVANCE; \
	STRING; \
	SKIP_SPACE; \
	Get R4; I64Const $58; I64Ne; If; EXIT; End; \
	ADVANCE

// DIGITS skips one digit or more.
#define DIGITS \
	LOADC; Get R4; I64Const $48; I64Sub; I64Const $10; I64GeU; If; EXIT; End; \
	Block; Loop; \
		ADVANCE; \
		LOADC; Get R4; I64Const $48; I64Sub; I64Const $10; I64LtU; BrIf $0; \
	End; End

// LITERAL(n, word) skips the literal of n bytes at i whose first 4 bytes are
// word (little-endian).
#define LITERAL(n, word) \
	Get R2; I64Const n; I64Add; Get R1; I64GtU; If; EXIT; End; \
	Get R0; Get R2; I64Add; I32WrapI64; I64Load32U $0; I64Const word; I64Ne; If; EXIT; End; \
	Get R2; I64Const n; I64Add; Set R2

// SKIP_VALUE skips the valid value at i, nested at most R8 (≤ 63) deep, or
// returns (EXIT). It is skipValue of skip_generic.go (skip_wasm.s has it
// with comments): R7 the bit set of the open containers that are objects
// (bit d for depth d), R9 the depth, R10 the byte that opened the container
// (then 1 if the container is an object). It uses the macros above.
#define SKIP_VALUE \
	I64Const $0; Set R7; I64Const $0; Set R9; \
	Block; /* the value is skipped */ \
	Loop; /* at a value */ \
		Block; /* after a value */ \
			SKIP_SPACE; \
			/* An object or an array. */ \
			Get R4; \
			I64Const $123; /* '{' */ \
			I64Eq; \
			Get R4; \
			I64Const $91; /* '[' */ \
			I64Eq; \
			I32Or; \
			If; \
				Get R4; \
				Set R10; \
				Get R9; \
				I64Const $1; \
				I64Add; \
				Tee R9; \
				Get R8; \
				I64GtS; \
				If; \
					EXIT; \
				End; \
				/* Bit R9 of R7 = bit 5 of the byte: '{' is 0x7b, '[' 0x5b. */ \
				Get R7; \
				I64Const $1; \
				Get R9; \
				I64Shl; \
				I64Const $-1; \
				I64Xor; \
				I64And; \
				Get R10; \
				I64Const $5; \
				I64ShrU; \
				I64Const $1; \
				I64And; \
				Get R9; \
				I64Shl; \
				I64Or; \
				Set R7; \
				ADVANCE; \
				SKIP_SPACE; \
				Get R4; \
				Get R10; \
				I64Const $2; /* '}' or ']' */ \
				I64Add; \
				I64Eq; \
				If; /* empty */ \
					ADVANCE; \
					Get R9; \
					I64Const $1; \
					I64Sub; \
					Set R9; \
					Br $2; /* -> after a value */ \
				End; \
				Get R10; \
				I64Const $123; \
				I64Eq; \
				If; \
					KEY; \
				End; \
				Br $2; /* -> at a value */ \
			End; \
			/* A string. */ \
			Get R4; \
			I64Const $34; \
			I64Eq; \
			If; \
				ADVANCE; \
				STRING; \
				Br $1; /* -> after a value */ \
			End; \
			/* A literal. */ \
			Get R4; \
			I64Const $116; /* 't' */ \
			I64Eq; \
			If; \
				LITERAL($4, $0x65757274); /* "true" */ \
				Br $1; \
			End; \
			Get R4; \
			I64Const $110; /* 'n' */ \
			I64Eq; \
			If; \
				LITERAL($4, $0x6c6c756e); /* "null" */ \
				Br $1; \
			End; \
			Get R4; \
			I64Const $102; /* 'f' */ \
			I64Eq; \
			If; \
				Get R2; \
				I64Const $5; \
				I64Add; \
				Get R1; \
				I64GtU; \
				If; \
					EXIT; \
				End; \
				Get R0; \
				Get R2; \
				I64Add; \
				I32WrapI64; \
				I64Load8U $4; \
				I64Const $101; /* 'e' */ \
				I64Ne; \
				If; \
					EXIT; \
				End; \
				LITERAL($5, $0x736c6166); /* "fals", then the 'e' */ \
				Br $1; \
			End; \
			/* A number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */ \
			Get R4; \
			I64Const $45; /* '-' */ \
			I64Eq; \
			If; \
				ADVANCE; \
			End; \
			LOADC; \
			Get R4; \
			I64Const $48; /* '0' */ \
			I64Eq; \
			If; \
				ADVANCE; \
			Else; \
				DIGITS; \
			End; \
			LOADC; \
			Get R4; \
			I64Const $46; /* '.' */ \
			I64Eq; \
			If; \
				ADVANCE; \
				DIGITS; \
			End; \
			LOADC; \
			Get R4; \
			I64Const $32; \
			I64Or; \
			I64Const $101; /* 'e' or 'E' */ \
			I64Eq; \
			If; \
				ADVANCE; \
				LOADC; \
				Get R4; \
				I64Const $43; /* '+' */ \
				I64Eq; \
				Get R4; \
				I64Const $45; /* '-' */ \
				I64Eq; \
				I32Or; \
				If; \
					ADVANCE; \
				End; \
				DIGITS; \
			End; \
		End; \
		/* After a value: the end of the outermost value, or a comma and */ \
		/* the next member or element, or the end of the container. */ \
		Loop; \
			Get R9; \
			I64Eqz; \
			If; \
				Br $3; /* -> the value is skipped */ \
			End; \
			SKIP_SPACE; \
			Get R7; \
			Get R9; \
			I64ShrU; \
			I64Const $1; \
			I64And; \
			Set R10; /* 1 in an object */ \
			Get R4; \
			I64Const $44; /* ',' */ \
			I64Eq; \
			If; \
				ADVANCE; \
				Get R10; \
				I64Eqz; \
				I32Eqz; \
				If; \
					SKIP_SPACE; \
					KEY; \
				End; \
				Br $2; /* -> at a value */ \
			End; \
			/* ']' (0x5d) in an array, '}' (0x7d) in an object. */ \
			Get R4; \
			I64Const $93; \
			Get R10; \
			I64Const $5; \
			I64Shl; \
			I64Add; \
			I64Ne; \
			If; \
				EXIT; \
			End; \
			ADVANCE; \
			Get R9; \
			I64Const $1; \
			I64Sub; \
			Set R9; \
			Br $0; \
		End; \
	End; \
	EXIT; \
	End
