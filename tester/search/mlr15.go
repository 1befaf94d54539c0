package search

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"
)

// Draft15 names the specification MLR15 follows.
const Draft15 = "draft-ietf-bmwg-mlrsearch-15"

// SearchGoal is a Search Goal of draft-ietf-bmwg-mlrsearch-15 (section 4.5).
// FinalTrialDuration, DurationSum, LossRatio and ExceedRatio are required;
// Width and InitialTrialDuration are optional.
type SearchGoal struct {
	// Name is the goal's label in reports ("NDR", "PDR", "RFC 2544" …); not
	// one of the draft's attributes.
	Name string `json:"name,omitempty"`
	// FinalTrialDuration: trials at least this long are Full-Length; only
	// they can make a load a Lower Bound.
	FinalTrialDuration time.Duration `json:"final_trial_duration_ns"`
	// DurationSum is how much trial time at one load suffices to classify it.
	DurationSum time.Duration `json:"duration_sum_ns"`
	// LossRatio: a trial that lost more is High-Loss.
	LossRatio float64 `json:"loss_ratio"`
	// ExceedRatio is the share of the Duration Sum that High-Loss trials may
	// take at a Lower Bound.
	ExceedRatio float64 `json:"exceed_ratio"`
	// Width is the relative width (RUB − RLB) / RUB a Regular result needs;
	// 0 means 0.005.
	Width float64 `json:"width"`
	// InitialTrialDuration is the shortest trial the Controller uses for
	// this goal; 0 means FinalTrialDuration.
	InitialTrialDuration time.Duration `json:"initial_trial_duration_ns"`
}

// CSIT's goal attributes (FD.io CSIT's TrafficGenerator.py and
// performance_utils.robot, 2025): both NDR and PDR use exceed ratio 0.5.
const (
	CSITFinalTrialDuration   = time.Second
	CSITDurationSum          = 21 * time.Second
	CSITExceedRatio          = 0.5
	CSITWidth                = 0.005
	CSITInitialTrialDuration = time.Second
	CSITPrecedingTargets     = 2
)

// CSITGoals are CSIT's goals, one per loss ratio: [0, 0.005] gives its NDR
// and PDR.
func CSITGoals(lossRatios []float64) []SearchGoal {
	var gs []SearchGoal
	for _, r := range lossRatios {
		name := "NDR"
		if r > 0 {
			name = fmt.Sprintf("PDR %g%%", 100*r)
		}
		gs = append(gs, SearchGoal{Name: name, FinalTrialDuration: CSITFinalTrialDuration,
			DurationSum: CSITDurationSum, LossRatio: r, ExceedRatio: CSITExceedRatio,
			Width: CSITWidth, InitialTrialDuration: CSITInitialTrialDuration})
	}
	return gs
}

// Preset is a named goal: "ndr" and "pdr" (CSIT's, PDR at 0.5 %),
// "rfc2544" (draft-15 section 4.10.2: unconditionally compliant with RFC
// 2544 section 24) and "tst009" (section 4.10.3: ETSI GS NFV-TST 009's
// binary search with loss verification, max(r) = 2, z = infinity).
func Preset(name string) (SearchGoal, bool) {
	switch name {
	case "ndr":
		return CSITGoals([]float64{0})[0], true
	case "pdr":
		return CSITGoals([]float64{0.005})[0], true
	case "rfc2544":
		return SearchGoal{Name: "RFC 2544", FinalTrialDuration: 60 * time.Second,
			DurationSum: 60 * time.Second, Width: CSITWidth}, true
	case "tst009":
		return SearchGoal{Name: "TST009", FinalTrialDuration: 60 * time.Second,
			DurationSum: 120 * time.Second, ExceedRatio: 0.5, Width: CSITWidth}, true
	}
	return SearchGoal{}, false
}

// Presets are Preset's names.
var Presets = []string{"ndr", "pdr", "rfc2544", "tst009"}

