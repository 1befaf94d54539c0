package rlnc

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/gf"
	"github.com/linerate/linerate/plugins"
	"github.com/linerate/linerate/plugins/stagetest"
)

// shortGen is a generation of K = 4 whose two source blocks are the first two
// of src: coded frames are made over them with any k′ on the wire.
type shortGen struct {
	src    [][]byte
	blocks [][]byte
}

func newShortGen(seed uint64) *shortGen {
	r := rand.New(rand.NewPCG(seed, seed))
	g := &shortGen{src: source(r, 2, 64)}
	for _, f := range g.src {
		b := make([]byte, 64)
		binary.BigEndian.PutUint16(b, uint16(len(f)-54))
		copy(b[2:], f[54:])
		g.blocks = append(g.blocks, b)
	}
	return g
}

// frame codes vec (K = 4) over the generation's blocks, with k′ = kk on the wire.
func (g *shortGen) frame(vec []byte, kk uint8, sys bool) []byte {
	blk := make([]byte, 64)
	gf.MulAddMulti([][]byte{blk}, g.blocks, vec[:2])
	f := goodFields(0, 4, vec)
	f.BlockLen = 64
	f.BlocksUsed = kk
	if sys {
		f.Flags = FlagSystematic
	}
	return codedFrame(testSrc, testDst, f, blk)
}

// delivered checks that out is exactly the generation's two originals (after
// the Ethernet header, which coded frames here leave zero).
func (g *shortGen) delivered(t *testing.T, out []packet.Handle) {
	t.Helper()
	got := map[string]bool{}
	for _, hd := range out {
		got[string(hd.P().Data()[14:])] = true
	}
	if len(out) != 2 || len(got) != 2 {
		t.Fatalf("%d packets delivered, want the 2 originals", len(out))
	}
	for i, f := range g.src {
		if !got[string(f[14:])] {
			t.Errorf("original %d not delivered", i)
		}
	}
}

// TestLateBlocksUsed: packets that left before their generation closed say
// k′ = 0 (K); a later packet says k′ = 2. The generation is complete as soon
// as k′ is known, even when the packet that brings it adds no rank: the
// decoder delivers both blocks, and a recoder passes k′ on.
func TestLateBlocksUsed(t *testing.T) {
	g := newShortGen(21)
	in := [][]byte{
		g.frame([]byte{1, 2, 0, 0}, 0, false),
		g.frame([]byte{3, 5, 0, 0}, 0, false),
		g.frame([]byte{7, 9, 0, 0}, 2, false), // adds no rank: only k′
	}
	t.Run("decoder", func(t *testing.T) {
		h := newHarness(t)
		dec := h.MustBuildNamed("rlnc.decoder", "dec", "memory = \"1MiB\"\n")
		o := h.Run(h.bursts(in, 0)[0], dec)
		if o.Consumed != 3 || len(o.Dropped) != 0 {
			t.Errorf("want all 3 consumed: %+v", o)
		}
		out := h.produce(dec)
		g.delivered(t, out)
		stagetest.Free(out...)
		if n := h.StageCounter("dec", "generations_decoded"); n != 1 {
			t.Errorf("generations_decoded %d", n)
		}
		dec.(plugins.Stopper).Stop(&h.Ctx)
		if n := h.StageCounter("dec", "generations_unfinished"); n != 0 {
			t.Errorf("generations_unfinished %d", n)
		}
	})
	t.Run("systematic", func(t *testing.T) {
		// The encoder's case: both blocks arrive uncoded, delivered at once;
		// the repair packet then only finishes the generation.
		h := newHarness(t)
		dec := h.MustBuildNamed("rlnc.decoder", "dec", "memory = \"1MiB\"\n")
		sys := [][]byte{g.frame([]byte{1, 0, 0, 0}, 0, true), g.frame([]byte{0, 1, 0, 0}, 0, true), in[2]}
		o := h.Run(h.bursts(sys, 0)[0], dec)
		g.delivered(t, o.Continued)
		stagetest.Free(o.Continued...)
		if o.Consumed != 1 || len(o.Dropped) != 0 {
			t.Errorf("the repair packet was not taken: %+v", o)
		}
		if n := h.StageCounter("dec", "generations_decoded"); n != 1 {
			t.Errorf("generations_decoded %d", n)
		}
		dec.(plugins.Stopper).Stop(&h.Ctx)
		for _, c := range []string{"generations_unfinished", "blocks_undelivered"} {
			if n := h.StageCounter("dec", c); n != 0 {
				t.Errorf("%s %d", c, n)
			}
		}
	})
	for _, links := range []string{"", "coded = 2\n", "repair_ratio = 0.5\n"} {
		t.Run("recoder/"+links, func(t *testing.T) {
			h := newHarness(t)
			rec := h.MustBuildNamed("rlnc.recoder", "rec", "memory = \"1MiB\"\n"+links)
			dec := h.MustBuildNamed("rlnc.decoder", "dec", "memory = \"1MiB\"\n")
			var sent []packet.Handle
			for _, f := range in {
				o := h.Run(h.bursts([][]byte{f}, 0)[0], rec)
				if len(o.Dropped) != 0 {
					t.Errorf("recoder dropped %v", o.Dropped)
				}
				sent = append(sent, h.produce(rec)...)
			}
			told := 0
			for _, hd := range sent {
				if codedHeader(t, hd).Fields().BlocksUsed == 2 {
					told++
				}
			}
			if told == 0 {
				t.Errorf("none of the recoder's %d packets says k′ = 2", len(sent))
			}
			if h.StageCounter("rec", "generations_opened") != 1 || storeOf(rec).liveGens() != 0 {
				t.Errorf("the recoder did not finish the generation at full rank")
			}
			o := h.Run(handlesBursts(sent)[0], dec)
			stagetest.Free(o.Continued...)
			out := h.produce(dec)
			g.delivered(t, out)
			stagetest.Free(out...)
		})
	}
}

