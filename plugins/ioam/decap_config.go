package ioam

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/linerate/linerate/plugins"
)

// ioam.decap's keys, and the stage built from them.
func init() {
	plugins.Register(plugins.Kind{Name: "ioam.decap", Summary: "IOAM decapsulating node: add own data, verify POT, record and export traces, remove the IOAM data", New: newDecap})
}

type decapConfig struct {
	nodeConfig
	exportConfig
	loopbackConfig
	// Mode is what to remove: "encap" strips the outer IPv6 header of
	// IPv6-in-IPv6 packets, "inline" removes IOAM options from the Hop-by-Hop
	// and Destination Options headers, "auto" (default) decides per packet:
	// encap when the header after the IOAM options is IPv6, inline otherwise.
	Mode string `toml:"mode"`
	// Fill adds this node's data to the traces before reading them, as the
	// kernel's destination does (default true).
	Fill *bool `toml:"fill"`
	// Remove takes the IOAM data out (default true). false leaves the packet
	// as it is: a monitoring tap.
	Remove *bool `toml:"remove"`
	// Histograms records per-hop and end-to-end delay histograms from the
	// trace timestamps (default true).
	Histograms *bool `toml:"histograms"`
	// MaxHops is how many per-hop delay histograms there are (default 8).
	MaxHops int         `toml:"max_hops"`
	POT     []potConfig `toml:"pot"`
}

const (
	decapAuto = iota
	decapEncap
	decapInline
)

func newDecap(s *plugins.Setup) (plugins.Stage, error) {
	c := decapConfig{MaxHops: 8}
	if err := s.Config.Decode(&c); err != nil {
		return nil, err
	}
	n, err := c.nodeConfig.build("ioam.decap", s)
	if err != nil {
		return nil, err
	}
	dc := &decap{node: n, fill: c.Fill == nil || *c.Fill, remove: c.Remove == nil || *c.Remove}
	switch strings.ToLower(c.Mode) {
	case "", "auto":
		dc.mode = decapAuto
	case "encap":
		dc.mode = decapEncap
	case "inline":
		dc.mode = decapInline
	default:
		return nil, fmt.Errorf("ioam.decap: mode %q: use \"auto\", \"encap\" or \"inline\"", c.Mode)
	}
	if dc.pot, err = loadPOTKeys("ioam.decap", c.POT, &n.ns); err != nil {
		return nil, err
	}
	if err := c.exportConfig.check("ioam.decap"); err != nil {
		return nil, err
	}
	if dc.exp, err = setupExport(s, &c.exportConfig); err != nil {
		return nil, err
	}
	if dc.loop, err = c.loopbackConfig.build("ioam.decap", s); err != nil {
		return nil, err
	}
	if c.MaxHops < 1 || c.MaxHops > 64 {
		return nil, fmt.Errorf("ioam.decap: max_hops %d is outside 1..64", c.MaxHops)
	}
	if c.Histograms == nil || *c.Histograms {
		for h := 1; h <= c.MaxHops; h++ {
			dc.hops = append(dc.hops, s.Histograms("hop"+strconv.Itoa(h)+"_delay",
				"delay from IOAM node "+strconv.Itoa(h-1)+" (0: the encapsulating node) to node "+strconv.Itoa(h)+", from the trace timestamps", "ns"))
		}
		dc.e2e = s.Histograms("e2e_delay", "delay from the encapsulating node to this node, from the trace timestamps", "ns")
	}
	dc.wantRec = dc.exp != nil
	cs := s.Counters
	dc.cDecap = cs.New("decapsulated", "packets whose IOAM data this node read")
	dc.cStripped = cs.New("removed_bytes", "bytes of IOAM data removed")
	dc.cNoIOAM = cs.New("no_ioam", "packets without IOAM options, passed as they are")
	dc.cPOTValid = cs.New("pot_valid", "POT options whose cumulative value proved the path")
	dc.cPOTInvalid = cs.New("pot_invalid", "POT options whose cumulative value did not prove the path")
	dc.cOverflow = cs.New("overflow", "traces without room for this node's data (O flag set)")
	dc.cUnknownNS = cs.New("unknown_namespace", "trace options of a namespace this node does not know")
	dc.cExported = cs.New("exported", "records offered to the export ring")
	dc.cDropped = cs.New("export_dropped", "records lost to a full export ring")
	return dc, nil
}
