package tester

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/linerate/linerate/tester/search"
)

// Report is a whole test: per frame size, what each search found, the
// latency at shares of the PDR, and every trial.
type Report struct {
	Profile   string    `json:"profile"`
	Started   time.Time `json:"started"`
	Algorithm string    `json:"algorithm,omitempty"`
	// Algorithms are the searches run on each frame size, in order.
	Algorithms []string `json:"algorithms"`
	// Draft names the MLRsearch specification the search follows.
	Draft      string        `json:"mlrsearch_draft"`
	Precision  float64       `json:"precision"`
	Final      time.Duration `json:"final_duration_ns"`
	Drain      time.Duration `json:"drain_ns"`
	Streams    []string      `json:"streams"`
	Timestamps string        `json:"timestamps"`
	Sizes      []SizeReport  `json:"frame_sizes"`
	Elapsed    time.Duration `json:"elapsed_ns"`
	// Incomplete: the run was stopped (Ctrl-C) before its end, Stopped
	// says why; what it found so far is all there is, the search's results
	// read from its final-duration trials so far.
	Incomplete bool   `json:"incomplete,omitempty"`
	Stopped    string `json:"stopped,omitempty"`
	// MaxLoadFrom is the calibration file that capped the Max Load.
	MaxLoadFrom string `json:"max_load_from,omitempty"`
	// Tester sums up every trial's retries and shortfall.
	Tester TesterSummary `json:"tester"`
}

// Draft is the MLRsearch draft the search implements.
const Draft = "draft-ietf-bmwg-mlrsearch-01"

// SizeReport is one frame size's results.
type SizeReport struct {
	Size int    `json:"frame_size"` // IMIXSize for the IMIX
	Name string `json:"name"`
	// LineRate is the tx ports' line rate for this size, packets per second,
	// all streams together; MaxRate the search's maximum.
	LineRate float64 `json:"line_rate_pps"`
	MaxRate  float64 `json:"max_rate_pps"`
	// CalibratedMax is the tester's calibrated maximum (max_load_from) when
	// it capped MaxRate: a result whose Relevant Lower Bound reached it is
	// tester-limited there.
	CalibratedMax float64 `json:"calibrated_max_pps,omitempty"`
	// Searches are one per algorithm run (MLRsearch, binary, or both).
	Searches []SearchReport `json:"searches"`
	Latency  []LatencyPoint `json:"latency"`
	Warmup   *Trial         `json:"warmup,omitempty"`
}

// SearchReport is one search's results and trials.
type SearchReport struct {
	Algorithm string `json:"algorithm"`
	// Draft is the MLRsearch draft the search follows, "" for binary.
	Draft   string          `json:"mlrsearch_draft,omitempty"`
	Results []search.Result `json:"results"`
	Trials  []*Trial        `json:"trials"`
	// TrialTime is the trials' durations summed; Wall the search's time.
	TrialTime time.Duration `json:"trial_time_ns"`
	Wall      time.Duration `json:"wall_ns"`
	// Irregular are the results the tester's own shortfall shaped.
	Irregular []Irregular `json:"irregular,omitempty"`
}

// Irregular marks a result the tester shaped: a trial at or below its upper
// bound failed with the tester short of its load, so the DUT's throughput
// may be higher than found. Rate is the most the tester sent in those.
type Irregular struct {
	LossRatio float64 `json:"loss_ratio"`
	Rate      float64 `json:"tester_limited_pps"`
	Note      string  `json:"note"`
}

// Limited is the mark of the result at ratio, nil when the tester did not
// shape it.
func (sr *SearchReport) Limited(ratio float64) *Irregular {
	for i := range sr.Irregular {
		if sr.Irregular[i].LossRatio == ratio {
			return &sr.Irregular[i]
		}
	}
	return nil
}

// LimitedAt is the tester-limited mark's load of result r, 0 when the tester
// did not shape it: its goal's, or for a result without one, the mark at its
// loss ratio.
func (sr *SearchReport) LimitedAt(r search.Result) float64 {
	if r.Goal != nil {
		return r.Goal.TesterLimited
	}
	if l := sr.Limited(r.LossRatio); l != nil {
		return l.Rate
	}
	return 0
}

