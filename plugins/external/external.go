// Package external is the external stage: a stage that runs in a plugin
// process of its own (written with plugins/sdk), launched and watched through
// hashicorp/go-plugin, with packets lent to it over memif rings.
//
// The stage lends each packet of its burst to the plugin and leaves it
// (Consume): the lcore never waits. Results come back asynchronously, in the
// order lent, and Produce gives them to the stages after this one, forwards
// them, or frees them, as the plugin said. Packets of linerate's own (shared,
// memfd-backed) pools go without a copy; others (DPDK mbufs) are copied into
// the stage's pool first, and counted. A plugin that makes packets (its
// stage asked for a pool) is lent empty buffers of a shared pool and emits
// them back, to a port or to the next stage; every emit is checked against
// what it was lent. A plugin that dies or hangs is killed with its whole
// cgroup, reaped, and only then are its packets and buffers taken back;
// meanwhile packets fail open (continue) or closed (drop as plugin_down), and
// the plugin restarts with backoff.
package external

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"time"
	"unsafe"

	"github.com/BurntSushi/toml"

	"github.com/linerate/linerate/appliance/clock"
	"github.com/linerate/linerate/appliance/memif"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/appliance/stats"
	"github.com/linerate/linerate/plugins"
)

func init() {
	plugins.Register(plugins.Kind{Name: "external", Summary: "run a stage in a plugin process (plugins/sdk), packets over memif", New: newStage})
}

var (
	reasonDown     = packet.RegisterReason("plugin_down")      // the plugin is down and the stage fails closed
	reasonRingFull = packet.RegisterReason("plugin_ring_full") // the plugin has a whole ring lent and unanswered
	reasonNoCopy   = packet.RegisterReason("plugin_no_buffer") // a packet of an unshared pool found no buffer to be copied into
	// The plugin has a whole ring lent and made no progress for
	// stall_timeout, and the stage fails closed (open: the packet passes).
	reasonStalled   = packet.RegisterReason("plugin_stalled")
	reasonBadWindow = packet.RegisterReason("plugin_bad_window") // the plugin's result moved the window out of the buffer
	reasonBadResult = packet.RegisterReason("plugin_bad_result") // the plugin answered the packet before it was lent
	reasonLost      = packet.RegisterReason("plugin_lost")       // lent to a plugin that was lost (fail closed): taken back and dropped
	// A drop by a reason of the plugin's past the names it may add, or one
	// it never announced (reasons.go).
	reasonOverflow = packet.RegisterReason("plugin_reason_overflow")
)

type stageConfig struct {
	Plugin       string `toml:"plugin"`        // the plugin binary, absolute
	SHA256       string `toml:"sha256"`        // its checksum: refused when it differs
	User         string `toml:"user"`          // run it as this user
	CPU          int    `toml:"cpu"`           // pin its threads to this CPU; -1 for none
	Fail         string `toml:"fail"`          // "closed" (default): drop while down; "open": continue
	HangTimeout  string `toml:"hang_timeout"`  // no progress this long with packets lent: lost
	StallTimeout string `toml:"stall_timeout"` // a full ring and no progress this long: stalled
	RingSize     int    `toml:"ring_size"`     // packets in flight per instance
	CopyBuffers  int    `toml:"copy_buffers"`  // the pool for copies of unshared packets
	RestartAfter string `toml:"restart_after"` // the first restart's delay, doubling to 5s
	// Containment: "cgroup" (the default), each generation in a cgroup v2
	// leaf that its kill empties; "none" accepts, by name, that a process
	// the plugin starts may outlive it.
	Containment string         `toml:"containment"`
	Config      map[string]any `toml:"config"` // the plugin's own table

	hangD, restartD, stallD time.Duration
}

func (c *stageConfig) hang() time.Duration       { return c.hangD }
func (c *stageConfig) restartMin() time.Duration { return c.restartD }

