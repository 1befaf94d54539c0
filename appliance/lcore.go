package appliance

import (
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"

	"github.com/linerate/linerate/appliance/clock"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/appliance/ring"
	"github.com/linerate/linerate/appliance/stats"
	"github.com/linerate/linerate/plugins"
	"github.com/linerate/linerate/ports"
)

// lcore is one polling thread: a goroutine locked to an OS thread and pinned to
// its CPU. It runs every pipeline instance placed on it, owns one tx queue and one
// bounded tx buffer per port, and drains its command queue once per loop.
type lcore struct {
	e         *Engine
	id        int // engine index
	cpu       int // -1: not pinned
	instances []*instance
	tx        []txBuffer // by port id

	cmdMu   chanMutex
	cmds    *ring.SPSC[*command]
	epoch   atomic.Uint64 // bumped at every quiescent point (end of a loop)
	stopped atomic.Bool

	loops, busy, packets stats.Counter
	gap                  *stats.Histogram
	drops                [packet.MaxReasons]stats.Counter // engine-level drops (tx_full …)
	dropsDirty           []packet.Reason
	copies               stats.Counter // packets copied into a port's own pool at tx

	idle atomic.Bool // the last loop moved nothing and nothing is buffered
	// freed holds what this lcore freed since its last quiescent point (the
	// end of a burst's run, or of a loop): a stage that frees a packet of its
	// burst is still in the middle of that burst, and the engine reads the
	// packet's verdict after it. A fixed array and a count, so freeing writes
	// one handle; it grows only if more than its size are freed between two
	// quiescent points, which the pools' sizes bound.
	freed  []packet.Handle
	nfreed int
	// What runs, for a checked build's report: the instance and the chain
	// position of its running stage (-1 between stages).
	cur *instance
	at  int
	// Bursts handed to ports and stages through interfaces would escape to the
	// heap if they were locals: they live here instead.
	txb   packet.Burst
	txLen [packet.MaxBurst]uint32
}

// txBuffer is a fixed array and a count: appending writes one handle, never a
// slice header (which would cost a write-barrier check per packet).
type txBuffer struct {
	port  *portEntry
	queue int
	n     int
	buf   []packet.Handle // fixed length: the buffer's capacity
	// What this lcore moved through the port. The engine counts for every driver,
	// in loops it runs anyway, so drivers need no per-packet pass of their own.
	txPackets, txBytes stats.Counter
	rxPackets, rxBytes stats.Counter
}

// command is a function run on an lcore between two loops.
type command struct {
	fn   func()
	done chan struct{}
}

// chanMutex is a mutex for the producer side of the command ring; commands come
// from control goroutines, rarely.
type chanMutex chan struct{}

func (m chanMutex) Lock() { m <- struct{}{} }

func (m chanMutex) Unlock() { <-m }

func newLcore(e *Engine, id, cpu int) *lcore {
	lc := &lcore{e: e, id: id, cpu: cpu, cmdMu: make(chanMutex, 1), cmds: ring.NewSPSC[*command](64),
		gap: stats.NewHistogram(), at: -1}
	return lc
}

// setupTx gives the lcore a tx buffer towards every port, on its own tx queue.
func (lc *lcore) setupTx(portsByID []*portEntry, size int) {
	lc.tx = make([]txBuffer, len(portsByID))
	for i, pe := range portsByID {
		lc.tx[i] = txBuffer{port: pe, queue: lc.id % max(pe.info.TxQueues, 1), buf: make([]packet.Handle, size)}
	}
	// Between two quiescent points: a burst, and what a flush of every tx
	// buffer can drop, twice over.
	lc.freed = make([]packet.Handle, 2*(packet.MaxBurst+len(portsByID)*size))
}

func (lc *lcore) countDrop(r packet.Reason, n uint64) {
	c := &lc.drops[r]
	if c.Local() == 0 {
		lc.dropsDirty = append(lc.dropsDirty, r)
	}
	c.Add(n)
}

