//go:build gc && !noasm

#include "textflag.h"
#include "scan_wasm.h"

// func scanString(s string, i int, simple *[256]bool) (j, escapes int)
TEXT ·scanString(SB), NOSPLIT, $0-48
	I64Load s_base+0(FP)
	Set R0
	I64Load s_len+8(FP)
	Set R1
	I64Load i+16(FP)
	Set R2
	I64Load simple+24(FP)
	Set R6
	I64Const $0
	Set R3
	SCAN
	Get SP
	Get R2
	I64Store j+32(FP)
	Get SP
	Get R3
	I64Store escapes+40(FP)
	RET