// TestBlocksUsedMismatch: a generation has one k′. A second, different k′, or
// a k′ below a coefficient the receiver already holds, or a coefficient at or
// beyond the k′ it learned, is rlnc_gen_mismatch.
func TestBlocksUsedMismatch(t *testing.T) {
	g := newShortGen(22)
	for _, kind := range []string{"rlnc.recoder", "rlnc.decoder"} {
		t.Run(kind, func(t *testing.T) {
			for _, tc := range []struct {
				name   string
				frames [][]byte
			}{
				{"k′ 2 then 3", [][]byte{g.frame([]byte{1, 2, 0, 0}, 2, false), g.frame([]byte{0, 0, 1, 0}, 3, false)}},
				{"k′ 2 then 1", [][]byte{g.frame([]byte{1, 2, 0, 0}, 2, false), g.frame([]byte{1, 0, 0, 0}, 1, false)}},
				{"held coefficient beyond k′", [][]byte{g.frame([]byte{1, 2, 0, 0}, 0, false), g.frame([]byte{1, 0, 0, 0}, 1, false)}},
				{"coefficient beyond learned k′", [][]byte{g.frame([]byte{1, 2, 0, 0}, 2, false), g.frame([]byte{1, 0, 3, 0}, 0, false)}},
			} {
				h := newHarness(t)
				keys := "memory = \"1MiB\"\n"
				if kind == "rlnc.recoder" {
					keys += "coded = 4\n"
				}
				st := h.MustBuildNamed(kind, "st", keys)
				o := h.Run(h.bursts(tc.frames, 0)[0], st)
				for _, e := range h.Env.TakeEmitted() {
					packet.FreeOne(e.H)
				}
				stagetest.Free(h.produce(st)...)
				stagetest.Free(o.Continued...)
				if o.Dropped["rlnc_gen_mismatch"] != 1 || o.Consumed != 1 {
					t.Errorf("%s: %+v, want the second packet dropped as rlnc_gen_mismatch", tc.name, o)
				}
				st.(plugins.Stopper).Stop(&h.Ctx)
			}
		})
	}
}

