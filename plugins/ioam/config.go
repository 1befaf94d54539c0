package ioam

import (
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/plugins"
)

// Uint64 is a config integer that may exceed TOML's int64: written as a
// number, or as a string in decimal or 0x-hex ("0xFFFFFFFFFFFFFFFF").
type Uint64 uint64

// UnmarshalTOML takes a non-negative integer or a numeric string.
func (u *Uint64) UnmarshalTOML(v any) error {
	switch v := v.(type) {
	case int64:
		if v < 0 {
			return fmt.Errorf("%d is negative", v)
		}
		*u = Uint64(v)
		return nil
	case string:
		n, err := strconv.ParseUint(strings.ReplaceAll(v, "_", ""), 0, 64)
		if err != nil {
			return fmt.Errorf("%q is not a 64-bit unsigned number", v)
		}
		*u = Uint64(n)
		return nil
	}
	return fmt.Errorf("expected an integer or a numeric string, found %T", v)
}

// nodeConfig is what every IOAM stage reads: the node's ids, its namespaces
// and its interfaces. Namespace 0 is known to every node (RFC 9197 §4.3): a
// stage that does not declare it uses the top-level ids for it.
type nodeConfig struct {
	NodeID     *Uint64           `toml:"node_id"`
	NodeIDWide *Uint64           `toml:"node_id_wide"`
	Timestamp  string            `toml:"timestamp"`
	Namespaces []namespaceConfig `toml:"namespaces"`
	Interfaces []interfaceConfig `toml:"interfaces"`
	EgressPort string            `toml:"egress_port"`
}

type namespaceConfig struct {
	ID         *Uint64 `toml:"id"`
	NodeID     *Uint64 `toml:"node_id"`
	NodeIDWide *Uint64 `toml:"node_id_wide"`
	Data       *Uint64 `toml:"data"`
	DataWide   *Uint64 `toml:"data_wide"`
	Timestamp  string  `toml:"timestamp"`
	SchemaID   *Uint64 `toml:"schema_id"`
	Schema     string  `toml:"schema"` // hex, a multiple of 4 bytes
}

type interfaceConfig struct {
	Port   string  `toml:"port"`
	ID     *Uint64 `toml:"id"`
	IDWide *Uint64 `toml:"id_wide"`
}

// exportConfig is the record export of decap and transit (DEX) stages.
type exportConfig struct {
	Export       bool   `toml:"export"`        // records to the export ring
	ExportFile   string `toml:"export_file"`   // JSON lines: a path, or "-" for stdout
	ExportSample uint32 `toml:"export_sample"` // keep one record in N
	ExportRing   int    `toml:"export_ring"`   // records per lcore ring
}

func parseTimestamp(s string, def TimestampFormat) (TimestampFormat, error) {
	switch strings.ToLower(s) {
	case "":
		return def, nil
	case "ptp":
		return TimestampPTP, nil
	case "ntp":
		return TimestampNTP, nil
	case "posix", "unix":
		return TimestampPOSIX, nil
	}
	return 0, fmt.Errorf("timestamp %q: use \"ptp\", \"ntp\" or \"posix\"", s)
}

func orDefault(v *Uint64, def uint64) uint64 {
	if v == nil {
		return def
	}
	return uint64(*v)
}

