package tester

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// Calibration is what `linerate test --calibrate` found: per frame size, the
// highest load the tester itself sustains, with the DUT taken out of the
// path. Draft-15 (section 4.3, the Max Load) has the tester's own limit set
// the Max Load, so that the search never reads it as the DUT's.
//
// The calibration runs the profile's own trials, ports and streams with
// each stream's tx port joined straight to its rx port (a cable, a veth
// pair, or the DUT's ports bridged): the generator, the tx port and its
// kernel or NIC path, the rx ring and the sink are all in it, so a tester
// that falls short of its load, or whose rx ring overflows, fails the
// calibration's trials as it would fail a DUT's. A generator paced into a
// null sink would leave out the ports, where a software tester's limit
// usually is.
type Calibration struct {
	Profile    string    `json:"profile"`
	Calibrated time.Time `json:"calibrated"`
	// Method says how the tester was measured.
	Method string `json:"method"`
	// Streams are the profile's streams: a calibration holds for the same
	// streams (the load is theirs together).
	Streams []string `json:"streams"`
	// Goal is the search goal each frame size's Max Load was found with.
	Goal  string           `json:"goal"`
	Sizes []CalibratedSize `json:"frame_sizes"`
}

// CalibratedSize is one frame size's calibration.
type CalibratedSize struct {
	Size int    `json:"frame_size"` // IMIXSize for the IMIX
	Name string `json:"name"`
	// MaxLoad is the highest load the tester sustained: the calibration
	// goal's Relevant Lower Bound, packets per second, all streams together.
	MaxLoad float64 `json:"max_load_pps"`
	// SearchMax is the most the calibration tried (the line rate or
	// max_rate). When MaxLoad is SearchMax, the tester kept up with all of
	// it (Regular false: Max Load is a Lower Bound).
	SearchMax float64 `json:"search_max_pps"`
	Regular   bool    `json:"regular"`
	Reason    string  `json:"irregular_reason,omitempty"`
	Trials    int     `json:"trials"`
}

// CalibrationMethod is Calibration.Method.
const CalibrationMethod = "loopback: each stream's tx port joined to its rx port, no DUT; " +
	"the profile's generator, ports and sink, every trial as in a test"

// calibrationGoal is the goal the calibration searches with: no loss (on a
// loopback any loss, and any shortfall, is the tester's), over three final
// trials at a load with CSIT's exceed ratio of 0.5, so that one trial a busy
// host spoilt does not lower the tester's figure, but two do.
func calibrationGoal(t *Test) Goal {
	zero, half, width := 0.0, 0.5, t.Precision
	return Goal{Name: "tester", LossRatio: &zero, ExceedRatio: &half, Width: &width,
		FinalTrialDuration: t.FinalDuration, DurationSum: 3 * t.FinalDuration,
		InitialTrialDuration: min(t.InitialDuration, t.FinalDuration)}
}

// Calibrate finds, per frame size of the profile, the highest load the
// tester sustains on a loopback (Calibration says what that is): an
// MLRsearch draft-15 search with calibrationGoal, up to the line rate or
// max_rate, whatever max_load_from says. It returns the calibration and the
// report of its trials.
func (r *Runner) Calibrate(ctx context.Context, progress func(Progress)) (*Calibration, *Report, error) {
	p := *r.Profile
	t := &p.Test
	t.Goals = []Goal{calibrationGoal(t)}
	t.Algorithm, t.Algorithms = "", []string{"mlrsearch-15"}
	t.LossRatios, t.Latency, t.MaxLoadFrom = []float64{0}, nil, ""
	p.calibration = nil
	cr := *r
	cr.Profile, cr.calibrating = &p, true
	rep, err := cr.Run(ctx, progress)
	r.trials = cr.trials
	if err != nil {
		return nil, rep, err
	}
	g := t.SearchGoals()[0]
	c := &Calibration{Profile: r.Profile.Path, Calibrated: time.Now().UTC(), Method: CalibrationMethod,
		Goal: fmt.Sprintf("loss ratio 0, exceed ratio %g, final trial %v, duration sum %v, width %g",
			g.ExceedRatio, g.FinalTrialDuration, g.DurationSum, g.Width)}
	for _, s := range t.Streams {
		c.Streams = append(c.Streams, s.Name)
	}
	var errs []error
	for _, s := range rep.Sizes {
		sr := s.Searches[0]
		gr := sr.Results[0].Goal
		cs := CalibratedSize{Size: s.Size, Name: s.Name, MaxLoad: gr.RelevantLowerBound, SearchMax: s.MaxRate,
			Regular: gr.Regular, Reason: gr.Reason, Trials: len(sr.Trials)}
		if cs.MaxLoad <= 0 {
			errs = append(errs, fmt.Errorf("frame size %s: the tester sustained no load down to %.0f pps: "+
				"is each stream's tx port joined to its rx port?", s.Name, sr.Results[0].Lower))
		}
		c.Sizes = append(c.Sizes, cs)
	}
	return c, rep, errors.Join(errs...)
}

// WriteJSON writes the calibration as a max_load_from file.
func (c *Calibration) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(c)
}

// ReadCalibration reads a file that Calibration.WriteJSON wrote.
func ReadCalibration(path string) (*Calibration, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parseCalibration(path, b)
}

// parseCalibration reads a calibration from b; path names it in errors.
func parseCalibration(path string, b []byte) (*Calibration, error) {
	var c Calibration
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for _, s := range c.Sizes {
		if !(s.MaxLoad > 0) || s.MaxLoad > 1e12 {
			return nil, fmt.Errorf("%s: frame size %s: max_load_pps %g is not a load", path, s.Name, s.MaxLoad)
		}
	}
	return &c, nil
}

// MaxLoad is the calibrated Max Load for size, false when the calibration
// has none.
func (c *Calibration) MaxLoad(size int) (float64, bool) {
	for _, s := range c.Sizes {
		if s.Size == size {
			return s.MaxLoad, true
		}
	}
	return 0, false
}

// loadCalibration reads the profile's max_load_from, relative to the
// profile's directory, and checks that it covers the profile's frame sizes
// and streams.
func (p *Profile) loadCalibration() (*Calibration, error) {
	path := p.Test.MaxLoadFrom
	if !filepath.IsAbs(path) {
		path = filepath.Join(filepath.Dir(p.Path), path)
	}
	c, err := ReadCalibration(path)
	if err != nil {
		return nil, fmt.Errorf("the calibration (linerate test --calibrate): %w", err)
	}
	var streams []string
	for _, s := range p.Test.Streams {
		streams = append(streams, s.Name)
	}
	if !slices.Equal(streams, c.Streams) {
		return nil, fmt.Errorf("%s calibrated streams %q, the profile has %q: calibrate again", path, c.Streams, streams)
	}
	for _, size := range p.Test.Sizes() {
		if _, ok := c.MaxLoad(size); !ok {
			return nil, fmt.Errorf("%s has no frame size %s: calibrate again with the profile's sizes", path, SizeName(size))
		}
	}
	return c, nil
}
