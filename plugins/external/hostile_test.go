package external

import (
	"math/rand/v2"
	"testing"

	"github.com/linerate/linerate/appliance/memif"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/plugins/stagetest"
)

// TestHostilePlugin: a plugin that lies, through the external stage's own
// rings, round after round (a fixed count, a fixed seed: no timing): results
// whose window leaves the packet's buffer, a result tail ahead of the
// packets lent (results written for packets never lent) or behind those
// taken, emits under forged ids, replayed ids, and windows outside the
// buffer. Each is refused and counted by name (bad_window, bad_result,
// bad_emit), the good results and emits between them go through, nothing
// crashes, and no buffer is lost: after the drain the pool has none in use.
// A checked build (-tags lrcheck) checks every hand-over too.
func TestHostilePlugin(t *testing.T) {
	h := stagetest.NewHarness(t, 0)
	const spares = 16
	pool, in, peer := spareRig(t, "hostile", 1024, spares)
	ctx := &h.Ctx
	rng := rand.New(rand.NewPCG(17, 4))

	// What the plugin knows, and what the host should count.
	var lentTail, resTail, spareTail, emitTail uint16
	held := map[uint16]memif.Desc{} // spare ids lent and not emitted
	gone := map[uint16]bool{}       // ids emitted and not lent again: a replay's
	var want struct{ lent, cont, dropped, badWindow, badResult, emitted, badEmit int }
	learn := func() {
		r := peer.C2S[1]
		for ; spareTail != r.Head(); spareTail++ {
			d := r.Load(spareTail)
			id := uint16(d.Metadata >> 16)
			held[id] = d
			delete(gone, id)
		}
		r.SetTail(spareTail)
	}
	var out packet.Burst
	drain := func() {
		for i := 0; ; i++ {
			if i > 1000 {
				t.Fatalf("no drain: done %d of %d, emits %d of %d, tail %d", in.done, in.head, in.emitDone, emitTail, resTail)
			}
			out.N = 0
			in.Produce(ctx, &out)
			for _, hd := range out.Handles() {
				if p := hd.P(); p.Offset()+p.Len() > p.Cap() || p.Len() == 0 {
					t.Fatalf("window %d+%d of %d", p.Offset(), p.Len(), p.Cap())
				}
			}
			stagetest.Free(out.Handles()...)
			for _, s := range h.Env.TakeEmitted() {
				stagetest.Free(s.H)
			}
			h.Env.Flush()
			if out.N == 0 && in.emitDone == emitTail && (in.done == in.head || int16(resTail-in.done) <= 0) {
				return
			}
		}
	}
	drain() // lends the spares
	learn()
	ahead := 0 // results the plugin wrote past what was lent
	for round := 0; round < 400; round++ {
		// Lend a burst, at least as many as the plugin answered ahead.
		var bu packet.Burst
		n := pool.Alloc(&bu, max(1+rng.IntN(packet.MaxBurst), ahead))
		for _, hd := range bu.Handles() {
			hd.P().Append(60)
		}
		in.Process(ctx, &bu)
		want.lent += n
		rx, tx := peer.C2S[0], peer.S2C[0]
		for ; lentTail != rx.Head(); lentTail++ {
			if ahead > 0 {
				// Its result was written before it was lent: refused.
				ahead--
				want.badResult++
				continue
			}
			d := rx.Load(lentTail)
			r := memif.Desc{Region: d.Region, Offset: d.Offset, Length: d.Length}
			switch k := rng.IntN(10); {
			case k < 6:
				want.cont++
			case k < 7:
				r.Metadata = memif.ExtDrop
				want.dropped++
			case k < 8:
				r.Offset += 4096 // past its buffer
				want.badWindow++
			case k < 9:
				r.Region++
				want.badWindow++
			default:
				r.Offset -= uint32(d.Metadata&0xFFFF) + 64 // before its buffer's first byte
				want.badWindow++
			}
			*tx.D(lentTail) = r
			resTail = lentTail + 1
		}
		rx.SetTail(lentTail)
		if round%7 == 3 {
			// Results for packets not lent yet.
			ahead = 1 + rng.IntN(4)
			for k := 0; k < ahead; k++ {
				*tx.D(resTail) = memif.Desc{Region: 1, Offset: 0, Length: 64}
				resTail++
			}
		}
		tx.SetTail(resTail)
		if round%50 == 10 && ahead == 0 {
			// A tail behind what was taken, with packets lent: nothing is
			// taken (their slots hold stale results), counted once; then
			// the plugin answers them.
			drain()
			var more packet.Burst
			n := pool.Alloc(&more, 4)
			for _, hd := range more.Handles() {
				hd.P().Append(60)
			}
			in.Process(ctx, &more)
			want.lent += n
			taken := in.done
			tx.SetTail(taken - 1)
			for k := 0; k < 3; k++ {
				out.N = 0
				in.Produce(ctx, &out)
				if in.done != taken {
					t.Fatalf("round %d: %d results taken from a tail behind", round, in.done-taken)
				}
			}
			want.badResult++
			for ; lentTail != rx.Head(); lentTail++ {
				d := rx.Load(lentTail)
				*tx.D(lentTail) = memif.Desc{Region: d.Region, Offset: d.Offset, Length: d.Length}
				want.cont++
			}
			rx.SetTail(lentTail)
			resTail = lentTail
			tx.SetTail(resTail)
		}

		// Emits: good ones, forged ids, replays, windows outside.
		learn()
		em := peer.S2C[1]
		for k := rng.IntN(6); k > 0; k-- {
			var id uint16
			var d memif.Desc
			good := false
			switch c := rng.IntN(8); {
			case c < 4 && len(held) > 0:
				for id, d = range held {
					break
				}
				good = c < 3
				delete(held, id)
				gone[id] = true
			case c < 6:
				id = uint16(spares + rng.IntN(memif.ExtMaxSpare-spares)) // never lent
			default:
				if len(gone) == 0 {
					continue
				}
				for id = range gone {
					break
				}
			}
			e := memif.Desc{Region: d.Region, Offset: d.Offset + d.Metadata&0xFFFF, Length: 60,
				Metadata: memif.ExtEmit(memif.ExtContinue, 0, id)}
			if d.Length != 0 && !good {
				e.Offset = d.Offset + d.Length - 30 // runs past the buffer
			}
			*em.D(emitTail) = e
			emitTail++
			if good {
				want.emitted++
			} else {
				want.badEmit++
			}
		}
		em.SetTail(emitTail)
		drain()
		learn()
		if got, w := pool.InUse(), in.spares()+int(in.head-in.done); got != w {
			t.Fatalf("round %d: %d buffers in use, want %d (spares lent and packets unanswered)", round, got, w)
		}
	}
	c := in.c
	for _, x := range []struct {
		name      string
		got, want uint64
	}{
		{"lent", c.lent.Local(), uint64(want.lent)},
		{"returned", c.returned.Local(), uint64(want.lent)},
		{"dropped", c.dropped.Local(), uint64(want.dropped)},
		{"bad_window", c.badWindow.Local(), uint64(want.badWindow)},
		{"bad_result", c.badResult.Local(), uint64(want.badResult)},
		{"emitted", c.emitted.Local(), uint64(want.emitted)},
		{"bad_emit", c.badEmit.Local(), uint64(want.badEmit)},
	} {
		if x.got != x.want {
			t.Errorf("%s %d, want %d", x.name, x.got, x.want)
		}
	}
	if want.cont == 0 || want.emitted == 0 || want.badResult == 0 || want.badEmit == 0 || want.badWindow == 0 {
		t.Errorf("the rounds did not try every case: %+v", want)
	}
	in.freeSpares(ctx)
	h.Env.Flush()
	if n := pool.InUse(); n != 0 {
		t.Errorf("%d buffers in use after the drain", n)
	}
}