// build turns the config into a node, resolving port names.
func (c *nodeConfig) build(kind string, s *plugins.Setup) (*node, error) {
	n := &node{egress: packet.NoPort, eg: egressIDs{short: unavailable16, wide: unavailable32}}
	ts, err := parseTimestamp(c.Timestamp, TimestampPTP)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", kind, err)
	}
	nodeID, nodeIDWide := orDefault(c.NodeID, DefaultNodeID), orDefault(c.NodeIDWide, DefaultNodeIDWide)
	if nodeID > 0xFFFFFF {
		return nil, fmt.Errorf("%s: node_id %#x does not fit 24 bits", kind, nodeID)
	}
	if nodeIDWide >= 1<<56 {
		return nil, fmt.Errorf("%s: node_id_wide %#x does not fit 56 bits", kind, nodeIDWide)
	}
	seen := map[uint16]bool{}
	for i, nc := range c.Namespaces {
		if nc.ID == nil {
			return nil, fmt.Errorf("%s: namespaces[%d] needs an id", kind, i)
		}
		if *nc.ID > math.MaxUint16 {
			return nil, fmt.Errorf("%s: namespaces[%d]: id %d does not fit 16 bits", kind, i, *nc.ID)
		}
		id := uint16(*nc.ID)
		if seen[id] {
			return nil, fmt.Errorf("%s: namespace %d declared twice", kind, id)
		}
		seen[id] = true
		ns := Namespace{ID: id, NodeID: uint32(orDefault(nc.NodeID, nodeID)), NodeIDWide: orDefault(nc.NodeIDWide, nodeIDWide),
			Data: unavailable32, DataWide: orDefault(nc.DataWide, unavailable64)}
		if nc.NodeID != nil && *nc.NodeID > 0xFFFFFF {
			return nil, fmt.Errorf("%s: namespace %d: node_id %#x does not fit 24 bits", kind, id, uint64(*nc.NodeID))
		}
		if nc.NodeIDWide != nil && *nc.NodeIDWide >= 1<<56 {
			return nil, fmt.Errorf("%s: namespace %d: node_id_wide does not fit 56 bits", kind, id)
		}
		if nc.Data != nil {
			if *nc.Data > math.MaxUint32 {
				return nil, fmt.Errorf("%s: namespace %d: data %#x does not fit 32 bits", kind, id, uint64(*nc.Data))
			}
			ns.Data = uint32(*nc.Data)
		}
		if ns.Timestamp, err = parseTimestamp(nc.Timestamp, ts); err != nil {
			return nil, fmt.Errorf("%s: namespace %d: %w", kind, id, err)
		}
		if nc.SchemaID != nil || nc.Schema != "" {
			if nc.SchemaID == nil || *nc.SchemaID > 0xFFFFFF {
				return nil, fmt.Errorf("%s: namespace %d: a schema needs a schema_id of at most 24 bits", kind, id)
			}
			b, err := hex.DecodeString(strings.TrimPrefix(nc.Schema, "0x"))
			if err != nil || len(b)%4 != 0 || len(b) > 128 {
				return nil, fmt.Errorf("%s: namespace %d: schema must be hex, a multiple of 4 bytes, at most 128", kind, id)
			}
			ns.HasSchema, ns.SchemaID, ns.Schema = true, uint32(*nc.SchemaID), b
		}
		n.ns.add(ns)
	}
	if !seen[0] {
		n.ns.add(Namespace{ID: 0, NodeID: uint32(nodeID), NodeIDWide: nodeIDWide, Data: unavailable32, DataWide: unavailable64, Timestamp: ts})
	}
	all := s.Ports.All()
	maxID := 0
	for _, pi := range all {
		maxID = max(maxID, int(pi.ID))
	}
	// A port's ifid (its [[ports]] key) is its interface id unless the stage
	// says otherwise.
	n.ingress = make([]egressIDs, maxID+1)
	for i := range n.ingress {
		n.ingress[i] = egressIDs{short: unavailable16, wide: unavailable32}
	}
	for _, pi := range all {
		if pi.IfID != 0 {
			n.ingress[pi.ID].wide = pi.IfID
			if pi.IfID < unavailable16 {
				n.ingress[pi.ID].short = uint16(pi.IfID)
			}
		}
	}
	for i, ic := range c.Interfaces {
		pi, ok := s.Ports.Port(ic.Port)
		if !ok {
			return nil, fmt.Errorf("%s: interfaces[%d]: no port %q", kind, i, ic.Port)
		}
		ids := egressIDs{short: uint16(orDefault(ic.ID, unavailable16)), wide: uint32(orDefault(ic.IDWide, unavailable32))}
		if orDefault(ic.ID, 0) > math.MaxUint16 || orDefault(ic.IDWide, 0) > math.MaxUint32 {
			return nil, fmt.Errorf("%s: interfaces[%d]: id must fit 16 bits and id_wide 32 bits", kind, i)
		}
		n.ingress[pi.ID] = ids
	}
	if c.EgressPort != "" {
		pi, ok := s.Ports.Port(c.EgressPort)
		if !ok {
			return nil, fmt.Errorf("%s: egress_port: no port %q", kind, c.EgressPort)
		}
		n.egress = pi.ID
		n.eg = n.ingress[pi.ID]
	}
	return n, nil
}

func (c *exportConfig) check(kind string) error {
	if c.ExportRing == 0 {
		c.ExportRing = 4096
	}
	if c.ExportRing < 16 || c.ExportRing > 1<<20 {
		return fmt.Errorf("%s: export_ring %d is outside 16..%d", kind, c.ExportRing, 1<<20)
	}
	if c.ExportFile != "" {
		c.Export = true
	}
	return nil
}

// potConfig names a POT key file for a namespace.
type potConfig struct {
	Namespace *Uint64 `toml:"namespace"`
	KeyFile   string  `toml:"key_file"`
}

func loadPOTKeys(kind string, cs []potConfig, ns *nsTable) (potKeys, error) {
	var k potKeys
	for i, c := range cs {
		if c.Namespace == nil || *c.Namespace > 0xFFFF {
			return k, fmt.Errorf("%s: pot[%d] needs a 16-bit namespace", kind, i)
		}
		if ns.lookup(uint16(*c.Namespace)) == nil {
			return k, fmt.Errorf("%s: pot[%d]: namespace %d is not among the stage's namespaces", kind, i, *c.Namespace)
		}
		if c.KeyFile == "" {
			return k, fmt.Errorf("%s: pot[%d] needs a key_file", kind, i)
		}
		key, err := LoadPOTKey(c.KeyFile)
		if err != nil {
			return k, fmt.Errorf("%s: pot[%d]: %w", kind, i, err)
		}
		k.add(uint16(*c.Namespace), key)
	}
	return k, nil
}