func (c *stageConfig) check() error {
	if c.Plugin == "" {
		return errors.New("plugin: the plugin binary's path is required")
	}
	switch c.Fail {
	case "":
		c.Fail = "closed"
	case "open", "closed":
	default:
		return fmt.Errorf("fail %q: \"open\" or \"closed\"", c.Fail)
	}
	var err error
	if c.hangD, err = durationOr(c.HangTimeout, 2*time.Second); err != nil {
		return fmt.Errorf("hang_timeout: %w", err)
	}
	if c.stallD, err = durationOr(c.StallTimeout, min(10*time.Millisecond, c.hangD/2)); err != nil {
		return fmt.Errorf("stall_timeout: %w", err)
	}
	if c.stallD >= c.hangD {
		return fmt.Errorf("stall_timeout %v: shorter than hang_timeout (%v)", c.stallD, c.hangD)
	}
	if c.restartD, err = durationOr(c.RestartAfter, 100*time.Millisecond); err != nil {
		return fmt.Errorf("restart_after: %w", err)
	}
	if c.RingSize == 0 {
		c.RingSize = 1024
	}
	if c.RingSize < packet.MaxBurst || c.RingSize > 1<<memif.MaxLog2Ring || c.RingSize&(c.RingSize-1) != 0 {
		return fmt.Errorf("ring_size %d: a power of two in %d..%d", c.RingSize, packet.MaxBurst, 1<<memif.MaxLog2Ring)
	}
	if c.CopyBuffers == 0 {
		c.CopyBuffers = 4096
	}
	switch c.Containment {
	case "":
		c.Containment = "cgroup"
	case "cgroup", "none":
	default:
		return fmt.Errorf("containment %q: \"cgroup\", or \"none\" to accept that what the plugin starts may outlive it", c.Containment)
	}
	if c.CPU < -1 {
		return fmt.Errorf("cpu %d: a CPU id, or -1", c.CPU)
	}
	return nil
}

func durationOr(s string, d time.Duration) (time.Duration, error) {
	if s == "" {
		return d, nil
	}
	v, err := time.ParseDuration(s)
	if err == nil && v <= 0 {
		err = errors.New("must be positive")
	}
	return v, err
}

func newStage(s *plugins.Setup) (plugins.Stage, error) {
	c := stageConfig{CPU: -1}
	if err := s.Config.Decode(&c); err != nil {
		return nil, err
	}
	if err := c.check(); err != nil {
		return nil, fmt.Errorf("%s: %w", s.Config.Where(), err)
	}
	if err := checkRegions(); err != nil {
		return nil, fmt.Errorf("%s: %w", s.Config.Where(), err)
	}
	var text bytes.Buffer
	if err := toml.NewEncoder(&text).Encode(c.Config); err != nil {
		return nil, fmt.Errorf("%s: config: %w", s.Config.Where(), err)
	}
	var svErr error
	sv, _ := s.Shared("external", func() any {
		sv, err := newSupervisor(c, s, text.String())
		svErr = err
		return sv
	}).(*supervisor)
	if sv == nil {
		if svErr == nil {
			svErr = errors.New("the plugin failed to start for an earlier instance")
		}
		return nil, fmt.Errorf("%s: %w", s.Config.Where(), svErr)
	}
	copies, err := s.Pool("external."+s.Name, c.CopyBuffers, 2048)
	if err != nil {
		return nil, err
	}
	in := &instance{sv: sv, idx: s.Instance, failOpen: c.Fail == "open", copyPool: copies, stall: int64(c.stallD),
		lent: make([]packet.Handle, c.RingSize), lentAt: make([]int64, c.RingSize), mask: uint16(c.RingSize - 1),
		latency: s.Histograms("plugin_latency", "time from lending a packet to taking its result back (the oldest of each batch of results)", "ns")}
	cs := s.Counters
	in.c = counters{
		lent:      cs.New("lent", "packets lent to the plugin"),
		returned:  cs.New("returned", "results the plugin gave back"),
		forwarded: cs.New("forwarded", "packets the plugin forwarded to a port"),
		dropped:   cs.New("dropped", "packets the plugin dropped"),
		consumed:  cs.New("consumed", "packets the plugin consumed"),
		marked:    cs.New("marked", "packets the plugin marked"),
		copies:    cs.New("copies", "packets of unshared pools copied before they were lent"),
		badWindow: cs.New("bad_window", "results whose data window left the packet's buffer: dropped"),
		badResult: cs.New("bad_result", "results for packets never lent (the plugin's result tail ahead of what was lent, or behind what was taken): ignored"),
		reclaimed: cs.New("reclaimed", "packets taken back from a lost plugin"),
		lost:      cs.New("plugin_lost", "times the plugin died or hung and was killed (instance 0 counts)"),
		restarts:  cs.New("plugin_restarts", "times the plugin was started again (instance 0 counts)"),
		bypassed: cs.New("plugin_bypassed", "packets that passed the plugin by, with fail = \"open\": "+
			"while it was down, or stalled with a full ring"),
	}
	if sv.emitBuffers > 0 {
		// Spares for the plugin's new packets: up to a ring's worth lent per
		// instance, and as many again in flight on linerate's side (tx
		// buffers, the stages after this one) before the plugin runs short.
		spares := min(sv.emitBuffers, c.RingSize, memif.ExtMaxSpare)
		in.emitPool, err = s.Pool("external."+s.Name+".emit", 2*spares*s.NumInstances+packet.MaxBurst, sv.emitDataRoom)
		if err != nil {
			return nil, fmt.Errorf("%s: the plugin's pool: %w", s.Config.Where(), err)
		}
		in.spare = make([]packet.Handle, spares)
		in.freeIDs = make([]uint16, 0, spares)
		for id := spares - 1; id >= 0; id-- {
			in.freeIDs = append(in.freeIDs, uint16(id))
		}
		in.c.emitted = cs.New("emitted", "packets the plugin made and emitted, to a port or the next stage")
		in.c.badEmit = cs.New("bad_emit", "emits naming no buffer lent to the plugin (forged, replayed) or a window outside it: dropped")
	}
	if err := checkRegions(); err != nil { // the stage's own pools
		return nil, fmt.Errorf("%s: %w", s.Config.Where(), err)
	}
	sv.inst[s.Instance] = in
	sv.refs.Add(1)
	return in, nil
}