// Check says what is wrong with the goal, if anything.
func (g SearchGoal) Check() error {
	switch {
	case g.FinalTrialDuration <= 0:
		return errors.New("the Goal Final Trial Duration must be positive")
	case g.DurationSum <= 0:
		return errors.New("the Goal Duration Sum must be positive")
	case !(g.LossRatio >= 0 && g.LossRatio < 1):
		return fmt.Errorf("the Goal Loss Ratio %g is not in [0, 1)", g.LossRatio)
	case !(g.ExceedRatio >= 0 && g.ExceedRatio < 1):
		return fmt.Errorf("the Goal Exceed Ratio %g is not in [0, 1)", g.ExceedRatio)
	case !(g.Width >= 0 && g.Width < 0.5):
		return fmt.Errorf("the Goal Width %g is not in [0, 0.5)", g.Width)
	case g.InitialTrialDuration < 0:
		return errors.New("the Goal Initial Trial Duration must be positive")
	}
	return nil
}

// Bound is a load's classification for a goal (draft-15 section 4.7.3).
type Bound int

const (
	Undecided Bound = iota
	LowerBound
	UpperBound
)

func (b Bound) String() string {
	return [...]string{"undecided", "lower bound", "upper bound"}[b]
}

// Classify is draft-15's Load Classification Code (appendix A) for the
// trials at one load, each trial's Effective Duration being its Duration.
func (g SearchGoal) Classify(trials []Trial) Bound {
	var fullLow, fullHigh, shortLow, shortHigh float64
	for _, t := range trials {
		d, low := t.Duration.Seconds(), t.LossRatio() <= g.LossRatio
		switch full := t.Duration >= g.FinalTrialDuration; {
		case full && low:
			fullLow += d
		case full:
			fullHigh += d
		case low:
			shortLow += d
		default:
			shortHigh += d
		}
	}
	balancing := shortLow * g.ExceedRatio / (1 - g.ExceedRatio)
	effHigh := fullHigh + max(0, shortHigh-balancing)
	whole := max(fullLow+effHigh, g.DurationSum.Seconds())
	quantile := whole * g.ExceedRatio
	pessimistic := whole-fullLow <= quantile
	optimistic := effHigh <= quantile
	switch {
	case optimistic && pessimistic:
		return LowerBound
	case !optimistic && !pessimistic:
		return UpperBound
	}
	return Undecided
}

// ConditionalThroughput is draft-15's Conditional Throughput Code (appendix
// B) at load: the load less the loss ratio at the goal's quantile of the
// Full-Length trials.
func (g SearchGoal) ConditionalThroughput(load float64, trials []Trial) float64 {
	var full []Trial
	var sum float64
	for _, t := range trials {
		if t.Duration >= g.FinalTrialDuration {
			full = append(full, t)
			sum += t.Duration.Seconds()
		}
	}
	sort.SliceStable(full, func(i, j int) bool { return full[i].LossRatio() < full[j].LossRatio() })
	remaining := max(g.DurationSum.Seconds(), sum) * (1 - g.ExceedRatio)
	q, set := 0.0, false
	for _, t := range full {
		if set && remaining <= 0 {
			break
		}
		q, set = t.LossRatio(), true
		remaining -= t.Duration.Seconds()
	}
	if !set || remaining > 0 {
		q = 1 // the missing time counts as lost
	}
	return load * (1 - q)
}

