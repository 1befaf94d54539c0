package ioam

import (
	"fmt"
	"sync/atomic"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/linerate/linerate/appliance/clock"
	"github.com/linerate/linerate/appliance/offload"
	"github.com/linerate/linerate/appliance/stats"
	"github.com/linerate/linerate/plugins"
	"github.com/linerate/linerate/plugins/ioam/bpf"
)

// trXDP is a transit stage's in-kernel part, shared by its instances.
// Instance 0 keeps the program's time offsets in step with the clock and
// moves its counters into the stage's.
type trXDP struct {
	req  *offload.Request
	prog atomic.Pointer[bpf.Transit]

	// Instance 0's, on its lcore.
	nextTick int64
	tai      [2]int
	last     []uint64
	counters []*stats.Counter // by bpf.TransitCounters
}

// xdpTickInterval is how often instance 0 reads the program's counters.
const xdpTickInterval = 100e6 // ns

// askXDP asks for the offload: decrement_hop_limit (the stage routing) stays
// in Go, refused with offload = "xdp".
func (t *transit) askXDP(s *plugins.Setup, mode offload.Mode) error {
	if t.decHL {
		why := "decrement_hop_limit makes the stage a router; in XDP the kernel routes after it"
		if mode == offload.XDP {
			return fmt.Errorf("%s: ioam.transit: offload = \"xdp\": %s", s.Config.Where(), why)
		}
		if s.Instance == 0 { // once, not per instance
			s.Log.Info("ioam.transit runs in Go", "stage", s.Name, "why", why)
		}
		return nil
	}
	x := s.Shared("ioam.transit/xdp", func() any { return &trXDP{} }).(*trXDP)
	t.xdp = x
	if s.Instance == 0 {
		x.counters = make([]*stats.Counter, len(bpf.TransitCounters))
		for i, n := range bpf.TransitCounters {
			switch n {
			case "filled":
				x.counters[i] = t.cFilled
			case "overflow":
				x.counters[i] = t.cOverflow
			case "unknown_namespace":
				x.counters[i] = t.cUnknownNS
			case "no_ioam":
				x.counters[i] = t.cNoIOAM
			default:
				x.counters[i] = s.Counters.New("xdp_to_go", "packets the XDP program left to this stage (other layouts, POT, DEX, incremental traces)")
			}
		}
	}
	if x.req != nil {
		return nil
	}
	spec, err := bpf.TransitSpec()
	if err != nil {
		return err
	}
	clk, ports := s.Clock, s.Ports.All()
	x.req, err = offload.Ask(s.Shared, s.Name, s.Config.Where(), mode, offload.Program{Spec: spec, Slot: bpf.TransitSlot,
		Prepare: func(maps map[string]*ebpf.Map) error {
			p, err := bpf.TransitMaps(maps)
			if err != nil {
				return err
			}
			// The program knows the ingress port by its interface's index,
			// which the ports on one give.
			ifx := map[int]uint16{}
			for _, pi := range ports {
				if pi.Ifindex != 0 {
					ifx[pi.Ifindex] = pi.ID
				}
			}
			c, nss := t.xdpConfig(clk, ifx)
			if err := p.Configure(c, nss); err != nil {
				return err
			}
			x.prog.Store(p)
			return nil
		}})
	return err
}

// Tick moves the program's counters into the stage's and its time offsets
// with the clock, on instance 0.
func (t *transit) Tick(ctx *plugins.Context) {
	x := t.xdp
	if x == nil || ctx.Instance != 0 || ctx.Now < x.nextTick {
		return
	}
	x.nextTick = ctx.Now + xdpTickInterval
	p := x.prog.Load()
	if p == nil {
		return
	}
	if tai := [2]int{kernelTAIOffset(), ctx.Clock.Sync().TAIOffset}; tai != x.tai {
		utc := -int64(tai[0]) * 1e9
		if err := p.SetClock(utc, utc+int64(tai[1])*1e9); err == nil {
			x.tai = tai
		}
	}
	// The program's counters start at zero with its maps: the first read
	// counts everything since.
	if v, err := p.Counters(); err == nil {
		if x.last == nil {
			x.last = make([]uint64, len(v))
		}
		for i, n := range v {
			if n > x.last[i] {
				x.counters[i].Add(n - x.last[i])
			}
		}
		x.last = v
	}
}

// xdpConfig is the transit's config as its XDP program reads it. The
// program reads CLOCK_TAI and the ingress interface's index: ifindex maps
// those indexes to the stage's port ids.
func (t *transit) xdpConfig(c clock.Clock, ifindex map[int]uint16) (bpf.TransitConfig, []bpf.Namespace) {
	utcOff := -int64(kernelTAIOffset()) * 1e9
	tc := bpf.TransitConfig{Loopback: t.loop != nil, EgressID: t.eg.short, EgressIDWide: t.eg.wide,
		UTCOffset: utcOff, TAIOffset: utcOff + int64(c.Sync().TAIOffset)*1e9,
		IngressByIndex: map[int][2]uint32{}}
	for ifx, port := range ifindex {
		ids := t.ingressIDs(port)
		tc.IngressByIndex[ifx] = [2]uint32{uint32(ids.short), ids.wide}
	}
	var nss []bpf.Namespace
	for _, ns := range t.ns.ns {
		nss = append(nss, bpf.Namespace{ID: ns.ID, NodeID: ns.NodeID, NodeIDWide: ns.NodeIDWide, Data: ns.Data,
			DataWide: ns.DataWide, Timestamp: uint8(ns.Timestamp), HasSchema: ns.HasSchema, SchemaID: ns.SchemaID,
			Schema: ns.Schema})
	}
	return tc, nss
}

// kernelTAIOffset is CLOCK_TAI − CLOCK_REALTIME in seconds: the kernel's
// TAI offset, 0 until something (chrony, ptp4l) sets it.
func kernelTAIOffset() int {
	var tx unix.Timex
	if _, err := unix.Adjtimex(&tx); err != nil {
		return 0
	}
	return int(tx.Tai)
}