type counters struct {
	lent, returned, forwarded, dropped, consumed, marked, copies, badWindow, reclaimed, lost, restarts *stats.Counter
	emitted, badEmit, badResult, bypassed                                                              *stats.Counter
}

// instance is the stage on one lcore.
type instance struct {
	sv       *supervisor
	idx      int
	failOpen bool
	copyPool packet.Pool
	c        counters
	// stall is stall_timeout in ns: a full ring with no progress this long
	// is a stalled plugin; warnedFull, the stage's warning of its first full
	// ring is given.
	stall      int64
	warnedFull bool

	l       *link
	lent    []packet.Handle // by lend sequence number & mask
	lentAt  []int64         // the loop time each was lent
	latency *stats.Histogram
	mask    uint16
	head    uint16 // next lend sequence number (the C2S head)
	done    uint16 // next result expected (the S2C slot)
	// orphans: after the plugin's loss, lent packets [done, head) are taken
	// back by Produce.
	orphans bool
	// Results the plugin wrote for packets not lent yet: slots [earlyFrom,
	// earlyFrom+early) (early 0: none); behindAt the last result tail seen
	// behind what was taken.
	earlyFrom, early       uint16
	behind                 bool
	behindAt               uint16
	seenLost, seenRestarts uint64

	// The plugin's new packets (nil emitPool: it makes none). spare[id] is
	// the buffer lent on the spare ring under id, 0 when that id is not lent;
	// freeIDs the ids that are not. spareHead is the spare ring's head,
	// emitDone the next emit to read.
	emitPool  packet.Pool
	spare     []packet.Handle
	freeIDs   []uint16
	spareHead uint16
	emitDone  uint16
	fresh     packet.Burst // lendSpares' allocations

	outstanding atomicInt
	progress    atomicInt
	touched     uint32 // what memif.Ring.Touch read: kept, so its loads are
}

var _ plugins.Producer = (*instance)(nil)

// Start takes the instance's link; the first instance to start has the
// plugin listen and dials every instance's link.
func (in *instance) Start(ctx *plugins.Context) error {
	if err := in.sv.start(); err != nil {
		return err
	}
	in.sync()
	return nil
}