// GoalResult is a goal's result (draft-15 section 4.8.4): Regular, with a
// Relevant Upper Bound and a Relevant Lower Bound within the Goal Width, or
// Irregular, with Reason saying why and whatever bounds there are.
type GoalResult struct {
	Goal    SearchGoal `json:"goal"`
	Regular bool       `json:"regular"`
	Reason  string     `json:"irregular_reason,omitempty"`
	// RelevantUpperBound is the smallest Upper Bound; 0 when none.
	RelevantUpperBound float64 `json:"relevant_upper_bound_pps"`
	// RelevantLowerBound is the largest Lower Bound below it. When Max Load
	// is a Lower Bound and no Upper Bound exists, it is Max Load as an
	// "effective" bound of an Irregular result. 0 when none.
	RelevantLowerBound float64 `json:"relevant_lower_bound_pps"`
	// ConditionalThroughput is computed at RelevantLowerBound; 0 when none.
	ConditionalThroughput float64 `json:"conditional_throughput_pps"`
	// UpperTrials and LowerTrials are the trials at the bounds.
	UpperTrials []Trial `json:"upper_trials,omitempty"`
	LowerTrials []Trial `json:"lower_trials,omitempty"`
	// LowerAboveUpper is the largest Lower Bound above the Relevant Upper
	// Bound, 0 when none: loss that is not monotonic in the load.
	LowerAboveUpper float64 `json:"lower_above_upper_pps,omitempty"`
	// TesterLimited is set by the tester, not the search: the most it could
	// send in the High-Loss trials it fell short in that shaped this result,
	// which is then Irregular ("tester-limited at X pps"); 0 when none did.
	TesterLimited float64 `json:"tester_limited_pps,omitempty"`
}

// Width is (RUB − RLB) / RUB, or 0 without both bounds.
func (r GoalResult) Width() float64 {
	if r.RelevantUpperBound == 0 || r.RelevantLowerBound == 0 {
		return 0
	}
	return (r.RelevantUpperBound - r.RelevantLowerBound) / r.RelevantUpperBound
}

// ControllerInput is draft-15's Controller Input: the goals, and the
// optional Min Load and Max Load (required here).
type ControllerInput struct {
	Goals            []SearchGoal
	MinLoad, MaxLoad float64
	// PrecedingTargets are the coarser targets each goal is reached through
	// (CSIT's preceding_targets; -1 for none, 0 for CSIT's 2): each halves
	// the width of the one before and uses longer trials, from the goal's
	// Initial Trial Duration up.
	PrecedingTargets int
	// MaxTrials ends a search that does not converge with Irregular results
	// (default 2000).
	MaxTrials int
	OnTrial   func(phase string, t Trial)
}

// target is a goal or one of its preceding targets: the same classification
// with a shorter duration sum and trials, and a wider width.
type target struct {
	SearchGoal
	phase string
}

func (in *ControllerInput) targets(g SearchGoal, n int) []target {
	if g.Width == 0 {
		g.Width = CSITWidth
	}
	init := g.InitialTrialDuration
	if init <= 0 || init > g.FinalTrialDuration {
		init = g.FinalTrialDuration
	}
	var ts []target
	width := g.Width
	mult := math.Pow(init.Seconds()/g.DurationSum.Seconds(), 1/float64(max(n, 1)))
	for k := 1; k <= n; k++ {
		sum := time.Duration(float64(g.DurationSum) * math.Pow(mult, float64(k)))
		if k == n {
			sum = init
		}
		width = min(2*width, 0.25)
		t := g
		t.DurationSum, t.FinalTrialDuration, t.Width = sum, min(g.FinalTrialDuration, sum), width
		ts = append(ts, target{t, fmt.Sprintf("%s target %d", g.Name, n-k+1)})
	}
	slices.Reverse(ts) // coarsest first
	return append(ts, target{g, g.Name + " final"})
}

// db15 is the trials by load.
type db15 struct {
	in     *ControllerInput
	m      Measurer
	out    *Outcome
	loads  []float64 // ascending
	trials map[float64][]Trial
}

