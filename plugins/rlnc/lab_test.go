package rlnc_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/linerate/linerate/appliance"
	_ "github.com/linerate/linerate/appliance/all"
	"github.com/linerate/linerate/appliance/clock"
	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/internal/enginetest"
)

// TestLabPath runs the embedded lab in virtual time and checks its RLNC path:
// generator → encoder → 10% loss → recoder → 10% loss → decoder → sink
// delivers the generated packets, in order, with every buffer returned.
func TestLabPath(t *testing.T) {
	cfg, err := config.LoadLab()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Control.Listen = ""
	sim := clock.NewSim(1_700_000_000_000_000_000)
	e := enginetest.Build(t, cfg, appliance.Options{Manual: true, Clock: sim})
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	const dt = 20 * time.Microsecond
	enginetest.Run(e, sim, 300*time.Millisecond, dt)
	// Let the last generations flush and drain.
	sim.Advance(10 * time.Millisecond)
	enginetest.Run(e, sim, 2000*dt, dt)
	e.Stop()
	s := e.Snapshot()
	sent := enginetest.Counter(s, "rlnc-generator", "sent")
	blocks := enginetest.Counter(s, "rlnc-encoder", "source_blocks")
	recv := enginetest.Counter(s, "rlnc-sink", "received")
	gaps := enginetest.Counter(s, "rlnc-sink", "lost")
	decoded := enginetest.Counter(s, "rlnc-decoder", "generations_decoded")
	lost1 := enginetest.Counter(s, "link#0", "lost") // the two hops' links
	t.Logf("generated %d, taken as blocks %d, delivered %d (gaps %d), generations decoded %d, lost on the hops %d",
		sent, blocks, recv, gaps, decoded, lost1)
	if sent < 5000 || blocks != sent {
		t.Fatalf("generator sent %d, encoder took %d", sent, blocks)
	}
	if lost1 < sent/10 {
		t.Errorf("the hops lost only %d of ≥ %d coded packets: the path is not lossy", lost1, 2*sent)
	}
	// 24 coded packets per 16 over two 10% hops: nearly every generation
	// decodes. The generator runs to the end, so the last ones are still
	// on their way when the engine stops: up to 0.8 ms filling a generation
	// at 20 kpps, then on each hop ~0.3 ms of 1 Gbit/s wire and 0.5 ms of
	// delay. That is under 3 ms, 60 packets; 4 generations are allowed.
	if recv+4*16 < sent {
		t.Errorf("delivered %d of %d", recv, sent)
	}
	if recv > sent {
		t.Errorf("delivered %d, more than the %d generated", recv, sent)
	}
	if reordered := enginetest.Counter(s, "rlnc-sink", "reordered"); reordered != 0 {
		t.Errorf("%d reordered", reordered)
	}
	if err := e.Close(); err != nil {
		t.Errorf("close: %v (every buffer must come back)", err)
	}
}

// TestValidateMTU: `linerate validate` (a dry-run engine) refuses a coded
// packet that does not fit its link, naming the file, line, stage and the
// largest N that would fit.
func TestValidateMTU(t *testing.T) {
	lab := string(config.Lab())
	bad := strings.Replace(lab, "block = 1400                   # N:", "block = 1440                   # N:", 1)
	if bad == lab {
		t.Fatal("the lab's encoder block line moved; update the test")
	}
	cfg, err := config.Parse("lab-bad.toml", []byte(bad))
	if err != nil {
		t.Fatal(err)
	}
	_, err = appliance.New(cfg, appliance.Options{DryRun: true, Log: slog.New(slog.DiscardHandler)})
	if err == nil {
		t.Fatal("a 1508-byte coded packet on a 1500 MTU link passed validation")
	}
	for _, want := range []string{"lab-bad.toml:", "rlnc-encoder", "MTU", "1432", "rl0"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	cfg, _ = config.LoadLab()
	if _, err := appliance.New(cfg, appliance.Options{DryRun: true, Log: slog.New(slog.DiscardHandler)}); err != nil {
		t.Errorf("the lab does not validate: %v", err)
	}
}

// TestTwoLcores: the coding chain on two lcores. Sessions belong to one lcore
// each; packets that arrive on the other are handed over, and every session
// still decodes whole and in order.
func TestTwoLcores(t *testing.T) {
	const toml = `version = 1
[engine]
pin = false
[control]
listen = ""
[[ports]]
name = "a"
driver = "mem"
peer = "b"
[[ports]]
name = "b"
driver = "mem"
peer = "a"
[[pipelines]]
name = "gen"
lcores = [0]
[[pipelines.stages]]
kind = "generator"
flows = 8
src = "2001:db8:1::1"
dst = "2001:db8:2::1"
sizes = [300]
count = 1600
rate = "1Mpps"
[[pipelines.stages]]
kind = "forward"
port = "a"
[[pipelines]]
name = "code"
lcores = [0, 1]
rx = ["b"]
[[pipelines.stages]]
kind = "rlnc.encoder"
name = "enc"
k = 4
block = 300
repair_ratio = 0.25
flush = "1ms"
memory = "1MiB"
pool_buffers = 1024
[[pipelines.stages]]
kind = "rlnc.recoder"
name = "rec"
memory = "1MiB"
pool_buffers = 1024
[[pipelines.stages]]
kind = "rlnc.decoder"
name = "dec"
memory = "1MiB"
pool_buffers = 1024
[[pipelines.stages]]
kind = "sink"
name = "sink"
`
	sim := clock.NewSim(1_700_000_000_000_000_000)
	e := enginetest.Start(t, toml, appliance.Options{Manual: true, Clock: sim})
	enginetest.Run(e, sim, 6*time.Millisecond, 2*time.Microsecond)
	e.Stop()
	s := e.Snapshot()
	recv := enginetest.Counter(s, "sink", "received")
	gaps := enginetest.Counter(s, "sink", "lost")
	reordered := enginetest.Counter(s, "sink", "reordered")
	perLcore := map[int]uint64{}
	for _, st := range s.Stages {
		if st.Name == "dec" {
			for _, c := range st.Counters {
				if c.Name == "generations_decoded" {
					perLcore[st.Lcore] += c.Value
				}
			}
		}
	}
	t.Logf("received %d of 1600, gaps %d, reordered %d; generations decoded by lcore %v", recv, gaps, reordered, perLcore)
	if recv != 1600 || gaps != 0 {
		t.Errorf("received %d of 1600 (gaps %d)", recv, gaps)
	}
	if len(perLcore) != 2 || perLcore[0] == 0 || perLcore[1] == 0 {
		t.Errorf("sessions did not spread over both lcores: %v", perLcore)
	}
	if err := e.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
}
