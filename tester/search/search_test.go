package search

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"
)

func params() Params {
	return Params{
		MinRate:       10e3,
		MaxRate:       14.88e6,
		LossRatios:    []float64{0, 0.005},
		FinalDuration: 30 * time.Second,
		Precision:     0.005,
	}
}

// within: the result brackets want, and is as narrow as the precision asks.
func within(t *testing.T, name string, r Result, want, precision float64) {
	t.Helper()
	if !r.LowerFound {
		t.Errorf("%s: no passing trial (lower %.0f)", name, r.Lower)
		return
	}
	if r.Lower > want*(1+1e-9) {
		t.Errorf("%s: lower %.0f pps is above the device's %.0f", name, r.Lower, want)
	}
	if r.UpperFound && r.Upper <= want*(1-1e-9) {
		t.Errorf("%s: upper %.0f pps is at or below the device's %.0f", name, r.Upper, want)
	}
	if want < 14.88e6 && r.Lower < want*(1-precision) {
		t.Errorf("%s: lower %.0f pps is further than %g below the device's %.0f", name, r.Lower, precision, want)
	}
	if r.UpperFound && r.RelativeWidth() > precision {
		t.Errorf("%s: width %g > precision %g", name, r.RelativeWidth(), precision)
	}
}

func finalOnly(t *testing.T, o *Outcome, final time.Duration) {
	t.Helper()
	for _, r := range o.Results {
		if r.LowerTrial != nil && r.LowerTrial.Duration != final {
			t.Errorf("loss ratio %g: lower bound from a %v trial, not the final %v", r.LossRatio, r.LowerTrial.Duration, final)
		}
		if r.UpperTrial != nil && r.UpperTrial.Duration != final {
			t.Errorf("loss ratio %g: upper bound from a %v trial", r.LossRatio, r.UpperTrial.Duration)
		}
	}
}

// A device of known capacity and no loss: NDR and PDR are its capacity.
func TestKnownCapacity(t *testing.T) {
	for _, capacity := range []float64{12345, 1e6, 3.3e6, 14.8e6, 20e6} {
		for _, alg := range []struct {
			name string
			run  func(context.Context, Measurer, Params) (*Outcome, error)
		}{{"mlr", MLR}, {"binary", Binary}} {
			p := params()
			o, err := alg.run(t.Context(), &Sim{Capacity: capacity}, p)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range o.Results {
				// A loss ratio r allows sending up to capacity / (1 − r).
				want := math.Min(capacity/(1-r.LossRatio), p.MaxRate)
				within(t, fmt.Sprintf("%s %g", alg.name, r.LossRatio), r, want, p.Precision)
			}
			finalOnly(t, o, p.FinalDuration)
		}
	}
}

// The same device with 0.1 % loss at any load: PDR at 0.5 % is its capacity;
// NDR is not above the lowest load tried.
func TestKnownLoss(t *testing.T) {
	for _, alg := range []struct {
		name string
		run  func(context.Context, Measurer, Params) (*Outcome, error)
	}{{"mlr", MLR}, {"binary", Binary}} {
		p := params()
		o, err := alg.run(t.Context(), &Sim{Capacity: 2e6, Loss: 0.001}, p)
		if err != nil {
			t.Fatal(err)
		}
		ndr, pdr := o.Results[0], o.Results[1]
		if ndr.LowerFound {
			t.Errorf("%s: NDR %.0f pps found on a device that loses 0.1 %% at any load", alg.name, ndr.Lower)
		}
		lowest := math.Inf(1)
		for _, tr := range o.Trials {
			lowest = math.Min(lowest, tr.Rate)
		}
		if ndr.Lower > lowest {
			t.Errorf("%s: NDR %.0f above the lowest load tried, %.0f", alg.name, ndr.Lower, lowest)
		}
		// 0.1 % loss and 0.5 % allowed: PDR is up to 0.4 % above capacity.
		want := 2e6 / (1 - 0.005) * (1 - 0.001)
		within(t, alg.name+" pdr", pdr, want, p.Precision)
	}
}

