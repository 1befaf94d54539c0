package search

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
)

// maxTrials bounds a search: a device whose results contradict each other
// trial after trial ends the search with an error rather than running forever.
const maxTrials = 400

// MLR is the Multiple Loss Ratio search of draft-ietf-bmwg-mlrsearch-01, as
// FD.io CSIT ran it: one search for every loss ratio of p at once.
//
//   - Initial phase: a trial at MaxRate, then one at the rate it delivered
//     (its maximum receive rate), both of InitialDuration.
//   - Intermediate phases 1 … Phases: trial durations grow geometrically from
//     InitialDuration towards FinalDuration, and the goal width halves each
//     phase, down to 2 × Precision in the last one.
//   - Final phase: FinalDuration and Precision.
//
// In each phase, each loss ratio needs a passing and a failing trial of the
// phase's duration no further apart than its width. A bound found with
// shorter trials is measured again at the phase's duration first; a missing
// bound is searched for outwards with a step that doubles; bounds too far
// apart are bisected. Every trial counts for every ratio, so NDR and PDR share
// their trials where they can.
func MLR(ctx context.Context, m Measurer, p Params) (*Outcome, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	if p.InitialDuration <= 0 {
		p.InitialDuration = time.Second
	}
	p.InitialDuration = min(p.InitialDuration, p.FinalDuration)
	if p.Phases <= 0 {
		p.Phases = 2
	}
	out := &Outcome{Algorithm: "mlrsearch"}
	d := &db{m: m, p: &p, out: out}

	d.phase = "initial"
	t, err := d.measure(ctx, p.MaxRate, p.InitialDuration)
	if err != nil {
		return out, err
	}
	if mrr := float64(t.Received) / t.Duration.Seconds(); mrr < p.MaxRate*(1-p.Precision) {
		if _, err := d.measure(ctx, mrr, p.InitialDuration); err != nil {
			return out, err
		}
	}

	ratio := p.FinalDuration.Seconds() / p.InitialDuration.Seconds()
	for k := 1; k <= p.Phases+1; k++ {
		dur, width := p.FinalDuration, p.Precision
		d.phase = "final"
		if k <= p.Phases {
			dur = time.Duration(float64(p.InitialDuration) * math.Pow(ratio, float64(k-1)/float64(p.Phases)))
			width = p.Precision * math.Pow(2, float64(p.Phases-k+1))
			d.phase = fmt.Sprintf("intermediate %d", k)
		}
		if err := d.phase1(ctx, dur, min(width, 0.5)); err != nil {
			return out, err
		}
	}
	for _, r := range p.LossRatios {
		out.Results = append(out.Results, d.result(r))
	}
	return out, nil
}

// phase1 runs one phase: trials of duration dur until every ratio's bounds at
// that duration are within width.
func (d *db) phase1(ctx context.Context, dur time.Duration, width float64) error {
	steps := make([]float64, len(d.p.LossRatios))
	for i := range steps {
		steps[i] = width
	}
	for {
		next, ok := 0.0, false
		for i, r := range d.p.LossRatios {
			if next, ok = d.next(r, dur, width, &steps[i]); ok {
				break
			}
		}
		if !ok {
			return nil
		}
		if len(d.trials) >= maxTrials {
			return errors.New("search: no result after " + fmt.Sprint(maxTrials) + " trials; the device's results contradict each other")
		}
		if _, err := d.measure(ctx, next, dur); err != nil {
			return err
		}
	}
}

