package appliance_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/linerate/linerate/appliance"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/internal/enginetest"
	"github.com/linerate/linerate/plugins"
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

// reloadStage passes packets on, or drops them all with drop = true. Its
// Reload refuses a table whose fail_instance is its own instance: a stage
// whose check passes on one lcore and fails on another.
type reloadStage struct{ drop bool }

type reloadStageConfig struct {
	Drop         bool `toml:"drop"`
	FailInstance int  `toml:"fail_instance"`
}

var (
	registerReloadStage sync.Once
	reasonReloadDrop    = packet.RegisterReason("test_reload_drop")
)

func readReloadStage(cfg plugins.Config) (reloadStageConfig, error) {
	c := reloadStageConfig{FailInstance: -1}
	return c, cfg.Decode(&c)
}

func (s *reloadStage) Process(_ *plugins.Context, b *packet.Burst) {
	if s.drop {
		for i := 0; i < b.N; i++ {
			b.H[i].P().Drop(reasonReloadDrop)
		}
	}
}

func (s *reloadStage) Reload(ctx *plugins.Context, cfg plugins.Config) (func(), error) {
	c, err := readReloadStage(cfg)
	if err != nil {
		return nil, err
	}
	if c.FailInstance == ctx.Instance {
		return nil, fmt.Errorf("test.reload: refused on instance %d", ctx.Instance)
	}
	return func() { s.drop = c.Drop }, nil
}

// TestReloadRefusedAppliesNothing: a reload that one instance of a stage
// refuses, or that a later stage refuses, leaves every instance of every
// stage with its old table.
func TestReloadRefusedAppliesNothing(t *testing.T) {
	registerReloadStage.Do(func() {
		plugins.Register(plugins.Kind{Name: "test.reload", Summary: "test", New: func(s *plugins.Setup) (plugins.Stage, error) {
			c, err := readReloadStage(s.Config)
			return &reloadStage{drop: c.Drop}, err
		}})
	})
	lab := func(a, b string) string {
		return `version = 1
[engine]
pin = false
[control]
listen = ""
[[ports]]
name = "null0"
driver = "null"
[[pipelines]]
name = "p"
cpus = [0, 1]
[[pipelines.stages]]
kind = "generator"
src = "2001:db8::1"
dst = "2001:db8::2"
rate = "1Mpps"
flows = 2
[[pipelines.stages]]
kind = "test.reload"
name = "a"
` + a + `
[[pipelines.stages]]
kind = "test.reload"
name = "b"
` + b + `
[[pipelines.stages]]
kind = "sink"
`
	}
	clk := newSimClock()
	e := enginetest.Start(t, lab("", ""), appliance.Options{Manual: true, Clock: clk})
	run := func(d time.Duration) { enginetest.Run(e, clk, d, 10*time.Microsecond) }
	// drops is what stage a dropped on each lcore, and packets what it saw.
	drops := func() (drops, packets map[int]uint64) {
		drops, packets = map[int]uint64{}, map[int]uint64{}
		for _, st := range e.Snapshot().Stages {
			if st.Name == "a" {
				packets[st.Lcore] += st.Packets
				for _, d := range st.Drops {
					drops[st.Lcore] += d.Count
				}
			}
		}
		return drops, packets
	}
	run(5 * time.Millisecond)
	for _, c := range []struct{ name, doc, want string }{
		{"instance 2 of 2 refuses", lab("drop = true\nfail_instance = 1", ""), "refused on instance 1"},
		{"a later stage refuses", lab("drop = true", "fail_instance = 0"), "refused on instance 0"},
	} {
		// --check asks every instance too.
		if _, err := e.CheckReload(parse(t, c.doc)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: check: %v, want %q", c.name, err, c.want)
		}
		if _, err := e.Reload(parse(t, c.doc)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: reload: %v, want %q", c.name, err, c.want)
		}
		_, before := drops()
		run(5 * time.Millisecond)
		d, after := drops()
		for lc := range 2 {
			if after[lc] == before[lc] {
				t.Fatalf("%s: lcore %d ran no packets through stage a", c.name, lc)
			}
			if d[lc] != 0 {
				t.Errorf("%s: lcore %d took the refused table: stage a dropped %d packets", c.name, lc, d[lc])
			}
		}
	}
	// The same change without a refusal applies on both lcores.
	if _, err := e.Reload(parse(t, lab("drop = true", ""))); err != nil {
		t.Fatalf("reload: %v", err)
	}
	run(5 * time.Millisecond)
	d, _ := drops()
	for lc := range 2 {
		if d[lc] == 0 {
			t.Errorf("lcore %d did not take the new table", lc)
		}
	}
}
