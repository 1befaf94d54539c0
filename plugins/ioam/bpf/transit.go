package bpf

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/linerate/linerate/appliance/kernel"
	"github.com/linerate/linerate/appliance/offload"
)

// MaxSchema is the largest opaque state snapshot the program writes, in
// bytes: the Go stage's limit.
const MaxSchema = 128

// TransitConfig is the stage's config as the program reads it.
type TransitConfig struct {
	Loopback       bool   // the stage loops back copies: traces with L go up to Go
	EgressID       uint16 // the configured egress port's interface ids
	EgressIDWide   uint32
	UTCOffset      int64             // Unix ns − CLOCK_TAI ns
	TAIOffset      int64             // TAI ns − CLOCK_TAI ns (PTP timestamps)
	IngressByIndex map[int][2]uint32 // ifindex → short and wide interface ids
}

// Namespace is a namespace as the program reads it (plugins/ioam.Namespace).
type Namespace struct {
	ID         uint16
	NodeID     uint32
	NodeIDWide uint64
	Data       uint32
	DataWide   uint64
	Timestamp  uint8 // 0 PTP, 1 NTP, 2 POSIX
	HasSchema  bool
	SchemaID   uint32
	Schema     []byte
}

// TransitCounters are the program's counters, in the order of its per-CPU
// array: the Go stage's names, and "to_go", packets left to the Go stage.
var TransitCounters = []string{"filled", "overflow", "unknown_namespace", "no_ioam", "to_go"}

// TransitSpec is the program's collection, for a port that links its slot
// (TransitSlot) into its dispatcher.
func TransitSpec() (*ebpf.CollectionSpec, error) { return loadTransitPlain() }

// TransitSlot names the slot function in TransitSpec.
const TransitSlot = "ioam_transit_slot"

// TransitNeeds is what LoadTransit(ifindex) needs of the kernel: the
// device-bound variant (ifindex ≠ 0) calls the rx-timestamp kfunc too.
func TransitNeeds(ifindex int) ([]kernel.Feature, error) {
	load := loadTransitPlain
	if ifindex != 0 {
		load = loadTransitDev
	}
	spec, err := load()
	if err != nil {
		return nil, err
	}
	return offload.Program{Spec: spec, Slot: "ioam_transit_xdp"}.Needs(), nil
}

// Transit is the transit program's maps, and the program when it was loaded
// on its own (LoadTransit).
type Transit struct {
	// Program is the whole-frame XDP program: for prog.Run, or attached
	// alone.
	Program *ebpf.Program
	objs    transitPlainObjects
	dev     transitDevObjects
	maps    *transitPlainMaps
}

// TransitMaps wraps the maps of a linked slot, by their names in
// TransitSpec.
func TransitMaps(m map[string]*ebpf.Map) (*Transit, error) {
	t := &Transit{maps: &transitPlainMaps{}}
	for name, p := range map[string]**ebpf.Map{
		"ioam_tr_config": &t.maps.IoamTrConfig, "ioam_tr_counters": &t.maps.IoamTrCounters,
		"ioam_tr_ifids": &t.maps.IoamTrIfids, "ioam_tr_namespaces": &t.maps.IoamTrNamespaces,
	} {
		if *p = m[name]; *p == nil {
			return nil, fmt.Errorf("the XDP transit's map %s is missing", name)
		}
	}
	return t, nil
}

