package tester

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/linerate/linerate/tester/search"
)

// kppsReport is a run of a 20 kpps device: two frame sizes, a search each,
// a trial the tester fell short in, and latency at three shares.
func kppsReport() *Report {
	rep := &Report{}
	for _, size := range []int{64, 1518} {
		sr := SearchReport{Algorithm: "mlrsearch", Results: []search.Result{{LossRatio: 0, Lower: 9000}, {LossRatio: 0.005, Lower: 12000}}}
		for i, rate := range []float64{20000, 10000, 15000, 12000} {
			tr := &Trial{Trial: search.Trial{Rate: rate, Duration: time.Second, Sent: uint64(rate), Received: uint64(rate * 0.99)}}
			if i == 0 {
				tr.Sent, tr.Unsent, tr.TesterShort = 16000, 4000, 4000
			}
			sr.Trials = append(sr.Trials, tr)
		}
		s := SizeReport{Size: size, Name: SizeName(size), Searches: []SearchReport{sr}}
		for _, share := range []float64{0.1, 0.5, 0.9} {
			s.Latency = append(s.Latency, LatencyPoint{Share: share, Trial: &Trial{Latency: &Histogram{Count: 1, Buckets: []Bucket{{Lo: 1000, Hi: 2000, Count: 1}}}}})
		}
		rep.Sizes = append(rep.Sizes, s)
	}
	return rep
}

// TestPlotRateUnit: a kpps run is plotted in kpps (it was Mpps in the
// throughput plot), on both the throughput and the loss plot.
func TestPlotRateUnit(t *testing.T) {
	rep := kppsReport()
	tp, err := rep.throughputPlot()
	if err != nil {
		t.Fatal(err)
	}
	if tp.Y.Label.Text != "kpps" {
		t.Errorf("throughput axis %q for a 12 kpps throughput, want kpps", tp.Y.Label.Text)
	}
	lp, err := rep.lossPlot()
	if err != nil {
		t.Fatal(err)
	}
	if lp.X.Label.Text != "offered load (kpps)" {
		t.Errorf("loss axis %q for 20 kpps trials, want offered load (kpps)", lp.X.Label.Text)
	}
	for _, c := range []struct {
		max  float64
		unit string
	}{{500, "pps"}, {999, "pps"}, {1e3, "kpps"}, {14.88e6, "Mpps"}, {2e9, "Gpps"}} {
		if u, _ := rateUnit(c.max); u != c.unit {
			t.Errorf("rateUnit(%g) = %s, want %s", c.max, u, c.unit)
		}
	}
}

// TestLossPlotShortAndTargets: the loss plot has the tester's shortfall in
// its own legend entry and a line per target loss ratio.
func TestLossPlotShortAndTargets(t *testing.T) {
	dir := t.TempDir()
	if _, err := kppsReport().WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	svg, err := os.ReadFile(filepath.Join(dir, "loss.svg"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"tester short of its load", "target: NDR (0%)", "target: PDR 0.5% (0.5%)", "64 mlrsearch (DUT loss)"} {
		if !strings.Contains(string(svg), want) {
			t.Errorf("loss plot lacks %q in its legend", want)
		}
	}
}
