package appliance_test

import (
	"testing"
	"time"

	"github.com/linerate/linerate/appliance"
	"github.com/linerate/linerate/appliance/clock"
	"github.com/linerate/linerate/appliance/stats"
	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/internal/enginetest"
)

// TestLabDelayFloors runs the whole embedded lab on a clock that moves on at
// every reading, now and then by 900 µs as when the lcore is preempted: no
// delay measured from a time some stage wrote into a packet (the generator's
// and the sinks' latency, IOAM's hop and end-to-end delays, STAMP's) falls
// below what the links on its path allow. A stage that stamps a packet with
// one clock reading while a link after it delays the packet from another,
// earlier one shortens the delay by the time between the two.
func TestLabDelayFloors(t *testing.T) {
	cfg, err := config.LoadLab()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Control.Listen = ""
	const us = time.Microsecond
	// A reading in 97 jumps: the jumps fall at every place in the loop in turn.
	steps := make([]time.Duration, 97)
	for i := range steps {
		steps[i] = us
	}
	steps[96] = 900 * us
	clk := clock.NewTicking(1_700_000_000_000_000_000, steps...)
	e := enginetest.Build(t, cfg, appliance.Options{Manual: true, Clock: clk})
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	enginetest.Run(e, &clk.Sim, 3*time.Second, 10*us)
	e.Stop()
	hists := map[string]*stats.HistSnapshot{}
	for _, h := range e.Snapshot().Histogram {
		k := h.Owner + " " + h.Name
		if hists[k] == nil {
			hists[k] = stats.NewHistSnapshot()
		}
		hists[k].Add(h.Hist)
	}
	for _, f := range []struct {
		hist  string
		floor time.Duration
	}{
		// The source's link: 1 ms ± 100 µs.
		{"lab/sink latency", 900 * us},
		{"lab/ioam-decap e2e_delay", 900 * us},
		{"lab/ioam-decap hop2_delay", 900 * us}, // transit a, the link, transit b
		// RLNC's two hops: 500 µs each.
		{"rlnc-dest/rlnc-sink latency", 1000 * us},
		// STAMP: 2 ms ± 200 µs forward, 5 ms ± 500 µs back.
		{"stamp-sender/stamp-collector forward_delay", 1800 * us},
		{"stamp-sender/stamp-collector backward_delay", 4500 * us},
		{"stamp-sender/stamp-collector rtt", 6300 * us},
	} {
		h := hists[f.hist]
		if h == nil || h.Count < 100 {
			t.Errorf("%s: %v", f.hist, h)
			continue
		}
		t.Logf("%s: min %v over %d (floor %v)", f.hist, time.Duration(h.Min), h.Count, f.floor)
		if time.Duration(h.Min) < f.floor {
			t.Errorf("%s: min %v is below the path's floor %v", f.hist, time.Duration(h.Min), f.floor)
		}
	}
}
