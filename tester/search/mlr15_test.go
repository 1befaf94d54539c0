package search

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"testing"
	"time"
)

func trials(d time.Duration, losses ...float64) []Trial {
	var ts []Trial
	for _, l := range losses {
		ts = append(ts, Trial{Rate: 1e6, Duration: d, Sent: 1e6, Received: uint64(1e6 * (1 - l))})
	}
	return ts
}

// The appendix A code on the draft's compliance goals and CSIT's.
func TestClassify(t *testing.T) {
	rfc, _ := Preset("rfc2544")
	tst, _ := Preset("tst009")
	pdr, _ := Preset("pdr")
	var lows, highs []float64
	for range 11 {
		lows, highs = append(lows, 0.001), append(highs, 0.01)
	}
	for _, c := range []struct {
		name string
		g    SearchGoal
		ts   []Trial
		want Bound
	}{
		{"rfc2544 nothing", rfc, nil, Undecided},
		{"rfc2544 60s no loss", rfc, trials(time.Minute, 0), LowerBound},
		{"rfc2544 60s one lost", rfc, trials(time.Minute, 1e-6), UpperBound},
		{"rfc2544 30s no loss is short", rfc, trials(30*time.Second, 0), Undecided},
		{"rfc2544 30s lossy is enough", rfc, trials(30*time.Second, 0.1), UpperBound},
		{"tst009 first high", tst, trials(time.Minute, 0.1), Undecided},
		{"tst009 first low", tst, trials(time.Minute, 0), LowerBound},
		{"tst009 high then low", tst, trials(time.Minute, 0.1, 0), LowerBound},
		{"tst009 two high", tst, trials(time.Minute, 0.1, 0.1), UpperBound},
		{"pdr 11 low of 21s", pdr, trials(time.Second, lows...), LowerBound},
		{"pdr 10 low", pdr, trials(time.Second, lows[:10]...), Undecided},
		{"pdr 11 high", pdr, trials(time.Second, highs...), UpperBound},
		{"pdr 10 high 1 low", pdr, trials(time.Second, append(highs[:10:10], 0)...), Undecided},
	} {
		if got := c.g.Classify(c.ts); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// Appendix B: the loss ratio at the exceed ratio's quantile, missing time
// counted as lost.
func TestConditionalThroughput(t *testing.T) {
	pdr, _ := Preset("pdr")
	ts := trials(time.Second, 0.004, 0.001, 0.001, 0.002, 0.003, 0.01, 0.001, 0.002, 0.003, 0.001, 0.002, 0.001)
	// 12 s of 21 s measured; 10.5 s needed below the quantile: the 11th
	// lowest of the 12, 0.004.
	if got, want := pdr.ConditionalThroughput(1e6, ts), 1e6*(1-0.004); math.Abs(got-want) > 1e-6 {
		t.Errorf("conditional throughput %g, want %g", got, want)
	}
	if got := pdr.ConditionalThroughput(1e6, ts[:10]); got != 0 {
		t.Errorf("10 s of 21 s: %g, want 0 (the quantile is in the missing time)", got)
	}
	rfc, _ := Preset("rfc2544")
	if got := rfc.ConditionalThroughput(5e5, trials(time.Minute, 0)); got != 5e5 {
		t.Errorf("rfc2544: %g, want the load", got)
	}
}

func in15(goals ...SearchGoal) ControllerInput {
	return ControllerInput{Goals: goals, MinLoad: 100, MaxLoad: 14.88e6}
}

// regular: the goal's result is Regular, brackets want within the width.
func regular(t *testing.T, name string, r Result, want float64) {
	t.Helper()
	g := r.Goal
	if g == nil || !g.Regular {
		t.Fatalf("%s: not Regular: %+v", name, g)
	}
	if g.RelevantLowerBound > want*(1+1e-9) || g.RelevantUpperBound <= want*(1-1e-9) {
		t.Errorf("%s: bounds [%.1f, %.1f] do not bracket %.1f", name, g.RelevantLowerBound, g.RelevantUpperBound, want)
	}
	if w := g.Width(); w > g.Goal.Width*(1+1e-9) {
		t.Errorf("%s: width %g > goal width %g", name, w, g.Goal.Width)
	}
	if g.ConditionalThroughput <= 0 || g.ConditionalThroughput > g.RelevantLowerBound {
		t.Errorf("%s: conditional throughput %g for a lower bound %g", name, g.ConditionalThroughput, g.RelevantLowerBound)
	}
	if len(g.LowerTrials) == 0 || len(g.UpperTrials) == 0 {
		t.Errorf("%s: no trials behind the bounds", name)
	}
}

// A device of known capacity and no loss: both of CSIT's goals bracket it,
// and so does RFC 2544's compliance goal.
func TestMLR15KnownCapacity(t *testing.T) {
	rfc, _ := Preset("rfc2544")
	tst, _ := Preset("tst009")
	goals := append(CSITGoals([]float64{0, 0.005}), rfc, tst)
	for _, capacity := range []float64{12345, 1e6, 3.3e6, 14.8e6} {
		o, err := MLR15(t.Context(), &Sim{Capacity: capacity}, in15(goals...))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range o.Results {
			regular(t, fmt.Sprintf("%g %s", capacity, r.Goal.Goal.Name), r, capacity/(1-r.LossRatio))
		}
	}
}

// Irregular results: Max Load is a Lower Bound (the device outruns it), or
// Min Load an Upper Bound (it loses at every load), or loss that is not
// monotonic: lossless at Max Load, lossy below.
func TestMLR15Irregular(t *testing.T) {
	goals := CSITGoals([]float64{0, 0.005})
	for _, c := range []struct {
		name   string
		m      Measurer
		reason string
		rlb    float64
		rub    float64
	}{
		{"fast device", &Sim{Capacity: 20e6}, "Max Load is a Lower Bound: no Upper Bound", 14.88e6, 0},
		{"dead device", &Sim{Capacity: 10}, "Min Load is an Upper Bound: no Lower Bound", 0, 100},
		{"lossy below max", &Noisy{Curve: func(r float64) float64 {
			if r >= 14e6 {
				return 0
			}
			return 0.02
		}}, "Max Load is a Lower Bound: no Upper Bound", 14.88e6, 0},
	} {
		o, err := MLR15(t.Context(), c.m, in15(goals...))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range o.Results {
			g := r.Goal
			if g.Regular || g.Reason != c.reason || g.RelevantLowerBound != c.rlb || g.RelevantUpperBound != c.rub {
				t.Errorf("%s %s: regular %v (%q), bounds [%g, %g]; want irregular (%q) [%g, %g]",
					c.name, g.Goal.Name, g.Regular, g.Reason, g.RelevantLowerBound, g.RelevantUpperBound, c.reason, c.rlb, c.rub)
			}
		}
	}
}

// A trial limit ends a search with Irregular results, not an error.
func TestMLR15TrialLimit(t *testing.T) {
	in := in15(CSITGoals([]float64{0})...)
	in.MaxTrials = 3
	o, err := MLR15(t.Context(), &Sim{Capacity: 1e6}, in)
	if err != nil {
		t.Fatal(err)
	}
	if g := o.Results[0].Goal; g.Regular || len(o.Trials) != 3 {
		t.Errorf("%d trials, regular %v (%q)", len(o.Trials), g.Regular, g.Reason)
	}
}

// stalls is a 10 kpps device that loses 0.1 % on average, in 6 ms stalls
// once in 6 s: the 15 % of 1 s trials with a stall lose 0.6 %, over the
// PDR's 0.5 %.
func stalls(seed uint64) *Noisy {
	return &Noisy{Capacity: 10e3, StallRate: 1.0 / 6, Stall: 6 * time.Millisecond, Seed: seed}
}

// The same seed gives the same search, trial for trial.
func TestMLR15Deterministic(t *testing.T) {
	run := func() *Outcome {
		o, err := MLR15(context.Background(), stalls(7), in15(CSITGoals([]float64{0, 0.005})...))
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	a, b := run(), run()
	if !reflect.DeepEqual(a, b) {
		t.Error("two searches with the same seed differ")
	}
}

// The PDR collapse: with random loss, one unlucky short trial below the
// PDR is an upper bound to draft-01, which then searches below it, and
// more unlucky trials drag it further down. Draft-15's goal classifies a
// load on 21 s of trials with an exceed ratio of 0.5, so a 1-in-10 unlucky
// trial does not move it. Both searches use 1 s final trials, CSIT's.
func TestPDRCollapse(t *testing.T) {
	const pdr = 10e3 / (1 - 0.005) // what the device forwards, at 0.5 % loss
	p := Params{MinRate: 100, MaxRate: 14.88e6, LossRatios: []float64{0.005},
		FinalDuration: time.Second, InitialDuration: time.Second, Precision: 0.005}
	// Seed 228's draft-01 search collapses (1 seed of the first 500 does,
	// with this device): the regression case.
	old, err := MLR(t.Context(), stalls(228), p)
	if err != nil {
		t.Fatal(err)
	}
	if l := old.Results[0].Lower; l > 0.9*pdr {
		t.Errorf("draft-01 PDR %.0f pps: the collapse is no longer reproduced with this seed", l)
	}
	collapsed := 0
	for _, seed := range []uint64{228, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20} {
		if o, err := MLR(t.Context(), stalls(seed), p); err == nil && o.Results[0].Lower < 0.95*pdr {
			collapsed++
		}
		o, err := MLR15(t.Context(), stalls(seed), in15(CSITGoals([]float64{0.005})...))
		if err != nil {
			t.Fatal(err)
		}
		g := o.Results[0].Goal
		// The noise may shift the bounds by a width either way, no more.
		if !g.Regular || g.RelevantLowerBound < pdr*(1-2*g.Goal.Width) || g.RelevantLowerBound > pdr*(1+g.Goal.Width) {
			t.Errorf("seed %d: draft-15 PDR %v [%.0f, %.0f], want about %.0f: %s", seed, g.Regular,
				g.RelevantLowerBound, g.RelevantUpperBound, pdr, g.Reason)
		}
		if seed == 228 {
			t.Logf("seed 228: draft-01 PDR %.0f pps in %d trials; draft-15 [%.0f, %.0f], conditional throughput %.0f, %d trials",
				old.Results[0].Lower, len(old.Trials), g.RelevantLowerBound, g.RelevantUpperBound, g.ConditionalThroughput, len(o.Trials))
		}
	}
	t.Logf("draft-01 PDR more than 5 %% low in %d of 21 seeds", collapsed)
}

// The PDR collapse of issue 26, with its random loss: a device that loses
// 0.1 % of packets at random (binomial, Noisy.Loss), at a load where a trial
// is a few hundred packets (the unlucky trial lost 5 of 860, 0.58 %):
// now and then a 1 s trial just below the PDR loses more than 0.5 %. Draft-01
// takes that one trial as the upper bound and closes the PDR below it;
// draft-15's repeated final trials, judged with CSIT's exceed ratio of 0.5,
// do not, on any of 300 seeds.
func TestPDRCollapseRandomLoss(t *testing.T) {
	const capacity = 300
	const pdr = capacity * (1 - 0.001) / (1 - 0.005) // loss 0.5 %: 0.1 % random and the excess
	p := Params{MinRate: 3, MaxRate: 450, LossRatios: []float64{0.005},
		FinalDuration: time.Second, InitialDuration: time.Second, Precision: 0.005}
	in := ControllerInput{Goals: CSITGoals([]float64{0.005}), MinLoad: p.MinRate, MaxLoad: p.MaxRate}
	device := func(seed uint64) *Noisy { return &Noisy{Capacity: capacity, Loss: 0.001, Seed: seed} }
	// Seed 14's draft-01 search closes low: the regression case.
	old, err := MLR(t.Context(), device(14), p)
	if err != nil {
		t.Fatal(err)
	}
	if l := old.Results[0].Lower; l > pdr*(1-2*p.Precision) {
		t.Errorf("draft-01 PDR %.1f pps of %.1f: the collapse is no longer reproduced with seed 14", l, pdr)
	}
	collapsed, worst := 0, pdr
	for seed := range uint64(300) {
		if o, err := MLR(t.Context(), device(seed), p); err == nil && o.Results[0].Lower < pdr*(1-2*p.Precision) {
			collapsed++
			worst = min(worst, o.Results[0].Lower)
		}
		o, err := MLR15(t.Context(), device(seed), in)
		if err != nil {
			t.Fatal(err)
		}
		g := o.Results[0].Goal
		if !g.Regular || g.RelevantLowerBound < pdr*(1-2*g.Goal.Width) || g.RelevantLowerBound > pdr*(1+g.Goal.Width) {
			t.Errorf("seed %d: draft-15 PDR regular %v [%.1f, %.1f], want about %.1f: %s", seed, g.Regular,
				g.RelevantLowerBound, g.RelevantUpperBound, pdr, g.Reason)
		}
	}
	if collapsed == 0 {
		t.Error("draft-01 closed no PDR low in 300 seeds: the test no longer shows the collapse")
	}
	t.Logf("draft-01 closed the PDR more than 1 %% low in %d of 300 seeds (lowest %.1f pps of %.1f); draft-15 in none",
		collapsed, worst, pdr)
}
