package sdk

import (
	"testing"

	"github.com/linerate/linerate/appliance/memif"
	"github.com/linerate/linerate/appliance/packet"
)

// TestEmit: a plugin's Emit takes only packets of its pool in the stage's
// hands, once each; they go back to linerate on the emit ring at the end of
// the burst, each naming its buffer's id and a window inside the buffer it
// was lent; what the stage frees is back in the pool only then; a handle the
// pool does not have out is refused or ignored, and counted.
func TestEmit(t *testing.T) {
	const bufSize = 2368
	data, err := memif.NewRegion("emit-data", 4*bufSize)
	if err != nil {
		t.Fatal(err)
	}
	defer data.Close()
	rings, err := memif.NewRegion("emit-rings", 2*memif.RingBytes(4))
	if err != nil {
		t.Fatal(err)
	}
	defer rings.Close()
	spare, emits := memif.ViewRing(rings.Mem, 4), memif.ViewRing(rings.Mem[memif.RingBytes(4):], 4)
	ep, err := newEmitPool(4, 2048)
	if err != nil {
		t.Fatal(err)
	}
	defer packet.UnregisterPool(ep)
	regions := []*memif.Region{nil, data} // region 1, as linerate's pools are
	for id := 0; id < 4; id++ {
		*spare.D(uint16(id)) = memif.Desc{Region: 1, Offset: uint32(id * bufSize), Length: bufSize, Metadata: memif.ExtSpare(320, uint16(id))}
	}
	spare.SetHead(4)
	var last uint16
	ep.take(regions, spare, &last)
	if len(ep.free) != 4 || spare.Tail() != 4 {
		t.Fatalf("took %d spare buffers, tail %d", len(ep.free), spare.Tail())
	}
	in := &instance{}
	in.useEmitPool(ep)
	in.env.ring = emits
	e := &in.env

	a, _ := ep.AllocOne()
	b, _ := ep.AllocOne()
	c, _ := ep.AllocOne()
	if d, err := a.P().Append(100); err != nil {
		t.Fatal(err)
	} else {
		d[0], d[99] = 0xAA, 0xBB
	}
	if !e.Emit(a, 7) {
		t.Fatal("Emit of a packet of the pool refused")
	}
	if e.Emit(a, 7) {
		t.Error("a second Emit of the same packet taken")
	}
	lent := packet.Handle(in.env.base + 64) // not the pool's
	if e.Emit(lent, 7) || e.Emit(0, 7) {
		t.Error("Emit of a handle not of the pool taken")
	}
	b.P().Continue()
	if !e.queue(b, memif.ExtContinue, 0) {
		t.Fatal("a produced packet refused")
	}
	e.Free(c)
	if len(ep.free) != 1 || ep.inUse.Load() != 3 {
		t.Fatalf("before the burst's end: %d free, %d in use", len(ep.free), ep.inUse.Load())
	}
	e.flush()
	if len(ep.free) != 2 || ep.inUse.Load() != 0 || emits.Tail() != 2 {
		t.Fatalf("after: %d free, %d in use, emit tail %d", len(ep.free), ep.inUse.Load(), emits.Tail())
	}
	if n := e.refused.Local(); n != 3 {
		t.Errorf("refused %d, want 3", n)
	}
	for k, want := range []struct {
		code uint32
		port uint16
		len  uint32
	}{{memif.ExtForward, 7, 100}, {memif.ExtContinue, 0, 0}} {
		d := emits.Load(uint16(k))
		id := memif.ExtEmitID(d.Metadata)
		start := uint32(id) * bufSize
		if d.Metadata&0xF != want.code || uint16(d.Metadata>>16) != want.port || d.Region != 1 ||
			d.Length != want.len || d.Offset != start+320 {
			t.Errorf("emit %d: %+v (id %d)", k, d, id)
		}
		if k == 0 {
			buf, _ := memif.Buf(regions, d)
			if buf[0] != 0xAA || buf[99] != 0xBB {
				t.Error("the emitted packet's bytes are not in the buffer it names")
			}
		}
	}
	// A packet emitted is linerate's again: the pool no longer has it.
	ep.FreeOne(a)
	if ep.badFree.Load() != 1 || len(ep.free) != 2 {
		t.Errorf("a free of an emitted packet: bad_free %d, %d free", ep.badFree.Load(), len(ep.free))
	}
	// An id given back (emitted) may be lent again; one the plugin has
	// (free here) may not: it is counted and not taken.
	*spare.D(4) = memif.Desc{Region: 1, Offset: 0, Length: bufSize, Metadata: memif.ExtSpare(320, 0)}
	*spare.D(5) = memif.Desc{Region: 1, Offset: 3 * bufSize, Length: bufSize, Metadata: memif.ExtSpare(320, 3)}
	spare.SetHead(6)
	ep.take(regions, spare, &last)
	if ep.badSpare.Load() != 1 || len(ep.free) != 3 {
		t.Errorf("id 0 lent twice, id 3 again after its emit: bad_spare %d, %d free", ep.badSpare.Load(), len(ep.free))
	}
}