// markLimited finds the results the tester shaped: those that failing
// trials it fell short in shaped (at or below the result's upper bound),
// and, when calibrated is the tester's calibrated maximum that capped the
// Max Load, those whose lower bound reached it (the DUT kept up with all the
// tester can send). Each is marked in Irregular and in its goal result,
// which becomes Irregular with the reason.
func (sr *SearchReport) markLimited(calibrated float64) {
	for i, res := range sr.Results {
		var most float64
		for _, t := range sr.Trials {
			if t.TesterShort == 0 || t.LossRatio() <= res.LossRatio || t.Rate > res.Upper*(1+1e-9) {
				continue
			}
			most = max(most, t.SentRate())
		}
		note := ""
		switch {
		case most > 0:
			note = fmt.Sprintf("tester-limited at %.0f pps: the tester could not send the load asked for, and its shortfall counted as loss", most)
		case calibrated > 0 && !res.UpperFound && res.LowerFound && res.Lower >= calibrated*(1-1e-9):
			most = calibrated
			note = fmt.Sprintf("tester-limited at %.0f pps: the DUT kept up with the most the tester sustains "+
				"(its calibrated Max Load); it may do more", most)
		default:
			continue
		}
		sr.Irregular = append(sr.Irregular, Irregular{LossRatio: res.LossRatio, Rate: most, Note: note})
		if g := res.Goal; g != nil {
			gr := *g
			gr.TesterLimited, gr.Regular = most, false
			why := fmt.Sprintf("tester-limited at %.0f pps", most)
			if gr.Reason != "" {
				why += "; " + gr.Reason
			}
			gr.Reason = why
			sr.Results[i].Goal = &gr
		}
	}
}

// LatencyPoint is a latency trial at a share of the PDR.
type LatencyPoint struct {
	Share float64 `json:"share_of_pdr"`
	Trial *Trial  `json:"trial"`
	// Directions are the latency of each stream (a direction of a
	// bidirectional test) apart; the trial's latency merges them. Their
	// buckets are in the trial's streams.
	Directions []DirectionLatency `json:"directions"`
}

// DirectionLatency is one stream's latency in a latency trial.
type DirectionLatency struct {
	Stream  string     `json:"stream"`
	Tx      string     `json:"tx"`
	Rx      string     `json:"rx"`
	Latency *Histogram `json:"latency"` // nil when nothing came back
}

// directions are tr's streams' latency, without their buckets.
func directions(streams []Stream, tr *Trial) []DirectionLatency {
	var out []DirectionLatency
	for i, st := range tr.Streams {
		d := DirectionLatency{Stream: st.Name}
		if i < len(streams) {
			d.Tx, d.Rx = streams[i].Tx, streams[i].Rx
		}
		if st.Latency != nil {
			h := *st.Latency
			h.Buckets = nil
			d.Latency = &h
		}
		out = append(out, d)
	}
	return out
}

// Progress is what Run says while it runs, for a live line.
type Progress struct {
	Size   int
	Phase  string
	Trial  int // trials so far in this search
	Rate   float64
	Last   *Trial // the last trial, nil before the first
	Search string
}

