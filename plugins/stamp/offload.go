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
	running  map[uint16]bool // as last given to the program
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
	case bpf.AddressesFit(r.addrs) != nil:
		return bpf.AddressesFit(r.addrs).Error()
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
		if s.Instance == 0 { // once, not per instance
			s.Log.Info("stamp.reflector runs in Go", "stage", s.Name, "why", why)
		}
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

// runningChanged reports whether a session of table t was started or
// stopped since the program was given it.
func (r *reflector) runningChanged(x *rfXDP, t *rfTable) bool {
	if x.running == nil {
		x.running = map[uint16]bool{}
	}
	if t == nil {
		return false
	}
	for id, s := range t.m {
		if s.stage == r.name && s.running.Load() != x.running[id] {
			return true
		}
	}
	return false
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
	// A new table, or a session started or stopped (its flag, not the
	// table, changes).
	if t := r.reg.rf.Load(); t != x.table || r.runningChanged(x, t) {
		if err := r.syncXDP(p, t); err != nil {
			ctx.Log.Warn("stamp.reflector: the XDP program's sessions", "err", err)
		} else {
			x.table = t
			if x.running == nil {
				x.running = map[uint16]bool{}
			}
			clear(x.running)
			if t != nil {
				for id, s := range t.m {
					if s.stage == r.name {
						x.running[id] = s.running.Load()
					}
				}
			}
		}
	}
	r.ee.refresh()
	if tai := kernelTAIOffset(); r.ee.ee != x.ee || tai != x.tai {
		c := r.xdpConfig()
		if err := p.SetClock(c.ErrorEstimates, c.UTCOffset, c.PTPOffset); err == nil {
			x.ee, x.tai = r.ee.ee, tai
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
			// One the program cannot answer it leaves to this stage.
			x := xdpSession(s)
			if err := p.PutSession(x); err != nil {
				return err
			}
			// With the offload on, a stateful session's packets take
			// their numbers from the program's counter on both paths.
			var k *uint32
			if r.xdp != nil && x.Stateful && x.Offloadable() {
				if k, err = p.Seq(id); err != nil {
					return err
				}
			}
			s.kseq.Store(k)
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

// coXDP is a collector stage's in-kernel part, shared by its instances.
// Each instance polls its ring of records; instance 0 keeps the program's
// sessions in step with the table and moves its counters into the stage's.
type coXDP struct {
	req    *offload.Request
	prog   atomic.Pointer[bpf.Collector]
	utcOff atomic.Int64 // Unix ns − CLOCK_TAI ns, for T4

	// Instance 0's, on its lcore.
	table    *txTable
	nextTick int64
	last     []uint64
	counters []*stats.Counter // by bpf.CollectorCounters
}

// askXDP asks for the collector's offload.
func (c *collector) askXDP(s *plugins.Setup, mode offload.Mode) error {
	if s.NumInstances > bpf.MaxCollectorInstances {
		why := fmt.Sprintf("%d instances: the program has rings for %d", s.NumInstances, bpf.MaxCollectorInstances)
		if mode == offload.XDP {
			return fmt.Errorf("%s: stamp.collector: offload = \"xdp\": %s", s.Config.Where(), why)
		}
		if s.Instance == 0 { // once, not per instance
			s.Log.Info("stamp.collector runs in Go", "stage", s.Name, "why", why)
		}
		return nil
	}
	x := s.Shared("stamp.collector/xdp", func() any { return &coXDP{} }).(*coXDP)
	c.xdp = x
	c.onEvent = c.takeXDP // made once: Poll's callback allocates nothing
	if s.Instance == 0 {
		x.counters = make([]*stats.Counter, len(bpf.CollectorCounters))
		for i, n := range bpf.CollectorCounters {
			switch n {
			case "records":
				x.counters[i] = s.Counters.New("xdp_records", "replies the XDP program took and handed to this stage's records")
			case "to_go":
				x.counters[i] = s.Counters.New("xdp_to_go", "replies the XDP program left to this stage (TLVs, authenticated mode, extension headers)")
			case "ring_full":
				x.counters[i] = s.Counters.New("xdp_ring_full", "replies the XDP program left to this stage for a full ring")
			default:
				x.counters[i] = s.Counters.New(n, "replies the XDP program dropped: "+n)
			}
		}
	}
	if x.req != nil {
		return nil
	}
	spec, err := bpf.CollectorSpec(max(s.NumInstances, 1))
	if err != nil {
		return err
	}
	n, port, check := s.NumInstances, c.port, c.checkSrc
	x.req, err = offload.Ask(s.Shared, s.Name, s.Config.Where(), mode, offload.Program{Spec: spec, Slot: bpf.CollectorSlot,
		Prepare: func(maps map[string]*ebpf.Map) error {
			p, err := bpf.CollectorMaps(maps, max(n, 1))
			if err != nil {
				return err
			}
			if err := p.Configure(bpf.CollectorConfig{Port: port, CheckSource: check}); err != nil {
				p.Close()
				return err
			}
			x.utcOff.Store(-int64(kernelTAIOffset()) * 1e9)
			x.prog.Store(p)
			return nil
		}})
	return err
}

// xdpTick takes the records the program left in this instance's ring; on
// instance 0 it also syncs the program's sessions (the replies of sessions
// it does not have yet go to Go meanwhile) and counters.
func (c *collector) xdpTick(ctx *plugins.Context) {
	x := c.xdp
	if x == nil {
		return
	}
	p := x.prog.Load()
	if p == nil {
		return
	}
	c.tickCtx = ctx
	if _, err := p.Poll(ctx.Instance, c.onEvent); err != nil {
		ctx.Log.Warn("stamp.collector: the XDP program's ring", "err", err)
	}
	if ctx.Instance != 0 || ctx.Now < x.nextTick {
		return
	}
	x.nextTick = ctx.Now + xdpTickInterval
	x.utcOff.Store(-int64(kernelTAIOffset()) * 1e9)
	if t := c.reg.tx.Load(); t != x.table {
		var ss []bpf.CollectorSession
		if t != nil {
			for id, s := range t.m {
				cs := bpf.CollectorSession{SSID: id, SrcPort: s.cfg.SrcPort, IPv4: s.ipv4, Auth: s.cfg.Auth,
					HMACTLV: s.hmacTLV >= 0, Owner: ctx.Env.Owner(sessionKey(id)), Src: s.src16, Reflector: s.replySrc}
				if s.ipv4 {
					cs.Src, cs.Reflector = v4mapped(s.src4), v4mapped(s.replySrc4)
				}
				ss = append(ss, cs)
			}
		}
		if err := p.SetSessions(ss); err != nil {
			ctx.Log.Warn("stamp.collector: the XDP program's sessions", "err", err)
		} else {
			x.table = t
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

// takeXDP makes the record of a reply the program took: what take does
// after its checks, which the program made.
func (c *collector) takeXDP(ev *bpf.Event) {
	s := c.reg.tx.Load().get(ev.SSID)
	if s == nil {
		return // the session went since
	}
	if owner := s.col.Load(); owner != c {
		if owner != nil && owner.name != c.name {
			return // another collector stage's session: not ours to measure
		}
		s.col.Store(c)
	}
	if gen := s.sentGen.Load(); gen != s.rx.gen {
		s.rx.reset()
		s.rx.gen = gen
	}
	tai := 37
	if st := c.tickCtx.Clock.Sync(); st.TAIOffset != 0 {
		tai = st.TAIOffset
	}
	var r Record
	c.record(s, &r, ev.Pay[:], ev.Hop, int64(ev.T4)+c.xdp.utcOff.Load(), tai)
}
