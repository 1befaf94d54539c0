//go:build dpdk

package dpdk

/*
#include <stdlib.h>
#include "lr.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/linerate/linerate/appliance/packet"
)

// This file serves the package's tests: cgo cannot appear in _test.go files, and
// the rx slow paths (chained and foreign mbufs) need mbufs that linerate's own tx
// path never makes. Nothing else calls it.

// txRawChain sends one packet made of segs, chained, on tx queue q, with mbufs of
// mp (nil: the port's pool), bypassing the metadata sync.
func (p *Port) txRawChain(q int, mp *C.struct_rte_mempool, segs ...[]byte) error {
	if mp == nil {
		mp = p.pool.mp
	}
	var data []byte
	lens := make([]C.uint16_t, len(segs))
	for i, s := range segs {
		data = append(data, s...)
		lens[i] = C.uint16_t(len(s))
	}
	cdata := C.CBytes(data)
	defer C.free(cdata)
	clens := C.CBytes(unsafe.Slice((*byte)(unsafe.Pointer(&lens[0])), len(lens)*2))
	defer C.free(clens)
	if rc := C.lr_test_tx_chain(C.uint16_t(p.id), C.uint16_t(q), mp, (*C.uint8_t)(cdata), (*C.uint16_t)(clens), C.uint16_t(len(segs))); rc != 0 {
		return errnoErr("tx chain", rc)
	}
	return nil
}

// foreignPool is an mbuf pool without linerate's private area, as a PMD's own
// pool would be.
type foreignPool struct{ mp *C.struct_rte_mempool }

func newForeignPool(name string, n int) (*foreignPool, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	mp := C.rte_pktmbuf_pool_create(cname, C.uint(n), 0, 0, C.RTE_MBUF_DEFAULT_BUF_SIZE, C.SOCKET_ID_ANY)
	if mp == nil {
		return nil, fmt.Errorf("foreign pool: %s", strerror(C.lr_errno()))
	}
	return &foreignPool{mp}, nil
}

func (f *foreignPool) available() int { return int(C.lr_mempool_avail(f.mp)) }

func (f *foreignPool) free() { C.rte_mempool_free(f.mp) }

// handles is the set of every handle of the pool's mbufs: what a handle the
// pool gave out must be one of.
func (p *Pool) handles() map[packet.Handle]bool {
	hs := make([]packet.Handle, p.size)
	n := int(C.lr_test_pool_handles(p.mp, (*C.uintptr_t)(unsafe.Pointer(&hs[0])), C.unsigned(len(hs))))
	set := make(map[packet.Handle]bool, n)
	for _, h := range hs[:min(n, len(hs))] {
		set[h] = true
	}
	return set
}
