//go:build linux

package xdp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/linerate/linerate/appliance/offload"
)

// Limits of the dispatcher (bpf/dispatcher.c).
const (
	MaxRules  = 64
	MaxSlots  = 8
	maxQueues = 256
	ruleSize  = 32
)

// Rule fields set (struct rule.set).
const (
	rNextHeader = 1 << iota
	rUDPDst
	rUDPSrc
	rPrefix
	rHBH
	rSRH
	rIOAM
)

// Rule is one match rule of the dispatcher: a packet that meets every field
// set goes to the AF_XDP socket of its queue. The fields are the classify
// stage's, and IOAM: an IOAM option (RFC 9486) in a Hop-by-Hop or
// Destination Options header.
type Rule struct {
	NextHeader *int         // upper-layer protocol after the IPv6 extension headers (IPv4: protocol)
	UDPDstPort *int         // UDP destination port
	UDPSrcPort *int         // UDP source port
	DstPrefix  netip.Prefix // destination address within
	HopByHop   *bool        // a Hop-by-Hop Options header present, or absent
	SRH        *bool        // a Segment Routing Header present, or absent
	IOAM       *bool        // an IOAM option present, or absent
}

// check says what is wrong with r.
func (r Rule) check() error {
	if r.NextHeader == nil && r.UDPDstPort == nil && r.UDPSrcPort == nil && !r.DstPrefix.IsValid() &&
		r.HopByHop == nil && r.SRH == nil && r.IOAM == nil {
		return errors.New("sets no field: it would take every packet (say take_all = true for that)")
	}
	if r.NextHeader != nil && (*r.NextHeader < 0 || *r.NextHeader > 255) {
		return fmt.Errorf("next_header %d is outside 0..255", *r.NextHeader)
	}
	for _, p := range []*int{r.UDPDstPort, r.UDPSrcPort} {
		if p != nil && (*p < 0 || *p > 65535) {
			return fmt.Errorf("udp port %d is outside 0..65535", *p)
		}
	}
	return nil
}

// encode is r as the dispatcher's struct rule.
func (r Rule) encode() []byte {
	b := make([]byte, ruleSize)
	tri := func(v *bool, bit uint8, at int) {
		if v != nil {
			b[0] |= bit
			if *v {
				b[at] = 1
			}
		}
	}
	if r.NextHeader != nil {
		b[0] |= rNextHeader
		b[1] = uint8(*r.NextHeader)
	}
	tri(r.HopByHop, rHBH, 2)
	tri(r.SRH, rSRH, 3)
	tri(r.IOAM, rIOAM, 4)
	if r.DstPrefix.IsValid() {
		b[0] |= rPrefix
		p := r.DstPrefix.Masked()
		b[5] = uint8(p.Bits())
		b[6] = 6
		a := p.Addr().AsSlice()
		if p.Addr().Is4() {
			b[6] = 4
		}
		copy(b[16:], a)
	}
	if r.UDPDstPort != nil {
		b[0] |= rUDPDst
		binary.BigEndian.PutUint16(b[8:], uint16(*r.UDPDstPort))
	}
	if r.UDPSrcPort != nil {
		b[0] |= rUDPSrc
		binary.BigEndian.PutUint16(b[10:], uint16(*r.UDPSrcPort))
	}
	return b
}

// Counters of the dispatcher, by index in its counters map.
var dispatcherCounters = []struct{ name, help string }{
	{"xdp_matched", "packets a match rule sent to the AF_XDP socket"},
	{"xdp_passed", "packets left to the kernel's stack"},
	{"xdp_offload_user", "packets an offload sent up to the Go stages"},
	{"xdp_no_socket", "packets for a queue without an AF_XDP socket, left to the kernel"},
	{"xdp_offload_tx", "packets an offload sent back out (XDP_TX)"},
	{"xdp_offload_drop", "packets an offload dropped"},
	{"xdp_offload_pass", "packets an offload gave to the kernel"},
	{"xdp_unparsed", "packets whose headers did not parse, left to the kernel"},
	{"xdp_passed_early", "packets of xdp_passed decided on their first headers, without the rule walk"},
	{"xdp_no_room", "packets taken but left to the kernel: no room in the headroom for the rx stamp"},
}

// stampVia is how the dispatcher hands its rx stamp (struct lr_xdp_meta)
// up with a frame: stamp_via in bpf/dispatcher.c.
type stampVia uint32

const (
	viaNone stampVia = iota // no stamp: RxTime is the engine's clock
	viaMeta                 // the XDP metadata area, in front of the data
	viaHead                 // the frame's first bytes: the descriptor starts at the stamp
)

func (v stampVia) String() string {
	switch v {
	case viaNone:
		return "none"
	case viaMeta:
		return "metadata"
	case viaHead:
		return "headroom"
	}
	return fmt.Sprintf("stampVia(%d)", uint32(v))
}

// strip is what the port takes off the front of a frame the socket gets.
func (v stampVia) strip() int {
	if v == viaHead {
		return lrMetaSize
	}
	return 0
}

// dispatcher is the port's XDP program and its maps.
type dispatcher struct {
	prog     *ebpf.Program
	xsks     *ebpf.Map
	rules    *ebpf.Map
	sums     *ebpf.Map // the pass path's summaries, one per half of the table
	control  *ebpf.Map
	counters *ebpf.Map
	devBound bool
	nslots   int
	via      stampVia

	mu     sync.Mutex // reloads
	active uint32
	link   link.Link
	closed bool
}

