package appliance

import (
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/appliance/ring"
	"github.com/linerate/linerate/appliance/stats"
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
	epoch   atomic.Uint64 // bumped at quiescent points (a loop's end) while a Synchronize waits
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
	copyb packet.Burst // copyToPool's fresh buffers
	// The tx timestamp of the flush under way (txNow), and whether it was read.
	txNowAt  int64
	txNowSet bool
	// syncs counts the Synchronize calls waiting for this lcore's epoch: the
	// loop bumps it only then, since a bump is a locked instruction.
	syncs atomic.Int32
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
	// The thread is never unlocked: it ends with the lcore, and its pinning
	// and timer slack with it. Unlocked, it would go back to the scheduler
	// still pinned, and whatever goroutine ran on it next (another engine's
	// lcore, the program's main thread) would stay on that one CPU.
	runtime.LockOSThread()
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
	for _, in := range lc.instances {
		moved += in.poll(now, draining)
	}
	// What stages hold and what is buffered matter only to an idle loop's
	// verdict: a loop that moved packets is busy whatever they are.
	held, buffered := 0, 0
	if moved == 0 {
		for _, in := range lc.instances {
			held += in.held()
		}
		buffered = lc.txBuffered()
	}
	lc.flushAll()
	lc.flushFree()
	lc.loops.Inc()
	if moved > 0 {
		lc.busy.Inc()
		lc.packets.Add(uint64(moved))
	}
	// Each counter that changed is published with an atomic store, an XCHG
	// on amd64: a dozen of them cost a busy loop about 100 ns, 7% of the
	// generator's time on net_null. A loop that moved packets publishes every
	// publishEvery loops; an idle one at once. A Manual engine's too: its
	// Snapshot publishes what its caller stepped since (Engine.manualMu).
	if moved == 0 || lc.loops.Local()%publishEvery == 0 {
		lc.publish()
	}
	// Stored only when it changes, and the epoch bumped only for a waiter:
	// each is a locked instruction.
	if idle := moved == 0 && held == 0 && buffered == 0; idle != lc.idle.Load() {
		lc.idle.Store(idle)
	}
	if lc.syncs.Load() > 0 {
		lc.epoch.Add(1)
	}
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

// publishEvery is how many busy loops may pass between two publications of
// the lcore's counters: a few microseconds.
const publishEvery = 8

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
