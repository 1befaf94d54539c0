package plugins

import (
	"log/slog"
	"testing"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/internal/stagetest"
)

// The harness runs one stage (or a short chain) without the engine, on an
// internal/stagetest rig: a fake Env, a fixed set of ports, real slab pools that
// must all be empty when the test ends, and verdicts applied as
// appliance/lcore.go's instance.run does. (internal/plugintest does the same
// for the plugin packages; it imports this package, so its tests cannot use
// it.)

// fakePorts is a fixed port table.
type fakePorts []PortInfo

func (f fakePorts) Port(name string) (PortInfo, bool) {
	for _, p := range f {
		if p.Name == name {
			return p, true
		}
	}
	return PortInfo{}, false
}

func (f fakePorts) All() []PortInfo { return append([]PortInfo(nil), f...) }

// Ports of every harness: two NIC-like ports and an internal ring.
const (
	portEth0  = 0
	portEth1  = 1
	portRing0 = 2
)

type harness struct {
	*stagetest.Rig
	ports   fakePorts
	ctx     Context
	lcore   int
	nlcores int
}

// newHarness makes a harness with a "default" pool of 1024 buffers of 2048
// bytes. At cleanup every pool must be empty.
func newHarness(t testing.TB) *harness {
	t.Helper()
	h := &harness{Rig: stagetest.New(t, 0), nlcores: 1}
	def := h.NewPool("default", 1024, 2048)
	h.ports = fakePorts{
		{ID: portEth0, Name: "eth0", MTU: 1500, MAC: [6]byte{2, 0, 0, 0, 0, 0xe0}, Pool: def},
		{ID: portEth1, Name: "eth1", MTU: 1500, MAC: [6]byte{2, 0, 0, 0, 0, 0xe1}, Pool: def},
		{ID: portRing0, Name: "ring0", Internal: true, Pool: def},
	}
	h.ctx = Context{Clock: h.Clock, Log: slog.New(slog.DiscardHandler), Env: h.Env}
	return h
}

// setup is what a factory gets for a stage of kind with the TOML keys given.
func (h *harness) setup(kind, keys string) *Setup {
	h.T.Helper()
	name := kind + "#0"
	tab, err := config.ParseTable(kind+".toml", []byte(keys))
	if err != nil {
		h.T.Fatalf("ParseTable: %v", err)
	}
	return &Setup{Kind: kind, Name: name, Config: tab, Ports: h.ports, Lcore: h.lcore, NumLcores: h.nlcores,
		Clock: h.Clock, Log: slog.New(slog.DiscardHandler), Counters: h.Counters(name),
		Histograms: h.Histograms(name), Pool: h.Pool, Shared: h.Shared(name), Global: h.Global}
}

// build makes a stage of kind from TOML keys through the registry.
func (h *harness) build(kind, keys string) (Stage, error) {
	h.T.Helper()
	k, ok := Lookup(kind)
	if !ok {
		h.T.Fatalf("stage kind %q is not registered", kind)
	}
	return k.New(h.setup(kind, keys))
}

// mustBuild is build that fails the test on an error.
func (h *harness) mustBuild(kind, keys string) Stage {
	h.T.Helper()
	st, err := h.build(kind, keys)
	if err != nil {
		h.T.Fatalf("%s: %v", kind, err)
	}
	return st
}

// run passes b through stages from the first at the clock's time and applies
// their verdicts (stagetest.Rig.Chain).
func (h *harness) run(b *packet.Burst, stages ...Stage) stagetest.Outcome {
	h.T.Helper()
	h.ctx.Now = h.Clock.Now()
	return h.Chain(b, len(stages), func(k int, b *packet.Burst) {
		h.ctx.Stage = k
		stages[k].Process(&h.ctx, b)
	})
}

// produce calls p.Produce at the clock's time on an empty burst.
func (h *harness) produce(p Producer) *packet.Burst {
	b := &packet.Burst{}
	h.ctx.Now = h.Clock.Now()
	p.Produce(&h.ctx, b)
	return b
}