// dispatcherConfig is how a dispatcher loads.
type dispatcherConfig struct {
	ifindex int      // device-bound to it; 0: plain (any interface, and prog.Run)
	via     stampVia // how the rx stamp goes up
	hw      bool     // ask the NIC for its stamp (device-bound only)
	walk    bool     // walk the rules for every packet: the summary's reference in tests
	log     *slog.Logger
	name    string // the port's: the verifier log's file is named after it
}

// loadDispatcher loads the dispatcher with the requests' programs in its
// slots (offload.Link).
func loadDispatcher(c dispatcherConfig, reqs []*offload.Request) (*dispatcher, error) {
	if len(reqs) > MaxSlots {
		return nil, fmt.Errorf("%d offloads on one port: at most %d", len(reqs), MaxSlots)
	}
	load := loadDispatcherPlain
	if c.ifindex != 0 {
		load = loadDispatcherDev
	}
	spec, err := load()
	if err != nil {
		return nil, err
	}
	for name, v := range map[string]uint32{
		"nslots":      uint32(len(reqs)),
		"stamp_via":   uint32(c.via),
		"use_summary": boolU32(!c.walk),
		"hw_stamp":    boolU32(c.hw && c.ifindex != 0),
	} {
		if err := spec.Variables[name].Set(v); err != nil {
			return nil, fmt.Errorf("the dispatcher's %s: %w", name, err)
		}
	}
	spec, repl, err := offload.Link(spec, "lr_dispatch", reqs)
	if err != nil {
		return nil, err
	}
	offload.BindToDevice(spec, "lr_dispatch", c.ifindex)
	coll, err := ebpf.NewCollectionWithOptions(spec, ebpf.CollectionOptions{MapReplacements: repl})
	if err != nil {
		what := "load the XDP dispatcher"
		if c.ifindex != 0 {
			what = "load the device-bound XDP dispatcher"
		}
		return nil, loadFailed(c.log, what, c.name, err)
	}
	d := &dispatcher{prog: coll.Programs["lr_dispatch"], xsks: coll.Maps["xsks"], rules: coll.Maps["rules"],
		sums: coll.Maps["summaries"], control: coll.Maps["control"], counters: coll.Maps["counters"],
		devBound: c.ifindex != 0, nslots: len(reqs), via: c.via}
	// The stages' maps in coll are the requests' (MapReplacements): coll's
	// references to them go with it, and the requests keep their own.
	for name, m := range coll.Maps {
		if _, mine := map[string]bool{"xsks": true, "rules": true, "summaries": true, "control": true, "counters": true}[name]; !mine {
			m.Close()
		}
	}
	return d, nil
}

func boolU32(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}

// setRules writes the match table into the half not in use and then makes it
// the one in use, with one store: a packet meets either the old table or the
// new, never a mix. The program stays attached.
func (d *dispatcher) setRules(rs []Rule, takeAll bool) error {
	if len(rs) > MaxRules {
		return fmt.Errorf("%d match rules: at most %d", len(rs), MaxRules)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, r := range rs {
		if err := r.check(); err != nil {
			return fmt.Errorf("match rule %d: %w", i, err)
		}
	}
	next := d.active ^ 1
	for i, r := range rs {
		if err := d.rules.Update(uint32(next*MaxRules+uint32(i)), r.encode(), ebpf.UpdateAny); err != nil {
			return fmt.Errorf("match rule %d: %w", i, err)
		}
	}
	if err := d.sums.Update(next, summarize(rs).encode(), ebpf.UpdateAny); err != nil {
		return fmt.Errorf("match table's summary: %w", err)
	}
	ctl := make([]byte, 16)
	binary.NativeEndian.PutUint32(ctl[0:], next)
	binary.NativeEndian.PutUint32(ctl[4:], uint32(len(rs)))
	if takeAll {
		binary.NativeEndian.PutUint32(ctl[8:], 1)
	}
	if err := d.control.Update(uint32(0), ctl, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("match table: %w", err)
	}
	d.active = next
	return nil
}

// setSocket puts queue's AF_XDP socket in the XSKMAP.
func (d *dispatcher) setSocket(queue, fd int) error {
	if queue >= maxQueues {
		return fmt.Errorf("queue %d: the dispatcher redirects to queues below %d", queue, maxQueues)
	}
	return d.xsks.Update(uint32(queue), uint32(fd), ebpf.UpdateAny)
}

// stats sums the per-CPU counters by name.
func (d *dispatcher) stats() map[string]uint64 {
	out := map[string]uint64{}
	vals, err := offload.SumPerCPU(d.counters)
	if err != nil {
		return out
	}
	for i, c := range dispatcherCounters {
		if i < len(vals) {
			out[c.name] = vals[i]
		}
	}
	// The program counts each packet once: an early pass is a pass.
	out["xdp_passed"] += out["xdp_passed_early"]
	return out
}

func (d *dispatcher) close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	var errs []error
	if d.link != nil {
		errs = append(errs, d.link.Close())
	}
	for _, c := range []interface{ Close() error }{d.prog, d.xsks, d.rules, d.sums, d.control, d.counters} {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}