func (d *db15) measure(ctx context.Context, phase string, load float64, dur time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	t, err := d.m.Measure(ctx, load, dur)
	if err != nil {
		return fmt.Errorf("trial at %.0f pps for %v: %w", load, dur, err)
	}
	t.Rate, t.Duration = load, dur
	if _, ok := d.trials[load]; !ok {
		i, _ := slices.BinarySearch(d.loads, load)
		d.loads = slices.Insert(d.loads, i, load)
	}
	d.trials[load] = append(d.trials[load], t)
	d.out.Trials = append(d.out.Trials, Record{Phase: phase, Trial: t})
	d.out.TrialTime += dur
	if d.in.OnTrial != nil {
		d.in.OnTrial(phase, t)
	}
	return nil
}

// relevant are the goal's Relevant Upper Bound and Relevant Lower Bound (0
// when none), and the largest Lower Bound above the upper one.
func (d *db15) relevant(g SearchGoal) (rub, rlb, above float64) {
	for _, l := range d.loads {
		if g.Classify(d.trials[l]) == UpperBound {
			rub = l
			break
		}
	}
	for _, l := range d.loads {
		if g.Classify(d.trials[l]) == LowerBound {
			if rub == 0 || l < rub {
				rlb = l
			} else {
				above = l
			}
		}
	}
	return rub, rlb, above
}

// next is the load and duration target t needs measured, or false when it
// is done.
func (d *db15) next(t target) (float64, time.Duration, bool) {
	in := d.in
	rub, rlb, _ := d.relevant(t.SearchGoal)
	dur := t.FinalTrialDuration
	switch {
	case rub != 0 && rlb != 0 && (rub-rlb)/rub <= t.Width*(1+1e-9):
		return 0, 0, false
	case rub == 0 && rlb >= in.MaxLoad:
		return 0, 0, false // Irregular: nothing fails up to Max Load
	case rub != 0 && rub <= in.MinLoad:
		return 0, 0, false // Irregular: Min Load fails
	}
	// An Undecided load between the bounds: measure it again, so that it
	// is classified on its own trials rather than one lucky or unlucky one.
	for _, l := range d.loads {
		if l > rlb && (rub == 0 || l < rub) && len(d.trials[l]) > 0 && t.Classify(d.trials[l]) == Undecided {
			return l, dur, true
		}
	}
	switch {
	case rub == 0 && rlb == 0:
		return in.MaxLoad, dur, true
	case rub == 0: // extend up, step doubling with each Lower Bound found
		return min(in.MaxLoad, rlb/(1-d.step(t, LowerBound))), dur, true
	case rlb == 0: // extend down, towards what the Upper Bound forwarded
		l := rub * (1 - d.step(t, UpperBound))
		if fr := d.forwarded(rub) / (1 - t.LossRatio); fr < l {
			l = fr
		}
		return max(in.MinLoad, l), dur, true
	}
	// Bisect; near the width, aim just inside it from below, so that a
	// Lower Bound there ends the target.
	l := (rub + rlb) / 2
	if edge := rub * (1 - t.Width*0.999); edge < l {
		l = edge
	}
	return l, dur, true
}

// step is the relative step outward: the width, doubled for each load
// already classified as b, up to a half.
func (d *db15) step(t target, b Bound) float64 {
	s := t.Width
	for _, l := range d.loads {
		if t.Classify(d.trials[l]) == b {
			s = min(2*s, 0.5)
		}
	}
	return s
}

// forwarded is the lowest forwarding rate of the trials at load.
func (d *db15) forwarded(load float64) float64 {
	fr := load
	for _, t := range d.trials[load] {
		fr = min(fr, float64(t.Received)/t.Duration.Seconds())
	}
	return fr
}

