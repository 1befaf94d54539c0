package clock

import "syscall"

// STA_UNSYNC from <linux/timex.h>: the kernel clock is not synchronised.
const staUnsync = 0x0040

// HostSync reads the kernel's clock-sync state now, as a System clock does
// every RefreshInterval: for a one-off look (linerate doctor).
func HostSync() SyncState { return readSync() }

// readSync reads the kernel's clock-sync state with adjtimex(2), read-only.
func readSync() SyncState {
	var tx syscall.Timex
	state, err := syscall.Adjtimex(&tx)
	if err != nil {
		return SyncState{TAIOffset: 37}
	}
	s := SyncState{
		// TIME_ERROR (5) also means unsynchronised.
		Synchronized: tx.Status&staUnsync == 0 && state != 5,
		ErrorNs:      tx.Esterror * 1000,
		MaxErrorNs:   tx.Maxerror * 1000,
		TAIOffset:    int(tx.Tai),
	}
	if s.TAIOffset == 0 {
		s.TAIOffset = 37 // the kernel was never told; 37 s since 2017
	}
	return s
}