// MLRsearch and binary search on the same device and precision find the same
// NDR within precision, and MLRsearch's trials take at most half the time.
func TestMLRAgainstBinary(t *testing.T) {
	for _, capacity := range []float64{50e3, 1e6, 7.5e6, 13e6} {
		p := params()
		sm, sb := &Sim{Capacity: capacity, Overhead: 200 * time.Millisecond}, &Sim{Capacity: capacity, Overhead: 200 * time.Millisecond}
		m, err := MLR(t.Context(), sm, p)
		if err != nil {
			t.Fatal(err)
		}
		b, err := Binary(t.Context(), sb, p)
		if err != nil {
			t.Fatal(err)
		}
		for i := range p.LossRatios {
			lm, lb := m.Results[i].Lower, b.Results[i].Lower
			if math.Abs(lm-lb) > p.Precision*math.Max(lm, lb) {
				t.Errorf("capacity %.0f, loss ratio %g: MLR %.0f, binary %.0f: apart by more than the precision", capacity, p.LossRatios[i], lm, lb)
			}
		}
		ratio := sm.Elapsed.Seconds() / sb.Elapsed.Seconds()
		t.Logf("capacity %.0f pps: MLR %d trials %v, binary %d trials %v: %.2f× the time", capacity, len(m.Trials), sm.Elapsed, len(b.Trials), sb.Elapsed, ratio)
		if ratio > 0.5 {
			t.Errorf("capacity %.0f: MLRsearch took %.2f× binary search's time, want ≤ 0.5", capacity, ratio)
		}
	}
}

// A device whose results are noise: the search ends, with bounds or an error,
// never loops.
func TestNoisyDeviceEnds(t *testing.T) {
	n := 0
	m := MeasureFunc(func(_ context.Context, rate float64, d time.Duration) (Trial, error) {
		n++
		sent := uint64(rate * d.Seconds())
		lost := uint64(0)
		if n%3 == 0 {
			lost = sent / 10
		}
		return Trial{Sent: sent, Received: sent - lost}, nil
	})
	p := params()
	p.FinalDuration = time.Second
	if _, err := MLR(t.Context(), m, p); err != nil {
		t.Log(err)
	}
	if n > maxTrials+1 {
		t.Errorf("%d trials", n)
	}
}

func TestParamsChecked(t *testing.T) {
	bad := []func(*Params){
		func(p *Params) { p.LossRatios = nil },
		func(p *Params) { p.MinRate = 0 },
		func(p *Params) { p.MaxRate = p.MinRate / 2 },
		func(p *Params) { p.Precision = 0 },
		func(p *Params) { p.FinalDuration = 0 },
		func(p *Params) { p.LossRatios = []float64{1} },
	}
	for i, f := range bad {
		p := params()
		f(&p)
		if _, err := MLR(t.Context(), &Sim{Capacity: 1}, p); err == nil {
			t.Errorf("case %d: no error", i)
		}
		if _, err := Binary(t.Context(), &Sim{Capacity: 1}, p); err == nil {
			t.Errorf("case %d: binary: no error", i)
		}
	}
}