// LoadTransit loads the plain variant (ifindex 0, for prog.Run) or the
// device-bound one for the interface ifindex.
func LoadTransit(ifindex int) (*Transit, error) {
	t := &Transit{}
	if ifindex == 0 {
		if err := loadTransitPlainObjects(&t.objs, nil); err != nil {
			return nil, fmt.Errorf("load the XDP transit: %w", err)
		}
		t.Program, t.maps = t.objs.IoamTransitXdp, &t.objs.transitPlainMaps
		return t, nil
	}
	spec, err := loadTransitDev()
	if err != nil {
		return nil, err
	}
	delete(spec.Programs, TransitSlot)
	offload.BindToDevice(spec, "ioam_transit_xdp", ifindex)
	var objs struct {
		Prog *ebpf.Program `ebpf:"ioam_transit_xdp"`
		transitDevMaps
	}
	if err := spec.LoadAndAssign(&objs, nil); err != nil {
		return nil, fmt.Errorf("load the device-bound XDP transit for ifindex %d: %w", ifindex, err)
	}
	t.dev.IoamTransitXdp, t.dev.transitDevMaps = objs.Prog, objs.transitDevMaps
	t.Program = objs.Prog
	t.maps = (*transitPlainMaps)(&t.dev.transitDevMaps)
	return t, nil
}

// Close releases what LoadTransit loaded.
func (t *Transit) Close() error { return errors.Join(t.objs.Close(), t.dev.Close()) }

// Configure writes the config, the namespaces and the ingress ids.
func (t *Transit) Configure(c TransitConfig, nss []Namespace) error {
	v := transitPlainTrConfig{EgShort: c.EgressID, EgWide: c.EgressIDWide, UtcOff: c.UTCOffset, TaiOff: c.TAIOffset}
	if c.Loopback {
		v.Loopback = 1
	}
	if err := clearMap(t.maps.IoamTrNamespaces); err != nil {
		return err
	}
	for _, ns := range nss {
		if len(ns.Schema) > MaxSchema || len(ns.Schema)%4 != 0 {
			return fmt.Errorf("namespace %d: a schema of %d bytes", ns.ID, len(ns.Schema))
		}
		x := transitPlainTrNamespace{NodeId: ns.NodeID, Data: ns.Data, NodeIdWide: ns.NodeIDWide, DataWide: ns.DataWide,
			TsFormat: ns.Timestamp, SchemaId: ns.SchemaID, SchemaWords: uint8(len(ns.Schema) / 4)}
		if ns.HasSchema {
			x.HasSchema = 1
		}
		copy(x.Schema[:], ns.Schema)
		if err := t.maps.IoamTrNamespaces.Put(ns.ID, x); err != nil {
			return fmt.Errorf("XDP transit namespace %d: %w", ns.ID, err)
		}
	}
	if err := clearMap(t.maps.IoamTrIfids); err != nil {
		return err
	}
	for ifx, ids := range c.IngressByIndex {
		if err := t.maps.IoamTrIfids.Put(uint32(ifx), transitPlainIfIds{ShortId: uint16(ids[0]), Wide: ids[1]}); err != nil {
			return fmt.Errorf("XDP transit interface ids: %w", err)
		}
	}
	return t.maps.IoamTrConfig.Put(uint32(0), v)
}

// Counters sums the per-CPU counters, in the order of TransitCounters.
func (t *Transit) Counters() ([]uint64, error) {
	out := make([]uint64, len(TransitCounters))
	var vals []uint64
	for i := range out {
		if err := t.maps.IoamTrCounters.Lookup(uint32(i), &vals); err != nil {
			return nil, fmt.Errorf("read counter %d: %w", i, err)
		}
		for _, v := range vals {
			out[i] += v
		}
	}
	return out, nil
}

func clearMap(m *ebpf.Map) error {
	var keys [][]byte
	k := make([]byte, m.KeySize())
	v := make([]byte, m.ValueSize())
	it := m.Iterate()
	for it.Next(&k, &v) {
		keys = append(keys, append([]byte(nil), k...))
	}
	if err := it.Err(); err != nil {
		return err
	}
	for _, k := range keys {
		if err := m.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return err
		}
	}
	return nil
}

// SetClock changes the time offsets, leaving the rest of the config.
func (t *Transit) SetClock(utcOff, taiOff int64) error {
	var v transitPlainTrConfig
	if err := t.maps.IoamTrConfig.Lookup(uint32(0), &v); err != nil {
		return err
	}
	v.UtcOff, v.TaiOff = utcOff, taiOff
	return t.maps.IoamTrConfig.Put(uint32(0), v)
}
