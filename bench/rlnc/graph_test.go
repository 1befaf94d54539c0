package main

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

func TestSimplex(t *testing.T) {
	// max 3x + 5y st x ≤ 4, 2y ≤ 12, 3x + 2y ≤ 18: optimum 36 at (2, 6).
	got, x := simplex([][]float64{{1, 0}, {0, 2}, {3, 2}}, []float64{4, 12, 18}, []float64{3, 5})
	if math.Abs(got-36) > 1e-9 {
		t.Errorf("simplex = %g, want 36", got)
	}
	if len(x) != 2 || math.Abs(x[0]-2) > 1e-9 || math.Abs(x[1]-6) > 1e-9 {
		t.Errorf("simplex x = %v, want [2 6]", x)
	}
}

// TestPackingFeasible checks the tree weights the LP returns: none negative,
// no link over its capacity, and their sum the optimum.
func TestPackingFeasible(t *testing.T) {
	for _, tp := range []topology{butterfly(), codedIP()} {
		opt, trees, x := tp.steinerPacking()
		if len(x) != len(trees) {
			t.Fatalf("%s: %d weights for %d trees", tp.name, len(x), len(trees))
		}
		load := map[[2]string]float64{}
		sum := 0.0
		for j, tr := range trees {
			if x[j] < -1e-9 {
				t.Errorf("%s: tree %v has weight %g", tp.name, tr, x[j])
			}
			sum += x[j]
			for _, e := range tr {
				load[e] += x[j]
			}
		}
		for _, e := range tp.edges {
			if load[e] > 1+1e-9 {
				t.Errorf("%s: link %s→%s carries %g > 1", tp.name, e[0], e[1], load[e])
			}
		}
		if math.Abs(sum-opt) > 1e-9 {
			t.Errorf("%s: weights sum to %g, optimum %g", tp.name, sum, opt)
		}
		// Every tree of the packing reaches every terminal.
		for j, tr := range trees {
			for _, term := range tp.terminals {
				if x[j] > 1e-9 && tp.hops(tr, term) < 0 {
					t.Errorf("%s: tree %v misses %s", tp.name, tr, term)
				}
			}
		}
	}
}

func TestBounds(t *testing.T) {
	for _, tc := range []struct {
		t       topology
		cut     map[string]int
		packing float64
	}{
		{butterfly(), map[string]int{"T1": 2, "T2": 2}, 1.5},
		{codedIP(), map[string]int{"G": 2, "H": 2, "I": 2}, 1.5},
	} {
		for term, want := range tc.cut {
			if got := tc.t.minCut(term); got != want {
				t.Errorf("%s: min-cut to %s = %d, want %d", tc.t.name, term, got, want)
			}
		}
		got, trees, _ := tc.t.steinerPacking()
		if math.Abs(got-tc.packing) > 1e-9 {
			t.Errorf("%s: Steiner packing %g over %d trees, want %g", tc.t.name, got, len(trees), tc.packing)
		}
	}
	ci := codedIP()
	if n := len(ci.nodes()); n != 10 {
		t.Errorf("coded-ip: %d switches and source, want 10 (+ 12 hosts = 22)", n)
	}
	hosts := 0
	for _, hs := range codedIP().hosts {
		hosts += len(hs)
	}
	if hosts != 12 {
		t.Errorf("%d hosts", hosts)
	}
}

// TestButterflyGoal runs the butterfly briefly: coding reaches ≥ 1.8 and
// every generation decodes; routing, simulated over the LP's trees, reaches
// the packing's 1.5 and no more, and coding beats it at every sink.
func TestButterflyGoal(t *testing.T) {
	p := params{k: 32, n: 1400, rate: 10e6, dur: 1500 * time.Millisecond, warm: 500 * time.Millisecond,
		dt: 50 * time.Microsecond, margin: 1, pace: true, headroom: 0.01}
	res, err := simulate(butterfly(), p)
	if err != nil {
		t.Fatal(err)
	}
	if g := res.minGoodput(); g < 1.8 || g > 2 {
		t.Errorf("butterfly goodput %.3f, want 1.8..2", g)
	}
	for _, s := range res.sinks {
		if s.gaps != 0 {
			t.Errorf("%s: %d sequence gaps", s.name, s.gaps)
		}
	}
	for _, term := range res.t.terminals {
		if g := res.gens[term]; g.decoded != res.gensSent || res.gensSent == 0 {
			t.Errorf("%s", res.genNote(term))
		}
	}
	if len(res.routed) != len(res.sinks) {
		t.Fatalf("%d routed sinks, %d coded", len(res.routed), len(res.sinks))
	}
	for i, s := range res.routed {
		if s.goodput < 1.5*0.95 || s.goodput > 1.5+1e-3 {
			t.Errorf("%s: routing goodput %.3f, want 1.425..1.5", s.name, s.goodput)
		}
		if c := res.sinks[i].goodput; c <= s.goodput {
			t.Errorf("%s: coding %.3f does not beat routing %.3f", s.name, c, s.goodput)
		}
	}
	if off := res.routedOff(); len(off) > 0 {
		t.Errorf("routing off the packing: %v", off)
	}
	for _, d := range res.routedDrops {
		t.Errorf("routing dropped %d packets: %s", d.Count, d.Reason)
	}
	for _, l := range res.leaked {
		t.Errorf("leaked: %s", l)
	}
}

// TestLossAccounting: with loss, some generations do not decode, and the
// report says how many, consistent with what the source sent and the sinks
// received (it once said "0 blocks dropped undecoded" with 18 generations
// missing).
func TestLossAccounting(t *testing.T) {
	p := params{k: 32, n: 1400, rate: 10e6, dur: 1500 * time.Millisecond, warm: 500 * time.Millisecond,
		dt: 50 * time.Microsecond, loss: 0.02, margin: 2, pace: true, headroom: 0.01}
	res, err := simulate(butterfly(), p)
	if err != nil {
		t.Fatal(err)
	}
	if res.gensSent*uint64(p.k) != res.srcCount {
		t.Fatalf("the encoder sent %d generations of %d for %d packets", res.gensSent, p.k, res.srcCount)
	}
	missed := 0
	for _, term := range res.t.terminals {
		g := res.gens[term]
		note := res.genNote(term)
		t.Log(note)
		if g.received != g.decoded*uint64(p.k) {
			t.Errorf("%s received %d packets, %d generations decoded", term, g.received, g.decoded)
		}
		if g.decoded > res.gensSent || g.unfinished > res.gensSent-g.decoded {
			t.Errorf("%s: %+v of %d sent", term, g, res.gensSent)
		}
		if g.blocks != g.unfinished*uint64(p.k) {
			t.Errorf("%s: %d blocks undelivered for %d generations given up", term, g.blocks, g.unfinished)
		}
		if miss := res.gensSent - g.decoded; miss > 0 {
			missed++
			if want := fmt.Sprintf("; %d not:", miss); !strings.Contains(note, want) {
				t.Errorf("%q does not say %q", note, want)
			}
		}
	}
	if missed == 0 {
		t.Error("no generation was lost: the test does not exercise the report")
	}
	for _, l := range res.leaked {
		t.Errorf("leaked: %s", l)
	}
}
