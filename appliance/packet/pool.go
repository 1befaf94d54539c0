package packet

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// Pool owns buffers. Every buffer knows its pool (Packet.PoolID) and freeing always
// returns it there. Implementations: the mmap slab pool here, DPDK mempools in
// ports/dpdk, the UMEM in ports/xdp.
type Pool interface {
	ID() uint16
	Name() string
	// Alloc appends up to n fresh packets to b and returns how many it added.
	Alloc(b *Burst, n int) int
	// Free returns every packet of b, which all belong to this pool, and empties b.
	Free(b *Burst)
	// FreeHandles returns packets of this pool given as a slice of handles.
	FreeHandles(hs []Handle)
	AllocOne() (Handle, bool)
	FreeOne(h Handle)
	// Headroom is the headroom of a fresh packet; DataRoom the bytes after it.
	Headroom() int
	DataRoom() int
	Stats() PoolStats
}

// SizedAllocator is a pool that hands out packets whose window already holds
// a given number of bytes, as a port's rx does, instead of empty ones. A DPDK
// pool writes the mbuf's lengths in the pass that resets it, so the packet
// leaves without its window written back at tx. A generator of one frame
// size uses it.
type SizedAllocator interface {
	// AllocSized appends up to n fresh packets of length bytes, their content
	// undefined, to b and returns how many it added: none when length is
	// negative or over DataRoom.
	AllocSized(b *Burst, n, length int) int
}

// PoolStats are a pool's counters.
type PoolStats struct {
	Name      string
	Size      int    // buffers in the pool
	InUse     int    // buffers handed out and not yet freed
	AllocFail uint64 // buffers asked for and not given
	Copies    uint64 // InsertGap copy fallbacks into a new buffer
}

// MaxPools bounds the pool registry; a pool id is an index into it.
const MaxPools = 1024

type poolSlot struct{ p Pool }

var (
	registry   [MaxPools]atomic.Pointer[poolSlot]
	copyCounts [MaxPools]atomic.Uint64
	registryMu sync.Mutex
)

// RegisterPool gives p's implementation an id. Call it before the pool hands out
// buffers; NewPool does it for slab pools.
func RegisterPool(mk func(id uint16) Pool) (Pool, error) {
	registryMu.Lock()
	defer registryMu.Unlock()
	for i := 1; i < MaxPools; i++ { // id 0 is never used: a zeroed Packet has no pool
		if registry[i].Load() == nil {
			p := mk(uint16(i))
			copyCounts[i].Store(0)
			registry[i].Store(&poolSlot{p})
			return p, nil
		}
	}
	return nil, errors.New("packet: pool registry full")
}

// UnregisterPool frees p's id.
func UnregisterPool(p Pool) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if s := registry[p.ID()].Load(); s != nil && s.p == p {
		registry[p.ID()].Store(nil)
	}
}

// PoolByID returns the pool with id, or nil.
func PoolByID(id uint16) Pool {
	if int(id) >= MaxPools {
		return nil
	}
	if s := registry[id].Load(); s != nil {
		return s.p
	}
	return nil
}

// PoolOf returns the pool that owns p's buffer.
func PoolOf(p *Packet) Pool { return PoolByID(p.pool) }

// Pools lists every registered pool.
func Pools() []Pool {
	var out []Pool
	for i := range registry {
		if s := registry[i].Load(); s != nil {
			out = append(out, s.p)
		}
	}
	return out
}

// CopyCount is how many InsertGap copy fallbacks pool id made.
func CopyCount(id uint16) uint64 { return copyCounts[id].Load() }

func countCopyFor(id uint16) { copyCounts[id].Add(1) }

// FreeOne returns h to its pool.
func FreeOne(h Handle) {
	if pool := PoolOf(h.P()); pool != nil {
		pool.FreeOne(h)
	}
}

// Free returns every packet of b to its own pool and empties b.
func Free(b *Burst) {
	FreeHandles(b.H[:b.N])
	b.N = 0
}

// FreeHandles returns every packet of hs to its own pool. Runs of packets from
// the same pool go back in one call.
func FreeHandles(hs []Handle) {
	for i := 0; i < len(hs); {
		id := hs[i].P().pool
		j := i + 1
		for j < len(hs) && hs[j].P().pool == id {
			j++
		}
		if pool := PoolByID(id); pool != nil {
			pool.FreeHandles(hs[i:j])
		}
		i = j
	}
}

// SlabConfig sizes a slab pool.
type SlabConfig struct {
	Name     string
	Buffers  int // number of buffers
	DataRoom int // bytes after the headroom; 2048 when zero
	Headroom int // at least MinHeadroom; MinHeadroom when zero
	// Shared puts the buffers' bytes (headroom and data room) in a memfd, one
	// after another, and the metadata in a private mapping of its own: the
	// memfd can then be shared with another process (a memif region for an
	// out-of-process plugin) without the metadata, whose addresses mean
	// nothing there.
	Shared bool
}

