package bpf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/linerate/linerate/appliance/offload"
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

// eventLen is sizeof(struct co_event).
const eventLen = 64

// CollectorCounters are the program's counters, in the order of its
// per-CPU array: "records" (handed to Go through the rings), "to_go", drop
// reasons by the Go names, and "ring_full" (left to the Go stage instead).
var CollectorCounters = []string{"records", "to_go", "stamp_short", "stamp_unknown_session", "stamp_wrong_source", "ring_full"}

// CollectorSpec is the program's collection, for a port that links its
// slot (CollectorSlot).
func CollectorSpec() (*ebpf.CollectionSpec, error) { return loadCollectorPlain() }

// CollectorSlot names the slot function in CollectorSpec.
const CollectorSlot = "stamp_collect_slot"

// Collector is the collector program's maps, its rings and their readers,
// and the program when it was loaded on its own.
type Collector struct {
	Program *ebpf.Program
	objs    collectorPlainObjects
	maps    *collectorPlainMaps
	rings   []*ebpf.Map
	readers []*ringbuf.Reader
	recs    []ringbuf.Record // by instance: each polls its own ring
	evs     []Event
	ids     map[uint16]bool // the sessions in the array
	ports   [1024]uint64    // the ports bitmap as written
}

// CollectorMaps wraps the maps of a linked slot, by their names in
// CollectorSpec, and makes a ring for each of instances.
func CollectorMaps(m map[string]*ebpf.Map, instances int) (*Collector, error) {
	c := &Collector{maps: &collectorPlainMaps{}}
	for name, p := range map[string]**ebpf.Map{
		"stamp_co_config": &c.maps.StampCoConfig, "stamp_co_sessions": &c.maps.StampCoSessions,
		"stamp_co_ports": &c.maps.StampCoPorts, "stamp_co_rings": &c.maps.StampCoRings,
		"stamp_co_counters": &c.maps.StampCoCounters,
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
	for i := range n {
		m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.RingBuf, MaxEntries: 1 << 18})
		if err != nil {
			return fmt.Errorf("ring %d: %w", i, err)
		}
		c.rings = append(c.rings, m)
		if err := c.maps.StampCoRings.Put(uint32(i), m); err != nil {
			return fmt.Errorf("ring %d: %w", i, err)
		}
		r, err := ringbuf.NewReader(m)
		if err != nil {
			return fmt.Errorf("ring %d: %w", i, err)
		}
		r.SetDeadline(time.Unix(1, 0)) // never wait: Poll takes what is there
		c.readers = append(c.readers, r)
		c.recs = append(c.recs, ringbuf.Record{})
		c.evs = append(c.evs, Event{})
	}
	return nil
}

// Close releases the rings and readers, and what LoadCollector loaded.
func (c *Collector) Close() error {
	var errs []error
	for _, r := range c.readers {
		errs = append(errs, r.Close())
	}
	for _, m := range c.rings {
		errs = append(errs, m.Close())
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
		if s.Owner < 0 || s.Owner >= len(c.rings) {
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

// Poll hands the events waiting in instance's ring to f, without waiting:
// a ring with nothing in it costs two atomic loads. It returns how many.
func (c *Collector) Poll(instance int, f func(*Event)) (int, error) {
	r := c.readers[instance]
	if r.AvailableBytes() == 0 {
		return 0, nil
	}
	n := 0
	ev, rec := &c.evs[instance], &c.recs[instance]
	for {
		err := r.ReadInto(rec)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		b := rec.RawSample
		if len(b) < eventLen {
			continue
		}
		ev.T4 = binary.NativeEndian.Uint64(b[0:])
		ev.SSID = binary.NativeEndian.Uint16(b[8:])
		ev.Hop = b[10]
		copy(ev.Pay[:], b[16:60])
		f(ev)
		n++
	}
}

// Counters sums the per-CPU counters, in the order of CollectorCounters.
func (c *Collector) Counters() ([]uint64, error) {
	return sumPerCPU(c.maps.StampCoCounters, len(CollectorCounters))
}