// free gives a packet back: it returns to its pool at the lcore's next
// quiescent point (flushFree), never before, however many are freed.
func (lc *lcore) free(h packet.Handle) {
	packet.Own(h, packet.OpFree, uint16(lc.id), lc.at)
	if lc.nfreed == len(lc.freed) {
		lc.freed = slices.Grow(lc.freed, len(lc.freed))[:2*len(lc.freed)]
	}
	lc.freed[lc.nfreed] = h
	lc.nfreed++
}

// flushFree returns what the lcore freed to the pools. Call it only at a
// quiescent point, where no burst, tx buffer or stage call refers to them.
func (lc *lcore) flushFree() {
	if lc.nfreed > 0 {
		packet.FreeHandles(lc.freed[:lc.nfreed])
		lc.nfreed = 0
	}
}

// forward appends h to the tx buffer of port, flushing a full buffer first.
func (lc *lcore) forward(h packet.Handle, port uint16) {
	if int(port) >= len(lc.tx) {
		lc.countDrop(packet.ReasonNoPort, 1)
		lc.free(h)
		return
	}
	t := &lc.tx[port]
	if t.n == len(t.buf) {
		lc.flush(t, lc.e.clock.Now())
	}
	t.buf[t.n] = h
	t.n++
}

// forwardBurst appends every handle of hs to the tx buffer of port, flushing it
// whenever it fills.
func (lc *lcore) forwardBurst(hs []packet.Handle, port uint16) {
	if int(port) >= len(lc.tx) {
		lc.countDrop(packet.ReasonNoPort, uint64(len(hs)))
		for _, h := range hs {
			lc.free(h)
		}
		return
	}
	t := &lc.tx[port]
	for len(hs) > 0 {
		if t.n == len(t.buf) {
			lc.flush(t, lc.e.clock.Now())
		}
		k := copy(t.buf[t.n:], hs)
		t.n += k
		hs = hs[k:]
	}
}

// emit appends h to the tx buffer of port, dropping it as emit_full when full.
func (lc *lcore) emit(h packet.Handle, port uint16) bool {
	packet.Own(h, packet.OpClaim, uint16(lc.id), lc.at)
	if int(port) >= len(lc.tx) {
		lc.countDrop(packet.ReasonNoPort, 1)
		lc.free(h)
		return false
	}
	t := &lc.tx[port]
	if t.n == len(t.buf) {
		lc.countDrop(packet.ReasonEmitFull, 1)
		lc.free(h)
		return false
	}
	t.buf[t.n] = h
	t.n++
	return true
}

// flush transmits a tx buffer, stamped now. A packet of another pool that the
// port cannot transmit is copied into one of its own (counted). What the port
// does not take is offered once more, then dropped as tx_full.
func (lc *lcore) flush(t *txBuffer, now int64) {
	hs := t.buf[:t.n]
	t.n = 0
	retried := false
	for len(hs) > 0 {
		n, foreign := lc.send(t, hs, now)
		hs = hs[n:]
		switch {
		case len(hs) == 0:
		case foreign:
			if q := lc.copyToPool(hs[0], t.port); q != 0 {
				hs[0] = q
			} else {
				hs = hs[1:]
			}
		case t.port.handleTx == nil && n == packet.MaxBurst:
			// A whole burst went: the next one.
		case !retried:
			retried = true
		default:
			lc.countDrop(packet.ReasonTxFull, uint64(len(hs)))
			for _, h := range hs {
				lc.free(h)
			}
			hs = nil
		}
	}
}