// BenchmarkSearchTime: the time the trials of each search would take on a
// simulated device, MLRsearch beside binary search at the same final
// duration (30 s) and precision (0.5 %).
//
// Draft-15 runs beside them with CSIT's NDR and PDR goals (1 s final
// trials, a 21 s duration sum, exceed ratio 0.5): its cost is that of its
// repeated trials, as a ratio to binary search's in the same run.
func BenchmarkSearchTime(b *testing.B) {
	p := params()
	var tm, tb, t15 time.Duration
	for b.Loop() {
		sm, sb := &Sim{Capacity: 3.3e6, Overhead: 200 * time.Millisecond}, &Sim{Capacity: 3.3e6, Overhead: 200 * time.Millisecond}
		if _, err := MLR(b.Context(), sm, p); err != nil {
			b.Fatal(err)
		}
		if _, err := Binary(b.Context(), sb, p); err != nil {
			b.Fatal(err)
		}
		s15 := &Sim{Capacity: 3.3e6, Overhead: 200 * time.Millisecond}
		in := ControllerInput{Goals: CSITGoals(p.LossRatios), MinLoad: p.MinRate, MaxLoad: p.MaxRate}
		if _, err := MLR15(b.Context(), s15, in); err != nil {
			b.Fatal(err)
		}
		tm, tb, t15 = sm.Elapsed, sb.Elapsed, s15.Elapsed
	}
	b.ReportMetric(tm.Seconds(), "mlr-s")
	b.ReportMetric(tb.Seconds(), "binary-s")
	b.ReportMetric(t15.Seconds(), "mlr15-s")
	b.ReportMetric(tm.Seconds()/tb.Seconds(), "mlr/binary")
	b.ReportMetric(t15.Seconds()/tb.Seconds(), "mlr15/binary")
}

// FuzzSearch: any device, any parameters: the search ends, with results that
// never claim a passing load above a failing one.
func FuzzSearch(f *testing.F) {
	f.Add(1e6, 0.0, 10e3, 14.88e6, 0.005, uint8(2), uint16(30))
	f.Add(5.0, 0.3, 1.0, 1e9, 0.1, uint8(0), uint16(1))
	f.Fuzz(func(t *testing.T, capacity, loss, lo, hi, precision float64, phases uint8, final uint16) {
		if !(capacity >= 0 && capacity < 1e12 && loss >= 0 && loss <= 1 && lo < 1e12 && hi < 1e12) {
			return
		}
		p := Params{MinRate: lo, MaxRate: hi, LossRatios: []float64{0, 0.005}, Precision: precision,
			FinalDuration: time.Duration(final) * time.Second, Phases: int(phases % 8)}
		for _, run := range []func(context.Context, Measurer, Params) (*Outcome, error){MLR, Binary} {
			o, err := run(t.Context(), &Sim{Capacity: capacity, Loss: loss}, p)
			if err != nil {
				continue
			}
			for _, r := range o.Results {
				if r.LowerFound && r.UpperFound && r.Lower >= r.Upper {
					t.Fatalf("lower %g ≥ upper %g", r.Lower, r.Upper)
				}
			}
		}
	})
}

// Every search reports its results in draft-15's terms (Result.Goal):
// draft-01 and binary search as RFC 2544's goal, Regular with bounds that
// bracket the device and a Conditional Throughput, or Irregular with the
// reason when the device outruns Max Load.
func TestGoalResultEveryAlgorithm(t *testing.T) {
	for _, alg := range []struct {
		name string
		run  func(context.Context, Measurer, Params) (*Outcome, error)
	}{{"mlr", MLR}, {"binary", Binary}} {
		p := params()
		p.FinalDuration = time.Second
		o, err := alg.run(t.Context(), &Sim{Capacity: 1e6}, p)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range o.Results {
			g := r.Goal
			if g == nil || !g.Regular || g.RelevantLowerBound != r.Lower || g.RelevantUpperBound != r.Upper ||
				g.ConditionalThroughput <= 0 || g.ConditionalThroughput > r.Lower || g.Goal.ExceedRatio != 0 ||
				g.Goal.DurationSum != p.FinalDuration || len(g.LowerTrials) != 1 || len(g.UpperTrials) != 1 {
				t.Errorf("%s loss %g: %+v for [%.0f, %.0f]", alg.name, r.LossRatio, g, r.Lower, r.Upper)
			}
		}
		o, err = alg.run(t.Context(), &Sim{Capacity: 20e6}, p)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range o.Results {
			if g := r.Goal; g.Regular || g.Reason != "Max Load is a Lower Bound: no Upper Bound" || g.RelevantLowerBound != p.MaxRate {
				t.Errorf("%s loss %g on a device above Max Load: regular %v %q, lower bound %.0f", alg.name, r.LossRatio, g.Regular, g.Reason, g.RelevantLowerBound)
			}
		}
	}
}
