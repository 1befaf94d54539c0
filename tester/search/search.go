// Package search finds the throughput of a device under test at one or more
// loss ratios: the highest offered load whose trial lost no more than the
// ratio allows. It knows nothing of packets. A Measurer runs one trial at a
// given load for a given duration and says what was sent and what came back;
// the tests give it a simulated device of known capacity and loss.
//
// Three searches are offered, so that they can be compared on the same device:
//
//   - MLR15, MLRsearch as draft-ietf-bmwg-mlrsearch-15 specifies it: Search
//     Goals with a Goal Exceed Ratio and a Goal Duration Sum, so that a load
//     is judged on repeated trials, and Regular or Irregular Goal Results;
//   - MLR, the Multiple Loss Ratio search of draft-ietf-bmwg-mlrsearch-01
//     (FD.io CSIT's MLRsearch 0.4): every loss ratio in one search, short
//     trials while far from the answer, the final duration only near it;
//   - Binary, RFC 2544's binary search, one search per loss ratio, every
//     trial at the final duration.
package search

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
)

// Trial is the outcome of one trial.
type Trial struct {
	Rate     float64       `json:"rate_pps"`    // offered load asked for, packets per second
	Duration time.Duration `json:"duration_ns"` // how long traffic was sent for
	Sent     uint64        `json:"sent"`        // packets sent
	// Unsent is what the tester failed to send of the load asked for,
	// counted as lost (a tester may leave a rounding's worth out).
	Unsent   uint64 `json:"unsent,omitempty"`
	Received uint64 `json:"received"` // packets delivered (received, or consumed by the device by design)
}

// LossRatio is the share of the packets sent or unsent that were not
// delivered; 0 when nothing was sent.
func (t Trial) LossRatio() float64 {
	n := t.Sent + t.Unsent
	if n == 0 || t.Received >= n {
		return 0
	}
	return float64(n-t.Received) / float64(n)
}

// passes: the trial lost no more than ratio allows.
func (t Trial) passes(ratio float64) bool { return t.LossRatio() <= ratio }

// Measurer runs one trial: it offers rate packets per second for d and says
// what came back. Measure returns an error only when the trial could not run;
// loss is a result, not an error.
type Measurer interface {
	Measure(ctx context.Context, rate float64, d time.Duration) (Trial, error)
}

// MeasureFunc is a function that is a Measurer.
type MeasureFunc func(ctx context.Context, rate float64, d time.Duration) (Trial, error)

// Measure calls f.
func (f MeasureFunc) Measure(ctx context.Context, rate float64, d time.Duration) (Trial, error) {
	return f(ctx, rate, d)
}

// Params are a search's inputs.
type Params struct {
	// MinRate and MaxRate bound the load, in packets per second. MaxRate is
	// typically the port's line rate for the frame size.
	MinRate, MaxRate float64
	// LossRatios are the ratios to search for, e.g. [0, 0.005] for NDR and
	// PDR at 0.5 %.
	LossRatios []float64
	// FinalDuration is the duration of the trials a result rests on.
	FinalDuration time.Duration
	// Precision is the goal's relative width: a search ends when the highest
	// passing load and the lowest failing one above it are within
	// Precision × the failing load of each other.
	Precision float64
	// InitialDuration is the duration of MLR's first trials (default 1 s, or
	// FinalDuration when shorter); Binary does not use it.
	InitialDuration time.Duration
	// Phases is the number of MLR's intermediate phases (default 2): each
	// halves the width of the one before, with a longer trial duration.
	Phases int
	// OnTrial, when set, is called after each trial with its phase ("initial",
	// "intermediate 1", "final", "binary ndr" …).
	OnTrial func(phase string, t Trial)
}

// Record is one trial of a search, with the phase it belongs to.
type Record struct {
	Phase string `json:"phase"`
	Trial
}

// Result is what a search found for one loss ratio.
type Result struct {
	LossRatio float64 `json:"loss_ratio"`
	// Lower is the throughput: the highest load of a trial at the final
	// duration that lost no more than LossRatio, below Upper. When no trial
	// passed, Lower is MinRate and LowerFound is false.
	Lower      float64 `json:"lower_pps"`
	LowerFound bool    `json:"lower_found"`
	LowerTrial *Trial  `json:"lower_trial,omitempty"`
	// Upper is the lowest load above Lower whose final trial lost more; it
	// is MaxRate with UpperFound false when MaxRate itself passed.
	Upper      float64 `json:"upper_pps"`
	UpperFound bool    `json:"upper_found"`
	UpperTrial *Trial  `json:"upper_trial,omitempty"`
	// Goal is the result in draft-15's terms: MLR15's for its Search Goal,
	// and for MLR and Binary the equivalent of RFC 2544's goal (one final
	// trial decides a load), so that every search reports Regular or
	// Irregular, its Relevant Bounds and its Conditional Throughput.
	Goal *GoalResult `json:"goal,omitempty"`
}

// RelativeWidth is (Upper − Lower) / Upper.
func (r Result) RelativeWidth() float64 {
	if r.Upper == 0 {
		return 0
	}
	return (r.Upper - r.Lower) / r.Upper
}