// send gives the port the front of hs, and reports how many it took, and
// whether it stopped before a packet of another pool it cannot transmit.
// A port that takes handles straight from the tx buffer (ports.HandleTx)
// gets them all and does the per-packet tx work itself; any other gets a
// burst, stamped and measured here (the length read now: once the port has a
// packet it may free it).
func (lc *lcore) send(t *txBuffer, hs []packet.Handle, now int64) (n int, foreign bool) {
	id := uint16(lc.id)
	pe := t.port
	if tx := pe.handleTx; tx != nil {
		packet.OwnBurst(hs, packet.OpTx, id, -1)
		n, foreign = tx.TxHandles(t.queue, hs, now)
		packet.OwnBurst(hs[n:], packet.OpBack, id, -1)
		t.txPackets.Add(uint64(n))
		return n, foreign
	}
	b := &lc.txb
	b.N = 0
	bytes := 0
	for _, h := range hs[:min(len(hs), packet.MaxBurst)] {
		p := h.P()
		if pe.ownPoolOnly && p.PoolID() != pe.poolID {
			foreign = true
			break
		}
		p.StampTx(now)
		lc.txLen[b.N] = uint32(p.Len())
		bytes += p.Len()
		b.H[b.N] = h
		b.N++
	}
	if b.N == 0 {
		return 0, foreign
	}
	packet.OwnBurst(b.H[:b.N], packet.OpTx, id, -1)
	sent := pe.port.TxBurst(t.queue, b)
	packet.OwnBurst(b.H[sent:b.N], packet.OpBack, id, -1)
	if sent == b.N {
		t.txPackets.Add(uint64(sent))
		t.txBytes.Add(uint64(bytes))
		return sent, foreign
	}
	t.countTx(lc.txLen[:sent])
	return sent, false
}

func (t *txBuffer) countTx(lens []uint32) {
	for _, n := range lens {
		t.txBytes.Add(uint64(n))
	}
	t.txPackets.Add(uint64(len(lens)))
}

// copyToPool copies a packet into a buffer of the port's own pool, for ports that
// can transmit nothing else. It returns 0 when the pool is empty.
func (lc *lcore) copyToPool(h packet.Handle, pe *portEntry) packet.Handle {
	q, ok := pe.pool.AllocOne()
	if !ok {
		lc.countDrop(packet.ReasonNoBuffer, 1)
		lc.free(h)
		return 0
	}
	src := h.P()
	if err := q.P().CopyFrom(src, pe.pool.Headroom()); err != nil {
		pe.pool.FreeOne(q)
		lc.countDrop(packet.ReasonTooBig, 1)
		lc.free(h)
		return 0
	}
	lc.copies.Inc()
	lc.free(h)
	return q
}

// flushAll transmits every tx buffer, with one tx timestamp read just before.
func (lc *lcore) flushAll() {
	now := int64(0)
	for i := range lc.tx {
		if lc.tx[i].n > 0 {
			if now == 0 {
				now = lc.e.clock.Now()
			}
			lc.flush(&lc.tx[i], now)
		}
	}
}

func (lc *lcore) txBuffered() int {
	n := 0
	for i := range lc.tx {
		n += lc.tx[i].n
	}
	return n
}

// runCommands runs queued commands. They are control-plane work, between loops.
func (lc *lcore) runCommands() {
	for {
		c, ok := lc.cmds.Get()
		if !ok {
			return
		}
		c.fn()
		close(c.done)
	}
}

func (lc *lcore) publish() {
	lc.loops.Publish()
	lc.busy.Publish()
	lc.packets.Publish()
	lc.copies.Publish()
	for _, r := range lc.dropsDirty {
		lc.drops[r].Publish()
	}
	lc.gap.Publish()
	for i := range lc.tx {
		t := &lc.tx[i]
		t.txPackets.Publish()
		t.txBytes.Publish()
		t.rxPackets.Publish()
		t.rxBytes.Publish()
	}
	for _, in := range lc.instances {
		in.publish()
	}
}

// run is the lcore's poll loop.
func (lc *lcore) run(started chan<- error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := lc.e.rt.pinLcore(lc.cpu); err != nil {
		started <- err
		return
	}
	hooks := ports.LcoreHooks()
	for i, h := range hooks {
		if err := h.LcoreStart(lc.cpu); err != nil {
			for _, done := range hooks[:i] {
				done.LcoreStop()
			}
			started <- fmt.Errorf("lcore %d: %w", lc.id, err)
			return
		}
	}
	defer func() {
		for _, h := range hooks {
			h.LcoreStop()
		}
	}()
	for _, in := range lc.instances {
		if err := in.start(); err != nil {
			started <- err
			return
		}
	}
	started <- nil
	if packet.Checked {
		defer lc.explain()
	}
	lc.loop()
	lc.shutdown()
}

