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

// PrepareWrite readies slots [slot, slot+n) for this side to write: their
// cache lines, which the peer read last time round the ring, are asked for
// owned now (PREFETCHW), so that the stores into them later do not each
// wait for the peer's CPU to give its copy up. A producer calls it for its
// next burst's slots right after it publishes one: the peer never reads
// slots it has not been given, so it does not take them back meanwhile.
// Only a hint: it reads and writes nothing.
func (r *Ring) PrepareWrite(slot, n uint16) {
	spans := r.lineSpans(slot, n)
	for _, sp := range spans {
		if sp.lines > 0 {
			prefetchw(uintptr(r.desc)+sp.off, sp.lines)
		}
	}
}

// lineSpan is a run of whole cache lines of a ring's descriptors: off bytes
// from the first descriptor (a multiple of 64), lines long.
type lineSpan struct {
	off   uintptr
	lines int
}

// lineSpans is the cache lines slots [slot, slot+n) lie in, inside the
// descriptor area: two runs when the slots wrap round the ring's end, and
// none past it. (The area starts on a cache line: RingHdrSize is 128.)
func (r *Ring) lineSpans(slot, n uint16) [2]lineSpan {
	const perLine = 64 / DescSize
	var s [2]lineSpan
	n = min(n, r.size)
	if n == 0 {
		return s
	}
	first := uint32(slot & r.mask)
	end := first + uint32(n) // one past the last slot, unwrapped
	if end > uint32(r.size) {
		// Up to the first run's first line, which it may share.
		s[1] = lineSpan{0, int(min((end-uint32(r.size)+perLine-1)/perLine, first/perLine))}
		end = uint32(r.size)
	}
	s[0] = lineSpan{uintptr(first/perLine) * 64, int((end+perLine-1)/perLine - first/perLine)}
	return s
}

// Touch reads one word of each cache line of slots [slot, slot+n) and
// returns their xor (use it, so the loads stay): the lines' misses, the
// peer's writes coming over from its CPU, are then all in flight at once
// rather than one per few descriptors as the slots are checked. The words
// are not used for anything else: every descriptor is still read once
// (Load) and checked before use.
func (r *Ring) Touch(slot, n uint16) uint32 {
	const perLine = 64 / DescSize
	x := uint32(0)
	n = min(n, r.size)
	for k := uint16(0); k < n; k += perLine {
		x ^= atomic.LoadUint32(&r.D(slot + k).Metadata)
	}
	if n > 0 {
		x ^= atomic.LoadUint32(&r.D(slot + n - 1).Metadata)
	}
	return x
}

// Kick wakes the receiver unless it masked interrupts.
func (r *Ring) Kick() {
	if r.Intr >= 0 && r.Flags()&RingFlagMaskInt == 0 {
		_, _ = unix.Write(r.Intr, kickOne[:])
	}
}

// kickOne is what a kick adds to the eventfd: a package variable, only
// read, because a local escaped to the heap under -race (unix.Write's race
// annotations), an allocation a kick (TestSteadyStateAllocatesNothing).
var kickOne = [8]byte{1}

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
