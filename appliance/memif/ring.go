package memif

import (
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Desc is a ring descriptor as it lies in shared memory.
type Desc struct {
	Flags    uint16
	Region   uint16
	Length   uint32
	Offset   uint32
	Metadata uint32
}

// RingBytes is the size of a ring of 1<<log2 descriptors.
func RingBytes(log2 uint8) int { return RingHdrSize + DescSize<<log2 }

// Ring is a view of one ring in shared memory. Head and tail are free-running
// 16-bit counters; slot i is desc[i & mask].
type Ring struct {
	hdr  unsafe.Pointer // the ring header: cookie, flags, head; tail at +64
	desc unsafe.Pointer
	size uint16
	mask uint16
	// Intr is the ring's eventfd: the receiver waits on it, the producer
	// writes it unless the receiver masked interrupts.
	Intr int
}

// newRing views the ring at mem[off:], which must hold RingBytes(log2) bytes.
func newRing(mem []byte, off int, log2 uint8, intr int) *Ring {
	p := unsafe.Pointer(&mem[off])
	return &Ring{hdr: p, desc: unsafe.Add(p, RingHdrSize), size: 1 << log2, mask: 1<<log2 - 1, Intr: intr}
}

// ViewRing views a ring of 1<<log2 slots at the start of mem, with no
// eventfd: a ring both of whose sides are one's own (tests).
func ViewRing(mem []byte, log2 uint8) *Ring { return newRing(mem, 0, log2, -1) }

// Size is the number of slots.
func (r *Ring) Size() uint16 { return r.size }

// Mask is Size-1.
func (r *Ring) Mask() uint16 { return r.mask }

func (r *Ring) word4() *uint32  { return (*uint32)(unsafe.Add(r.hdr, 4)) }  // flags | head<<16
func (r *Ring) word64() *uint32 { return (*uint32)(unsafe.Add(r.hdr, 64)) } // tail, and padding

// Cookie reads the ring's cookie.
func (r *Ring) Cookie() uint32 { return atomic.LoadUint32((*uint32)(r.hdr)) }

// Head loads head with acquire ordering.
func (r *Ring) Head() uint16 { return uint16(atomic.LoadUint32(r.word4()) >> 16) }

// Tail loads tail with acquire ordering.
func (r *Ring) Tail() uint16 { return uint16(atomic.LoadUint32(r.word64())) }

// Flags loads the ring's flags.
func (r *Ring) Flags() uint16 { return uint16(atomic.LoadUint32(r.word4())) }

// SetHead stores head with release ordering, keeping the flags the other
// side may change meanwhile.
func (r *Ring) SetHead(h uint16) {
	w := r.word4()
	for {
		old := atomic.LoadUint32(w)
		if atomic.CompareAndSwapUint32(w, old, old&0xFFFF|uint32(h)<<16) {
			return
		}
	}
}

// SetTail stores tail with release ordering. Tail's cache line holds nothing
// else.
func (r *Ring) SetTail(t uint16) { atomic.StoreUint32(r.word64(), uint32(t)) }

// SetFlags stores the flags, keeping head.
func (r *Ring) SetFlags(f uint16) {
	w := r.word4()
	for {
		old := atomic.LoadUint32(w)
		if atomic.CompareAndSwapUint32(w, old, old&^0xFFFF|uint32(f)) {
			return
		}
	}
}

// init writes a fresh ring header: cookie, no flags, head and tail 0.
func (r *Ring) init() {
	atomic.StoreUint32((*uint32)(r.hdr), Cookie)
	atomic.StoreUint32(r.word4(), 0)
	atomic.StoreUint32(r.word64(), 0)
}

// D is descriptor slot (masked).
func (r *Ring) D(slot uint16) *Desc {
	return (*Desc)(unsafe.Add(r.desc, uintptr(slot&r.mask)*DescSize))
}

// Load copies descriptor slot: what the peer wrote is read once, then checked.
func (r *Ring) Load(slot uint16) Desc { return *r.D(slot) }

// Kick wakes the receiver unless it masked interrupts.
func (r *Ring) Kick() {
	if r.Intr >= 0 && r.Flags()&RingFlagMaskInt == 0 {
		var one = [8]byte{1}
		_, _ = unix.Write(r.Intr, one[:])
	}
}

// Region is shared memory: a memfd mapped here, or a peer's region mapped
// from the descriptor it sent.
type Region struct {
	Mem []byte
	FD  int
}

// NewRegion makes a memfd region of size bytes, sealed against shrinking (a
// peer could otherwise make our accesses fault) and mapped shared.
func NewRegion(name string, size int) (*Region, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, err
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		unix.Close(fd)
		return nil, err
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		unix.Close(fd)
		return nil, err
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	return &Region{Mem: mem, FD: fd}, nil
}

// Close unmaps the region and closes its descriptor.
func (r *Region) Close() error {
	var err error
	if r.Mem != nil {
		err = unix.Munmap(r.Mem)
		r.Mem = nil
	}
	if r.FD >= 0 {
		unix.Close(r.FD)
		r.FD = -1
	}
	return err
}

// Buf returns the bytes a descriptor names, or false when they are not all
// inside regions: the check every access to a peer's descriptor goes through.
func Buf(regions []*Region, d Desc) ([]byte, bool) {
	if int(d.Region) >= len(regions) || regions[d.Region] == nil {
		return nil, false
	}
	m := regions[d.Region].Mem
	end := uint64(d.Offset) + uint64(d.Length)
	if end > uint64(len(m)) {
		return nil, false
	}
	return m[d.Offset:end:end], true
}
