package stamp

import (
	"io"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/linerate/linerate/appliance"
	"github.com/linerate/linerate/appliance/clock"
	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/internal/enginetest"

	_ "github.com/linerate/linerate/plugins/builtin"
)

// The embedded lab's STAMP path, in virtual time: the delays, the jitter and
// the loss the collector reports per direction are the links'.
func TestLabSTAMP(t *testing.T) {
	cfg := labSTAMP(t)
	sim := clock.NewSim(testUnixBase)
	e := enginetest.Build(t, cfg, appliance.Options{Manual: true, Clock: sim})
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	enginetest.Run(e, sim, 20*time.Second, 50*time.Microsecond)
	var reg *Registry
	for _, st := range e.Stages("stamp-sender") {
		reg = st.(*sender).reg
	}
	s := reg.tx.Load().get(1)
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	enginetest.Run(e, sim, 20*time.Millisecond, 50*time.Microsecond)
	m := metricsOf(s)

	// The report goes to stdout when the engine stops.
	r, w, _ := os.Pipe()
	stdout := os.Stdout
	os.Stdout = w
	e.Stop()
	os.Stdout = stdout
	w.Close()
	out, _ := io.ReadAll(r)
	if err := e.Close(); err != nil {
		t.Error(err)
	}
	t.Logf("\n%s", out)
	for _, want := range []string{"STAMP session 1", "round trip", "forward", "backward"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the report has no %q", want)
		}
	}

	within := func(name string, got, want, tol float64) {
		if math.Abs(got-want) > tol*want {
			t.Errorf("%s: %.4g, want %.4g ±%.0f%%", name, got, want, 100*tol)
		}
	}
	// Each mem hop waits up to one step (50 µs) for the next loop.
	within("forward p50 (ms)", float64(m.Forward.P50)/1e6, 2.05, 0.03)
	within("backward p50 (ms)", float64(m.Backward.P50)/1e6, 5.05, 0.03)
	within("round trip p50 (ms)", float64(m.RTT.P50)/1e6, 7.1, 0.03)
	// Uniform jitter ±j: the mean |IPDV| of two independent draws is 2j/3.
	within("forward IPDV (µs)", float64(m.JitterForward.MeanAbs)/1e3, 2*200.0/3, 0.1)
	within("backward IPDV (µs)", float64(m.JitterBack.MeanAbs)/1e3, 2*500.0/3, 0.1)
	// About 20000 packets: 1% forward is 200 ± 14 (1σ), 2% of the rest
	// backward 396 ± 20.
	within("forward loss", float64(m.LostForward)/float64(m.Answered), 0.01, 0.25)
	within("backward loss", float64(m.LostBackward)/float64(m.Answered-uint64(m.LostForward)), 0.02, 0.2)
	if !m.Split || m.Unsynchronized != 0 || m.Duplicates != 0 || m.Reordered != 0 {
		t.Errorf("metrics %+v", m)
	}
}

// labSTAMP is the embedded lab's config with only its STAMP path: the others
// are their plugins' to test.
func labSTAMP(t *testing.T) *config.File {
	t.Helper()
	cfg, err := config.LoadLab()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Control.Listen = ""
	var pls []config.Pipeline
	for _, p := range cfg.Pipelines {
		if strings.HasPrefix(p.Name, "stamp-") {
			pls = append(pls, p)
		}
	}
	if len(pls) != 2 {
		t.Fatalf("the lab has %d STAMP pipelines", len(pls))
	}
	cfg.Pipelines = pls
	return cfg
}

// TestLabSTAMPFloor: no delay the lab's STAMP path measures is below its
// links' floor (forward 2 ms − 200 µs, backward 5 ms − 500 µs, round trip
// the two), however much time passes between the clock readings of one
// loop. The clock moves on at every reading, and now and then by 900 µs, as
// when the lcore's thread is preempted: T1 read after the loop's time, or T3
// after T2, must still be the time the link after it delays the packet from.
func TestLabSTAMPFloor(t *testing.T) {
	cfg := labSTAMP(t)
	const us = time.Microsecond
	clk := clock.NewTicking(testUnixBase, us, us, us, us, us, us, 900*us)
	e := enginetest.Build(t, cfg, appliance.Options{Manual: true, Clock: clk})
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	enginetest.Run(e, &clk.Sim, 4*time.Second, 10*us)
	var reg *Registry
	for _, st := range e.Stages("stamp-sender") {
		reg = st.(*sender).reg
	}
	s := reg.tx.Load().get(1)
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	enginetest.Run(e, &clk.Sim, 20*time.Millisecond, 10*us)
	m := metricsOf(s)
	e.Stop()
	if m.RTT.N < 1000 {
		t.Fatalf("only %d round trips measured", m.RTT.N)
	}
	for _, d := range []struct {
		name       string
		got, floor int64
	}{
		{"forward", m.Forward.Min, int64(1800 * us)},
		{"backward", m.Backward.Min, int64(4500 * us)},
		{"round trip", m.RTT.Min, int64(6300 * us)},
	} {
		t.Logf("%s: min %v (floor %v) over %d", d.name, time.Duration(d.got), time.Duration(d.floor), m.RTT.N)
		if d.got < d.floor {
			t.Errorf("%s delay min %v is below the links' floor %v", d.name, time.Duration(d.got), time.Duration(d.floor))
		}
	}
}
