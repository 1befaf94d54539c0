//go:build dpdk

package dpdk

/*
#cgo noescape lr_alloc
#cgo nocallback lr_alloc
#cgo noescape lr_free
#cgo nocallback lr_free
#include <stdlib.h>
#include "lr.h"
*/
import "C"

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/linerate/linerate/appliance/packet"
)

// Pool is an mbuf mempool seen as a packet.Pool. Its mbufs carry the packet
// metadata in their private area; a handle is the metadata's address.
type Pool struct {
	mp        *C.struct_rte_mempool
	id        uint16
	name      string
	socket    int
	size      int
	cache     int
	dataRoom  int // bytes after the headroom
	allocFail atomic.Uint64
}

var _ packet.Pool = (*Pool)(nil)

type poolKey struct{ socket, size, cache, dataRoom int }

// Pools live as long as the EAL: a port's rx ring keeps mbufs until the port
// closes, and engines in one process share the pools of a socket.
var pools struct {
	mu sync.Mutex
	m  map[poolKey]*Pool
}

// PoolFor returns the pool for a NUMA socket with the given sizes, creating it on
// first use. Zero sizes take the EAL config's.
func PoolFor(socket, size, cache, dataRoom int) (*Pool, error) {
	if !Running() {
		return nil, fmt.Errorf("dpdk: pool for socket %d: the EAL is not running", socket)
	}
	cfg := eal.cfg
	if size == 0 {
		size = cfg.PoolSize
	}
	if cache == 0 {
		cache = cfg.PoolCache
	}
	if dataRoom == 0 {
		dataRoom = cfg.DataRoom
	}
	c := EAL{PoolSize: size, PoolCache: cache, DataRoom: dataRoom}
	if err := c.check(); err != nil {
		return nil, fmt.Errorf("dpdk: pool: %w", err)
	}
	k := poolKey{socket, size, cache, dataRoom}
	pools.mu.Lock()
	defer pools.mu.Unlock()
	if p := pools.m[k]; p != nil {
		return p, nil
	}
	name := fmt.Sprintf("lr_s%d_%d_%d_%d", socket, size, cache, dataRoom)
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var cerr C.int
	mp := C.lr_pool_create(cname, C.unsigned(size), C.unsigned(cache), C.uint16_t(dataRoom+rteHeadroom), C.int(socket), &cerr)
	if mp == nil {
		return nil, errnoErr(fmt.Sprintf("dpdk: rte_pktmbuf_pool_create %s (%d mbufs of %d bytes on socket %d)", name, size, dataRoom, socket), cerr)
	}
	p := &Pool{mp: mp, name: name, socket: socket, size: size, cache: cache, dataRoom: dataRoom}
	if _, err := packet.RegisterPool(func(id uint16) packet.Pool { p.id = id; return p }); err != nil {
		C.rte_mempool_free(mp)
		return nil, fmt.Errorf("dpdk: pool %s: %w", name, err)
	}
	C.lr_pool_init_meta(mp, C.uint16_t(p.id))
	if rc := C.lr_pool_register(mp, C.uint16_t(p.id)); rc != 0 {
		packet.UnregisterPool(p)
		C.rte_mempool_free(mp)
		return nil, errnoErr("dpdk: pool "+name, rc)
	}
	if pools.m == nil {
		pools.m = map[poolKey]*Pool{}
	}
	pools.m[k] = p
	return p, nil
}

func (p *Pool) ID() uint16    { return p.id }
func (p *Pool) Name() string  { return p.name }
func (p *Pool) Headroom() int { return Headroom }
func (p *Pool) DataRoom() int { return p.dataRoom }

// Socket is the NUMA socket the pool's memory is on.
func (p *Pool) Socket() int { return p.socket }

// Size is the number of mbufs in the pool.
func (p *Pool) Size() int { return p.size }

// Available is the number of mbufs in the pool now, per-lcore caches included.
func (p *Pool) Available() int { return int(C.lr_mempool_avail(p.mp)) }

// Stats: InUse counts every mbuf out of the pool, including those a NIC's rx
// descriptor rings hold until the port closes.
func (p *Pool) Stats() packet.PoolStats {
	return packet.PoolStats{Name: p.name, Size: p.size, InUse: p.size - p.Available(),
		AllocFail: p.allocFail.Load(), Copies: packet.CopyCount(p.id)}
}

// handles hands C an array of handles as a pointer, never as an integer: the
// prologue of cgo's wrapper can grow (move) the goroutine's stack after the
// arguments are computed, and the runtime adjusts pointers into the stack, not
// integers. The fast-path functions are noescape and nocallback, so a Burst or
// handle on the caller's stack stays there (no allocation, no copy through C
// scratch) and nothing moves the stack while C holds it. cgo checks nothing:
// uintptr_t holds no pointers.
func handles(h *packet.Handle) *C.uintptr_t { return (*C.uintptr_t)(unsafe.Pointer(h)) }

var _ packet.SizedAllocator = (*Pool)(nil)

// Alloc appends up to n fresh packets to b: one cgo call for the lot.
func (p *Pool) Alloc(b *packet.Burst, n int) int { return p.alloc(b, n, 0) }

// AllocSized appends up to n fresh packets of length bytes to b, the mbufs'
// lengths written as they are reset: one cgo call for the lot.
func (p *Pool) AllocSized(b *packet.Burst, n, length int) int {
	if length < 0 || length > p.dataRoom {
		return 0
	}
	return p.alloc(b, n, length)
}

func (p *Pool) alloc(b *packet.Burst, n, length int) int {
	n = min(n, b.Room())
	if n <= 0 {
		return 0
	}
	got := int(C.lr_alloc(p.mp, handles(&b.H[b.N]), C.unsigned(n), C.uint16_t(length)))
	packet.OwnBurst(b.H[b.N:b.N+got], packet.OpRecv, packet.NoOwner, -1)
	b.N += got
	if got < n {
		p.allocFail.Add(uint64(n - got))
	}
	return got
}

// AllocOne takes one fresh packet.
func (p *Pool) AllocOne() (packet.Handle, bool) {
	var h packet.Handle
	if C.lr_alloc(p.mp, handles(&h), 1, 0) == 0 {
		p.allocFail.Add(1)
		return 0, false
	}
	packet.Own(h, packet.OpRecv, packet.NoOwner, -1)
	return h, true
}

// Free returns every packet of b (rte_pktmbuf_free_bulk) and empties b.
func (p *Pool) Free(b *packet.Burst) {
	p.FreeHandles(b.H[:b.N])
	b.N = 0
}

// FreeHandles returns packets given as a slice of handles.
func (p *Pool) FreeHandles(hs []packet.Handle) {
	if len(hs) > 0 {
		p.released(hs)
		C.lr_free(handles(&hs[0]), C.unsigned(len(hs)))
	}
}

// FreeOne returns h.
func (p *Pool) FreeOne(h packet.Handle) {
	packet.Released(h, p.id)
	C.lr_free(handles(&h), 1)
}

// released records, in a checked build, that hs go back to the pool. An mbuf
// a PMD frees after transmit goes back in C, unrecorded: it stays a port's
// (packet.StatePort) until it is allocated again.
func (p *Pool) released(hs []packet.Handle) {
	if packet.Checked {
		for _, h := range hs {
			packet.Released(h, p.id)
		}
	}
}