// next is the load of the next trial ratio needs in a phase of duration dur
// and goal width, or false when its bounds are narrow enough. step is the
// ratio's outward step, doubled at each outward trial.
func (d *db) next(ratio float64, dur time.Duration, width float64, step *float64) (float64, bool) {
	lo, up := d.bounds(ratio, dur)
	outward := func() float64 { s := *step; *step = min(2*s, 0.5); return s }
	switch {
	case lo != nil && up != nil:
		if (up.Rate-lo.Rate)/up.Rate <= width*(1+1e-9) {
			return 0, false
		}
		// What the failing trial delivered is the device's guess of its
		// capacity, as the initial phase's receive rate is: a load it may
		// pass. Above a passing guess, step out from the lower bound.
		c := float64(up.Received) / up.Duration.Seconds() / (1 - ratio)
		if c <= lo.Rate*(1+1e-9) {
			c = lo.Rate / (1 - outward())
		}
		if mid := d.bisect(lo.Rate, up.Rate, width); c > mid {
			c = mid
		}
		return c, true
	case up != nil: // nothing passed at this duration below up
		if up.Rate <= d.p.MinRate {
			return 0, false
		}
		if c := d.passBelow(ratio, up.Rate); c != nil {
			return c.Rate, true
		}
		return up.Rate * (1 - outward()), true
	case lo != nil: // nothing failed at this duration above lo
		if lo.Rate >= d.p.MaxRate {
			return 0, false
		}
		if c := d.failAbove(ratio, lo.Rate); c != nil {
			return c.Rate, true
		}
		return math.Min(d.p.MaxRate, lo.Rate/(1-outward())), true
	}
	// Nothing yet at this duration: start from the best of the shorter trials.
	lo, up = d.bounds(ratio, 0)
	switch {
	case lo != nil:
		return lo.Rate, true
	case up != nil:
		return up.Rate, true
	}
	return d.p.MaxRate, true
}

// bisect is the load between lo and up that halves their distance, or, when
// the goal width is nearly met, the one that meets it from below: a passing
// trial there ends the ratio.
func (d *db) bisect(lo, up, width float64) float64 {
	mid := (lo + up) / 2
	// Aim a hair inside the width so that rounding cannot leave it unmet.
	if edge := up * (1 - width*0.999); edge < mid {
		return edge // within twice the width of each other
	}
	return mid
}

// passBelow is the highest passing trial of any duration below rate.
func (d *db) passBelow(ratio, rate float64) *Trial {
	var c *Trial
	for i := range d.trials {
		t := &d.trials[i]
		if t.Rate < rate && t.passes(ratio) && (c == nil || t.Rate > c.Rate) {
			c = t
		}
	}
	return c
}

// failAbove is the lowest failing trial of any duration above rate.
func (d *db) failAbove(ratio, rate float64) *Trial {
	var c *Trial
	for i := range d.trials {
		t := &d.trials[i]
		if t.Rate > rate && !t.passes(ratio) && (c == nil || t.Rate < c.Rate) {
			c = t
		}
	}
	return c
}

// Binary is RFC 2544's search (section 26.1), once for each loss ratio of p,
// every trial of FinalDuration: a trial at MaxRate, then bisection between
// the highest passing and the lowest failing load until they are within
// Precision; MinRate is measured when nothing above it passed.
func Binary(ctx context.Context, m Measurer, p Params) (*Outcome, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	out := &Outcome{Algorithm: "binary"}
	for _, r := range p.LossRatios {
		d := &db{m: m, p: &p, out: out, phase: fmt.Sprintf("binary %g", r)}
		lo, hi := p.MinRate, p.MaxRate
		loFound := false
		t, err := d.measure(ctx, hi, p.FinalDuration)
		if err != nil {
			return out, err
		}
		if !t.passes(r) {
			for (hi-lo)/hi > p.Precision {
				if len(d.trials) >= maxTrials {
					return out, errors.New("search: binary search did not converge")
				}
				mid := (lo + hi) / 2
				t, err := d.measure(ctx, mid, p.FinalDuration)
				if err != nil {
					return out, err
				}
				if t.passes(r) {
					lo, loFound = mid, true
				} else {
					hi = mid
				}
			}
			if !loFound {
				if _, err := d.measure(ctx, p.MinRate, p.FinalDuration); err != nil {
					return out, err
				}
			}
		}
		out.Results = append(out.Results, d.result(r))
	}
	return out, nil
}
