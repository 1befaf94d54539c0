package memif

// prefetchw brings lines cache lines from p into this CPU's cache, owned
// (PREFETCHW): a hint, never a fault.
//
//go:noescape
func prefetchw(p uintptr, lines int)
