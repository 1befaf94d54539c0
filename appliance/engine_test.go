package appliance_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/linerate/linerate/appliance"
	"github.com/linerate/linerate/appliance/stats"
	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/internal/enginetest"

	_ "github.com/linerate/linerate/appliance/all"
)

// twoPipelines: a generator with a count feeds m0; m1 (its peer) feeds a sink on
// another lcore. The engine must stop by itself when the count is sent and every
// packet has arrived.
func twoPipelines(count int, extra string) string {
	return fmt.Sprintf(`
version = 1
[engine]
pin = false
[control]
listen = ""
[[pools]]
name = "default"
buffers = 8192
[[ports]]
name = "m0"
driver = "mem"
peer = "m1"
[[ports]]
name = "m1"
driver = "mem"
peer = "m0"
[[pipelines]]
name = "source"
lcores = [0]
[[pipelines.stages]]
kind = "generator"
ip_version = 4
src = "192.0.2.1"
dst = "198.51.100.1"
flows = 8
sizes = [64, 128, 1518]
count = %d
%s
[[pipelines.stages]]
kind = "forward"
port = "m0"
swap_mac = true
[[pipelines]]
name = "dest"
lcores = [1]
rx = ["m1"]
[[pipelines.stages]]
kind = "counter"
name = "ingress"
[[pipelines.stages]]
kind = "sink"
name = "sink"
`, count, extra)
}

