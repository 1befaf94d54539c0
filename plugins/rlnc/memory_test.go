package rlnc

import (
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/plugins"
	"github.com/linerate/linerate/plugins/stagetest"
)

const floodLimits = `max_sessions = 64
max_generations = 128
max_session_generations = 8
window = 16
memory = "256KiB"
max_block = 64
session_timeout = "50ms"
pool_buffers = 1024
`

// storeOf reaches a stage's store.
func storeOf(st plugins.Stage) *store {
	switch s := st.(type) {
	case *encoder:
		return s.st
	case *recoder:
		return s.st
	case *decoder:
		return s.st
	}
	return nil
}

// checkBounded asserts every limit of the store and its internal consistency.
func checkBounded(t *testing.T, st *store, when string) {
	t.Helper()
	if n := st.sessLRU.n; n > st.cfg.MaxSessions || n != st.cfg.MaxSessions-len(st.sessFree) {
		t.Fatalf("%s: %d sessions (free %d, max %d)", when, n, len(st.sessFree), st.cfg.MaxSessions)
	}
	if n := st.liveGens(); n > st.cfg.MaxGenerations || n != st.cfg.MaxGenerations-len(st.genFree) {
		t.Fatalf("%s: %d generations (free %d, max %d)", when, n, len(st.genFree), st.cfg.MaxGenerations)
	}
	slots, total := 0, len(st.arena)/st.stride
	for si := range st.sess {
		s := &st.sess[si]
		if !s.live {
			continue
		}
		if s.gens.n > st.cfg.MaxSessionGenerations {
			t.Fatalf("%s: session holds %d generations", when, s.gens.n)
		}
		for gi := s.gens.head; gi >= 0; gi = st.gs.next[gi] {
			slots += len(st.gens[gi].rows)
			if st.gens[gi].sess != int32(si) || !st.gens[gi].live {
				t.Fatalf("%s: generation list broken", when)
			}
			if st.gen(int32(si), st.gens[gi].id) != gi {
				t.Fatalf("%s: generation index broken", when)
			}
		}
		if st.lookup(&s.key, s.hash) != int32(si) {
			t.Fatalf("%s: session index broken", when)
		}
	}
	if slots != st.liveSlots() || slots > total {
		t.Fatalf("%s: %d slots held by generations, %d in use, %d in the arena", when, slots, st.liveSlots(), total)
	}
	if st.cached > st.cfg.MaxGenerations {
		t.Fatalf("%s: %d Echelons cached", when, st.cached)
	}
}

// TestFlood: whatever arrives — new sessions, new and random generations,
// K and N that change, garbage vectors — the receivers' memory stays within
// its limits and the pools get every buffer back.
func TestFlood(t *testing.T) {
	for _, kind := range []string{"rlnc.recoder", "rlnc.decoder"} {
		t.Run(kind, func(t *testing.T) {
			h := newHarness(t)
			st := h.MustBuildNamed(kind, "st", floodLimits)
			s := storeOf(st)
			r := rand.New(rand.NewPCG(7, 7))
			const packets = 20000
			var frames [][]byte
			for i := 0; i < packets; i++ {
				// A third of the packets open new sessions; the rest belong to 32
				// sessions that flood generations.
				src := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 15: byte(r.IntN(32))})
				if r.IntN(3) == 0 {
					src = netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 13: 1, 14: byte(r.IntN(256)), 15: byte(r.IntN(256))})
				}
				k := 1 + r.IntN(32)
				if r.IntN(4) == 0 {
					k = 64
				}
				n := 16 + r.IntN(48)
				vec := make([]byte, k)
				for j := range vec {
					vec[j] = byte(r.Uint32())
				}
				vec[r.IntN(k)] |= 1
				f := Fields{NextHeader: 17, SessionID: 1, GenerationID: uint16(r.Uint32()), K: uint8(k),
					Version: 1, BlockLen: uint16(n), Vector: vec}
				if r.IntN(3) == 0 {
					f.GenerationID = uint16(i / 50) // a slowly moving stream
				}
				frames = append(frames, codedFrame(src, testDst, f, make([]byte, n)))
			}
			out := 0
			for i := 0; i*packet.MaxBurst < len(frames); i++ {
				b := h.bursts(frames[i*packet.MaxBurst:min(len(frames), (i+1)*packet.MaxBurst)], 0)[0]
				o := h.Run(b, st)
				if len(o.Continued) > 0 || len(o.Forwarded) > 0 {
					t.Fatalf("coded packets passed: %+v", o)
				}
				for _, e := range h.Env.TakeEmitted() {
					packet.FreeOne(e.H)
				}
				p := h.produce(st)
				out += len(p)
				stagetest.Free(p...)
				if i%16 == 0 {
					checkBounded(t, s, "flood")
				}
				if h.pool.InUse() != 0 {
					t.Fatalf("%d rx buffers held after a burst", h.pool.InUse())
				}
				h.Clock.Advance(100 * time.Microsecond)
				h.Tick(st)
			}
			checkBounded(t, s, "end")
			// The recoder finishes a generation once the session moves on, so
			// only the decoder fills its generation limits here.
			if h.StageCounter("st", "sessions_evicted") == 0 || (kind == "rlnc.decoder" && h.StageCounter("st", "generations_evicted") == 0) {
				t.Errorf("the flood never hit a limit: sessions_evicted %d generations_evicted %d",
					h.StageCounter("st", "sessions_evicted"), h.StageCounter("st", "generations_evicted"))
			}
			// Quiet for longer than the session timeout: everything goes.
			h.Clock.Advance(100 * time.Millisecond)
			h.Tick(st)
			if s.sessLRU.n != 0 || s.liveGens() != 0 || s.liveSlots() != 0 {
				t.Errorf("after the timeout: %d sessions, %d generations, %d slots", s.sessLRU.n, s.liveGens(), s.liveSlots())
			}
			t.Logf("%d packets in, %d out; echelons allocated %d", packets, out, h.StageCounter("st", "echelon_allocs"))
			st.(plugins.Stopper).Stop(&h.Ctx)
		})
	}
}