// sync takes a new link, or gives up one whose plugin is dead.
func (in *instance) sync() {
	if in.l != nil && in.sv.dead.Load() >= in.l.gen {
		in.orphans = in.head != in.done || in.spares() > 0
		in.l.close()
		in.l = nil
	}
	if in.l == nil && !in.orphans {
		if l := in.sv.next[in.idx].Swap(nil); l != nil {
			in.l = l
			in.head, in.done = 0, 0
			in.spareHead, in.emitDone = 0, 0
			in.early, in.behind = 0, false
			// Every result and emit slot is free: the host's S2C slots
			// carry no buffers.
			l.conn.S2C[0].SetHead(uint16(len(in.lent)))
			if l.emits {
				l.conn.S2C[1].SetHead(l.conn.S2C[1].Size())
			}
		}
	}
	if in.idx == 0 {
		if n := in.sv.lost.Load(); n != in.seenLost {
			in.c.lost.Add(n - in.seenLost)
			in.seenLost = n
		}
		if n := in.sv.restarts.Load(); n != in.seenRestarts {
			in.c.restarts.Add(n - in.seenRestarts)
			in.seenRestarts = n
		}
	}
}

// Process lends the burst's packets to the plugin. A packet it cannot lend
// (plugin down, ring full) fails open or closed.
func (in *instance) Process(ctx *plugins.Context, b *packet.Burst) {
	in.sync()
	if in.l == nil {
		if in.failOpen {
			in.c.bypassed.Add(uint64(b.N))
			return
		}
		for i := 0; i < b.N; i++ {
			b.H[i].P().Drop(reasonDown)
		}
		return
	}
	if len(in.freeIDs) > 0 && in.emitting() {
		// Spare buffers go before the packets they may be copied for.
		in.lendSpares(ctx)
	}
	l := in.l
	r := l.conn.C2S[0]
	size := uint16(len(in.lent))
	// The loop's state in locals: its stores into the ring and the packets
	// could alias in's fields, which the compiler would reload per packet.
	head, limit := in.head, in.done+size
	lent, lentAt, mask, now := in.lent, in.lentAt, in.mask, ctx.Now
	first := head
	if head == in.done {
		in.progress.Store(clock.Mono())
	}
	full := reasonUnset
	lastPool, region, base := uint16(0xFFFF), uint16(0), uintptr(0)
	for i := 0; i < b.N; i++ {
		h := b.H[i]
		p := h.P()
		if head == limit {
			if full == reasonUnset {
				full = in.ringFull()
			}
			if full != reasonPass {
				p.Drop(full)
			} else {
				in.c.bypassed.Inc()
			}
			continue
		}
		if pid := p.PoolID(); pid != lastPool {
			lastPool, region, base = pid, l.regionOf[pid], l.base[pid]
		}
		if region == 0 {
			c, ok := in.copyPool.AllocOne()
			if !ok || c.P().CopyFrom(p, p.Headroom()) != nil {
				if ok {
					packet.FreeOne(c)
				}
				p.Drop(reasonNoCopy)
				continue
			}
			in.c.copies.Inc()
			p.Consume()
			ctx.Env.Free(h)
			h, p = c, c.P()
			lastPool = p.PoolID()
			region, base = l.regionOf[lastPool], l.base[lastPool]
		} else {
			p.Consume()
		}
		*r.D(head) = memif.Desc{Region: region, Offset: uint32(dataAddr(p) - base), Length: uint32(p.Len()),
			Metadata: memif.ExtRooms(p.Headroom(), p.Tailroom())}
		packet.Own(h, packet.OpLend, packet.NoOwner, ctx.Stage)
		lent[head&mask] = h
		lentAt[head&mask] = now
		head++
	}
	in.head = head
	in.c.lent.Add(uint64(head - first))
	r.SetHead(head)
	r.Kick() // only when the plugin sleeps on its eventfd: a load of the flags otherwise
	in.outstanding.Store(int64(head - in.done))
	// The next burst's slots, owned before it comes: the plugin read them
	// a lap ago, and is done with every slot not lent.
	r.PrepareWrite(head, min(packet.MaxBurst, limit-head))
}

// Outcomes of ringFull besides a drop reason.
const (
	reasonUnset = packet.Reason(0xFFFF) // not asked yet
	reasonPass  = packet.Reason(0xFFFE) // the packet passes the plugin by
)