// MLR15 is the Multiple Loss Ratio search of draft-ietf-bmwg-mlrsearch-15.
// Each goal is reached through its preceding targets, then its own: a
// target is done when its Relevant Upper and Lower Bounds are within its
// width, or Max Load is a Lower Bound, or Min Load an Upper Bound. Until
// then it asks, in this order, for another trial at an Undecided load
// between its bounds (the repeated trials the Goal Exceed Ratio judges), a
// trial at Max Load, a step outward from the one bound it has, or a load
// between the two. Every trial counts for every goal.
func MLR15(ctx context.Context, m Measurer, in ControllerInput) (*Outcome, error) {
	if len(in.Goals) == 0 {
		return nil, errors.New("search: no Search Goal")
	}
	if !(in.MinLoad > 0) || !(in.MaxLoad >= in.MinLoad) || math.IsInf(in.MaxLoad, 0) {
		return nil, fmt.Errorf("search: loads must satisfy 0 < Min Load (%g) ≤ Max Load (%g)", in.MinLoad, in.MaxLoad)
	}
	for i, g := range in.Goals {
		if err := g.Check(); err != nil {
			return nil, fmt.Errorf("search: goal %d (%s): %w", i+1, g.Name, err)
		}
	}
	n := in.PrecedingTargets
	switch {
	case n == 0:
		n = CSITPrecedingTargets
	case n < 0:
		n = 0
	}
	if in.MaxTrials <= 0 {
		in.MaxTrials = 2000
	}
	out := &Outcome{Algorithm: "mlrsearch-15"}
	d := &db15{in: &in, m: m, out: out, trials: map[float64][]Trial{}}
	var chains [][]target
	for _, g := range in.Goals {
		chains = append(chains, in.targets(g, n))
	}
	limited := false
search:
	for {
		for _, ts := range chains {
			for _, t := range ts {
				if l, dur, ok := d.next(t); ok {
					if len(out.Trials) >= in.MaxTrials {
						limited = true
						break search
					}
					l = min(max(l, in.MinLoad), in.MaxLoad)
					if err := d.measure(ctx, t.phase, l, dur); err != nil {
						return out, err
					}
					continue search
				}
			}
		}
		break
	}
	for _, ts := range chains {
		out.Results = append(out.Results, d.result(ts[len(ts)-1].SearchGoal, limited))
	}
	return out, nil
}

func (d *db15) result(g SearchGoal, limited bool) Result {
	rub, rlb, above := d.relevant(g)
	gr := GoalResult{Goal: g, RelevantUpperBound: rub, RelevantLowerBound: rlb, LowerAboveUpper: above}
	switch {
	case limited:
		gr.Reason = fmt.Sprintf("the search stopped at %d trials", d.in.MaxTrials)
	case rub == 0 && rlb >= d.in.MaxLoad:
		gr.Reason = "Max Load is a Lower Bound: no Upper Bound"
	case rub == 0:
		gr.Reason = "no Upper Bound"
	case rub <= d.in.MinLoad:
		gr.Reason = "Min Load is an Upper Bound: no Lower Bound"
	case rlb == 0:
		gr.Reason = "no Lower Bound"
	case (rub-rlb)/rub > g.Width*(1+1e-9):
		gr.Reason = fmt.Sprintf("the bounds are %.4g apart, wider than the Goal Width %g", (rub-rlb)/rub, g.Width)
	default:
		gr.Regular = true
	}
	gr.UpperTrials = slices.Clone(d.trials[rub])
	gr.LowerTrials = slices.Clone(d.trials[rlb])
	if rlb != 0 {
		gr.ConditionalThroughput = g.ConditionalThroughput(rlb, d.trials[rlb])
	}
	// The draft-01 view of the same result, for the report's columns.
	r := Result{LossRatio: g.LossRatio, Lower: d.in.MinLoad, Upper: d.in.MaxLoad, Goal: &gr}
	if rlb != 0 {
		t := best(gr.LowerTrials)
		r.Lower, r.LowerFound, r.LowerTrial = rlb, true, &t
	}
	if rub != 0 {
		t := best(gr.UpperTrials)
		r.Upper, r.UpperFound, r.UpperTrial = rub, true, &t
	}
	return r
}

// best is the longest of ts, the last one of that length.
func best(ts []Trial) Trial {
	var b Trial
	for _, t := range ts {
		if t.Duration >= b.Duration {
			b = t
		}
	}
	return b
}
