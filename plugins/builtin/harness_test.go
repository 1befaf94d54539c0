package builtin

import (
	"testing"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/plugins"
	"github.com/linerate/linerate/plugins/stagetest"
)

// The built-in stages are tested as any stage is, with plugins/stagetest's
// Harness: a fake Env, a fixed set of ports, real slab pools that must all be
// empty when the test ends, and verdicts applied as the engine applies them.

// Ports of every harness: two NIC-like ports and an internal ring.
const (
	portEth0  = 0
	portEth1  = 1
	portRing0 = 2
)

type harness struct {
	*stagetest.Harness
}

// newHarness makes a harness with a "default" pool of 1024 buffers of 2048
// bytes. At cleanup every pool must be empty.
func newHarness(t testing.TB) *harness {
	t.Helper()
	h := &harness{stagetest.NewHarness(t, 0)}
	def := h.NewPool("default", 1024, 2048)
	h.Ports = stagetest.Ports{
		{ID: portEth0, Name: "eth0", MTU: 1500, MAC: [6]byte{2, 0, 0, 0, 0, 0xe0}, Pool: def},
		{ID: portEth1, Name: "eth1", MTU: 1500, MAC: [6]byte{2, 0, 0, 0, 0, 0xe1}, Pool: def},
		{ID: portRing0, Name: "ring0", Internal: true, Pool: def},
	}
	return h
}

// build makes a stage of kind from TOML keys through the registry.
func (h *harness) build(kind, keys string) (plugins.Stage, error) { return h.Build(kind, keys) }

// mustBuild is build that fails the test on an error.
func (h *harness) mustBuild(kind, keys string) plugins.Stage { return h.MustBuild(kind, keys) }

// run passes b through stages from the first at the clock's time and applies
// their verdicts.
func (h *harness) run(b *packet.Burst, stages ...plugins.Stage) stagetest.Outcome {
	return h.Run(b, stages...)
}

// produce calls p.Produce at the clock's time on an empty burst.
func (h *harness) produce(p plugins.Producer) *packet.Burst {
	b := &packet.Burst{}
	h.Ctx.Now = h.Clock.Now()
	p.Produce(&h.Ctx, b)
	return b
}