// TestEncoderFlood: a flood of new sessions at the encoder keeps its memory
// bounded too; generations evicted for room are sent short, not lost.
func TestEncoderFlood(t *testing.T) {
	h := newHarness(t)
	enc := h.MustBuildNamed("rlnc.encoder", "enc", "k = 16\nblock = 64\n"+floodLimits)
	s := storeOf(enc)
	r := rand.New(rand.NewPCG(8, 8))
	var frames [][]byte
	for i := 0; i < 10000; i++ {
		src := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 14: byte(r.IntN(8)), 15: byte(r.IntN(256))})
		frames = append(frames, udpFrame(src, testDst, 1, 2, make([]byte, r.IntN(50))))
	}
	coded := 0
	for i := 0; i*packet.MaxBurst < len(frames); i++ {
		b := h.bursts(frames[i*packet.MaxBurst:min(len(frames), (i+1)*packet.MaxBurst)], 0)[0]
		h.Run(b, enc)
		p := h.produce(enc)
		coded += len(p)
		stagetest.Free(p...)
		if i%8 == 0 {
			checkBounded(t, s, "encoder flood")
		}
	}
	if blocks := h.StageCounter("enc", "source_blocks"); blocks != 10000 {
		t.Errorf("took %d of 10000 packets", blocks)
	}
	h.Clock.Advance(20 * time.Millisecond)
	h.Tick(enc)
	stagetest.Free(h.produce(enc)...)
	if s.liveSlots() != 0 {
		t.Errorf("%d blocks held after the flush", s.liveSlots())
	}
	if h.StageCounter("enc", "generations_short") == 0 {
		t.Error("no generation was flushed short")
	}
	enc.(plugins.Stopper).Stop(&h.Ctx)
}

// TestNoAllocs: in steady state the encoder, recoder and decoder allocate
// nothing per packet.
func TestNoAllocs(t *testing.T) {
	h := newHarness(t)
	enc := h.MustBuildNamed("rlnc.encoder", "enc", "k = 8\nblock = 300\ncoded = 10\nmemory = \"2MiB\"\npool_buffers = 1024\n")
	rec := h.MustBuildNamed("rlnc.recoder", "rec", "memory = \"2MiB\"\npool_buffers = 1024\ncoded = 10\n")
	dec := h.MustBuildNamed("rlnc.decoder", "dec", "memory = \"2MiB\"\npool_buffers = 1024\n")
	r := rand.New(rand.NewPCG(9, 9))
	frames := source(r, 64, 300)
	chain := []plugins.Stage{enc, rec, dec}
	var bursts [4]packet.Burst
	// pass runs b through chain[k] and everything it produces through the
	// rest, as the engine would.
	var pass func(k int, b *packet.Burst)
	pass = func(k int, b *packet.Burst) {
		if k == len(chain) {
			packet.Free(b)
			return
		}
		st := chain[k]
		st.Process(&h.Ctx, b)
		for i := 0; i < b.N; i++ {
			switch b.H[i].P().Verdict() {
			case packet.Drop, packet.Continue:
				packet.FreeOne(b.H[i])
			}
		}
		b.N = 0
		h.Env.Flush()
		next := &bursts[k+1]
		for {
			next.N = 0
			st.(plugins.Producer).Produce(&h.Ctx, next)
			if next.N == 0 {
				return
			}
			pass(k+1, next)
		}
	}
	step := func() {
		in := &bursts[0]
		in.N = 0
		for _, f := range frames {
			hd, _ := h.pool.AllocOne()
			d, _ := hd.P().Append(len(f))
			copy(d, f)
			in.Push(hd)
		}
		h.Ctx.Now = h.Clock.Now()
		pass(0, in)
		h.Clock.Advance(time.Microsecond)
	}
	for i := 0; i < 50; i++ {
		step() // warm up: Echelons, generation rows
	}
	if a := testing.AllocsPerRun(100, step); a != 0 {
		t.Errorf("%.1f allocations per 64 packets through encoder, recoder and decoder", a)
	}
	if h.StageCounter("dec", "delivered") == 0 {
		t.Fatal("nothing decoded")
	}
	for _, st := range []plugins.Stage{enc, rec, dec} {
		st.(plugins.Stopper).Stop(&h.Ctx)
	}
}