// Outcome is a whole search: a result per loss ratio, in the order of
// Params.LossRatios, and every trial in the order it ran.
type Outcome struct {
	Algorithm string        `json:"algorithm"`
	Results   []Result      `json:"results"`
	Trials    []Record      `json:"trials"`
	TrialTime time.Duration `json:"trial_time_ns"` // sum of the trials' durations
}

func (p *Params) check() error {
	switch {
	case len(p.LossRatios) == 0:
		return errors.New("search: no loss ratio")
	case !(p.MinRate > 0) || !(p.MaxRate >= p.MinRate) || math.IsInf(p.MaxRate, 0):
		return fmt.Errorf("search: rates must satisfy 0 < min (%g) ≤ max (%g)", p.MinRate, p.MaxRate)
	case !(p.Precision > 0 && p.Precision < 1):
		return fmt.Errorf("search: precision %g must be between 0 and 1", p.Precision)
	case p.FinalDuration <= 0:
		return errors.New("search: the final trial duration must be positive")
	}
	for _, r := range p.LossRatios {
		if !(r >= 0 && r < 1) {
			return fmt.Errorf("search: loss ratio %g must be in [0, 1)", r)
		}
	}
	return nil
}

// db is the trials a search has run, which every loss ratio reads.
type db struct {
	m      Measurer
	p      *Params
	out    *Outcome
	trials []Trial
	phase  string
}

func (d *db) measure(ctx context.Context, rate float64, dur time.Duration) (Trial, error) {
	rate = math.Min(math.Max(rate, d.p.MinRate), d.p.MaxRate)
	if err := ctx.Err(); err != nil {
		return Trial{}, err
	}
	t, err := d.m.Measure(ctx, rate, dur)
	if err != nil {
		return Trial{}, fmt.Errorf("trial at %.0f pps for %v: %w", rate, dur, err)
	}
	t.Rate, t.Duration = rate, dur
	d.trials = append(d.trials, t)
	d.out.Trials = append(d.out.Trials, Record{Phase: d.phase, Trial: t})
	d.out.TrialTime += dur
	if d.p.OnTrial != nil {
		d.p.OnTrial(d.phase, t)
	}
	return t, nil
}

// bounds are, for ratio, among the trials of at least min duration: the
// lowest failing load (upper) and the highest passing load below it (lower).
func (d *db) bounds(ratio float64, min time.Duration) (lower, upper *Trial) {
	for i := range d.trials {
		t := &d.trials[i]
		if t.Duration < min || t.passes(ratio) {
			continue
		}
		if upper == nil || t.Rate < upper.Rate {
			upper = t
		}
	}
	for i := range d.trials {
		t := &d.trials[i]
		if t.Duration < min || !t.passes(ratio) || (upper != nil && t.Rate >= upper.Rate) {
			continue
		}
		if lower == nil || t.Rate > lower.Rate {
			lower = t
		}
	}
	return lower, upper
}

func (d *db) result(ratio float64) Result {
	r := Result{LossRatio: ratio, Lower: d.p.MinRate, Upper: d.p.MaxRate}
	lo, up := d.bounds(ratio, d.p.FinalDuration)
	if lo != nil {
		t := *lo
		r.Lower, r.LowerFound, r.LowerTrial = t.Rate, true, &t
	}
	if up != nil {
		t := *up
		r.Upper, r.UpperFound, r.UpperTrial = t.Rate, true, &t
	}
	r.Goal = d.goalResult(r)
	return r
}

// goalResult is a draft-01 or binary result in draft-15's terms, so that
// reports show every search alike: its goal is the one RFC 2544's search
// meets (draft-15 section 4.10.2: one Full-Length trial decides a load, an
// exceed ratio of 0), with the final duration and the precision as width.
// It is Regular when both bounds were found within the precision; its
// Conditional Throughput is the lower bound's trial's forwarding rate.
func (d *db) goalResult(r Result) *GoalResult {
	g := SearchGoal{FinalTrialDuration: d.p.FinalDuration,
		DurationSum: d.p.FinalDuration, LossRatio: r.LossRatio, Width: d.p.Precision}
	gr := &GoalResult{Goal: g}
	if r.LowerFound {
		gr.RelevantLowerBound = r.Lower
		gr.LowerTrials = []Trial{*r.LowerTrial}
		gr.ConditionalThroughput = g.ConditionalThroughput(r.Lower, gr.LowerTrials)
	}
	if r.UpperFound {
		gr.RelevantUpperBound = r.Upper
		gr.UpperTrials = []Trial{*r.UpperTrial}
	}
	switch {
	case !r.UpperFound && r.LowerFound && r.Lower >= d.p.MaxRate:
		gr.Reason = "Max Load is a Lower Bound: no Upper Bound"
		gr.RelevantLowerBound = d.p.MaxRate
	case !r.UpperFound:
		gr.Reason = "no Upper Bound"
	case !r.LowerFound && r.Upper <= d.p.MinRate:
		gr.Reason = "Min Load is an Upper Bound: no Lower Bound"
	case !r.LowerFound:
		gr.Reason = "no Lower Bound"
	case r.RelativeWidth() > d.p.Precision*(1+1e-9):
		gr.Reason = fmt.Sprintf("the bounds are %.4g apart, wider than the precision %g", r.RelativeWidth(), d.p.Precision)
	default:
		gr.Regular = true
	}
	return gr
}
