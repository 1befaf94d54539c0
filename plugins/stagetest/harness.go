package stagetest

// Harness runs stages without the engine: a Rig (fake Env, pools checked for
// leaks, virtual time, stats), a fixed port table, stages built from TOML keys
// through the registry as the engine builds them, and a run loop that applies
// their verdicts.

import (
	"log/slog"

	"testing"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/plugins"
)

// Ports is a fixed port table.
type Ports []plugins.PortInfo

// Port finds a port by name.
func (ps Ports) Port(name string) (plugins.PortInfo, bool) {
	for _, p := range ps {
		if p.Name == name {
			return p, true
		}
	}
	return plugins.PortInfo{}, false
}

// All lists the ports.
func (ps Ports) All() []plugins.PortInfo { return append([]plugins.PortInfo(nil), ps...) }

// Harness builds and runs stages on one rig.
type Harness struct {
	*Rig
	Ports Ports
	Ctx   plugins.Context
	// What the stages' Setup says: the instance they are among their
	// pipeline's instances and how many there are (0 means 1), and the config file's top-level sections, as
	// TOML ([[routes]] …).
	Instance, NumInstances int
	Sections               string

	started []plugins.Stage
}

// NewHarness makes a harness whose clock reads 0 with wall time unixBase. The caller
// makes the pools and the ports.
func NewHarness(t testing.TB, unixBase int64) *Harness {
	t.Helper()
	h := &Harness{Rig: New(t, unixBase)}
	h.Ctx = plugins.Context{Clock: h.Clock, Log: slog.New(slog.DiscardHandler), Env: h.Env}
	t.Cleanup(h.stop) // before the rig's checks: cleanups run last first
	return h
}

// Setup is what a factory gets for the stage kind#0 with the TOML keys given.
func (h *Harness) Setup(kind, keys string) *plugins.Setup {
	h.T.Helper()
	return h.SetupNamed(kind, kind+"#0", keys)
}

// SetupNamed is Setup for a stage instance called name.
func (h *Harness) SetupNamed(kind, name, keys string) *plugins.Setup {
	h.T.Helper()
	tab, err := config.ParseTable(name+".toml", []byte(keys))
	if err != nil {
		h.T.Fatalf("ParseTable: %v", err)
	}
	return &plugins.Setup{Kind: kind, Name: name, Config: tab, Ports: h.Ports, Instance: h.Instance,
		NumInstances: max(h.NumInstances, 1), Clock: h.Clock, Log: slog.New(slog.DiscardHandler),
		Counters: h.Counters(name), Histograms: h.Histograms(name), Pool: h.Pool,
		Shared: h.Shared(name), Global: h.Global, Section: h.section}
}

func (h *Harness) section(name string) plugins.Config {
	h.T.Helper()
	tab, err := config.ParseTable("sections.toml", []byte(h.Sections))
	if err != nil {
		h.T.Fatalf("ParseTable: %v", err)
	}
	return tab.Only(name)
}

// Build makes the stage kind#0 from TOML keys through the registry.
func (h *Harness) Build(kind, keys string) (plugins.Stage, error) {
	h.T.Helper()
	return h.BuildNamed(kind, kind+"#0", keys)
}

// BuildNamed is Build for a stage instance called name.
func (h *Harness) BuildNamed(kind, name, keys string) (plugins.Stage, error) {
	h.T.Helper()
	k, ok := plugins.Lookup(kind)
	if !ok {
		h.T.Fatalf("stage kind %q is not registered", kind)
	}
	return k.New(h.SetupNamed(kind, name, keys))
}

// MustBuild is Build that fails the test on an error.
func (h *Harness) MustBuild(kind, keys string) plugins.Stage {
	h.T.Helper()
	return h.MustBuildNamed(kind, kind+"#0", keys)
}

// MustBuildNamed is BuildNamed that fails the test on an error.
func (h *Harness) MustBuildNamed(kind, name, keys string) plugins.Stage {
	h.T.Helper()
	st, err := h.BuildNamed(kind, name, keys)
	if err != nil {
		h.T.Fatalf("%s: %v", kind, err)
	}
	return st
}

// Start starts st if it is a Starter, as the engine does before the first
// burst, and stops it when the test ends if it is a Stopper.
func (h *Harness) Start(st plugins.Stage) plugins.Stage {
	h.T.Helper()
	if s, ok := st.(plugins.Starter); ok {
		if err := s.Start(&h.Ctx); err != nil {
			h.T.Fatal(err)
		}
	}
	h.started = append(h.started, st)
	return st
}

func (h *Harness) stop() {
	h.Env.Flush()
	for _, st := range h.started {
		if s, ok := st.(plugins.Stopper); ok {
			s.Stop(&h.Ctx)
		}
	}
}

// Run passes b through stages at the clock's time and applies their verdicts
// (see Rig.Chain).
func (h *Harness) Run(b *packet.Burst, stages ...plugins.Stage) Outcome {
	h.T.Helper()
	h.Ctx.Now = h.Clock.Now()
	return h.Chain(b, len(stages), func(k int, b *packet.Burst) {
		h.Ctx.Stage = k
		stages[k].Process(&h.Ctx, b)
	})
}

// Produce gives st, a Producer, one empty burst at the clock's time and
// returns what it made.
func (h *Harness) Produce(st plugins.Stage) *packet.Burst {
	h.T.Helper()
	p, ok := st.(plugins.Producer)
	if !ok {
		h.T.Fatalf("%T is not a Producer", st)
	}
	b := &packet.Burst{}
	h.Ctx.Now = h.Clock.Now()
	p.Produce(&h.Ctx, b)
	return b
}

// Reload gives st, a plugins.Reloader, a new table of TOML keys, as the engine
// does on a reload: between bursts, at the clock's time, Reload and then,
// unless it refused, its commit.
func (h *Harness) Reload(st plugins.Stage, keys string) error {
	h.T.Helper()
	r, ok := st.(plugins.Reloader)
	if !ok {
		h.T.Fatalf("%T is not a Reloader", st)
	}
	tab, err := config.ParseTable("reload.toml", []byte(keys))
	if err != nil {
		h.T.Fatalf("ParseTable: %v", err)
	}
	h.Ctx.Now = h.Clock.Now()
	commit, err := r.Reload(&h.Ctx, tab)
	if err != nil {
		return err
	}
	if commit == nil {
		h.T.Fatalf("%T.Reload took the table but returned no commit", st)
	}
	commit()
	return nil
}

// Tick runs the timers of the stages that have them at the clock's time and
// returns what they freed.
func (h *Harness) Tick(stages ...plugins.Stage) {
	h.Ctx.Now = h.Clock.Now()
	for _, st := range stages {
		if t, ok := st.(plugins.Ticker); ok {
			t.Tick(&h.Ctx)
		}
	}
	h.Env.Flush()
}
