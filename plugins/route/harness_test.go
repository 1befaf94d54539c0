package route

import (
	"net/netip"
	"testing"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/plugins"
	"github.com/linerate/linerate/plugins/stagetest"
)

const (
	port0 = 0 // 2001:db8:1::1/64, 192.0.2.1/24
	port1 = 1 // 2001:db8:2::1/64, 198.51.100.1/24
	portT = 2 // a TAP: fd00::1/64
)

var (
	mac0     = packet.MAC{2, 0, 0, 0, 1, 1}
	mac1     = packet.MAC{2, 0, 0, 0, 2, 1}
	macT     = packet.MAC{2, 0, 0, 0, 3, 1}
	macTHost = packet.MAC{2, 0, 0, 0, 3, 2}
	host1    = packet.MAC{2, 0, 0, 0, 1, 2} // 2001:db8:1::2, 192.0.2.2
	host2    = packet.MAC{2, 0, 0, 0, 2, 2} // 2001:db8:2::2, 198.51.100.2
)

// harness runs routed stages (plugins/stagetest) on two routed ports and a
// TAP sharing one pool.
type harness struct {
	*stagetest.Harness
}

func pfx(s ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, x := range s {
		out = append(out, netip.MustParsePrefix(x))
	}
	return out
}

func newHarness(t testing.TB) *harness {
	t.Helper()
	h := &harness{stagetest.NewHarness(t, 1e9)}
	def := h.NewPool("default", 512, 0)
	h.Ports = stagetest.Ports{
		{ID: port0, Name: "eth0", MTU: 1500, MAC: mac0, DriverMAC: mac0, Pool: def, IfID: 1,
			Addrs: pfx("2001:db8:1::1/64", "192.0.2.1/24")},
		{ID: port1, Name: "eth1", MTU: 1500, MAC: mac1, DriverMAC: mac1, Pool: def, IfID: 2,
			Addrs: pfx("2001:db8:2::1/64", "198.51.100.1/24")},
		{ID: portT, Name: "tap0", MTU: 1500, MAC: macT, DriverMAC: macTHost, Pool: def, IfID: 3, Addrs: pfx("fd00::1/64")},
	}
	return h
}

// build makes and starts a stage, as the engine does before the first burst.
func (h *harness) build(kind, keys string) plugins.Stage {
	h.T.Helper()
	return h.Start(h.MustBuild(kind, keys))
}

func (h *harness) routed() *Routed { return h.Globals["route"].(*Routed) }

// run passes frames received on port in through stages.
func (h *harness) run(in uint16, frames [][]byte, stages ...plugins.Stage) stagetest.Outcome {
	h.T.Helper()
	return h.Run(h.Burst(in, frames...), stages...)
}