// explain completes a checked build's ownership report with the names of the
// lcore and stage that broke the rule, then panics on.
func (lc *lcore) explain() {
	r := recover()
	if r == nil {
		return
	}
	if oe, ok := r.(*packet.OwnershipError); ok && oe.Where == "" {
		oe.Where = fmt.Sprintf("lcore %d (cpu %d)", lc.id, lc.cpu)
		if in := lc.cur; in != nil && lc.at >= 0 && lc.at < len(in.stages) {
			s := in.stages[lc.at]
			oe.Where += fmt.Sprintf(", pipeline %q stage %d %q (%s)", in.pipe.name, lc.at, s.name, s.kind)
		}
	}
	panic(r)
}

// loop polls until the engine stops. It is also driven step by step in
// simulations (Engine.Step), so each iteration is in step().
func (lc *lcore) loop() {
	var back backoff
	last := lc.e.clock.Now()
	for {
		st := lc.e.phase.Load()
		if st == phaseStop {
			return
		}
		now := lc.e.clock.Now()
		lc.gap.Record(uint64(now - last))
		last = now
		moved := lc.step(now, st == phaseDrain)
		if lc.e.poll == pollAdaptive {
			if moved == 0 {
				back.idle()
			} else {
				back.reset()
			}
		}
	}
}

// step runs one loop iteration and returns how many packets it moved.
func (lc *lcore) step(now int64, draining bool) int {
	lc.runCommands()
	moved := 0
	held := 0
	for _, in := range lc.instances {
		moved += in.poll(now, draining)
		held += in.held()
	}
	buffered := lc.txBuffered()
	lc.flushAll()
	lc.flushFree()
	lc.loops.Inc()
	if moved > 0 {
		lc.busy.Inc()
		lc.packets.Add(uint64(moved))
	}
	lc.publish()
	lc.idle.Store(moved == 0 && held == 0 && buffered == 0)
	lc.epoch.Add(1)
	return moved
}

// shutdown stops the stages, frees what they hold and what is buffered.
func (lc *lcore) shutdown() {
	lc.runCommands()
	for _, in := range lc.instances {
		in.stop()
	}
	lc.flushAll()
	lc.flushFree()
	lc.publish()
	lc.stopped.Store(true)
	lc.epoch.Add(1)
}

// backoff is the adaptive poll mode: spin while traffic flows, then sleep in
// growing steps up to maxSleep so an idle lcore leaves its CPU to others.
type backoff struct{ n int }

const (
	spinLoops = 256
	maxSleep  = 50_000 // ns
)

func (b *backoff) reset() { b.n = 0 }

func (b *backoff) idle() {
	b.n++
	if b.n < spinLoops {
		return
	}
	d := int64(1000) << min(b.n-spinLoops, 6)
	if d > maxSleep {
		d = maxSleep
	}
	sleepNs(d)
}

// instance is one pipeline's chain on one lcore.
type instance struct {
	pipe      *pipeline
	idx       int // index among the pipeline's instances
	lc        *lcore
	stages    []*stageInst
	producers []int // stage indices that implement plugins.Producer
	tickers   []int
	rx        []rxQueue
	handoffIn []*ring.Handles // rings from the pipeline's other instances
	ctx       plugins.Context
	lastTick  int64
	unclaimed *stageInst // where unclaimed drops are counted: the last stage
	b, hb     packet.Burst
}

type rxQueue struct {
	port     *portEntry
	queue    int
	internal bool // a mem link: keep polling while draining
	stamped  bool // the driver stamps InPort, InQueue and RxTime itself
}

type stageInst struct {
	kind, name string
	st         plugins.Stage
	producer   plugins.Producer
	holder     plugins.Holder
	finite     plugins.Finite
	counters   *stats.Set
	packets    stats.Counter
	drops      [packet.MaxReasons]stats.Counter
	dropsDirty []packet.Reason
	hists      []namedHist
}

type namedHist struct {
	name, help, unit string
	h                *stats.Histogram
}

func (s *stageInst) countDrop(r packet.Reason) {
	c := &s.drops[r]
	if c.Local() == 0 {
		s.dropsDirty = append(s.dropsDirty, r)
	}
	c.Inc()
}