// Run runs the profile's test: for each frame size, learning frames, the
// search(es), then the latency trials at shares of the first search's PDR
// (its highest loss ratio).
func (r *Runner) Run(ctx context.Context, progress func(Progress)) (*Report, error) {
	t := &r.Profile.Test
	start := time.Now()
	algs := t.Searches()
	rep := &Report{Profile: r.Profile.Path, Started: start, Algorithm: t.Algorithm, Algorithms: algs, Draft: draft(algs[0]),
		Precision: t.Precision, Final: time.Duration(t.FinalDuration), Drain: time.Duration(t.Drain), Timestamps: TimestampNote,
		MaxLoadFrom: t.MaxLoadFrom}
	if rep.Draft == "" {
		rep.Draft = Draft
	}
	defer func() { rep.Tester = summarize(rep) }()
	for _, s := range t.Streams {
		rep.Streams = append(rep.Streams, s.Name)
	}
	// stopped keeps what a cancelled run found so far.
	stopped := func(sr SizeReport, err error) (*Report, error) {
		if ctx.Err() != nil {
			rep.Sizes = append(rep.Sizes, sr)
			rep.Incomplete, rep.Stopped, rep.Elapsed = true, err.Error(), time.Since(start)
		}
		return rep, err
	}
	say := func(p Progress) {
		if progress != nil {
			progress(p)
		}
	}
	for _, size := range t.Sizes() {
		sr := SizeReport{Size: size, Name: SizeName(size), LineRate: r.lineRate(size)}
		sr.MaxRate = sr.LineRate
		if t.MaxRate != 0 {
			sr.MaxRate = float64(t.MaxRate)
		}
		if c := r.Profile.calibration; c != nil {
			if cm, ok := c.MaxLoad(size); ok && cm < sr.MaxRate {
				sr.MaxRate, sr.CalibratedMax = cm, cm
			}
		}
		minRate := float64(t.MinRate)
		if minRate == 0 || minRate > sr.MaxRate {
			minRate = sr.MaxRate / 100
		}
		if t.Warmup > 0 {
			say(Progress{Size: size, Phase: "warm-up", Rate: float64(t.WarmupRate)})
			w, err := r.Measure(ctx, size, float64(t.WarmupRate), time.Duration(t.Warmup))
			if err != nil {
				return stopped(sr, fmt.Errorf("frame size %s: warm-up: %w", sr.Name, err))
			}
			w.Phase = "warm-up"
			sr.Warmup = w
		}
		for _, alg := range algs {
			srep := SearchReport{Algorithm: alg, Draft: draft(alg)}
			began := time.Now()
			m := search.MeasureFunc(func(ctx context.Context, rate float64, d time.Duration) (search.Trial, error) {
				say(Progress{Size: size, Search: alg, Trial: len(srep.Trials) + 1, Rate: rate, Last: last(srep.Trials)})
				tr, err := r.Measure(ctx, size, rate, d)
				if err != nil {
					return search.Trial{}, err
				}
				srep.Trials = append(srep.Trials, tr)
				return tr.Trial, nil
			})
			p := search.Params{MinRate: minRate, MaxRate: sr.MaxRate, LossRatios: t.LossRatios,
				FinalDuration: time.Duration(t.FinalDuration), Precision: t.Precision,
				InitialDuration: time.Duration(t.InitialDuration), Phases: t.Phases,
				OnTrial: func(phase string, _ search.Trial) { srep.Trials[len(srep.Trials)-1].Phase = phase }}
			var o *search.Outcome
			var err error
			switch alg {
			case "binary":
				o, err = search.Binary(ctx, m, p)
			case "mlrsearch-15":
				o, err = search.MLR15(ctx, m, search.ControllerInput{Goals: t.SearchGoals(),
					MinLoad: minRate, MaxLoad: sr.MaxRate, OnTrial: p.OnTrial})
			default:
				o, err = search.MLR(ctx, m, p)
			}
			if err != nil {
				if ctx.Err() != nil {
					srep.Results, srep.Wall = partialResults(srep.Trials, p), time.Since(began)
					for _, t := range srep.Trials {
						srep.TrialTime += t.Duration
					}
					if !r.calibrating {
						srep.markLimited(sr.CalibratedMax)
					}
					sr.Searches = append(sr.Searches, srep)
				}
				return stopped(sr, fmt.Errorf("frame size %s: %s: %w", sr.Name, alg, err))
			}
			srep.Results, srep.TrialTime, srep.Wall = o.Results, o.TrialTime, time.Since(began)
			if !r.calibrating {
				srep.markLimited(sr.CalibratedMax)
			}
			sr.Searches = append(sr.Searches, srep)
		}
		res := sr.Searches[0].Results
		pdr := res[len(res)-1] // the last goal's
		d := time.Duration(t.LatencyDuration)
		if d == 0 {
			d = time.Duration(t.FinalDuration)
		}
		for _, share := range t.Latency {
			rate := share * pdr.Lower
			say(Progress{Size: size, Phase: fmt.Sprintf("latency %.0f%%", 100*share), Rate: rate})
			tr, err := r.Measure(ctx, size, rate, d)
			if err != nil {
				return stopped(sr, fmt.Errorf("frame size %s: latency at %g of the PDR: %w", sr.Name, share, err))
			}
			tr.Phase = fmt.Sprintf("latency %g", share)
			sr.Latency = append(sr.Latency, LatencyPoint{Share: share, Trial: tr, Directions: directions(t.Streams, tr)})
		}
		rep.Sizes = append(rep.Sizes, sr)
	}
	rep.Elapsed = time.Since(start)
	return rep, nil
}