// TestShortGenerationsEndToEnd: an encoder whose generations are often
// flushed short, with and without systematic mode, through a recoder (or
// none) to a decoder with no loss: every packet arrives, and every
// generation is decoded, none left unfinished.
func TestShortGenerationsEndToEnd(t *testing.T) {
	for _, enc := range []string{
		"systematic = true\n",                       // no repair: k′ rides on a packet of its own
		"systematic = true\nrepair_ratio = 0.25\n",  // k′ rides on the repair packets
		"systematic = false\nrepair_ratio = 0.25\n", // every packet leaves after the flush
	} {
		for _, rec := range []string{"none", "", "repair_ratio = 0.25\n", "coded = 40\n"} {
			name := fmt.Sprintf("%q/%q", enc, rec)
			t.Run(name, func(t *testing.T) { shortEndToEnd(t, enc, rec) })
		}
	}
}

// shortEndToEnd runs it with the encoder's and the recoder's keys; "none"
// leaves the recoder out.
func shortEndToEnd(t *testing.T, encKeys, recKeys string) {
	h := newHarness(t)
	const mem = "memory = \"8MiB\"\nmax_block = 300\npool_buffers = 4096\n"
	enc := h.MustBuildNamed("rlnc.encoder", "enc", "k = 32\nblock = 300\nflush = \"1ms\"\n"+encKeys+mem)
	var rec plugins.Stage
	if recKeys != "none" {
		rec = h.MustBuildNamed("rlnc.recoder", "rec", recKeys+mem)
	}
	dec := h.MustBuildNamed("rlnc.decoder", "dec", mem)
	r := rand.New(rand.NewPCG(23, 23))
	frames := source(r, 1072, 300)
	var got []packet.Handle
	// Packets beyond full rank are late or non-innovative; nothing else
	// is dropped.
	checkDrops := func(who string, o stagetest.Outcome) {
		for r := range o.Dropped {
			if r != "rlnc_late" && r != "rlnc_non_innovative" {
				t.Errorf("%s dropped %v", who, o.Dropped)
			}
		}
	}
	// pass runs what the encoder made through the recoder and the decoder.
	pass := func(hs []packet.Handle) {
		if rec != nil {
			for _, b := range handlesBursts(hs) {
				o := h.Run(b, rec)
				checkDrops("recoder", o)
				stagetest.Free(o.Continued...)
			}
			hs = h.produce(rec)
		}
		for _, b := range handlesBursts(hs) {
			o := h.Run(b, dec)
			checkDrops("decoder", o)
			got = append(got, o.Continued...)
		}
		got = append(got, h.produce(dec)...)
	}
	// Bursts of varying size, some followed by a pause past the flush time.
	for i := 0; len(frames) > 0; i++ {
		n := min(len(frames), 1+r.IntN(packet.MaxBurst))
		for _, b := range h.bursts(frames[:n], 0) {
			h.Run(b, enc)
		}
		frames = frames[n:]
		pass(h.produce(enc))
		if i%3 == 0 || len(frames) == 0 {
			h.Clock.Advance(2 * time.Millisecond)
			h.Tick(enc)
			pass(h.produce(enc))
		}
		h.Clock.Advance(50 * time.Microsecond)
		h.Tick(rec, dec)
	}
	h.Clock.Advance(50 * time.Millisecond)
	h.Tick(enc, rec, dec)
	pass(h.produce(enc))
	if len(got) != 1072 {
		t.Errorf("delivered %d of 1072 (encoder sent %d generations, %d short)", len(got),
			h.StageCounter("enc", "generations_sent"), h.StageCounter("enc", "generations_short"))
	}
	seen := map[uint64]bool{}
	for _, hd := range got {
		seen[binary.BigEndian.Uint64(hd.P().Data()[62:])] = true
	}
	if len(seen) != len(got) {
		t.Errorf("%d distinct packets of %d delivered", len(seen), len(got))
	}
	stagetest.Free(got...)
	if s, d := h.StageCounter("enc", "generations_sent"), h.StageCounter("dec", "generations_decoded"); s != d {
		t.Errorf("encoder sent %d generations, decoder decoded %d", s, d)
	}
	if h.StageCounter("enc", "generations_short") < 10 {
		t.Errorf("only %d generations were short", h.StageCounter("enc", "generations_short"))
	}
	for _, st := range []plugins.Stage{enc, rec, dec} {
		if st != nil {
			st.(plugins.Stopper).Stop(&h.Ctx)
		}
	}
	for _, c := range []struct{ st, name string }{{"rec", "generations_unfinished"}, {"dec", "generations_unfinished"},
		{"dec", "blocks_undelivered"}} {
		if c.st == "rec" && rec == nil {
			continue
		}
		if n := h.StageCounter(c.st, c.name); n != 0 {
			t.Errorf("%s %s = %d", c.st, c.name, n)
		}
	}
}

