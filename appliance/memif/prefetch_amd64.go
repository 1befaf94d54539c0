package memif

// prefetchw brings lines cache lines from p into this CPU's cache, owned
// (PREFETCHW): a hint, never a fault, and nothing on a CPU without the
// instruction (Intel before Broadwell may not decode it as a NOP).
func prefetchw(p uintptr, lines int) {
	if hasPrefetchW {
		prefetchwLines(p, lines)
	}
}

// hasPrefetchW: CPUID 0x80000001 ECX bit 8 (3DNowPrefetch, PRFCHW).
var hasPrefetchW = func() bool {
	if max, _ := cpuid(0x80000000); max < 0x80000001 {
		return false
	}
	_, ecx := cpuid(0x80000001)
	return ecx&(1<<8) != 0
}()

//go:noescape
func prefetchwLines(p uintptr, lines int)

func cpuid(leaf uint32) (eax, ecx uint32)