// partialResults are a stopped search's results from its final-duration
// trials so far: per loss ratio, the lowest failing load and the highest
// passing one below it.
func partialResults(ts []*Trial, p search.Params) []search.Result {
	var out []search.Result
	for _, ratio := range p.LossRatios {
		r := search.Result{LossRatio: ratio, Lower: p.MinRate, Upper: p.MaxRate}
		for _, t := range ts {
			if t.Duration >= p.FinalDuration && t.LossRatio() > ratio && (!r.UpperFound || t.Rate < r.Upper) {
				tt := t.Trial
				r.Upper, r.UpperFound, r.UpperTrial = t.Rate, true, &tt
			}
		}
		for _, t := range ts {
			if t.Duration >= p.FinalDuration && t.LossRatio() <= ratio && (!r.UpperFound || t.Rate < r.Upper) &&
				(!r.LowerFound || t.Rate > r.Lower) {
				tt := t.Trial
				r.Lower, r.LowerFound, r.LowerTrial = t.Rate, true, &tt
			}
		}
		out = append(out, r)
	}
	return out
}

// draft is the MLRsearch draft the search alg follows, "" for binary.
func draft(alg string) string {
	switch alg {
	case "mlrsearch-15":
		return search.Draft15
	case "mlrsearch":
		return Draft
	}
	return ""
}

func last(ts []*Trial) *Trial {
	if len(ts) == 0 {
		return nil
	}
	return ts[len(ts)-1]
}

// TimestampNote says where the latency's timestamps come from, and their
// uncertainty.
const TimestampNote = "tx: the generator's engine clock (CLOCK_MONOTONIC) when it made the packet, " +
	"before the tx port took it (the tx ring and the kernel's send path come after, so latency " +
	"includes them); rx: the rx port's stamp (afpacket: the kernel's software stamp as the frame " +
	"entered the stack, or the NIC's; dpdk and others: the engine's clock at the poll), on the same clock"

// lineRate is the streams' line rate for size: each tx port's bit rate over
// the frame's bytes on the wire.
func (r *Runner) lineRate(size int) float64 {
	var pps float64
	for _, s := range r.Profile.Test.Streams {
		bps := float64(r.Profile.Test.LinkSpeed)
		if bps == 0 {
			bps = r.portSpeed(s.Tx)
		}
		pps += bps / (8 * wireBytes(size))
	}
	return pps
}

// portSpeed is the tx port's interface speed where the kernel knows it
// (/sys/class/net/IF/speed), else 10 Gbit/s.
func (r *Runner) portSpeed(port string) float64 {
	const fallback = 10e9
	for _, p := range r.Profile.file.Ports {
		if p.Name != port {
			continue
		}
		var keys map[string]any
		_ = p.Table.Decode(&keys)
		ifname, _ := keys["interface"].(string)
		if ifname == "" {
			return fallback
		}
		// /sys shows the namespace that mounted it: a port in another one
		// gets the fallback.
		b, err := os.ReadFile("/sys/class/net/" + ifname + "/speed")
		if mbit, perr := strconv.ParseFloat(strings.TrimSpace(string(b)), 64); err == nil && perr == nil && mbit > 0 {
			return mbit * 1e6
		}
	}
	return fallback
}
