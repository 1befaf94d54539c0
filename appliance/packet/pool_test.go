package packet

import (
	"bytes"
	"testing"
	"unsafe"
)

func TestSlabConfig(t *testing.T) {
	bad := []SlabConfig{
		{Name: "zero", Buffers: 0},
		{Name: "low headroom", Buffers: 1, Headroom: MinHeadroom - 1},
		{Name: "small room", Buffers: 1, DataRoom: 63},
		{Name: "big room", Buffers: 1, DataRoom: 65536},
	}
	for _, c := range bad {
		if s, err := NewSlab(c); err == nil {
			s.Close()
			t.Errorf("%s: no error", c.Name)
		}
	}
	s := newTestSlab(t, 3)
	if s.Size() != 3 || s.Headroom() != MinHeadroom || s.DataRoom() < 2048 || s.Name() != t.Name() {
		t.Fatalf("size %d headroom %d dataroom %d", s.Size(), s.Headroom(), s.DataRoom())
	}
	if PoolByID(s.ID()) != Pool(s) || PoolByID(0) != nil || PoolByID(MaxPools) != nil {
		t.Fatal("PoolByID")
	}
	found := false
	for _, p := range Pools() {
		found = found || p == Pool(s)
	}
	if !found {
		t.Fatal("Pools does not list the slab")
	}
}

func TestSlabAccounting(t *testing.T) {
	s := newTestSlab(t, 10)
	var b Burst
	if got := s.Alloc(&b, 4); got != 4 || b.Len() != 4 || s.InUse() != 4 {
		t.Fatalf("Alloc 4: got %d, in use %d", got, s.InUse())
	}
	// Asking for more than is left gives what is left and counts the rest.
	if got := s.Alloc(&b, 8); got != 6 || b.Len() != 10 || s.InUse() != 10 || s.Stats().AllocFail != 2 {
		t.Fatalf("Alloc 8 of 6: got %d, in use %d, fail %d", got, s.InUse(), s.Stats().AllocFail)
	}
	if _, ok := s.AllocOne(); ok || s.Stats().AllocFail != 3 {
		t.Fatal("AllocOne from an empty pool")
	}
	// Every buffer is distinct, inside the mapping, aligned, fresh, and writable
	// over its whole data room without touching another's metadata.
	seen := map[Handle]bool{}
	for i, h := range b.Handles() {
		p := h.P()
		if seen[h] || uintptr(h)%64 != 0 {
			t.Fatalf("handle %d: %#x duplicate or unaligned", i, h)
		}
		seen[h] = true
		if p.Len() != 0 || p.Headroom() != s.Headroom() || p.PoolID() != s.ID() || p.InPort != NoPort ||
			p.Verdict() != Continue || p.Flags() != 0 || p.Tailroom() < s.DataRoom() || PoolOf(p) != Pool(s) {
			t.Fatalf("packet %d not fresh", i)
		}
		d, err := p.Append(p.Tailroom())
		if err != nil {
			t.Fatal(err)
		}
		for j := range d {
			d[j] = byte(i)
		}
	}
	for i, h := range b.Handles() {
		p := h.P()
		if p.PoolID() != s.ID() || !bytes.Equal(p.Data(), bytes.Repeat([]byte{byte(i)}, p.Len())) {
			t.Fatalf("packet %d overwritten by a neighbour", i)
		}
	}
	if err := s.Close(); err == nil {
		t.Fatal("Close with buffers in use succeeded")
	}
	// A burst that is full takes no more.
	if got := s.Alloc(&b, 1); got != 0 {
		t.Fatalf("Alloc into a full burst: %d", got)
	}
	h := b.H[9]
	b.N = 9
	s.FreeOne(h)
	if s.InUse() != 9 {
		t.Fatalf("FreeOne: in use %d", s.InUse())
	}
	// A reused buffer comes back reset.
	h2, ok := s.AllocOne()
	if !ok || h2.P().Len() != 0 || h2.P().Headroom() != s.Headroom() {
		t.Fatal("AllocOne after FreeOne")
	}
	b.Push(h2)
	s.Free(&b)
	if b.Len() != 0 || s.InUse() != 0 || s.Stats().InUse != 0 || s.Stats().Size != 10 {
		t.Fatalf("Free: burst %d, in use %d", b.Len(), s.InUse())
	}
	s.Free(&b) // empty: nothing happens
	if s.InUse() != 0 {
		t.Fatal("Free of an empty burst")
	}
}

