// Macros of the WASM assembly of this package. Registers: R0 the address of
// the body s, R1 len(s), R2 the read position i; R4 and R5 are scratch; R6
// the address of simpleEscape.

// LOADC sets R4 to s[i], or to 0 at the end of s.
#define LOADC \
	I64Const $0; Set R4; \
	Get R2; Get R1; I64LtU; \
	If; Get R0; Get R2; I64Add; I32WrapI64; I64Load8U $0; Set R4; End

// SKIP_SPACE moves i past JSON whitespace.
#define SKIP_SPACE \
	Block; Loop; \
		Get R2; Get R1; I64GeU; BrIf $1; \
		Get R0; Get R2; I64Add; I32WrapI64; I64Load8U $0; Tee R4; \
		I64Const $32; I64GtU; BrIf $1; \
		Get R4; I64Const $32; I64Eq; \
		Get R4; I64Const $9; I64Eq; I32Or; \
		Get R4; I64Const $10; I64Eq; I32Or; \
		Get R4; I64Const $13; I64Eq; I32Or; \
		I32Eqz; BrIf $1; \
		Get R2; I64Const $1; I64Add; Set R2; \
		Br $0; \
	End; End

// SCAN moves i, in the content of a string, to the first quote, backslash
// or control character, or to the end of s, skipping the two-byte escapes
// (a backslash and a byte b with simpleEscape[b]), whose number it adds to
// R3. It is scanString of scan_generic.go: 8 bytes at a time, flagging in R5
// the high bit of each byte that is below 0x20, or 0x22 ('"'), or 0x5c
// ('\\'); the lowest flagged byte of each mask is exact (a false positive
// only ever sits above a true one), so the lowest of them all is too. Then
// one byte at a time to the byte to stop at.
#define SCAN \
	Block; Loop; \
		Block; Loop; \
			Get R2; I64Const $8; I64Add; Get R1; I64GtU; BrIf $1; \
			Get R0; Get R2; I64Add; I32WrapI64; I64Load $0; Set R4; \
			Get R4; I64Const $0x2020202020202020; I64Sub; Get R4; I64Const $-1; I64Xor; I64And; \
			Get R4; I64Const $0x2222222222222222; I64Xor; Tee R5; I64Const $0x0101010101010101; I64Sub; Get R5; I64Const $-1; I64Xor; I64And; I64Or; \
			Get R4; I64Const $0x5c5c5c5c5c5c5c5c; I64Xor; Tee R5; I64Const $0x0101010101010101; I64Sub; Get R5; I64Const $-1; I64Xor; I64And; I64Or; \
			I64Const $0x8080808080808080; I64And; Tee R5; \
			I64Eqz; If; Get R2; I64Const $8; I64Add; Set R2; Br $1; End; \
			Get R2; Get R5; I64Ctz; I64Const $3; I64ShrU; I64Add; Set R2; \
		End; End; \
		Block; Loop; \
			Get R2; Get R1; I64GeU; BrIf $3; \
			Get R0; Get R2; I64Add; I32WrapI64; I64Load8U $0; Tee R4; \
			I64Const $34; I64Eq; BrIf $1; \
			Get R4; I64Const $92; I64Eq; BrIf $1; \
			Get R4; I64Const $32; I64LtU; BrIf $1; \
			Get R2; I64Const $1; I64Add; Set R2; \
			Br $0; \
		End; End; \
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
