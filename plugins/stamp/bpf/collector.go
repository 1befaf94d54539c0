package bpf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/linerate/linerate/appliance/kernel"
	"github.com/linerate/linerate/appliance/offload"
	"golang.org/x/sys/unix"
)

// MaxCollectorInstances is how many collector instances (lcores) the
// program has rings for (collector.c: CO_MAX_INSTANCES).
const MaxCollectorInstances = 64

// CollectorConfig is the collector stage's config as the program reads it.
type CollectorConfig struct {
	Port        int // -1: each session's src_port; 0: any; else this one
	CheckSource bool
}

// CollectorSession is a sender session as the collector program reads it.
type CollectorSession struct {
	SSID, SrcPort  uint16
	IPv4           bool
	Auth, HMACTLV  bool
	Owner          int      // the collector instance whose ring gets its records
	Src, Reflector [16]byte // IPv4 mapped
}

// Event is what the program hands to the session's owner: T4 (CLOCK_TAI
// ns, or the driver's stamp) and the base reflected packet.
type Event struct {
	T4   uint64
	SSID uint16
	Hop  uint8 // the reply's TTL or hop limit
	Pay  [44]byte
}

// RingSlots is how many records an instance's ring holds (collector.c:
// CO_RING_SLOTS): what the program hands over between two polls; more go to
// the Go stage the slow way, counted as ring_full.
const RingSlots = 1 << ringShift

const ringShift = 12

// slotLen is sizeof(struct co_slot), headLen sizeof(struct co_head): the
// strides of the rings and of their heads, where a ring's tail is at 8.
const slotLen, headLen = 64, 64

var (
	_ = [1]struct{}{}[unsafe.Sizeof(collectorPlainCoSlot{})-slotLen]
	_ = [1]struct{}{}[unsafe.Sizeof(collectorPlainCoHead{})-headLen]
)

// CollectorCounters are the program's counters, in the order of its
// per-CPU array: "records" (handed to Go through the rings), "to_go", drop
// reasons by the Go names, and "ring_full" (left to the Go stage instead).
var CollectorCounters = []string{"records", "to_go", "stamp_short", "stamp_unknown_session", "stamp_wrong_source", "ring_full"}

// CollectorNeeds is what LoadCollector(ifindex, n) needs of the kernel.
func CollectorNeeds(ifindex int) ([]kernel.Feature, error) {
	load := loadCollectorPlain
	if ifindex != 0 {
		load = loadCollectorDev
	}
	return needs(load, "stamp_collect_xdp")
}

// CollectorSpec is the program's collection, for a port that links its
// slot (CollectorSlot), with rings for instances.
func CollectorSpec(instances int) (*ebpf.CollectionSpec, error) {
	spec, err := loadCollectorPlain()
	if err != nil {
		return nil, err
	}
	return spec, sizeRings(spec, instances)
}

// sizeRings makes the rings' array hold instances rings.
func sizeRings(spec *ebpf.CollectionSpec, instances int) error {
	if instances < 1 || instances > MaxCollectorInstances {
		return fmt.Errorf("%d collector instances: the XDP collector has rings for 1..%d", instances, MaxCollectorInstances)
	}
	spec.Maps["stamp_co_slots"].MaxEntries = uint32(instances * RingSlots)
	return nil
}

// CollectorSlot names the slot function in CollectorSpec.
const CollectorSlot = "stamp_collect_slot"

// Collector is the collector program's maps, its rings, mapped, and the
// program when it was loaded on its own.
type Collector struct {
	Program *ebpf.Program
	objs    collectorPlainObjects
	maps    *collectorPlainMaps
	rings   []byte   // the rings' array, mapped: off the Go heap
	heads   []byte   // the rings' heads and tails, mapped
	next    []uint64 // by instance: the position its next record is at
	evs     []Event
	ids     map[uint16]bool // the sessions in the array
	ports   [1024]uint64    // the ports bitmap as written
}

// CollectorMaps wraps the maps of a linked slot, by their names in
// CollectorSpec(instances), and maps the instances' rings.
func CollectorMaps(m map[string]*ebpf.Map, instances int) (*Collector, error) {
	c := &Collector{maps: &collectorPlainMaps{}}
	for name, p := range map[string]**ebpf.Map{
		"stamp_co_config": &c.maps.StampCoConfig, "stamp_co_sessions": &c.maps.StampCoSessions,
		"stamp_co_ports": &c.maps.StampCoPorts, "stamp_co_heads": &c.maps.StampCoHeads,
		"stamp_co_slots": &c.maps.StampCoSlots, "stamp_co_counters": &c.maps.StampCoCounters,
	} {
		if *p = m[name]; *p == nil {
			return nil, fmt.Errorf("the XDP collector's map %s is missing", name)
		}
	}
	return c, c.makeRings(instances)
}

