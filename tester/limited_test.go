package tester

import (
	"math"
	"testing"
)

// A tester that cannot send more than 2 kpps (its generator throttled on
// purpose, genCap) over a wire that loses nothing, asked up to 4 kpps: the
// shortfall still counts as loss for the search, so the NDR comes out near
// 2 kpps, but every result the shortfall shaped says so: tester-limited at
// about 2 kpps, never a silently low NDR.
func TestTesterLimitedMarked(t *testing.T) {
	p, err := Parse("limited.toml", []byte(lateProfile))
	if err != nil {
		t.Fatal(err)
	}
	p.Test.LossRatios = []float64{0}
	r := &Runner{Profile: p, genCap: 2000}
	rep, err := r.Run(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	sr := rep.Sizes[0].Searches[0]
	ndr := sr.Results[0]
	within := ndr.Lower >= (1-p.Test.Precision)*4000
	lim := sr.Limited(0)
	if !within && (lim == nil || math.Abs(lim.Rate-2000) > 100) {
		t.Errorf("NDR %.0f pps of a 4 kpps wire, tester-limited %+v: neither within precision nor marked at ~2000 pps", ndr.Lower, lim)
	}
	if lim != nil && lim.Note == "" {
		t.Errorf("a tester-limited result without its note")
	}
}