func TestMillionsThroughEveryBufferBack(t *testing.T) {
	n := 2_000_000
	if testing.Short() {
		n = 200_000
	}
	e := enginetest.Start(t, twoPipelines(n, `rate = "1Mpps"`), appliance.Options{})
	select {
	case <-e.Done():
	case <-time.After(2 * time.Minute):
		e.Stop()
		t.Fatal("the engine did not stop by itself after its finite source was done")
	}
	s := e.Snapshot()
	// Every packet is accounted for: received, or dropped with a reason (a mem
	// ring can fill when the machine is busy, as a NIC's would).
	var dropped uint64
	for _, d := range s.Drops {
		dropped += d.Count
	}
	got := enginetest.Counter(s, "sink", "received")
	if got+dropped != uint64(n) {
		t.Errorf("sink received %d and %d were dropped (%v): want %d in all", got, dropped, s.Drops, n)
	}
	if got == 0 {
		t.Errorf("sink received nothing")
	}
	// Drops after a flow's last received packet leave no gap behind them.
	if lost := enginetest.Counter(s, "sink", "lost"); lost > dropped {
		t.Errorf("sink saw %d sequence gaps, but only %d packets were dropped", lost, dropped)
	}
	for name, used := range e.InUse() {
		if used != 0 {
			t.Errorf("pool %q has %d buffers in use after a drained stop", name, used)
		}
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestStopDrainsHeldPackets stops an engine mid-flight, with packets held by a
// slow link: every buffer must still come back.
func TestStopDrainsHeldPackets(t *testing.T) {
	e := enginetest.New(t, twoPipelines(0, "rate = \"500kpps\"")+`
`, appliance.Options{})
	_ = e
	cfg := twoPipelines(0, `rate = "500kpps"`)
	// Put a link with a long delay between generator and forward.
	cfg = replaceOnce(cfg, `[[pipelines.stages]]
kind = "forward"`, `[[pipelines.stages]]
kind = "link"
delay = "50ms"
[[pipelines.stages]]
kind = "forward"`)
	_ = e.Close()
	e = enginetest.Start(t, cfg, appliance.Options{})
	time.Sleep(200 * time.Millisecond)
	e.Stop()
	for name, used := range e.InUse() {
		if used != 0 {
			t.Errorf("pool %q has %d buffers in use after Stop", name, used)
		}
	}
	s := e.Snapshot()
	if enginetest.Counter(s, "sink", "received") == 0 {
		t.Error("nothing reached the sink")
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
}

func replaceOnce(s, old, new string) string {
	for i := 0; i+len(old) <= len(s); i++ {
		if s[i:i+len(old)] == old {
			return s[:i] + new + s[i+len(old):]
		}
	}
	panic("replaceOnce: not found")
}

// TestSteadyStateAllocatesNothing drives a manual engine (generator → forward →
// mem → sink) and asserts zero allocations per loop once warm.
func TestSteadyStateAllocatesNothing(t *testing.T) {
	e := enginetest.Start(t, twoPipelines(0, ""), appliance.Options{Manual: true})
	for i := 0; i < 1000; i++ {
		e.Step()
	}
	allocs := testing.AllocsPerRun(2000, func() { e.Step() })
	if allocs != 0 {
		t.Errorf("steady state allocates %.2f times per loop, want 0", allocs)
	}
	e.Stop()
	s := e.Snapshot()
	sent := enginetest.Counter(s, "generator#0", "sent")
	// One thread drives both sides: nothing can overflow, nothing may be lost.
	if got := enginetest.Counter(s, "sink", "received"); got == 0 || got != sent || len(s.Drops) != 0 {
		t.Errorf("sink received %d of %d (drops %v)", got, sent, s.Drops)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestLinkLossAndDelayInVirtualTime(t *testing.T) {
	clk := newSimClock()
	cfg := twoPipelines(100_000, `rate = "1Mpps"`)
	cfg = replaceOnce(cfg, `[[pipelines.stages]]
kind = "forward"`, `[[pipelines.stages]]
kind = "link"
delay = "2ms"
jitter = "500us"
loss = 0.1
seed = 7
[[pipelines.stages]]
kind = "forward"`)
	e := enginetest.Start(t, cfg, appliance.Options{Manual: true, Clock: clk})
	for i := 0; i < 200_000; i++ {
		clk.Advance(time.Microsecond)
		e.Step()
	}
	e.Stop()
	s := e.Snapshot()
	got := enginetest.Counter(s, "sink", "received")
	if got < 88_000 || got > 92_000 {
		t.Errorf("received %d of 100000 through a 10%% lossy link", got)
	}
	// Losses after the last packet received leave no gap to see.
	if lost := enginetest.Counter(s, "sink", "lost"); lost+got > 100_000 || lost+got < 99_990 {
		t.Errorf("sink: lost %d + received %d, want 100000 less a few tail losses", lost, got)
	}
	var lat *stats.HistSnapshot
	for _, h := range s.Histogram {
		if h.Name == "latency" {
			lat = h.Hist
		}
	}
	if lat == nil {
		t.Fatal("no latency histogram")
	}
	// Delay 2 ms ± 0.5 ms, in order: the median must sit near 2 ms.
	if p50 := time.Duration(lat.Quantile(0.5)); p50 < 1900*time.Microsecond || p50 > 2200*time.Microsecond {
		t.Errorf("p50 latency %v, want about 2ms", p50)
	}
	if mx := time.Duration(lat.Max); mx > 2600*time.Microsecond {
		t.Errorf("max latency %v beyond delay+jitter", mx)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestBuildErrors: a build error names its place in the file once, and an
// unknown driver or stage kind gets the closest known name.
func TestBuildErrors(t *testing.T) {
	head := "version = 1\n[[ports]]\nname = \"m\"\ndriver = %q\n[[pipelines]]\nname = \"p\"\nlcores = [0]\nrx = [\"m\"]\n" +
		"[[pipelines.stages]]\nkind = %q\n%s"
	for _, c := range []struct{ driver, kind, keys, want string }{
		{"mem", "link", "delay = \"xx\"\n", `test.toml:11: pipelines[0].stages[0].delay: invalid duration "xx"`},
		{"mem", "forwrd", "", `test.toml:9: stage kind "forwrd" is unknown (did you mean "forward"?)`},
		{"nul", "sink", "", `test.toml:2: port "m": unknown driver "nul" (did you mean "null"?); this binary has`},
	} {
		cfg, err := config.Parse("test.toml", []byte(fmt.Sprintf(head, c.driver, c.kind, c.keys)))
		if err != nil {
			t.Fatal(err)
		}
		_, err = appliance.New(cfg, appliance.Options{DryRun: true, Log: enginetest.Quiet})
		if err == nil || !strings.HasPrefix(err.Error(), c.want) || strings.Count(err.Error(), "test.toml") != 1 {
			t.Errorf("%s/%s: got %v\nwant %s…, with the place once", c.driver, c.kind, err, c.want)
		}
	}
}

// A stage's pool "port:NAME" is the pool port NAME receives into; an unknown
// port is an error.
func TestPortPool(t *testing.T) {
	cfg := `version = 1
[engine]
pin = false
[control]
listen = ""
[[pools]]
name = "rx"
buffers = 1024
[[ports]]
name = "m0"
driver = "mem"
peer = "m1"
pool = "rx"
[[ports]]
name = "m1"
driver = "mem"
peer = "m0"
[[pipelines]]
name = "gen"
[[pipelines.stages]]
kind = "generator"
ip_version = 4
src = "198.18.0.1"
dst = "198.18.1.1"
count = 10
pool = "port:%s"
[[pipelines.stages]]
kind = "forward"
port = "m0"
[[pipelines]]
name = "sink"
rx = ["m1"]
[[pipelines.stages]]
kind = "sink"
`
	e := enginetest.Start(t, fmt.Sprintf(cfg, "m0"), appliance.Options{})
	select {
	case <-e.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the generator's 10 packets did not reach the sink")
	}
	if got := enginetest.Counter(e.Snapshot(), "sink#0", "received"); got != 10 {
		t.Errorf("sink received %d, want 10", got)
	}
	c, err := config.Parse("test.toml", []byte(fmt.Sprintf(cfg, "m9")))
	if err != nil {
		t.Fatal(err)
	}
	if e, err := appliance.New(c, appliance.Options{Log: enginetest.Quiet}); err == nil {
		_ = e.Close()
		t.Error("pool port:m9 of no port was accepted")
	} else if !strings.Contains(err.Error(), `no port "m9"`) {
		t.Errorf("error %q does not name the port", err)
	}
}
