#include "textflag.h"

// func prefetchw(p uintptr, lines int)
//
// PREFETCHW each of lines cache lines from p: the lines come into this CPU's
// cache owned, ready to be written, so the stores that follow do not wait
// for the other CPU, which read them last, to give them up. PREFETCHW
// (0F 0D /1) has no mnemonic in Go's assembler. A prefetch never faults.
TEXT ·prefetchw(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), AX
	MOVQ lines+8(FP), CX
	TESTQ CX, CX
	JLE done
loop:
	BYTE $0x0F; BYTE $0x0D; BYTE $0x08 // PREFETCHW (AX)
	ADDQ $64, AX
	DECQ CX
	JNZ loop
done:
	RET