// TestRecoderBudgetAtLowRank: a recoder sends on each link no more than what
// it holds can make innovative there, plus the link's redundancy for that
// much: a flood of generations of rank 1 costs one packet each (two at
// repair_ratio 0.5), not a whole generation's budget. A link that carries a
// share of the generation (coded < K) still gets its share once the rank is
// there.
func TestRecoderBudgetAtLowRank(t *testing.T) {
	const gens = 1000
	for _, tc := range []struct {
		keys       string
		rank       int
		perGen     int // packets per generation and link
		linksOfGen int
	}{
		{"coded = 16\n", 1, 1, 1},
		{"repair_ratio = 0.5\n", 1, 2, 1},
		{"coded = 32\n", 2, 4, 1}, // 2 + 100% of 2
		{"links = [ { port = \"mem0\", coded = 9 }, { port = \"mem1\", coded = 24 } ]\n", 16, 9 + 24, 2}, // full rank: the whole budget
		{"links = [ { port = \"mem0\", coded = 9 }, { port = \"mem1\", coded = 24 } ]\n", 5, 5 + 8, 2},   // share: at most the rank; 24 = 16 + 50%: 5 + 3
	} {
		t.Run(fmt.Sprintf("%q/rank %d", tc.keys, tc.rank), func(t *testing.T) {
			h := newHarness(t)
			rec := h.MustBuildNamed("rlnc.recoder", "rec", "memory = \"4MiB\"\nmax_block = 64\npool_buffers = 8192\n"+tc.keys)
			var frames [][]byte
			for g := 0; g < gens; g++ {
				for i := 0; i < tc.rank; i++ {
					v := make([]byte, 16)
					v[i] = 1
					f := goodFields(uint16(g), 16, v)
					frames = append(frames, codedFrame(testSrc, testDst, f, make([]byte, 16)))
				}
			}
			sent := 0
			collect := func() {
				for _, e := range h.Env.TakeEmitted() {
					packet.FreeOne(e.H)
					sent++
				}
				for _, hd := range h.produce(rec) {
					packet.FreeOne(hd)
					sent++
				}
			}
			for len(frames) > 0 {
				b := h.bursts(frames[:min(len(frames), packet.MaxBurst)], 0)[0]
				frames = frames[b.N:]
				o := h.Run(b, rec)
				if o.Consumed != b.N && len(o.Dropped) > 0 {
					t.Fatalf("%+v", o)
				}
				collect()
			}
			h.Clock.Advance(time.Second) // past the flush: the last generation is owed its rest
			h.Tick(rec)
			collect()
			if want := gens * tc.perGen; sent != want {
				t.Errorf("recoded %d packets for %d generations of rank %d, want %d", sent, gens, tc.rank, want)
			}
			if n := h.StageCounter("rec", "recoded_sent"); n != uint64(sent) {
				t.Errorf("recoded_sent %d, %d came out", n, sent)
			}
			rec.(plugins.Stopper).Stop(&h.Ctx)
		})
	}
}
