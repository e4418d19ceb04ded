#include "textflag.h"

// func asmAdd(a, b int64) int64: frameless.
TEXT ·asmAdd(SB), NOSPLIT, $0-24
	MOVQ a+0(FP), AX
	MOVQ b+8(FP), BX
	ADDQ BX, AX
	MOVQ AX, ret+16(FP)
	RET

// func asmFrame(a int64) int64: a 24-byte frame (the assembler adds the
// frame pointer's slot) and a call to another assembly function.
TEXT ·asmFrame(SB), NOSPLIT, $24-16
	MOVQ a+0(FP), AX
	MOVQ AX, 0(SP)
	MOVQ $7, 8(SP)
	CALL ·asmAdd(SB)
	MOVQ 16(SP), AX
	MOVQ AX, ret+8(FP)
	RET