// ringFull is what becomes of the packets of a burst that find the ring
// full: dropped as plugin_ring_full while the plugin makes progress (it is
// slower than the traffic); once it has made none for stall_timeout it is
// stalled (hung, or descheduled), and they pass it by with fail = "open"
// (plugin_bypassed) or drop as plugin_stalled, until hang_timeout has the
// plugin killed and restarted. The first full ring is logged, once per
// stage, with the ring's size and the key that sets it.
func (in *instance) ringFull() packet.Reason {
	if !in.warnedFull {
		in.warnedFull = true
		in.sv.warnRingFull(len(in.lent))
	}
	if clock.Mono()-in.progress.Load() < in.stall {
		return reasonRingFull
	}
	if in.failOpen {
		return reasonPass
	}
	return reasonStalled
}

// drop frees h as a drop of this stage by reason r, which the engine counts
// under the stage (its Env's Drop); an Env without one frees it uncounted.
func (in *instance) drop(ctx *plugins.Context, h packet.Handle, r packet.Reason) {
	if d, ok := ctx.Env.(dropper); ok {
		d.Drop(h, r)
		return
	}
	ctx.Env.Free(h)
}

// dropper is the engine's Env: Drop frees a packet the running stage drops
// outside its Process, and counts it by reason as the stage's.
type dropper interface {
	Drop(h packet.Handle, r packet.Reason)
}

// Produce takes the plugin's results (or, once it is lost, what it had) and
// gives each packet its verdict: on down the chain, out to a port, or freed.
func (in *instance) Produce(ctx *plugins.Context, b *packet.Burst) {
	in.sync()
	if in.orphans {
		in.reclaim(ctx, b)
		return
	}
	if in.l == nil {
		return
	}
	r := in.l.conn.S2C[0]
	// Results first, then emits: the plugin publishes a burst's emits before
	// its results, so every emit of a result seen here is seen too.
	avail := r.Tail() - in.done
	if lent := in.head - in.done; avail > lent {
		avail = in.badTail(r.Tail(), lent)
	}
	if in.emitting() {
		in.emits(ctx, b)
		in.lendSpares(ctx)
	}
	if avail == 0 {
		return
	}
	// One latency sample per batch of results, its oldest packet's: the
	// histogram costs nothing per packet.
	if dt := ctx.Now - in.lentAt[in.done&in.mask]; dt >= 0 {
		in.latency.Record(uint64(dt))
	}
	first := in.done
	// The batch's result lines, the plugin's writes, fetched all at once.
	in.touched ^= r.Touch(in.done, min(avail, packet.MaxBurst))
	l, lent, mask := in.l, in.lent, in.mask
	done := in.done
	lastPool, region, base := uint16(0xFFFF), uint16(0), uintptr(0)
	for ; avail > 0 && b.N < packet.MaxBurst; avail-- {
		h := lent[done&mask]
		if in.early != 0 {
			in.done = done
			early := in.answeredEarly()
			done = in.done
			if early {
				in.c.badResult.Inc()
				back(ctx, h)
				in.drop(ctx, h, reasonBadResult)
				continue
			}
		}
		d := r.Load(done)
		done++
		back(ctx, h)
		// The common result inline: Continue, unmarked, its window inside
		// its buffer. result checks every other.
		p := h.P()
		if pid := p.PoolID(); pid != lastPool {
			lastPool, region, base = pid, l.regionOf[pid], l.base[pid]
		}
		if d.Metadata&(0xF|memif.ExtMarked) == memif.ExtContinue {
			start := uint64(dataAddr(p) - base - uintptr(p.Offset()))
			if off, length, ok := window(d.Region, d.Offset, d.Length, region, start, p.Cap()); ok {
				p.SetWindow(off, length)
				p.Continue()
				b.H[b.N] = h
				b.N++
				continue
			}
		}
		in.result(ctx, h, d, b)
	}
	in.done = done
	in.c.returned.Add(uint64(done - first))
	r.SetHead(done + uint16(len(lent)))
	in.outstanding.Store(int64(in.head - done))
	in.progress.Store(clock.Mono())
}

