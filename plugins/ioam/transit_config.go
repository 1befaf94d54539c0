package ioam

import (
	"fmt"

	"github.com/linerate/linerate/appliance/offload"
	"github.com/linerate/linerate/appliance/stats"
	"github.com/linerate/linerate/plugins"
	"github.com/linerate/linerate/plugins/route"
)

// ioam.transit's keys, and the stage built from them.
func init() {
	plugins.Register(plugins.Kind{Name: "ioam.transit", Summary: "IOAM transit node: fill node data into the traces of known namespaces, update POT, export DEX", New: newTransit})
}

type transitConfig struct {
	nodeConfig
	exportConfig
	loopbackConfig
	// DecrementHopLimit makes the node a router: it lowers the IPv6 hop limit
	// and writes the lowered value, as the kernel does on forwarding.
	DecrementHopLimit bool        `toml:"decrement_hop_limit"`
	POT               []potConfig `toml:"pot"`
	// Offload runs the stage in the kernel, in the xdp port's dispatcher:
	// "off", "xdp" or "auto".
	Offload string `toml:"offload"`
}

func newTransit(s *plugins.Setup) (plugins.Stage, error) {
	var c transitConfig
	if err := s.Config.Decode(&c); err != nil {
		return nil, err
	}
	n, err := c.nodeConfig.build("ioam.transit", s)
	if err != nil {
		return nil, err
	}
	t := &transit{node: n, decHL: c.DecrementHopLimit}
	if t.decHL {
		if t.icmp, err = route.NewErrorSender(s); err != nil {
			return nil, fmt.Errorf("ioam.transit: %w", err)
		}
	}
	if t.pot, err = loadPOTKeys("ioam.transit", c.POT, &n.ns); err != nil {
		return nil, err
	}
	if err := c.exportConfig.check("ioam.transit"); err != nil {
		return nil, err
	}
	if t.exp, err = setupExport(s, &c.exportConfig); err != nil {
		return nil, err
	}
	if t.loop, err = c.loopbackConfig.build("ioam.transit", s); err != nil {
		return nil, err
	}
	t.counters(s.Counters)
	mode, err := offload.ParseMode(c.Offload)
	if err != nil {
		return nil, fmt.Errorf("ioam.transit: %w", err)
	}
	if mode != offload.Off {
		if err := t.askXDP(s, mode); err != nil {
			return nil, err
		}
	}
	return t, nil
}

func (t *transit) counters(cs *stats.Set) {
	t.cFilled = cs.New("filled", "trace options this node wrote its data into")
	t.cOverflow = cs.New("overflow", "trace options without room for this node's data (O flag set)")
	t.cUnknownNS = cs.New("unknown_namespace", "IOAM options of a namespace this node does not know, left untouched")
	t.cNoIOAM = cs.New("no_ioam", "packets without IOAM options")
	t.cPOT = cs.New("pot_updated", "POT options this node added its share to")
	t.cDEX = cs.New("dex_exported", "DEX options exported as records")
	t.cGrown = cs.New("incremental", "incremental traces this node inserted its data into")
	t.cExtra = cs.New("extra_traces", "trace options beyond the first four of a packet (filled too, found by a second walk)")
	t.cDropped = cs.New("export_dropped", "records lost to a full export ring")
}
