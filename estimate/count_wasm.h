// Macros of the calibrated count (count.go) in WASM assembly, for
// count_wasm.s (spansUnits) and plain_wasm.s (plainTurns, which weighs the
// text it counts as it scans it). They need go_asm.h (the weights).

#define HIGH $0x8080808080808080

// ADD_UNITS(u, w) adds w times the number of bits set in the value on the
// stack to u.
#define ADD_UNITS(u, w) I64Popcnt; I64Const w; I64Mul; Get u; I64Add; Set u

// ADD(u, w) adds w units to u.
#define ADD(u, w) Get u; I64Const w; I64Add; Set u

// VALID(v, n) sets v to the high bit of each of the low n bytes (n from 1
// to 8): HIGH >> (64 - 8n).
#define VALID(v, n) I64Const HIGH; I64Const $64; Get n; I64Const $3; I64Shl; I64Sub; I64ShrU; Set v

// LOAD_LAST(k) sets R4 to the R5 bytes at s[i:] (fewer than 8, where s
// has fewer than 8 bytes from i: read one by one), the first the lowest,
// and R7 to their VALID mask; k is scratch.
#define LOAD_LAST(k) \
	Get R5; Set k; \
	I64Const $0; Set R4; \
	Block; Loop; \
		Get k; I64Eqz; BrIf $1; \
		Get k; I64Const $1; I64Sub; Set k; \
		Get R4; I64Const $8; I64Shl; \
		Get R0; Get R2; I64Add; Get k; I64Add; I32WrapI64; I64Load8U $0; I64Or; Set R4; \
		Br $0; \
	End; End; \
	VALID(R7, R5)

// WEIGH(x, n, v, u, cl, cd, a, b, l, d) adds to u the weight of the low n
// bytes of the word x (n from 1 to 8, v their VALID mask), as count.go's
// wordUnits weighs them: each byte as another ASCII byte, then each
// feature its weight less that of the class it was counted in. cl and cd
// flag (0x80) that the byte before the word is a letter, a digit, and are
// set to the flags of its last byte; a, b, l and d are scratch (a: x with
// the high bits set; b: the ASCII bytes, then the bytes past ASCII; l:
// letters; d: digits).
#define WEIGH(x, n, v, u, cl, cd, a, b, l, d) \
	Get n; I64Const $const_weightOther; I64Mul; Get u; I64Add; Set u; \
	Get x; I64Const HIGH; I64Or; Set a; \
	Get x; I64Const $-1; I64Xor; Get v; I64And; Set b; \
	/* Letters (from 0x41), digits, spaces (and controls, below 0x21). */ \
	Get a; I64Const $0x4141414141414141; I64Sub; Get b; I64And; Tee l; \
	ADD_UNITS(u, $(const_weightLetter-const_weightOther)); \
	Get a; I64Const $0x3030303030303030; I64Sub; \
	Get a; I64Const $0x3a3a3a3a3a3a3a3a; I64Sub; I64Const $-1; I64Xor; I64And; \
	Get b; I64And; Set d; \
	Get a; I64Const $0x2121212121212121; I64Sub; I64Const $-1; I64Xor; Get b; I64And; \
	ADD_UNITS(u, $(const_weightSpace-const_weightOther)); \
	/* Bytes past ASCII, if any: continuation bytes, then lead bytes, */ \
	/* of 3-byte characters, of 4-byte ones, of 3-byte ones below */ \
	/* U+3000 (0xE0-0xE2). */ \
	Get x; Get v; I64And; Tee b; I64Eqz; I32Eqz; If; \
		Get b; ADD_UNITS(u, $(const_weightCont-const_weightOther)); \
		Get b; Get x; I64Const $1; I64Shl; I64And; Tee b; \
		ADD_UNITS(u, $(const_weightLead2-const_weightCont)); \
		Get b; Get x; I64Const $2; I64Shl; I64And; Tee b; \
		ADD_UNITS(u, $(const_weightLead3-const_weightLead2)); \
		Get b; Get x; I64Const $3; I64Shl; I64And; \
		ADD_UNITS(u, $(const_weightLead4-const_weightLead3)); \
		Get x; I64Const $3; I64Shl; Get x; I64Const $4; I64Shl; I64Or; \
		Get x; I64Const $5; I64Shl; I64Or; \
		Get x; I64Const $6; I64Shl; Get x; I64Const $7; I64Shl; I64And; I64Or; \
		I64Const $-1; I64Xor; Get b; I64And; \
		ADD_UNITS(u, $(const_weightLead3Low-const_weightLead3)); \
	End; \
	/* The starts of runs of letters and of digits. */ \
	Get l; Get l; I64Const $8; I64Shl; Get cl; I64Or; I64Const $-1; I64Xor; I64And; \
	ADD_UNITS(u, $const_weightWord); \
	Get d; I64Eqz; I32Eqz; If; \
		Get d; Get d; I64Const $8; I64Shl; Get cd; I64Or; I64Const $-1; I64Xor; I64And; \
		ADD_UNITS(u, $const_weightNumber); \
	End; \
	/* The flags of the last byte. */ \
	Get n; I64Const $3; I64Shl; I64Const $8; I64Sub; Set a; \
	Get l; Get a; I64ShrU; Set cl; \
	Get d; Get a; I64ShrU; Set cd

// WEIGH_RUNE(r, u) adds to u the weight of the character r of a \u escape
// (count.go's escapeFeatures): its UTF-8 bytes, an ASCII one as it weighs
// after anything but a letter or a digit; the first half of a surrogate
// pair as a 4-byte character, its second half nothing.
#define WEIGH_RUNE(r, u) \
	Get r; I64Const $0x80; I64LtU; If; \
		Get r; I64Const $0x41; I64GeU; If; \
			ADD(u, $(const_weightLetter+const_weightWord)); \
		Else; Get r; I64Const $0x30; I64Sub; I64Const $10; I64LtU; If; \
			ADD(u, $(const_weightOther+const_weightNumber)); \
		Else; Get r; I64Const $0x21; I64LtU; If; \
			ADD(u, $const_weightSpace); \
		Else; \
			ADD(u, $const_weightOther); \
		End; End; End; \
	Else; Get r; I64Const $0x800; I64LtU; If; \
		ADD(u, $(const_weightLead2+const_weightCont)); \
	Else; Get r; I64Const $0x3000; I64LtU; If; \
		ADD(u, $(const_weightLead3Low+2*const_weightCont)); \
	Else; Get r; I64Const $0xd800; I64Sub; I64Const $0x400; I64LtU; If; \
		ADD(u, $(const_weightLead4+3*const_weightCont)); \
	Else; Get r; I64Const $0xdc00; I64Sub; I64Const $0x400; I64LtU; I32Eqz; If; \
		ADD(u, $(const_weightLead3+2*const_weightCont)); \
	End; End; End; End; End