func TestBurst(t *testing.T) {
	var b Burst
	for i := 0; i < MaxBurst; i++ {
		if !b.Push(Handle(i + 1)) {
			t.Fatalf("Push %d refused", i)
		}
	}
	if b.Push(99) || b.Len() != MaxBurst || b.Room() != 0 || len(b.Handles()) != MaxBurst {
		t.Fatal("full burst")
	}
	b.Reset()
	if b.Len() != 0 || b.Room() != MaxBurst {
		t.Fatal("Reset")
	}
}

// TestFreeMixedPools: packet.Free returns each packet of a burst to its own pool,
// whatever the order, and allocates nothing doing it.
func TestFreeMixedPools(t *testing.T) {
	pools := []*Slab{newTestSlab(t, 64), newTestSlab(t, 64), newTestSlab(t, 64)}
	fill := func(b *Burst) {
		// Interleave: runs of 1, 2, 3 … from the pools in turn.
		for i := 0; b.Len() < MaxBurst; i++ {
			s := pools[i%len(pools)]
			h, ok := s.AllocOne()
			if !ok {
				t.Fatal("alloc")
			}
			b.Push(h)
			for k := 0; k < i%3 && b.Len() < MaxBurst; k++ {
				h, _ := s.AllocOne()
				b.Push(h)
			}
		}
	}
	var b Burst
	fill(&b)
	total := 0
	for _, s := range pools {
		total += s.InUse()
	}
	if total != MaxBurst {
		t.Fatalf("in use %d", total)
	}
	Free(&b)
	for i, s := range pools {
		if s.InUse() != 0 {
			t.Errorf("pool %d: %d in use after Free", i, s.InUse())
		}
	}
	if b.Len() != 0 {
		t.Fatal("Free left the burst non-empty")
	}
	// One pool only, and an empty burst.
	pools[1].Alloc(&b, 10)
	Free(&b)
	Free(&b)
	if pools[1].InUse() != 0 {
		t.Fatal("same-pool Free")
	}
	allocs := testing.AllocsPerRun(20, func() {
		fill(&b)
		Free(&b)
	})
	if allocs != 0 {
		t.Errorf("Free of a mixed burst allocates %v times", allocs)
	}
}

// TestBurstInsertGap: the in-place paths copy nothing; when neither side fits,
// Burst.InsertGap moves the packet to a fresh buffer of the same pool, counts the
// copy, and frees the old buffer.
func TestBurstInsertGap(t *testing.T) {
	s := newTestSlab(t, 4)
	var b Burst
	s.Alloc(&b, 2)
	p := b.P(0)
	data := seq(200)
	fill(p, s.Headroom(), data)
	copies := CopyCount(s.ID())

	gap, err := b.InsertGap(0, 14, 40, nil)
	if err != nil || len(gap) != 40 || CopyCount(s.ID()) != copies || b.P(0) != p {
		t.Fatalf("in place: %v, copies %d → %d", err, copies, CopyCount(s.ID()))
	}

	// 30 bytes of room on each side: a 40-byte gap fits neither, but the
	// packet and gap fit a fresh buffer laid out with 20 bytes of headroom.
	full := seq(p.Cap() - 60)
	fill(p, 30, full)
	p.InPort, p.RxTime, p.Hash = 7, 1234, 99
	p.Scratch[3] = 0x5a
	old := b.H[0]
	inUse := s.InUse()
	gap, err = b.InsertGap(0, 100, 40, nil)
	if err != nil {
		t.Fatal(err)
	}
	q := b.P(0)
	if b.H[0] == old || CopyCount(s.ID()) != copies+1 || s.Stats().Copies != copies+1 {
		t.Fatalf("copy fallback: handle %#x (old %#x), copies %d", b.H[0], old, CopyCount(s.ID()))
	}
	if s.InUse() != inUse {
		t.Fatalf("in use %d → %d: the old buffer was not freed", inUse, s.InUse())
	}
	d := q.Data()
	if len(gap) != 40 || &gap[0] != &d[100] || !bytes.Equal(d[:100], full[:100]) || !bytes.Equal(d[140:], full[100:]) {
		t.Fatal("copy fallback: data")
	}
	if q.InPort != 7 || q.RxTime != 1234 || q.Hash != 99 || q.Scratch[3] != 0x5a || q.PoolID() != s.ID() {
		t.Fatal("copy fallback: per-packet state not carried")
	}
	if q.Headroom() != 20 || q.Len() != len(full)+40 {
		t.Fatalf("copy fallback: headroom %d len %d cap %d", q.Headroom(), q.Len(), q.Cap())
	}

	// Larger than any buffer: ErrNoRoom, and nothing changes or leaks.
	h := b.H[1]
	fill(h.P(), s.Headroom(), data)
	if _, err := b.InsertGap(1, 0, 1<<20, nil); err != ErrNoRoom || b.H[1] != h || s.InUse() != inUse {
		t.Fatalf("oversized gap: %v, in use %d", err, s.InUse())
	}
	// Bad offset: not a copy.
	if _, err := b.InsertGap(1, 201, 1, nil); err != ErrBadOffset {
		t.Fatalf("bad offset: %v", err)
	}

	// An empty pool: the fallback cannot get a buffer.
	s.Alloc(&b, 2)
	if s.InUse() != 4 {
		t.Fatal("pool not exhausted")
	}
	fill(b.P(1), 10, seq(b.P(1).Cap()-30))
	if _, err := b.InsertGap(1, 5, 40, nil); err != ErrNoRoom || CopyCount(s.ID()) != copies+1 {
		t.Fatalf("exhausted pool: %v", err)
	}
	Free(&b)
}