// badTail is how many results may be taken when the plugin's result tail
// names packets never lent. Past the last lent: those results were written
// before their packets were lent, and are refused when their packets come
// (answeredEarly); the lent ones are taken. Behind the last taken: the
// slots hold stale results, and none is taken. Each bad tail is counted
// once (bad_result).
func (in *instance) badTail(tail, lent uint16) uint16 {
	ahead := int16(tail - in.head)
	if ahead > 0 {
		if in.early == 0 {
			in.earlyFrom = in.head
		}
		in.early = min(uint16(ahead)+(in.head-in.earlyFrom), uint16(len(in.lent)))
		return lent
	}
	if !in.behind || tail != in.behindAt {
		in.behind, in.behindAt = true, tail
		in.c.badResult.Inc()
	}
	return 0
}

// answeredEarly reports, and consumes, the next result when the plugin
// wrote it before its packet was lent: it is refused (bad_result). The
// caller has checked in.early != 0.
func (in *instance) answeredEarly() bool {
	if in.done-in.earlyFrom >= in.early {
		in.early = 0
		return false
	}
	in.done++
	if in.done-in.earlyFrom == in.early {
		in.early = 0
	}
	return true
}

// result applies one verdict, to a packet given back (back). The window is
// checked against the packet's own buffer: the plugin names no memory, it
// only moves the window inside the buffer it was lent.
func (in *instance) result(ctx *plugins.Context, h packet.Handle, d memif.Desc, b *packet.Burst) {
	p := h.P() // back already: the caller ended its loan
	pid := p.PoolID()
	start := uint64(dataAddr(p) - in.l.base[pid] - uintptr(p.Offset()))
	off, length, ok := window(d.Region, d.Offset, d.Length, in.l.regionOf[pid], start, p.Cap())
	if !ok {
		in.c.badWindow.Inc()
		in.drop(ctx, h, reasonBadWindow)
		return
	}
	p.SetWindow(off, length)
	if d.Metadata&memif.ExtMarked != 0 {
		in.c.marked.Inc()
	}
	arg := uint16(d.Metadata >> 16)
	switch d.Metadata & 0xF {
	case memif.ExtForward:
		in.c.forwarded.Inc()
		ctx.Emit(h, arg)
	case memif.ExtDrop:
		in.c.dropped.Inc()
		in.drop(ctx, h, reasonOf(in.l.reasons, arg))
	case memif.ExtConsume:
		in.c.consumed.Inc()
		ctx.Env.Free(h)
	default:
		p.Continue()
		b.H[b.N] = h
		b.N++
	}
}

// emitting reports whether the plugin makes packets and its link carries
// them (a plugin of extension version 1 has no such rings).
func (in *instance) emitting() bool { return in.emitPool != nil && in.l != nil && in.l.emits }

// spares is how many spare buffers the plugin has.
func (in *instance) spares() int { return len(in.spare) - len(in.freeIDs) }

// lendSpares tops the plugin's spare buffers up: every id not lent gets a
// fresh buffer of the emit pool, on the spare ring.
func (in *instance) lendSpares(ctx *plugins.Context) {
	if len(in.freeIDs) == 0 {
		return
	}
	r := in.l.conn.C2S[1]
	for len(in.freeIDs) > 0 && in.emitPool.Alloc(&in.fresh, min(len(in.freeIDs), packet.MaxBurst)) > 0 {
		in.lend(ctx, r, &in.fresh)
	}
	r.SetHead(in.spareHead)
}

// lend puts the fresh buffers of b on the spare ring, each under a free id,
// and empties b.
func (in *instance) lend(ctx *plugins.Context, r *memif.Ring, b *packet.Burst) {
	for _, h := range b.Handles() {
		id := in.freeIDs[len(in.freeIDs)-1]
		in.freeIDs = in.freeIDs[:len(in.freeIDs)-1]
		p := h.P()
		pid := p.PoolID()
		*r.D(in.spareHead) = memif.Desc{Region: in.l.regionOf[pid], Offset: uint32(bufAddr(p) - in.l.base[pid]),
			Length: uint32(p.Cap()), Metadata: memif.ExtSpare(p.Headroom(), id)}
		packet.Own(h, packet.OpLend, packet.NoOwner, ctx.Stage)
		in.spare[id] = h
		in.spareHead++
	}
	b.N = 0
}

