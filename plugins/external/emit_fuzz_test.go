package external

import (
	"encoding/binary"
	"testing"

	"github.com/linerate/linerate/appliance/memif"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/plugins/stagetest"
)

// FuzzEmits: whatever a plugin writes on its emit ring — forged ids,
// replays of a buffer it gave back, windows and regions outside the buffer,
// unknown codes, a tail far ahead — the host only ever takes back buffers it
// lent and has not had back, each once, with a window inside the buffer;
// everything else is counted as bad_emit, and no buffer is lost or owned
// twice: the pool's buffers in use are exactly the spares still lent plus
// what came out. A checked build (-tags lrcheck) checks every hand-over.
func FuzzEmits(f *testing.F) {
	// Entries of 8 bytes: id (2), code (1), region delta (1), offset delta
	// from the buffer's headroom (2, signed), length (2).
	f.Add([]byte{0, 0, 1, 0, 0, 0, 64, 0})                          // a good forward
	f.Add([]byte{1, 0, 0, 0, 0, 0, 64, 0, 1, 0, 0, 0, 0, 0, 64, 0}) // a good continue, then its replay
	f.Add([]byte{2, 0, 1, 1, 0, 0, 64, 0})                          // another region
	f.Add([]byte{3, 0, 1, 0, 0, 0xFF, 0xFF, 0xFF})                  // past the buffer
	f.Add([]byte{0xFF, 0x07, 1, 0, 0, 0, 64, 0})                    // an id never lent
	f.Add([]byte{4, 0, 9, 0, 0x80, 0xFE, 64, 0})                    // a bad code, before the buffer
	h := stagetest.NewHarness(f, 0)
	pool, err := packet.NewSlab(packet.SlabConfig{Name: "fuzz-emit", Buffers: 256, Shared: true})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { pool.Close() })
	in, peer := lendRig(f, pool)
	const spares = 32
	in.emitPool = pool
	in.spare = make([]packet.Handle, spares)
	for id := spares - 1; id >= 0; id-- {
		in.freeIDs = append(in.freeIDs, uint16(id))
	}
	f.Cleanup(func() {
		in.freeSpares(&h.Ctx)
		h.Env.Flush()
	})
	ctx := &h.Ctx
	var out packet.Burst
	in.Produce(ctx, &out) // lends the spares
	// The plugin's view of what it was lent: id → the buffer's descriptor.
	var lent [spares]memif.Desc
	var spareTail uint16
	learn := func() {
		r := peer.C2S[1]
		for ; spareTail != r.Head(); spareTail++ {
			d := r.Load(spareTail)
			lent[d.Metadata>>16] = d
		}
		r.SetTail(spareTail)
	}
	learn()
	var tail uint16
	f.Fuzz(func(t *testing.T, raw []byte) {
		r := peer.S2C[1]
		k := 0
		for ; len(raw) >= 8 && k < 512; raw, k = raw[8:], k+1 {
			id := binary.LittleEndian.Uint16(raw) % memif.ExtMaxSpare
			base := lent[id%spares]
			head := base.Metadata & 0xFFFF
			off := int64(base.Offset) + int64(head) + int64(int16(binary.LittleEndian.Uint16(raw[4:])))
			*r.D(tail) = memif.Desc{Region: base.Region + uint16(raw[3]), Offset: uint32(max(off, 0)),
				Length: uint32(binary.LittleEndian.Uint16(raw[6:])), Metadata: memif.ExtEmit(uint32(raw[2]), 0, id)}
			tail++
		}
		r.SetTail(tail)
		emitted0, bad0 := in.c.emitted.Local(), in.c.badEmit.Local()
		seen := map[packet.Handle]bool{}
		taken := 0
		for in.emitDone != tail {
			before := in.emitDone
			out.N = 0
			in.Produce(ctx, &out)
			if in.emitDone == before {
				t.Fatalf("emits stuck at %d of %d", before, tail)
			}
			sent := h.Env.TakeEmitted()
			hs := append(out.Handles(), make([]packet.Handle, 0, len(sent))...)
			for _, s := range sent {
				hs = append(hs, s.H)
			}
			h.Env.Flush() // bad emits' buffers, freed
			if got, want := pool.InUse(), in.spares()+len(hs); got != want {
				t.Fatalf("%d buffers in use: %d spares lent + %d out", got, in.spares(), len(hs))
			}
			for _, hd := range hs {
				p := hd.P()
				if seen[hd] || p.Offset()+p.Len() > p.Cap() {
					t.Fatalf("buffer %#x out twice, or window %d+%d of %d", uintptr(hd), p.Offset(), p.Len(), p.Cap())
				}
				seen[hd] = true
			}
			taken += len(hs)
			stagetest.Free(hs...)
			learn()
		}
		if n := (in.c.emitted.Local() - emitted0) + (in.c.badEmit.Local() - bad0); n != uint64(k) || uint64(taken) != in.c.emitted.Local()-emitted0 {
			t.Fatalf("%d descriptors: %d emitted (%d out), %d bad", k, in.c.emitted.Local()-emitted0, taken, in.c.badEmit.Local()-bad0)
		}
	})
}

// TestExtVersion1Link: a plugin of extension version 1 (built against an
// earlier release: no spare or emit rings, one ring each way) still runs,
// as docs/compatibility.md promises: packets are lent and taken back, and
// an instance that would lend spares (a restarted plugin that is older than
// the one configured) touches no ring its link does not have.
func TestExtVersion1Link(t *testing.T) {
	h := stagetest.NewHarness(t, 0)
	pool, err := packet.NewSlab(packet.SlabConfig{Name: "ext-v1", Buffers: 256, Shared: true})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	in, peer := lendRigOf(t, pool, false)
	if len(peer.C2S) != 1 || len(peer.S2C) != 1 {
		t.Fatalf("%d C2S and %d S2C rings", len(peer.C2S), len(peer.S2C))
	}
	in.emitPool = pool
	in.spare = make([]packet.Handle, 8)
	for id := 7; id >= 0; id-- {
		in.freeIDs = append(in.freeIDs, uint16(id))
	}
	ctx := &h.Ctx
	var bu, out packet.Burst
	pool.Alloc(&bu, 16)
	for _, hd := range bu.Handles() {
		hd.P().Append(60)
	}
	in.Process(ctx, &bu)
	rx, tx := peer.C2S[0], peer.S2C[0]
	if rx.Head() != 16 {
		t.Fatalf("lent %d of 16", rx.Head())
	}
	for k := uint16(0); k < 16; k++ {
		d := rx.Load(k)
		*tx.D(k) = memif.Desc{Region: d.Region, Offset: d.Offset, Length: d.Length}
	}
	rx.SetTail(16)
	tx.SetTail(16)
	in.Produce(ctx, &out)
	if out.N != 16 || in.spares() != 0 || in.Held() != 0 {
		t.Fatalf("%d of 16 back, %d spares lent, %d held", out.N, in.spares(), in.Held())
	}
	stagetest.Free(out.Handles()...)
}
