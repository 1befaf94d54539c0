package main

import (
	"math"
	"testing"
	"time"
)

func TestSimplex(t *testing.T) {
	// max 3x + 5y st x ≤ 4, 2y ≤ 12, 3x + 2y ≤ 18: optimum 36 at (2, 6).
	got := simplex([][]float64{{1, 0}, {0, 2}, {3, 2}}, []float64{4, 12, 18}, []float64{3, 5})
	if math.Abs(got-36) > 1e-9 {
		t.Errorf("simplex = %g, want 36", got)
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
		got, trees := tc.t.steinerPacking()
		if math.Abs(got-tc.packing) > 1e-9 {
			t.Errorf("%s: Steiner packing %g over %d trees, want %g", tc.t.name, got, trees, tc.packing)
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
// every generation decodes.
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
}