// emits takes the packets the plugin made: each to its port (Emit) or into
// b, on to the next stage, as far as b has room. At most a burst's worth of
// descriptors is read per call, whatever tail the plugin wrote, so that a
// tx buffer, flushed every loop, takes them.
func (in *instance) emits(ctx *plugins.Context, b *packet.Burst) {
	r := in.l.conn.S2C[1]
	tail := r.Tail()
	start := in.emitDone
	for n := packet.MaxBurst; in.emitDone != tail && n > 0 && b.N < packet.MaxBurst; n-- {
		d := r.Load(in.emitDone)
		in.emitDone++
		in.emit(ctx, d, b)
	}
	if in.emitDone != start {
		r.SetHead(in.emitDone + r.Size())
	}
}

// emit applies one emit descriptor. The buffer it names must be lent to the
// plugin right now (an id is lent once, and comes back once), and the window
// must lie inside it: anything else is counted as bad_emit and touches no
// memory but that buffer's metadata, which is linerate's.
func (in *instance) emit(ctx *plugins.Context, d memif.Desc, b *packet.Burst) {
	id := memif.ExtEmitID(d.Metadata)
	if int(id) >= len(in.spare) || in.spare[id] == 0 {
		in.c.badEmit.Inc()
		return
	}
	h := in.spare[id]
	in.spare[id] = 0
	in.freeIDs = append(in.freeIDs, id)
	back(ctx, h)
	p := h.P()
	pid := p.PoolID()
	off, length, ok := window(d.Region, d.Offset, d.Length, in.l.regionOf[pid], uint64(bufAddr(p)-in.l.base[pid]), p.Cap())
	code := d.Metadata & 0xF
	if !ok || code != memif.ExtForward && code != memif.ExtContinue {
		in.c.badEmit.Inc()
		ctx.Env.Free(h)
		return
	}
	p.SetWindow(off, length)
	in.c.emitted.Inc()
	if code == memif.ExtForward {
		ctx.Emit(h, uint16(d.Metadata>>16))
		return
	}
	p.Continue()
	b.H[b.N] = h
	b.N++
}

// pendingEmits is how many emits the plugin wrote that are not taken yet,
// at most its spare buffers.
func (in *instance) pendingEmits() int {
	if !in.emitting() {
		return 0
	}
	return min(int(in.l.conn.S2C[1].Tail()-in.emitDone), in.spares())
}

// dataAddr is the address of p's first data byte.
func dataAddr(p *packet.Packet) uintptr {
	return uintptr(unsafe.Pointer(unsafe.SliceData(p.DataTail())))
}

// bufAddr is the address of p's buffer's first byte.
func bufAddr(p *packet.Packet) uintptr { return dataAddr(p) - uintptr(p.Offset()) }

// window is the data window a result (or an emit) gives a packet lent from
// region, whose buffer starts at start in the region and holds capacity
// bytes: ok only when the descriptor's region is the same and its offset and
// length a window inside that buffer. It takes the descriptor's fields, not
// the descriptor: passing the struct made the compiler copy it whole from
// where it had stored it field by field, a store-forwarding stall on every
// result.
func window(dRegion uint16, dOff, dLen uint32, region uint16, start uint64, capacity int) (off, length int, ok bool) {
	if dRegion != region || uint64(dOff) < start || uint64(dOff)+uint64(dLen) > start+uint64(capacity) {
		return 0, 0, false
	}
	return int(uint64(dOff) - start), int(dLen), true
}

// back ends h's loan: the plugin gave it back, or is gone. Until then a
// checked build refuses to free it or touch its bytes.
func back(ctx *plugins.Context, h packet.Handle) {
	if packet.Checked { // else ctx.Stage would cost a nil check per packet
		packet.Own(h, packet.OpReturn, packet.NoOwner, ctx.Stage)
	}
}

// reclaim takes back what a lost plugin had: its cgroup is empty, so no
// one else writes those buffers any more.
func (in *instance) reclaim(ctx *plugins.Context, b *packet.Burst) {
	for in.done != in.head && b.N < packet.MaxBurst {
		h := in.lent[in.done&in.mask]
		in.done++
		in.c.reclaimed.Inc()
		back(ctx, h)
		if in.failOpen {
			h.P().Continue()
			b.H[b.N] = h
			b.N++
		} else {
			in.drop(ctx, h, reasonLost) // and counted as reclaimed
		}
	}
	if in.done == in.head {
		in.freeSpares(ctx)
		in.orphans = false
		in.outstanding.Store(0)
	}
}

