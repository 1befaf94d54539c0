package rlnc

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/gf"
	"github.com/linerate/linerate/plugins"
	"github.com/linerate/linerate/plugins/stagetest"
)

// source makes count UDP frames whose upper-layer bytes fit N − 2, each with a
// distinct sequence number, in session order.
func source(r *rand.Rand, count, n int) [][]byte {
	var out [][]byte
	for i := 0; i < count; i++ {
		max := n - LenPrefix - 8 // UDP header
		size := 8
		if max > 8 {
			size += r.IntN(max - 8 + 1)
		}
		if i%7 == 0 {
			size = max // a full block
		}
		pl := make([]byte, size)
		binary.BigEndian.PutUint64(pl, uint64(i))
		for j := 8; j < size; j++ {
			pl[j] = byte(r.Uint32())
		}
		out = append(out, udpFrame(testSrc, testDst, 10000, 20000, pl))
	}
	return out
}

// lose frees each packet with probability p and returns the rest.
func lose(r *rand.Rand, hs []packet.Handle, p float64) []packet.Handle {
	var out []packet.Handle
	for _, h := range hs {
		if r.Float64() < p {
			packet.FreeOne(h)
			continue
		}
		out = append(out, h)
	}
	return out
}

// through runs handles through st in bursts and returns what continued and
// what it produced.
func (h *harness) through(st plugins.Stage, hs []packet.Handle) (cont []packet.Handle, drops map[string]int) {
	drops = map[string]int{}
	for _, b := range handlesBursts(hs) {
		o := h.Run(b, st)
		cont = append(cont, o.Continued...)
		for k, v := range o.Dropped {
			drops[k] += v
		}
		if len(o.Forwarded) > 0 {
			h.T.Errorf("%d packets forwarded", len(o.Forwarded))
		}
	}
	return cont, drops
}

// genOf reads the generation id and header of a coded packet.
func codedHeader(t testing.TB, hd packet.Handle) Header {
	t.Helper()
	l, h, ok, err := coded(hd.P())
	if !ok || err != nil {
		t.Fatalf("not a good coded packet: %v (layers %+v)", err, l)
	}
	return h
}

type rtCase struct {
	k, n        int
	loss        float64
	systematic  bool
	recoder     bool
	generations int
}

func (c rtCase) String() string {
	return fmt.Sprintf("k=%d/n=%d/loss=%.0f%%/systematic=%v/recoder=%v", c.k, c.n, c.loss*100, c.systematic, c.recoder)
}

// TestRoundTrip: encoder → loss → (recoder → loss) → decoder delivers the
// original packets byte for byte, exactly those of every generation whose
// packets that reached the decoder span it, plus every systematic packet that
// arrived; nothing else and nothing twice.
func TestRoundTrip(t *testing.T) {
	ns := []int{64, 300, 1400}
	losses := []float64{0, 0.1, 0.3, 0.5}
	idx := 0
	for _, k := range []int{1, 3, 16, 32, 64, 255} {
		for _, sys := range []bool{false, true} {
			for _, rec := range []bool{false, true} {
				c := rtCase{k: k, n: ns[idx%len(ns)], loss: losses[idx%len(losses)], systematic: sys, recoder: rec, generations: 3}
				if k == 255 {
					c.generations = 2
				}
				idx++
				t.Run(c.String(), func(t *testing.T) { roundTrip(t, c, uint64(idx)) })
			}
		}
	}
}

