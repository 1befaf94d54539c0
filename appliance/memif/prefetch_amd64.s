#include "textflag.h"

// func prefetchwLines(p uintptr, lines int)
//
// PREFETCHW each of lines cache lines from p: the lines come into this CPU's
// cache owned, ready to be written, so the stores that follow do not wait
// for the other CPU, which read them last, to give them up. PREFETCHW
// (0F 0D /1) has no mnemonic in Go's assembler. A prefetch never faults.
TEXT ·prefetchwLines(SB), NOSPLIT, $0-16
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

// func cpuid(leaf uint32) (eax, ecx uint32)
TEXT ·cpuid(SB), NOSPLIT, $0-16
	MOVL leaf+0(FP), AX
	XORL CX, CX
	CPUID
	MOVL AX, eax+8(FP)
	MOVL CX, ecx+12(FP)
	RET