// freeSpares takes back the spare buffers the plugin had (and what it
// emitted that was not taken): its process is gone.
func (in *instance) freeSpares(ctx *plugins.Context) {
	for id, h := range in.spare {
		if h != 0 {
			in.spare[id] = 0
			in.freeIDs = append(in.freeIDs, uint16(id))
			back(ctx, h)
			ctx.Env.Free(h)
		}
	}
}

// Held is what the instance has lent and not had back, and the plugin's
// emits not taken yet: a drain waits for them. Spare buffers the plugin
// merely holds are no packets in flight.
func (in *instance) Held() int { return int(in.head-in.done) + in.pendingEmits() }

// Stop takes back what is still lent, after the plugin is stopped and gone;
// the last instance to stop ends the plugin.
func (in *instance) Stop(ctx *plugins.Context) {
	if in.head != in.done || in.spares() > 0 {
		in.sv.end(in.head == in.done) // stopped and reaped before anything lent is reused
		if !in.sv.reaped() {
			// A process of the plugin's may still write them: they stay
			// lent, and the pool says so at close.
			in.sv.log.Error("buffers left lent to a plugin that may live", "lent", in.head-in.done, "spares", in.spares())
			in.done, in.orphans = in.head, false
			clear(in.spare)
		}
	}
	for in.done != in.head {
		h := in.lent[in.done&in.mask]
		in.done++
		in.c.reclaimed.Inc()
		back(ctx, h)
		in.drop(ctx, h, reasonLost)
	}
	in.freeSpares(ctx)
	if in.l != nil {
		in.l.close()
		in.l = nil
	}
	if in.sv.refs.Add(-1) == 0 {
		in.sv.close()
	}
}

// Status is what the control plane shows of a plugin.
type Status struct {
	Stage, Plugin, State string
	PID                  int
	Lost, Restarts       uint64
	Counters             map[string]uint64
	Err                  string // why the last restart or kill failed; "" once it is up again
}

var (
	registryMu  sync.Mutex
	supervisors []*supervisor
)

// Statuses lists the plugins of every running external stage.
func Statuses() []Status {
	registryMu.Lock()
	defer registryMu.Unlock()
	out := make([]Status, 0, len(supervisors))
	for _, sv := range supervisors {
		out = append(out, sv.status())
	}
	return out
}

func register(sv *supervisor) {
	registryMu.Lock()
	defer registryMu.Unlock()
	supervisors = append(supervisors, sv)
}

func unregister(sv *supervisor) {
	registryMu.Lock()
	defer registryMu.Unlock()
	for i, x := range supervisors {
		if x == sv {
			supervisors = append(supervisors[:i], supervisors[i+1:]...)
			return
		}
	}
}

func (sv *supervisor) status() Status {
	sv.mu.Lock()
	pid, why := sv.pid, sv.err
	sv.mu.Unlock()
	st := Status{Stage: sv.name, Plugin: sv.cfg.Plugin, State: sv.state.Load().(string), PID: pid,
		Lost: sv.lost.Load(), Restarts: sv.restarts.Load(), Err: why}
	if m := sv.stats.Load(); m != nil {
		st.Counters = *m
	}
	return st
}

// maxRegion is the most a shared pool may span: a descriptor's offset is 32
// bits, and one past 4 GiB would name another packet's buffer.
const maxRegion = 1 << 32

// shareable reports whether a link may map s: a shared slab that its
// descriptors' offsets can address whole.
func shareable(s *packet.Slab) bool {
	_, mem, _, shared := s.SharedMemory()
	return shared && len(mem) <= maxRegion
}

// checkRegions refuses a shared pool that a link could not map (over 4 GiB):
// at build, where config errors belong, rather than copying its packets
// unannounced.
func checkRegions() error {
	for _, p := range packet.Pools() {
		s, ok := p.(*packet.Slab)
		if !ok {
			continue
		}
		if _, mem, stride, shared := s.SharedMemory(); shared && len(mem) > maxRegion {
			return fmt.Errorf("pool %q shares %d bytes (%d buffers of %d): over the 4 GiB a plugin's descriptors address; "+
				"give it at most %d buffers, or private = true (its packets are then copied)",
				s.Name(), len(mem), len(mem)/stride, stride, maxRegion/stride)
		}
	}
	return nil
}
