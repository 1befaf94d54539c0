package stamp

import (
	"fmt"
	"sync/atomic"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/linerate/linerate/appliance/offload"
	"github.com/linerate/linerate/appliance/stats"
	"github.com/linerate/linerate/plugins"
	"github.com/linerate/linerate/plugins/stamp/bpf"
)

// rfXDP is a reflector stage's in-kernel part, shared by its instances:
// the request, and the program's maps once a port loaded them. Instance 0
// keeps them in step with the session table and the clock, and moves the
// program's counters into its own.
type rfXDP struct {
	req  *offload.Request
	prog atomic.Pointer[bpf.Reflector]

	// Instance 0's, on its lcore.
	table    *rfTable
	nextTick int64
	ee       [2]ErrorEstimate
	tai      int
	last     []uint64
	counters []*stats.Counter // by bpf.ReflectorCounters
}

// xdpTickInterval is how often instance 0 syncs the program: session
// changes reach the kernel within it.
const xdpTickInterval = 100e6 // ns

// xdpBlocker says why the reflector's config cannot run in XDP, "" if it
// can.
func (r *reflector) xdpBlocker(c *reflectorConfig) string {
	switch {
	case c.Forward != "in":
		return `the program sends replies back out of the port they came in on (XDP_TX): set forward = "in"`
	case len(r.addrs) > 64:
		return "more than 64 addresses"
	case len(r.allow) > 256:
		return "more than 256 allowed prefixes"
	case len(r.bcast) > 8:
		return "the ports have more than 8 IPv4 broadcast addresses"
	}
	return ""
}

// askXDP asks for the offload: with mode xdp a config the program cannot
// run is an error, with auto the stage stays in Go.
func (r *reflector) askXDP(s *plugins.Setup, c *reflectorConfig, mode offload.Mode) error {
	if why := r.xdpBlocker(c); why != "" {
		if mode == offload.XDP {
			return fmt.Errorf("%s: stamp.reflector: offload = \"xdp\": %s", s.Config.Where(), why)
		}
		s.Log.Info("stamp.reflector runs in Go", "stage", s.Name, "why", why)
		return nil
	}
	x := s.Shared("stamp.reflector/xdp", func() any { return &rfXDP{} }).(*rfXDP)
	r.xdp = x
	r.xdpCounters(s, x)
	if x.req != nil {
		return nil
	}
	spec, err := bpf.ReflectorSpec()
	if err != nil {
		return err
	}
	x.req, err = offload.Ask(s.Shared, s.Name, s.Config.Where(), mode, offload.Program{Spec: spec, Slot: bpf.ReflectorSlot,
		Prepare: func(maps map[string]*ebpf.Map) error {
			p, err := bpf.ReflectorMaps(maps)
			if err != nil {
				return err
			}
			if err := p.Configure(r.xdpConfig()); err != nil {
				return err
			}
			if err := r.syncXDP(p, r.reg.rf.Load()); err != nil {
				return err
			}
			x.prog.Store(p)
			return nil
		}})
	return err
}

// xdpCounters registers the program's counters as the stage's, by the Go
// names: "reflected" is the stage's own, the drop reasons are counters of
// their names, and "xdp_to_go" counts the packets the program left to Go.
func (r *reflector) xdpCounters(s *plugins.Setup, x *rfXDP) {
	if s.Instance != 0 {
		return
	}
	x.counters = make([]*stats.Counter, len(bpf.ReflectorCounters))
	for i, n := range bpf.ReflectorCounters {
		switch n {
		case "reflected":
			x.counters[i] = r.cReflected
		case "to_go":
			x.counters[i] = s.Counters.New("xdp_to_go", "test packets the XDP program left to this stage (TLVs, authenticated mode, extension headers)")
		default:
			x.counters[i] = s.Counters.New(n, "test packets the XDP program dropped: "+n)
		}
	}
}

// Tick keeps the program in step, on instance 0: the sessions when the
// table changed, the clock's Error Estimates and offsets, and the counters.
func (r *reflector) Tick(ctx *plugins.Context) {
	x := r.xdp
	if x == nil || ctx.Instance != 0 || ctx.Now < x.nextTick {
		return
	}
	x.nextTick = ctx.Now + xdpTickInterval
	p := x.prog.Load()
	if p == nil {
		return
	}
	if t := r.reg.rf.Load(); t != x.table {
		if err := r.syncXDP(p, t); err != nil {
			ctx.Log.Warn("stamp.reflector: the XDP program's sessions", "err", err)
		} else {
			x.table = t
		}
	}
	r.ee.refresh()
	if tai := kernelTAIOffset(); r.ee.ee != x.ee || tai != x.tai {
		c := r.xdpConfig()
		if err := p.SetClock(c.ErrorEstimates, c.UTCOffset, c.PTPOffset); err == nil {
			x.ee, x.tai = r.ee.ee, tai
		}
	}
	if v, err := p.Counters(); err == nil {
		for i, n := range v {
			if i < len(x.last) && n > x.last[i] {
				x.counters[i].Add(n - x.last[i])
			}
		}
		x.last = v
	}
}

// xdpConfig is the reflector's config as its XDP program reads it. The
// program reads CLOCK_TAI; utcOff is Unix time − CLOCK_TAI (kernelTAIOffset
// says how far apart they are).
func (r *reflector) xdpConfig() bpf.ReflectorConfig {
	r.ee.refresh()
	utcOff := -int64(kernelTAIOffset()) * 1e9
	c := bpf.ReflectorConfig{Port: r.port, HopLimit: r.hopLimit, SwapMAC: r.swapMAC, ReflectAll: r.reflectAll,
		Format:         int8(r.format),
		ErrorEstimates: [2]uint16{uint16(r.ee.ee[formatNTP]), uint16(r.ee.ee[formatPTP])},
		UTCOffset:      utcOff, PTPOffset: utcOff + int64(r.ee.tai)*1e9,
		Broadcasts: r.bcast, Addresses: r.addrs, Allow: r.allow}
	if r.limiter != nil {
		c.RateLimit, c.RateBurst = r.limiter.perNs*1e9, int(r.limiter.burst)
	}
	return c
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

// xdpSession is a reflector session as the XDP program reads it.
func xdpSession(s *rfSession) bpf.ReflectorSession {
	x := bpf.ReflectorSession{SSID: s.id, Stateful: s.cfg.Stateful, Running: s.running.Load(), Auth: s.cfg.Auth,
		Pinned: s.pinned, Format: int8(s.format), Sender: s.sender, ReturnEnd: s.retLast,
		SRH: s.srh, SRHLast: s.srhLast}
	if s.cfg.Source.IsValid() {
		x.Source, x.HasSource = as16(s.cfg.Source), true
	}
	return x
}

// syncXDP makes the program's sessions this stage's: those of the table
// put (their program state kept), the others removed.
func (r *reflector) syncXDP(p *bpf.Reflector, t *rfTable) error {
	have, err := p.Sessions()
	if err != nil {
		return err
	}
	keep := map[uint16]bool{}
	if t != nil {
		for id, s := range t.m {
			if s.stage != r.name {
				continue
			}
			x := xdpSession(s)
			if !x.Offloadable() {
				continue // its packets go up to this stage
			}
			if err := p.PutSession(x); err != nil {
				return err
			}
			keep[id] = true
		}
	}
	for _, id := range have {
		if !keep[id] {
			if err := p.DeleteSession(id); err != nil {
				return err
			}
		}
	}
	return nil
}