// LoadCollector loads the plain variant (ifindex 0, for prog.Run) or the
// device-bound one for ifindex, with rings for instances.
func LoadCollector(ifindex, instances int) (*Collector, error) {
	c := &Collector{}
	spec, err := loadCollectorPlain()
	if ifindex != 0 {
		spec, err = loadCollectorDev()
	}
	if err != nil {
		return nil, err
	}
	delete(spec.Programs, CollectorSlot)
	if err := sizeRings(spec, instances); err != nil {
		return nil, err
	}
	offload.BindToDevice(spec, "stamp_collect_xdp", ifindex)
	var objs struct {
		Prog *ebpf.Program `ebpf:"stamp_collect_xdp"`
		collectorPlainMaps
	}
	if err := spec.LoadAndAssign(&objs, nil); err != nil {
		return nil, fmt.Errorf("load the XDP collector: %w", err)
	}
	c.objs.StampCollectXdp, c.objs.collectorPlainMaps = objs.Prog, objs.collectorPlainMaps
	c.Program, c.maps = objs.Prog, &c.objs.collectorPlainMaps
	if err := c.makeRings(instances); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (c *Collector) makeRings(n int) error {
	if n < 1 || n > MaxCollectorInstances {
		return fmt.Errorf("%d collector instances: the XDP collector has rings for 1..%d", n, MaxCollectorInstances)
	}
	m := c.maps.StampCoSlots
	if int(m.MaxEntries()) < n*RingSlots {
		return fmt.Errorf("the XDP collector's rings hold %d records, %d instances need %d (CollectorSpec)",
			m.MaxEntries(), n, n*RingSlots)
	}
	heads, err := unix.Mmap(c.maps.StampCoHeads.FD(), 0, MaxCollectorInstances*headLen,
		unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("map the XDP collector's ring heads: %w", err)
	}
	mem, err := unix.Mmap(m.FD(), 0, n*RingSlots*slotLen, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Munmap(heads)
		return fmt.Errorf("map the XDP collector's rings: %w", err)
	}
	c.heads, c.rings, c.next, c.evs = heads, mem, make([]uint64, n), make([]Event, n)
	// A ring the program wrote before (the maps of a port that outlived an
	// earlier stage) goes on from where its reader was.
	for i := range n {
		c.next[i] = atomic.LoadUint64(c.tail(i))
	}
	return nil
}

// Close unmaps the rings and releases what LoadCollector loaded.
func (c *Collector) Close() error {
	var errs []error
	for _, m := range []*[]byte{&c.rings, &c.heads} {
		if *m != nil {
			errs = append(errs, unix.Munmap(*m))
			*m = nil
		}
	}
	errs = append(errs, c.objs.Close())
	return errors.Join(errs...)
}

// Configure writes the config.
func (c *Collector) Configure(cfg CollectorConfig) error {
	v := collectorPlainCoConfig{Port: int32(cfg.Port)}
	if cfg.CheckSource {
		v.CheckSrc = 1
	}
	return c.maps.StampCoConfig.Put(uint32(0), v)
}

// Collector session flags (collector.c).
const (
	csIPv4    = 1
	csAuth    = 2
	csHMACTLV = 4
	csExists  = 8
)

// SetSessions makes the program's sessions these, and its ports theirs.
func (c *Collector) SetSessions(ss []CollectorSession) error {
	keep := map[uint16]bool{}
	var ports [1024]uint64
	for _, s := range ss {
		if s.Owner < 0 || s.Owner >= len(c.next) {
			return fmt.Errorf("session %d: owner %d has no ring", s.SSID, s.Owner)
		}
		v := collectorPlainCoSession{Flags: csExists, Owner: uint8(s.Owner), SrcPort: s.SrcPort, Src: s.Src, Reflector: s.Reflector}
		for _, f := range []struct {
			on   bool
			flag uint8
		}{{s.IPv4, csIPv4}, {s.Auth, csAuth}, {s.HMACTLV, csHMACTLV}} {
			if f.on {
				v.Flags |= f.flag
			}
		}
		if err := c.maps.StampCoSessions.Put(uint32(s.SSID), v); err != nil {
			return err
		}
		keep[s.SSID] = true
		ports[s.SrcPort>>6] |= 1 << (s.SrcPort & 63)
	}
	for id := range c.ids {
		if !keep[id] {
			if err := c.maps.StampCoSessions.Put(uint32(id), collectorPlainCoSession{}); err != nil {
				return err
			}
		}
	}
	c.ids = keep
	for w, bits := range ports {
		if bits != c.ports[w] {
			if err := c.maps.StampCoPorts.Put(uint32(w), bits); err != nil {
				return err
			}
			c.ports[w] = bits
		}
	}
	return nil
}

// tail is where instance's reader tells the program what it has read.
func (c *Collector) tail(instance int) *uint64 {
	return (*uint64)(unsafe.Pointer(&c.heads[instance*headLen+8]))
}

// Poll hands the records waiting in instance's ring to f, in the order
// the program took their slots, at most a ring's worth, without waiting: an
// empty ring costs one atomic load. Only instance's lcore polls its ring.
// It returns how many.
func (c *Collector) Poll(instance int, f func(*Event)) (int, error) {
	base := instance * RingSlots
	pos, ev := c.next[instance], &c.evs[instance]
	n := 0
	for ; n < RingSlots; n++ {
		i := (base + int(pos&(RingSlots-1))) * slotLen
		b := c.rings[i : i+slotLen : i+slotLen]
		if atomic.LoadUint64((*uint64)(unsafe.Pointer(&b[0]))) != pos>>ringShift+1 {
			break
		}
		ev.T4 = binary.NativeEndian.Uint64(b[8:])
		ev.SSID = binary.NativeEndian.Uint16(b[16:])
		ev.Hop = b[18]
		copy(ev.Pay[:], b[20:64])
		pos++
		f(ev)
	}
	if n > 0 {
		c.next[instance] = pos
		atomic.StoreUint64(c.tail(instance), pos) // the slots are the program's again
	}
	return n, nil
}

// Counters sums the per-CPU counters, in the order of CollectorCounters.
func (c *Collector) Counters() ([]uint64, error) {
	return sumPerCPU(c.maps.StampCoCounters, len(CollectorCounters))
}
