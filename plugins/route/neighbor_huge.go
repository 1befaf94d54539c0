package route

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// hugePage is the size transparent huge pages come in on x86-64 and arm64
// (with 4 KiB base pages).
const hugePage = 2 << 20

// hugePages asks for transparent huge pages under the whole huge pages of m,
// a table of at least two. A table of 2^20 neighbours is 64 MiB: with 4 KiB
// pages nearly every lookup misses the TLB too, and on a VM a page walk is
// itself a chain of misses. The pages of a new table are not yet in memory,
// so they come in huge when first written. Where THP is off ("never"), or the
// memory was in use before, the advice changes nothing and the table works
// as it did.
func hugePages(m []byte) {
	if len(m) < 2*hugePage {
		return
	}
	off := (hugePage - int(uintptr(unsafe.Pointer(&m[0]))%hugePage)) % hugePage
	n := (len(m) - off) / hugePage * hugePage
	_ = unix.Madvise(m[off:off+n], unix.MADV_HUGEPAGE)
}