func (in *instance) start() error {
	for _, s := range in.stages {
		if st, ok := s.st.(plugins.Starter); ok {
			in.ctx.Stage = 0
			if err := st.Start(&in.ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

func (in *instance) stop() {
	for i, s := range in.stages {
		if st, ok := s.st.(plugins.Stopper); ok {
			in.ctx.Stage = i
			st.Stop(&in.ctx)
		}
	}
	// Packets handed to this instance and not yet taken.
	var b packet.Burst
	for _, r := range in.handoffIn {
		for ring.DequeueBurst(r, &b) > 0 {
			for i := 0; i < b.N; i++ {
				in.lc.countDrop(packet.ReasonStopping, 1)
			}
			packet.Free(&b)
		}
	}
}

func (in *instance) held() int {
	n := 0
	for _, s := range in.stages {
		if s.holder != nil {
			n += s.holder.Held()
		}
	}
	for _, r := range in.handoffIn {
		n += r.Len()
	}
	return n
}

func (in *instance) publish() {
	for _, s := range in.stages {
		s.packets.Publish()
		s.counters.Publish()
		for _, r := range s.dropsDirty {
			s.drops[r].Publish()
		}
		for _, h := range s.hists {
			h.h.Publish()
		}
	}
}

// poll runs one round of the instance: its rx queues, handoffs from other lcores,
// its producers and, when due, its tickers.
func (in *instance) poll(now int64, draining bool) int {
	in.lc.cur = in
	b := &in.b
	moved := 0
	for i := range in.rx {
		rq := &in.rx[i]
		if draining && !rq.internal {
			continue
		}
		b.N = 0
		n := rq.port.port.RxBurst(rq.queue, b)
		if n == 0 {
			continue
		}
		packet.OwnBurst(b.H[:n], packet.OpClaim, uint16(in.lc.id), -1)
		if rq.stamped {
			in.lc.tx[rq.port.id].rxPackets.Add(uint64(n))
			in.ctx.Now = b.H[0].P().RxTime
			moved += n
			in.run(b, 0)
			continue
		}
		t := in.lc.e.clock.Now()
		stamp := rq.port.engineStamps
		bytes := 0
		for j := 0; j < b.N; j++ {
			p := b.H[j].P()
			p.Continue() // a verdict from the sending side of a mem link is not ours
			p.InPort = rq.port.id
			p.InQueue = uint16(rq.queue)
			if stamp || p.RxTime == 0 {
				p.RxTime = t
			}
			bytes += p.Len()
		}
		tb := &in.lc.tx[rq.port.id]
		tb.rxPackets.Add(uint64(n))
		tb.rxBytes.Add(uint64(bytes))
		in.ctx.Now = t
		moved += n
		in.run(b, 0)
	}
	for _, r := range in.handoffIn {
		b.N = 0
		if ring.DequeueBurst(r, b) == 0 {
			continue
		}
		packet.OwnBurst(b.H[:b.N], packet.OpClaim, uint16(in.lc.id), -1)
		moved += b.N
		in.ctx.Now = now
		in.runHandoff(b)
	}
	for _, k := range in.producers {
		s := in.stages[k]
		if draining && s.holder == nil {
			continue // sources stop making packets; delay lines still empty out
		}
		b.N = 0
		in.ctx.Now = now
		in.ctx.Stage = k
		in.lc.at = k
		s.producer.Produce(&in.ctx, b)
		in.lc.at = -1
		if b.N > 0 {
			packet.OwnBurst(b.H[:b.N], packet.OpClaim, uint16(in.lc.id), k)
			moved += b.N
			in.run(b, k+1)
		}
	}
	if len(in.tickers) > 0 && now-in.lastTick >= plugins.TickInterval {
		in.lastTick = now
		in.ctx.Now = now
		for _, k := range in.tickers {
			in.ctx.Stage = k
			in.lc.at = k
			in.stages[k].st.(plugins.Ticker).Tick(&in.ctx)
		}
		in.lc.at = -1
	}
	return moved
}

// runHandoff resumes handed-off packets at their stage, in runs of equal stage.
func (in *instance) runHandoff(b *packet.Burst) {
	run := &in.hb
	for i := 0; i < b.N; {
		stage := b.H[i].P().Stage
		run.N = 0
		for i < b.N && b.H[i].P().Stage == stage {
			p := b.H[i].P()
			p.Continue()
			run.H[run.N] = b.H[i]
			run.N++
			i++
		}
		in.run(run, int(stage))
	}
}

// run passes b through the chain from stage `from`. After each stage, packets
// with a verdict leave the burst: Forward to a tx buffer, Drop to the free list
// with its reason counted, Consume to whoever took it. The end of run is a
// quiescent point: what the burst's stages freed goes back to its pools.
func (in *instance) run(b *packet.Burst, from int) {
	lc := in.lc
	for k := from; k < len(in.stages) && b.N > 0; k++ {
		s := in.stages[k]
		in.ctx.Stage = k
		lc.at = k
		s.packets.Add(uint64(b.N))
		s.st.Process(&in.ctx, b)
		j := 0
		for i := 0; i < b.N; i++ {
			h := b.H[i]
			p := h.P()
			if packet.Checked && p.Verdict() != packet.Consume {
				packet.Own(h, packet.OpVerdict, uint16(lc.id), k)
			}
			switch p.Verdict() {
			case packet.Continue:
				b.H[j] = h
				j++
			case packet.Forward:
				lc.forward(h, p.OutPort)
			case packet.Drop:
				s.countDrop(p.Reason)
				lc.free(h)
			case packet.Consume:
			case packet.Handoff:
				to := in.pipe.instances[p.OutPort].lc.id
				packet.OwnTo(h, packet.OpHandoff, uint16(lc.id), uint16(to), k)
				if !in.pipe.handoff[in.idx][p.OutPort].Put(h) {
					packet.Own(h, packet.OpBack, uint16(lc.id), k)
					lc.countDrop(packet.ReasonRingFull, 1)
					lc.free(h)
				}
			default:
				s.countDrop(packet.ReasonUnknown)
				lc.free(h)
			}
		}
		b.N = j
	}
	for i := 0; i < b.N; i++ {
		in.unclaimed.countDrop(packet.ReasonUnclaimed)
		lc.free(b.H[i])
	}
	b.N = 0
	lc.at = -1
	lc.flushFree()
}

// env is the plugins.Env of one instance.
type env struct{ in *instance }

func (e env) Emit(h packet.Handle, port uint16) bool { return e.in.lc.emit(h, port) }

func (e env) TxDepth(port uint16) int {
	if int(port) >= len(e.in.lc.tx) {
		return 0
	}
	return e.in.lc.tx[port].n
}

func (e env) Owner(key uint64) int { return ownerOf(key, len(e.in.pipe.instances)) }

func (e env) NumInstances() int { return len(e.in.pipe.instances) }

func (e env) Free(h packet.Handle) { e.in.lc.free(h) }

// ForwardBurst moves the whole burst to a port's tx buffer: the packets leave
// the chain with no verdict written and no partition pass.
func (e env) ForwardBurst(b *packet.Burst, port uint16) {
	e.in.lc.forwardBurst(b.H[:b.N], port)
	b.N = 0
}

func (e env) Handoff(h packet.Handle, owner int) bool {
	in := e.in
	if owner == in.idx || owner < 0 || owner >= len(in.pipe.instances) {
		return false
	}
	h.P().HandoffTo(owner, in.ctx.Stage)
	return true
}

// ownerOf maps a session key to an instance: MurmurHash3's 64-bit finaliser
// (keys are often small consecutive numbers; every output bit must depend on
// every input bit), then Lemire's multiply-shift reduction. Every lcore
// computes the same owner.
func ownerOf(key uint64, n int) int {
	if n <= 1 {
		return 0
	}
	key ^= key >> 33
	key *= 0xff51afd7ed558ccd
	key ^= key >> 33
	key *= 0xc4ceb9fe1a85ec53
	key ^= key >> 33
	return int((key >> 32) * uint64(n) >> 32)
}

var (
	_ plugins.Env            = env{}
	_ plugins.BurstForwarder = env{}
)
var _ = clock.Mono