// Slab is a pool of buffers carved from one anonymous mmap: off the Go heap, so the
// garbage collector never scans packet memory. Each buffer is laid out as
// [Packet metadata | headroom | data room], cache-line aligned.
type Slab struct {
	id       uint16
	name     string
	mem      []byte // metadata and buffers; only metadata when shared
	data     []byte // shared: the memfd's mapping
	fd       int    // shared: the memfd, or -1
	bufSize  int    // stride of mem; of data when shared
	headroom int
	dataRoom int

	mu   sync.Mutex
	free []Handle // a stack; plain integers, so not scanned either

	inUse     atomic.Int64
	allocFail atomic.Uint64
	size      int

	// fresh is the first cache line of a fresh packet's metadata but for
	// base: what Init writes, as one block copy at Alloc.
	fresh [8]uint64
}

var _ Pool = (*Slab)(nil)

// NewSlab maps and registers a slab pool.
func NewSlab(cfg SlabConfig) (*Slab, error) {
	if cfg.Buffers <= 0 {
		return nil, fmt.Errorf("pool %q: buffers must be positive", cfg.Name)
	}
	if cfg.DataRoom == 0 {
		cfg.DataRoom = 2048
	}
	if cfg.Headroom == 0 {
		cfg.Headroom = MinHeadroom
	}
	if cfg.Headroom < MinHeadroom {
		return nil, fmt.Errorf("pool %q: headroom %d is below %d", cfg.Name, cfg.Headroom, MinHeadroom)
	}
	if cfg.DataRoom < 64 || cfg.DataRoom > 65535 {
		return nil, fmt.Errorf("pool %q: data_room %d is outside 64..65535", cfg.Name, cfg.DataRoom)
	}
	bufSize := (MetaSize + cfg.Headroom + cfg.DataRoom + 63) &^ 63
	if cfg.Shared {
		bufSize = (cfg.Headroom + cfg.DataRoom + 63) &^ 63
	}
	var mem, data []byte
	fd := -1
	var err error
	if cfg.Shared {
		if fd, data, err = sharedMap(cfg.Name, bufSize*cfg.Buffers); err != nil {
			return nil, fmt.Errorf("pool %q: %w", cfg.Name, err)
		}
		mem, err = syscall.Mmap(-1, 0, MetaSize*cfg.Buffers, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS)
	} else {
		mem, err = syscall.Mmap(-1, 0, bufSize*cfg.Buffers, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS)
	}
	if err != nil {
		unmapShared(fd, data)
		return nil, fmt.Errorf("pool %q: mmap: %w", cfg.Name, err)
	}
	var s *Slab
	_, err = RegisterPool(func(id uint16) Pool {
		s = &Slab{id: id, name: cfg.Name, mem: mem, data: data, fd: fd, bufSize: bufSize, headroom: cfg.Headroom,
			dataRoom: cfg.DataRoom, size: cfg.Buffers, free: make([]Handle, 0, cfg.Buffers)}
		return s
	})
	if err != nil {
		_ = syscall.Munmap(mem)
		unmapShared(fd, data)
		return nil, err
	}
	// Metadata is written at Alloc, not here, so pages are touched only when
	// used; fresh is what Init writes there, made once.
	var img Packet
	capacity := bufSize - MetaSize
	if cfg.Shared {
		capacity = bufSize
	}
	img.Init(0, capacity, cfg.Headroom, s.id, 0)
	s.fresh = *(*[8]uint64)(unsafe.Pointer(&img))
	base := uintptr(unsafe.Pointer(&mem[0]))
	stride := uintptr(bufSize)
	if cfg.Shared {
		stride = MetaSize
	}
	for i := cfg.Buffers - 1; i >= 0; i-- {
		s.free = append(s.free, Handle(base+uintptr(i)*stride))
	}
	return s, nil
}

func sharedMap(name string, size int) (int, []byte, error) {
	fd, err := memfdCreate("linerate-pool-" + name)
	if err != nil {
		return -1, nil, fmt.Errorf("memfd_create: %w", err)
	}
	if err := syscall.Ftruncate(fd, int64(size)); err != nil {
		syscall.Close(fd)
		return -1, nil, fmt.Errorf("ftruncate: %w", err)
	}
	// Sealed: a process it is shared with cannot shrink it under us.
	if err := sealAll(fd); err != nil {
		syscall.Close(fd)
		return -1, nil, fmt.Errorf("seals: %w", err)
	}
	data, err := syscall.Mmap(fd, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		syscall.Close(fd)
		return -1, nil, fmt.Errorf("mmap: %w", err)
	}
	return fd, data, nil
}

func unmapShared(fd int, data []byte) {
	if data != nil {
		_ = syscall.Munmap(data)
	}
	if fd >= 0 {
		syscall.Close(fd)
	}
}

