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
	e []uint32
	m []byte // the mapping, or nil on the heap
}

func newRegion(n int) (region, error) {
	if heapTables {
		return region{e: make([]uint32, n)}, nil
	}
	m, err := unix.Mmap(-1, 0, n*4, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return region{}, fmt.Errorf("lpm: map %d MiB: %w", n*4>>20, err)
	}
	return region{e: unsafe.Slice((*uint32)(unsafe.Pointer(&m[0])), n), m: m}, nil
}

func (r region) free() {
	if r.m != nil {
		_ = unix.Munmap(r.m)
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