func roundTrip(t *testing.T, c rtCase, seed uint64) {
	h := newHarness(t)
	r := rand.New(rand.NewPCG(seed, uint64(c.k)))
	count := c.generations*c.k + c.k/2 // the last generation is flushed short
	frames := source(r, count, c.n)
	// Enough redundancy to decode most generations through the losses.
	coded := int(math.Ceil(float64(c.k)/(1-c.loss)*1.15)) + 2
	if c.systematic {
		coded = max(coded, c.k)
	}
	mem := fmt.Sprintf(`memory = "8MiB"
max_block = %d
pool_buffers = 4096
`, c.n)
	enc := h.MustBuildNamed("rlnc.encoder", "enc", fmt.Sprintf("k = %d\nblock = %d\nsystematic = %v\ncoded = %d\nflush = \"5ms\"\n%s",
		c.k, c.n, c.systematic, coded, mem))
	rec := h.MustBuildNamed("rlnc.recoder", "rec", fmt.Sprintf("coded = %d\nseed = 9\n%s", coded, mem))
	dec := h.MustBuildNamed("rlnc.decoder", "dec", mem)

	var sent []packet.Handle
	for _, b := range h.bursts(frames, 0) {
		o := h.Run(b, enc)
		if o.Consumed != len(o.Continued)+o.Consumed || len(o.Dropped) > 0 {
			t.Fatalf("encoder: %+v", o)
		}
		sent = append(sent, h.produce(enc)...)
	}
	h.Clock.Advance(6 * time.Millisecond)
	h.Tick(enc)
	sent = append(sent, h.produce(enc)...)
	if got, want := h.StageCounter("enc", "generations_sent"), uint64(c.generations+min(1, c.k/2)); got != want {
		t.Errorf("encoder sent %d generations, want %d", got, want)
	}
	in := lose(r, sent, c.loss)
	if c.recoder {
		cont, drops := h.through(rec, in)
		if len(cont) > 0 {
			t.Fatalf("recoder let %d coded packets through", len(cont))
		}
		for reason := range drops {
			if reason != "rlnc_non_innovative" && reason != "rlnc_late" {
				t.Errorf("recoder drop %s", reason)
			}
		}
		in = lose(r, h.produce(rec), c.loss)
	}

	// What reaches the decoder decides what it must deliver.
	type genState struct {
		ech *gf.Echelon
		kk  int
		sys map[int]bool
	}
	gens := map[uint16]*genState{}
	for _, hd := range in {
		ch := codedHeader(t, hd)
		g := gens[ch.GenerationID()]
		if g == nil {
			e, _ := gf.NewEchelon(c.k, 0)
			g = &genState{ech: e, kk: c.k, sys: map[int]bool{}}
			gens[ch.GenerationID()] = g
		}
		g.kk = min(g.kk, ch.BlocksUsed())
		g.ech.Insert(ch.Vector(), nil)
		if ch.Systematic() {
			g.sys[bytes.IndexByte(ch.Vector(), 1)] = true
		}
	}
	want := map[string]bool{}
	decodable := 0
	for gid, g := range gens {
		base := int(gid) * c.k
		for i := 0; i < g.kk && base+i < len(frames); i++ {
			if g.ech.Rank() >= g.kk || g.sys[i] {
				want[string(frames[base+i])] = true
			}
		}
		if g.ech.Rank() >= g.kk {
			decodable++
		}
	}
	if c.loss < 0.5 && decodable == 0 {
		t.Fatalf("no generation decodable (test redundancy too low)")
	}

	cont, drops := h.through(dec, in)
	for reason := range drops {
		if reason != "rlnc_non_innovative" && reason != "rlnc_late" {
			t.Errorf("decoder drop %s", reason)
		}
	}
	out := append(cont, h.produce(dec)...)
	got := map[string]bool{}
	for _, hd := range out {
		f := string(hd.P().Data())
		if got[f] {
			t.Errorf("packet delivered twice")
		}
		got[f] = true
		if !want[f] {
			t.Errorf("delivered a packet that is not an expected original (%d bytes): %x", len(f), []byte(f)[:min(len(f), 80)])
		}
		var l packet.Layers
		if err := packet.Parse([]byte(f), &l); err != nil || l.Flags&packet.FlagUDP == 0 {
			t.Errorf("delivered packet does not parse: %v", err)
		} else if !packet.UDP([]byte(f)[l.L4:l.End]).IsChecksumValid(packet.PseudoHeaderChecksum(17,
			[]byte(f)[l.L3+8:l.L3+24], []byte(f)[l.L3+24:l.L3+40], uint32(int(l.End)-int(l.L4)))) {
			t.Errorf("delivered packet has a bad UDP checksum")
		}
	}
	stagetest.Free(out...)
	for f := range want {
		if !got[f] {
			t.Errorf("original %d not delivered", binary.BigEndian.Uint64([]byte(f)[62:]))
		}
	}
	if d := h.StageCounter("dec", "delivered"); d != uint64(len(got)) {
		t.Errorf("decoder counts %d delivered, %d came out", d, len(got))
	}
	t.Logf("%d originals, %d coded reached the decoder, %d of %d generations decodable, %d delivered",
		len(frames), len(in), decodable, len(gens), len(got))
	for _, st := range []plugins.Stage{enc, rec, dec} {
		st.(plugins.Stopper).Stop(&h.Ctx)
	}
}