// SharedMemory is a shared slab's memfd and its mapping, buffer after buffer
// of Stride bytes (headroom then data room); ok is false for a slab that is
// not shared. The descriptor stays the slab's: a caller that sends it dups it.
func (s *Slab) SharedMemory() (fd int, mem []byte, stride int, ok bool) {
	return s.fd, s.data, s.bufSize, s.data != nil
}

// BufferIndex is h's index in the slab, and Handle the handle of buffer i:
// for shared slabs, whose buffers and metadata lie apart.
func (s *Slab) BufferIndex(h Handle) int {
	if s.data != nil {
		return int((uintptr(h) - uintptr(unsafe.Pointer(&s.mem[0]))) / MetaSize)
	}
	return int((uintptr(h) - uintptr(unsafe.Pointer(&s.mem[0]))) / uintptr(s.bufSize))
}

// Handle is buffer i's handle; see BufferIndex.
func (s *Slab) Handle(i int) Handle {
	if s.data != nil {
		return Handle(uintptr(unsafe.Pointer(&s.mem[0])) + uintptr(i)*MetaSize)
	}
	return Handle(uintptr(unsafe.Pointer(&s.mem[0])) + uintptr(i*s.bufSize))
}

func (s *Slab) ID() uint16    { return s.id }
func (s *Slab) Name() string  { return s.name }
func (s *Slab) Headroom() int { return s.headroom }
func (s *Slab) DataRoom() int {
	if s.data != nil {
		return s.bufSize - s.headroom
	}
	return s.bufSize - MetaSize - s.headroom
}
func (s *Slab) Size() int  { return s.size }
func (s *Slab) InUse() int { return int(s.inUse.Load()) }
func (s *Slab) Stats() PoolStats {
	return PoolStats{Name: s.name, Size: s.size, InUse: s.InUse(), AllocFail: s.allocFail.Load(), Copies: CopyCount(s.id)}
}

// Alloc appends up to n fresh packets to b.
func (s *Slab) Alloc(b *Burst, n int) int {
	if n > b.Room() {
		n = b.Room()
	}
	if n <= 0 {
		return 0
	}
	s.mu.Lock()
	avail := len(s.free)
	got := n
	if got > avail {
		got = avail
	}
	copy(b.H[b.N:b.N+got], s.free[avail-got:])
	s.free = s.free[:avail-got]
	s.mu.Unlock()
	for i := b.N; i < b.N+got; i++ {
		s.init(b.H[i])
	}
	OwnBurst(b.H[b.N:b.N+got], OpAlloc, NoOwner, -1)
	b.N += got
	s.inUse.Add(int64(got))
	if got < n {
		s.allocFail.Add(uint64(n - got))
	}
	return got
}

// AllocOne takes one fresh packet.
func (s *Slab) AllocOne() (Handle, bool) {
	s.mu.Lock()
	n := len(s.free)
	if n == 0 {
		s.mu.Unlock()
		s.allocFail.Add(1)
		return 0, false
	}
	h := s.free[n-1]
	s.free = s.free[:n-1]
	s.mu.Unlock()
	s.init(h)
	Own(h, OpAlloc, NoOwner, -1)
	s.inUse.Add(1)
	return h, true
}

func (s *Slab) init(h Handle) {
	// Init's stores as one copy of its image: the line is written whole.
	line := (*[8]uint64)(addr(uintptr(h)))
	*line = s.fresh
	if s.data != nil {
		line[0] = uint64(uintptr(unsafe.Pointer(&s.data[0])) + uintptr(s.BufferIndex(h)*s.bufSize)) // base
		return
	}
	line[0] = uint64(uintptr(h) + MetaSize) // base
}

// Free returns every packet of b.
func (s *Slab) Free(b *Burst) {
	s.FreeHandles(b.H[:b.N])
	b.N = 0
}

// FreeHandles returns packets of this slab.
func (s *Slab) FreeHandles(hs []Handle) {
	if len(hs) == 0 {
		return
	}
	if Checked {
		for _, h := range hs {
			Released(h, s.id)
		}
	}
	s.mu.Lock()
	s.free = append(s.free, hs...)
	s.mu.Unlock()
	s.inUse.Add(-int64(len(hs)))
}

// FreeOne returns h.
func (s *Slab) FreeOne(h Handle) {
	Released(h, s.id)
	s.mu.Lock()
	s.free = append(s.free, h)
	s.mu.Unlock()
	s.inUse.Add(-1)
}

// Close unmaps the slab. It fails while buffers are in use.
func (s *Slab) Close() error {
	if n := s.InUse(); n != 0 {
		return fmt.Errorf("pool %q: %d buffers still in use", s.name, n)
	}
	UnregisterPool(s)
	unmapShared(s.fd, s.data)
	return syscall.Munmap(s.mem)
}
