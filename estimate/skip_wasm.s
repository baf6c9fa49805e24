//go:build gc && !noasm

#include "textflag.h"
#include "scan_wasm.h"

// skipValue of skip_generic.go: SKIP_VALUE (scan_wasm.h), with R8 the
// deepest nesting allowed.

// EXIT returns ok = false: the walker reads the value itself.
#define EXIT \
	Get SP; I64Const $0; I64Store end+40(FP); \
	Get SP; I64Const $0; I64Store8 ok+48(FP); \
	RET

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
	SKIP_VALUE
	Get SP
	Get R2
	I64Store end+40(FP)
	Get SP
	I64Const $1
	I64Store8 ok+48(FP)
	RET
