package tester

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The calibration of a tester whose generator is throttled to 2 kpps on
// purpose (genCap), over a loopback (the mem wire: tg a straight to b): it
// finds at most 2 kpps, whatever the profile's 4 kpps max_rate says, and
// writes it to a file the profile names in max_load_from. A test with that
// profile never asks more than the calibrated load, and every result that
// reached it is marked tester-limited there: the DUT kept up with all the
// tester can send, so the tester's limit is not read as the DUT's. Without
// the calibration the same search asks 4 kpps, and fails there by the
// tester's own shortfall.
func TestCalibrate(t *testing.T) {
	const limit = 2000
	p, err := Parse("calibrate.toml", []byte(lateProfile))
	if err != nil {
		t.Fatal(err)
	}
	r := &Runner{Profile: p, genCap: limit}
	c, rep, err := r.Calibrate(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Sizes) != 1 || c.Sizes[0].Size != 128 || len(c.Streams) != 1 || c.Streams[0] != "east" {
		t.Fatalf("calibration %+v", c)
	}
	cal := c.Sizes[0].MaxLoad
	// The generator cannot send more than its cap: any load above it falls
	// short, which fails a calibration trial. It may run 5 ms past a 200 ms
	// trial, and a shortfall of up to 3 packets is a rounding's, so a load
	// up to 2.5 % and 15 pps over the cap can pass. A busy host may keep it
	// lower.
	if over := limit*(205.0/200) + 3/0.2; cal <= 0 || cal > over {
		t.Errorf("calibrated Max Load %.0f pps for a tester capped at %d pps", cal, limit)
	}
	if s := rep.Sizes[0].Searches[0]; s.Algorithm != "mlrsearch-15" || len(s.Trials) != c.Sizes[0].Trials {
		t.Errorf("calibration search %s with %d trials, calibration says %d", s.Algorithm, len(s.Trials), c.Sizes[0].Trials)
	}
	t.Logf("calibrated Max Load %.0f pps (regular %v %s) in %d trials", cal, c.Sizes[0].Regular, c.Sizes[0].Reason, c.Sizes[0].Trials)

	dir := t.TempDir()
	fh, err := os.Create(filepath.Join(dir, "calibration.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.WriteJSON(fh); err != nil {
		t.Fatal(err)
	}
	fh.Close()
	text := strings.Replace(lateProfile, "[test]\n", "[test]\nmax_load_from = \"calibration.json\"\n", 1)
	p, err = Parse(filepath.Join(dir, "profile.toml"), []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	p.Test.LossRatios = []float64{0}
	rep, err = (&Runner{Profile: p, genCap: limit}).Run(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	s := rep.Sizes[0]
	if s.CalibratedMax != cal || s.MaxRate != cal || rep.MaxLoadFrom != "calibration.json" {
		t.Errorf("max rate %.0f, calibrated max %.0f, from %q: want the calibration's %.0f", s.MaxRate, s.CalibratedMax, rep.MaxLoadFrom, cal)
	}
	for _, tr := range s.Searches[0].Trials {
		if tr.Rate > cal*(1+1e-9) {
			t.Errorf("a trial at %.0f pps, above the calibrated Max Load %.0f", tr.Rate, cal)
		}
	}
	res := s.Searches[0].Results[0]
	lim := s.Searches[0].Limited(0)
	if lim == nil || res.Goal == nil || res.Goal.Regular || res.Goal.TesterLimited != lim.Rate ||
		!strings.HasPrefix(res.Goal.Reason, "tester-limited at ") {
		t.Errorf("NDR %.0f pps (found %v) under a calibrated Max Load of %.0f: mark %+v, goal %+v; want it tester-limited",
			res.Lower, res.LowerFound, cal, lim, res.Goal)
	}

	// Before: no calibration, the search asks more than the tester can send.
	p, err = Parse("uncalibrated.toml", []byte(lateProfile))
	if err != nil {
		t.Fatal(err)
	}
	p.Test.LossRatios = []float64{0}
	rep, err = (&Runner{Profile: p, genCap: limit}).Run(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	above := 0
	for _, tr := range rep.Sizes[0].Searches[0].Trials {
		if tr.Rate > limit {
			above++
		}
	}
	if above == 0 {
		t.Error("without a calibration no trial asked more than the tester sends: the test shows nothing")
	}
}

// max_load_from is checked when the profile is read: a missing file, one
// without the profile's frame sizes or streams, or a load that is not one,
// is an error at its line.
func TestMaxLoadFromChecked(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("other-size.json", `{"streams": ["east"], "frame_sizes": [{"frame_size": 64, "name": "64", "max_load_pps": 1000}]}`)
	write("other-stream.json", `{"streams": ["west"], "frame_sizes": [{"frame_size": 128, "name": "128", "max_load_pps": 1000}]}`)
	write("zero.json", `{"streams": ["east"], "frame_sizes": [{"frame_size": 128, "name": "128", "max_load_pps": 0}]}`)
	write("bad.json", `{"streams": [`)
	write("good.json", `{"streams": ["east"], "frame_sizes": [{"frame_size": 128, "name": "128", "max_load_pps": 1500}]}`)
	for file, want := range map[string]string{
		"missing.json":      "no such file",
		"other-size.json":   "has no frame size 128",
		"other-stream.json": `calibrated streams ["west"]`,
		"zero.json":         "max_load_pps 0 is not a load",
		"bad.json":          "unexpected end of JSON",
		"good.json":         "",
	} {
		text := strings.Replace(lateProfile, "[test]\n", "[test]\nmax_load_from = \""+file+"\"\n", 1)
		p, err := Parse(filepath.Join(dir, "p.toml"), []byte(text))
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v", file, err)
		case want == "" && p.calibration.Sizes[0].MaxLoad != 1500:
			t.Errorf("%s: %+v", file, p.calibration)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "p.toml:21: test.max_load_from")):
			t.Errorf("%s: error %v, want %q at p.toml:21", file, err, want)
		}
	}
}

// FuzzCalibration: any file gives a calibration whose every Max Load is a
// load, or an error; never a panic.
func FuzzCalibration(f *testing.F) {
	f.Add([]byte(`{"streams": ["east"], "frame_sizes": [{"frame_size": 128, "name": "128", "max_load_pps": 1500}]}`))
	f.Add([]byte(`{"frame_sizes": [{"frame_size": 0, "max_load_pps": -1}]}`))
	f.Add([]byte(`{"frame_sizes": [{"max_load_pps": 1e300}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := parseCalibration("fuzz.json", data)
		if err != nil {
			return
		}
		for _, s := range c.Sizes {
			if m, ok := c.MaxLoad(s.Size); !ok || !(m > 0) || m > 1e12 {
				t.Fatalf("frame size %d: max load %g accepted", s.Size, m)
			}
		}
	})
}
