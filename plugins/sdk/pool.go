package sdk

import (
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/linerate/linerate/appliance/memif"
	"github.com/linerate/linerate/appliance/packet"
)

// emitPool is an instance's Setup.Pool in a plugin: the empty buffers
// linerate lends on the link's spare ring, for the stage to make packets in.
// A packet it makes goes back to linerate when it is emitted (Env.Emit, or
// Produce); one it frees comes back here for the next allocation. Only the
// instance's thread touches it, once the instance runs.
type emitPool struct {
	id       uint16
	dataRoom int
	// meta holds each buffer's packet metadata, by the buffer's id: the
	// plugin's own, off the Go heap.
	meta []byte
	base uintptr
	bufs []spareBuf
	free []packet.Handle // buffers lent and not in the stage's hands

	inUse     atomic.Int64
	allocFail atomic.Uint64
	badSpare  atomic.Uint64 // spare descriptors outside the regions, or of an id in use
	badFree   atomic.Uint64 // frees of a handle the pool does not have out: ignored
}

// spareBuf is one lent buffer, as its descriptor said.
type spareBuf struct {
	state    uint8 // spareGone, spareFree, spareUsed
	region   uint16
	offset   uint32 // the buffer's first byte in the region
	headroom int
	buf      []byte
}

const (
	spareGone = iota // not lent to us (yet, or any more)
	spareFree        // lent, in the free list
	spareUsed        // the stage's: allocated
	spareOut         // emitted or freed in the running burst: linerate's, or the free list's, at its end
)

func newEmitPool(buffers, dataRoom int) (*emitPool, error) {
	n := min(buffers, memif.ExtMaxSpare)
	meta, err := unix.Mmap(-1, 0, n*packet.MetaSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, err
	}
	var ep *emitPool
	if _, err := packet.RegisterPool(func(id uint16) packet.Pool {
		ep = &emitPool{id: id, dataRoom: dataRoom, meta: meta, bufs: make([]spareBuf, n),
			free: make([]packet.Handle, 0, n)}
		ep.base = uintptr(unsafe.Pointer(&meta[0]))
		return ep
	}); err != nil {
		unix.Munmap(meta)
		return nil, err
	}
	return ep, nil
}

func (ep *emitPool) handle(id int) packet.Handle {
	return packet.Handle(ep.base + uintptr(id*packet.MetaSize))
}

// idOf is the id of h when h is one of this pool's buffers in the stage's
// hands.
func (ep *emitPool) idOf(h packet.Handle) (int, bool) {
	if uintptr(h) < ep.base {
		return 0, false
	}
	off := uintptr(h) - ep.base
	id := int(off / packet.MetaSize)
	if off%packet.MetaSize != 0 || id >= len(ep.bufs) || ep.bufs[id].state != spareUsed {
		return 0, false
	}
	return id, true
}

// take adds what linerate lent on the spare ring since slot *last.
func (ep *emitPool) take(regions []*memif.Region, r *memif.Ring, last *uint16) {
	head := r.Head()
	if head == *last {
		return
	}
	for ; *last != head; *last++ {
		d := r.Load(*last)
		id, headroom := int(d.Metadata>>16), int(d.Metadata&0xFFFF)
		buf, ok := memif.Buf(regions, memif.Desc{Region: d.Region, Offset: d.Offset, Length: d.Length})
		// A buffer holds a minimal frame past its headroom (an empty one
		// would have no address).
		if !ok || id >= len(ep.bufs) || ep.bufs[id].state != spareGone || headroom+64 > len(buf) {
			ep.badSpare.Add(1)
			continue
		}
		ep.bufs[id] = spareBuf{state: spareFree, region: d.Region, offset: d.Offset, headroom: headroom, buf: buf}
		ep.free = append(ep.free, ep.handle(id))
	}
	r.SetTail(head)
}

// reset forgets every buffer: a new connection lends afresh (linerate took
// back what the last one lent).
func (ep *emitPool) reset() {
	for i := range ep.bufs {
		ep.forget(i)
	}
	ep.free = ep.free[:0]
	ep.inUse.Store(0)
}

// gone marks buffer id as given back to linerate (emitted).
func (ep *emitPool) gone(id int) {
	ep.forget(id)
	ep.inUse.Add(-1)
}

// forget drops buffer id, and its metadata with it: the next lending under
// id starts from a free packet (a checked build's state included). The
// buffer itself is linerate's again and is not touched.
func (ep *emitPool) forget(id int) {
	ep.bufs[id] = spareBuf{}
	clear(ep.meta[id*packet.MetaSize : (id+1)*packet.MetaSize])
}

// desc is the emit descriptor of buffer id's packet.
func (ep *emitPool) desc(id int, word uint32) memif.Desc {
	p := ep.handle(id).P()
	b := &ep.bufs[id]
	return memif.Desc{Region: b.region, Offset: b.offset + uint32(p.Offset()), Length: uint32(p.Len()), Metadata: word}
}

func (ep *emitPool) ID() uint16   { return ep.id }
func (ep *emitPool) Name() string { return "plugin" }

func (ep *emitPool) Alloc(b *packet.Burst, n int) int {
	got := 0
	for ; got < n && b.Room() > 0; got++ {
		h, ok := ep.AllocOne()
		if !ok {
			break
		}
		b.Push(h)
	}
	return got
}

func (ep *emitPool) AllocOne() (packet.Handle, bool) {
	n := len(ep.free)
	if n == 0 {
		ep.allocFail.Add(1)
		return 0, false
	}
	h := ep.free[n-1]
	ep.free = ep.free[:n-1]
	id := int((uintptr(h) - ep.base) / packet.MetaSize)
	b := &ep.bufs[id]
	b.state = spareUsed
	// The metadata directly: a free packet's P() is a use after free in a
	// checked build.
	p := (*packet.Packet)(unsafe.Pointer(&ep.meta[id*packet.MetaSize]))
	p.Init(uintptr(unsafe.Pointer(unsafe.SliceData(b.buf))), len(b.buf), b.headroom, ep.id, 0)
	packet.Own(h, packet.OpAlloc, packet.NoOwner, -1)
	ep.inUse.Add(1)
	return h, true
}

// FreeOne takes h back at once. A handle the pool does not have out is
// counted and ignored: the plugin's bug, which must not corrupt the list.
func (ep *emitPool) FreeOne(h packet.Handle) {
	id, ok := ep.idOf(h)
	if !ok {
		ep.badFree.Add(1)
		return
	}
	ep.release(id)
}

// release puts buffer id, allocated or out in the running burst, back on the
// free list.
func (ep *emitPool) release(id int) {
	h := ep.handle(id)
	packet.Released(h, ep.id)
	ep.bufs[id].state = spareFree
	ep.free = append(ep.free, h)
	ep.inUse.Add(-1)
}

func (ep *emitPool) Free(b *packet.Burst) {
	ep.FreeHandles(b.H[:b.N])
	b.N = 0
}

func (ep *emitPool) FreeHandles(hs []packet.Handle) {
	for _, h := range hs {
		ep.FreeOne(h)
	}
}

func (ep *emitPool) Headroom() int {
	for _, b := range ep.bufs {
		if b.state != spareGone {
			return b.headroom
		}
	}
	return 0
}

func (ep *emitPool) DataRoom() int { return ep.dataRoom }

func (ep *emitPool) Stats() packet.PoolStats {
	return packet.PoolStats{Name: ep.Name(), Size: len(ep.bufs), InUse: int(ep.inUse.Load()), AllocFail: ep.allocFail.Load()}
}