func TestPacketSize(t *testing.T) {
	if unsafe.Sizeof(Packet{}) != MetaSize {
		t.Fatalf("Packet is %d bytes, MetaSize %d", unsafe.Sizeof(Packet{}), MetaSize)
	}
	if unsafe.Offsetof(Packet{}.Scratch)%8 != 0 {
		t.Fatal("Scratch is not 8-byte aligned")
	}
}

// A slab writes a fresh packet's metadata as one image: the same as Init.
func TestSlabFreshIsInit(t *testing.T) {
	s := newTestSlab(t, 2)
	h, ok := s.AllocOne()
	if !ok {
		t.Fatal("alloc")
	}
	defer FreeOne(h)
	p := h.P()
	p.Forward(3) // dirty it, then free and take it again
	p.RxTime, p.Hash = 9, 9
	FreeOne(h)
	if h, ok = s.AllocOne(); !ok {
		t.Fatal("alloc")
	}
	var want Packet
	want.Init(uintptr(h)+MetaSize, s.bufSize-MetaSize, s.headroom, s.id, 0)
	got := h.P()
	if *(*[64]byte)(unsafe.Pointer(got)) != *(*[64]byte)(unsafe.Pointer(&want)) {
		t.Fatalf("fresh metadata % x, Init gives % x", (*[64]byte)(unsafe.Pointer(got))[:], (*[64]byte)(unsafe.Pointer(&want))[:])
	}
}

// TestSharedSlab: a shared slab's bytes lie in its memfd, buffer i at i
// strides, and its metadata apart from them.
func TestSharedSlab(t *testing.T) {
	s, err := NewSlab(SlabConfig{Name: "shared", Buffers: 8, DataRoom: 1000, Shared: true})
	if err != nil {
		t.Fatal(err)
	}
	fd, mem, stride, ok := s.SharedMemory()
	if !ok || fd < 0 || stride%64 != 0 || len(mem) != 8*stride || s.DataRoom() < 1000 {
		t.Fatalf("shared memory fd %d, %d bytes, stride %d, data room %d", fd, len(mem), stride, s.DataRoom())
	}
	var b Burst
	if s.Alloc(&b, 8) != 8 {
		t.Fatal("alloc")
	}
	for _, h := range b.Handles() {
		i := s.BufferIndex(h)
		if s.Handle(i) != h {
			t.Fatalf("buffer %d: handle %#x, index gives %#x", i, h, s.Handle(i))
		}
		d, _ := h.P().Append(4)
		copy(d, []byte{1, 2, 3, byte(i)})
		at := i*stride + MinHeadroom
		if mem[at+3] != byte(i) || h.P().Cap() != stride {
			t.Fatalf("buffer %d: data not at %d of the memfd", i, at)
		}
		if uintptr(h) >= uintptr(unsafe.Pointer(&mem[0])) && uintptr(h) < uintptr(unsafe.Pointer(&mem[0]))+uintptr(len(mem)) {
			t.Fatalf("metadata of buffer %d inside the shared memory", i)
		}
	}
	s.Free(&b)
	if _, _, _, ok := (&Slab{fd: -1}).SharedMemory(); ok {
		t.Error("an unshared slab says it is shared")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}
