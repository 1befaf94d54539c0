package appliance_test

import (
	"strings"
	"testing"
	"time"

	"github.com/linerate/linerate/appliance"
	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/internal/enginetest"
)

// reloadLab is a generator feeding a link and a sink through a mem link, with
// the link's keys given.
func reloadLab(link string) string {
	return `version = 1
[engine]
pin = false
[control]
listen = ""
[[ports]]
name = "m0"
driver = "mem"
peer = "m1"
[[ports]]
name = "m1"
driver = "mem"
peer = "m0"
[[pipelines]]
name = "gen"
cpus = [0]
[[pipelines.stages]]
kind = "generator"
ip_version = 6
src = "2001:db8::1"
dst = "2001:db8::2"
rate = "1Mpps"
count = 100000
[[pipelines.stages]]
kind = "forward"
port = "m0"
[[pipelines]]
name = "lab"
cpus = [1]
rx = ["m1"]
[[pipelines.stages]]
kind = "link"
name = "wan"
` + link + `
[[pipelines.stages]]
kind = "sink"
name = "sink"
`
}

func parse(t *testing.T, doc string) *config.File {
	t.Helper()
	cfg, err := config.Parse("lab.toml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestReload: a reload changes a link's loss and delay while packets are on
// it, and loses none of them; what a running engine cannot change is refused
// by name, and nothing of the refused file is applied.
func TestReload(t *testing.T) {
	clk := newSimClock()
	e := enginetest.Start(t, reloadLab(`delay = "1ms"`), appliance.Options{Manual: true, Clock: clk})
	run := func(d time.Duration) { enginetest.Run(e, clk, d, 10*time.Microsecond) }
	run(50 * time.Millisecond)
	s := e.Snapshot()
	if lost := enginetest.Counter(s, "wan", "lost"); lost != 0 {
		t.Fatalf("lost %d before the reload", lost)
	}
	held := enginetest.Counter(s, "generator#0", "sent") // compared below, once drained

	// The same link with 50% loss, a longer delay and jitter (the delay
	// line changes kind, with packets on it).
	if _, err := e.Reload(parse(t, reloadLab(`delay = "2ms"`+"\njitter = \"500us\"\nloss = 0.5"))); err != nil {
		t.Fatalf("reload: %v", err)
	}
	run(40 * time.Millisecond)
	s = e.Snapshot()
	lost := enginetest.Counter(s, "wan", "lost")
	if lost == 0 {
		t.Fatal("the link lost nothing after the reload to loss = 0.5")
	}

	for _, c := range []struct{ doc, want string }{
		{strings.Replace(reloadLab(`delay = "1ms"`), `port = "m0"`, `port = "m1"`, 1),
			`lab.toml:24: stage "forward#1" (forward) takes a new table only with a restart`},
		{strings.Replace(reloadLab(`delay = "1ms"`), `rate = "1Mpps"`, "rate = \"1Mpps\"\nflows = 2", 1),
			`lab.toml:17: stage "generator#0": generator: flows: changes only with a restart`},
		{strings.Replace(reloadLab(`delay = "1ms"`), `peer = "m0"`, "peer = \"m0\"\nmtu = 1400", 1), "ports[1].mtu: changes only with a restart"},
		{strings.Replace(reloadLab(`delay = "1ms"`), "cpus = [1]", "cpus = [0]", 1), "lab.toml:29: pipelines[1].cpus[0]: changes only with a restart"},
		{reloadLab(`delay = "1ms"` + "\nqueue = 10"), `link: queue 10: the queue's size changes only with a restart`},
		{reloadLab(`delay = "1ms"` + "\nlos = 0.1"), `lab.toml:35: pipelines[1].stages[0].los: unknown key (did you mean "loss"?)`},
	} {
		if _, err := e.Reload(parse(t, c.doc)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("reload: %v\nwant %s", err, c.want)
		}
	}
	// The refused reloads applied nothing: the link still loses. The
	// generator is done by 100 ms, the link empty 3 ms later.
	before := enginetest.Counter(e.Snapshot(), "wan", "lost")
	run(20 * time.Millisecond)
	if enginetest.Counter(e.Snapshot(), "wan", "lost") == before {
		t.Error("a refused reload changed the link")
	}
	run(20 * time.Millisecond)
	e.Stop()
	s = e.Snapshot()
	sent := enginetest.Counter(s, "generator#0", "sent")
	recv := enginetest.Counter(s, "sink", "received")
	lost = enginetest.Counter(s, "wan", "lost")
	if sent != 100000 || held == 0 || recv+lost != sent {
		t.Errorf("sent %d, received %d, lost %d on the link: a reload dropped packets", sent, recv, lost)
	}
	for _, d := range s.Drops {
		if d.Reason != "link_loss" {
			t.Errorf("%d packets dropped as %s", d.Count, d.Reason)
		}
	}
}

// TestReloadRate: a generator takes a new rate while running; the packets
// sent in the same stretch of (simulated) time follow it.
func TestReloadRate(t *testing.T) {
	clk := newSimClock()
	lab := strings.Replace(reloadLab(`delay = "1ms"`), "count = 100000", "", 1)
	e := enginetest.Start(t, lab, appliance.Options{Manual: true, Clock: clk})
	run := func(d time.Duration) { enginetest.Run(e, clk, d, 10*time.Microsecond) }
	sent := func() uint64 { return enginetest.Counter(e.Snapshot(), "generator#0", "sent") }
	run(5 * time.Millisecond) // past the start
	s0 := sent()
	run(20 * time.Millisecond)
	s1 := sent()
	res, err := e.Reload(parse(t, strings.Replace(lab, `rate = "1Mpps"`, `rate = "3Mpps"`, 1)))
	if err != nil {
		t.Fatalf("reload: %v", err)
	}
	if len(res.Stages) != 1 || res.Stages[0] != "gen/generator#0" {
		t.Errorf("reload changed %q, want [gen/generator#0]", res.Stages)
	}
	run(20 * time.Millisecond)
	s2 := sent()
	e.Stop()
	before, after := s1-s0, s2-s1
	// 20 ms at 1 and 3 Mpps: 20000 and 60000, give or take a burst of credit.
	if before < 19000 || before > 21000 || after < 57000 || after > 61000 {
		t.Errorf("sent %d in 20 ms at 1 Mpps, then %d at 3 Mpps; want about 20000 and 60000", before, after)
	}
}
