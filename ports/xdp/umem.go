//go:build linux

package xdp

import (
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/linerate/linerate/appliance/packet"
)

// The UMEM is the port's packet pool. Each frame is one buffer:
//
//	frame: [ Packet metadata (128) | UMEM headroom | XDP headroom (256) | data … ]
//	        ^ handle                  ^ the kernel's data_hard_start
//
// The UMEM headroom (umemHeadroom) keeps the metadata out of the kernel's
// reach and gives every packet packet.MinHeadroom bytes of room to grow in
// front, as the Go pools do. The dispatcher's rx stamp (struct lr_xdp_meta)
// sits in the last bytes of that room, right in front of the data.
const (
	umemHeadroom = packet.MinHeadroom + packet.MetaSize - xdpPacketHeadroom
	// xdpPacketHeadroom is XDP_PACKET_HEADROOM: the kernel writes a frame's
	// data that far past the UMEM headroom.
	xdpPacketHeadroom = 256
)

// umem is the mapped frames and the pool over them.
type umem struct {
	id        uint16
	name      string
	mem       []byte
	base      uintptr
	frameSize int
	frames    int

	mu   sync.Mutex
	free []packet.Handle

	inUse     atomic.Int64
	allocFail atomic.Uint64
}

var _ packet.Pool = (*umem)(nil)

func newUmem(name string, frames, frameSize int) (*umem, error) {
	if frameSize != 2048 && frameSize != 4096 {
		return nil, fmt.Errorf("frame_size %d is not 2048 or 4096", frameSize)
	}
	total := frames * frameSize
	mem, err := syscall.Mmap(-1, 0, total, syscall.PROT_READ|syscall.PROT_WRITE,
		syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS|syscall.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("mmap %d bytes of UMEM: %w", total, err)
	}
	var u *umem
	if _, err := packet.RegisterPool(func(id uint16) packet.Pool {
		u = &umem{id: id, name: name, mem: mem, base: uintptr(unsafe.Pointer(&mem[0])), frameSize: frameSize,
			frames: frames, free: make([]packet.Handle, 0, frames)}
		return u
	}); err != nil {
		_ = syscall.Munmap(mem)
		return nil, err
	}
	for i := frames - 1; i >= 0; i-- {
		u.free = append(u.free, packet.Handle(u.base+uintptr(i*frameSize)))
	}
	return u, nil
}

func (u *umem) ID() uint16    { return u.id }
func (u *umem) Name() string  { return u.name }
func (u *umem) Headroom() int { return packet.MinHeadroom }
func (u *umem) DataRoom() int { return u.frameSize - packet.MetaSize - packet.MinHeadroom }
func (u *umem) Stats() packet.PoolStats {
	return packet.PoolStats{Name: u.name, Size: u.frames, InUse: int(u.inUse.Load()), AllocFail: u.allocFail.Load(),
		Copies: packet.CopyCount(u.id)}
}

// frameOf is the UMEM offset of h's frame.
func (u *umem) frameOf(h packet.Handle) uint64 { return uint64(uintptr(h) - u.base) }

// handleAt is the frame holding UMEM offset addr.
func (u *umem) handleAt(addr uint64) packet.Handle {
	return packet.Handle(u.base + uintptr(addr&^uint64(u.frameSize-1)))
}

func (u *umem) init(h packet.Handle) {
	// Handle.P would check ownership of a buffer the pool is handing out.
	p := (*packet.Packet)(unsafe.Add(unsafe.Pointer(&u.mem[0]), uintptr(h)-u.base))
	p.Init(uintptr(h)+packet.MetaSize, u.frameSize-packet.MetaSize, packet.MinHeadroom, u.id, uintptr(u.frameOf(h)))
}

// take pops up to len(hs) frames, uninitialised, and returns how many.
func (u *umem) take(hs []packet.Handle) int {
	u.mu.Lock()
	n := min(len(hs), len(u.free))
	copy(hs, u.free[len(u.free)-n:])
	u.free = u.free[:len(u.free)-n]
	u.mu.Unlock()
	return n
}

// Alloc appends up to n fresh packets to b.
func (u *umem) Alloc(b *packet.Burst, n int) int {
	n = min(n, b.Room())
	if n <= 0 {
		return 0
	}
	got := u.take(b.H[b.N : b.N+n])
	for _, h := range b.H[b.N : b.N+got] {
		u.init(h)
	}
	packet.OwnBurst(b.H[b.N:b.N+got], packet.OpAlloc, packet.NoOwner, -1)
	b.N += got
	u.inUse.Add(int64(got))
	if got < n {
		u.allocFail.Add(uint64(n - got))
	}
	return got
}

// AllocOne takes one fresh packet.
func (u *umem) AllocOne() (packet.Handle, bool) {
	var hs [1]packet.Handle
	if u.take(hs[:]) == 0 {
		u.allocFail.Add(1)
		return 0, false
	}
	u.init(hs[0])
	packet.Own(hs[0], packet.OpAlloc, packet.NoOwner, -1)
	u.inUse.Add(1)
	return hs[0], true
}

// Free returns every packet of b.
func (u *umem) Free(b *packet.Burst) {
	u.FreeHandles(b.H[:b.N])
	b.N = 0
}

// FreeHandles returns packets of this UMEM.
func (u *umem) FreeHandles(hs []packet.Handle) {
	if len(hs) == 0 {
		return
	}
	if packet.Checked {
		for _, h := range hs {
			packet.Released(h, u.id)
		}
	}
	u.mu.Lock()
	u.free = append(u.free, hs...)
	u.mu.Unlock()
	u.inUse.Add(-int64(len(hs)))
}

// FreeOne returns h.
func (u *umem) FreeOne(h packet.Handle) {
	packet.Released(h, u.id)
	u.mu.Lock()
	u.free = append(u.free, h)
	u.mu.Unlock()
	u.inUse.Add(-1)
}

// close unmaps the UMEM; its sockets must be closed first.
func (u *umem) close() error {
	if n := u.inUse.Load(); n != 0 {
		return fmt.Errorf("UMEM %q: %d frames still in use", u.name, n)
	}
	packet.UnregisterPool(u)
	return syscall.Munmap(u.mem)
}
