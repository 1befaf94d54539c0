package lpm

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// heapTables makes tables on the Go heap instead of mappings, so that the race
// detector sees every entry (it does not watch memory outside the heap). The
// package's tests set it.
var heapTables = false

// region is a zeroed array of n entries whose pages cost memory only once
// written.
type region struct {
	e     []uint32
	m     []byte // the entries' bytes in the mapping, or nil on the heap
	whole []byte // the mapping
}

// hugePage is the size transparent huge pages come in on x86-64 and arm64
// (with 4 KiB base pages).
const hugePage = 2 << 20

func newRegion(n int) (region, error) {
	if heapTables {
		return region{e: make([]uint32, n)}, nil
	}
	size := n * 4
	m, err := unix.Mmap(-1, 0, size+hugePage, unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return region{}, fmt.Errorf("lpm: map %d MiB: %w", size>>20, err)
	}
	// Huge pages, aligned: the TLB covers tbl24 in 32 entries, and an entry
	// never written reads from the kernel's huge zero page. With 4 KiB pages
	// each never-written page read faults in the zero page, and reading it
	// again cost about 3 µs a lookup on this project's VM: traffic to
	// unrouted addresses would be that slow. Without THP ("never") the
	// advice fails and the table still works, with 4 KiB pages.
	off := (hugePage - int(uintptr(unsafe.Pointer(&m[0]))%hugePage)) % hugePage
	r := region{m: m[off : off+size : off+size]}
	_ = unix.Madvise(r.m, unix.MADV_HUGEPAGE)
	r.e = unsafe.Slice((*uint32)(unsafe.Pointer(&r.m[0])), n)
	r.whole = m
	return r, nil
}

func (r region) free() {
	if r.whole != nil {
		_ = unix.Munmap(r.whole)
	}
}

// resident is how many bytes of the region memory holds.
func (r region) resident() int64 {
	if r.m == nil {
		return int64(len(r.e)) * 4
	}
	page := os.Getpagesize()
	vec := make([]byte, (len(r.m)+page-1)/page)
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&r.m[0])), uintptr(len(r.m)),
		uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		return -1
	}
	var n int64
	for _, v := range vec {
		n += int64(v & 1)
	}
	return n * int64(page)
}
