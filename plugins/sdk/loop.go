package sdk

import (
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/linerate/linerate/appliance/clock"
	"github.com/linerate/linerate/appliance/memif"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/appliance/stats"
	"github.com/linerate/linerate/plugins"
)

// instance runs one stage instance for one lcore of linerate's.
type instance struct {
	idx      int
	stage    plugins.Stage
	counters *stats.Set
	pool     packet.Pool
	clk      clock.Clock
	log      *slog.Logger
	cpu      int

	meta []byte // MaxBurst packets' metadata, off the Go heap
	env  env
	// spans are the connection's regions, for the check of each lent
	// packet; lent is where the running burst's packets lie, as read once
	// from their descriptors.
	spans []regionSpan
	lent  [packet.MaxBurst]struct {
		start  uint32 // the buffer's first byte in its region
		region uint16
	}
	// emit is the stage's Setup.Pool, the buffers linerate lends it to make
	// packets in; nil when it asked for none.
	emit *emitPool
	// producer is the stage when it is a Producer: what its Produce makes
	// goes to the stage after the external one. made is its burst.
	producer plugins.Producer
	made     packet.Burst

	mu      sync.Mutex
	conn    *memif.Conn
	quit    chan struct{}
	running sync.WaitGroup

	bursts, packets, kicked atomic.Uint64
	touched                 uint32 // what memif.Ring.Touch read: kept, so its loads are
}

func newInstance(idx int, st plugins.Stage, counters *stats.Set, pool packet.Pool, clk clock.Clock, log *slog.Logger) (*instance, error) {
	meta, err := unix.Mmap(-1, 0, packet.MaxBurst*packet.MetaSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, err
	}
	in := &instance{idx: idx, stage: st, counters: counters, pool: pool, clk: clk, log: log, cpu: -1, meta: meta}
	in.producer, _ = st.(plugins.Producer)
	in.env.base = uintptr(unsafe.Pointer(&meta[0]))
	for k := 0; k < packet.MaxBurst; k++ {
		// The metadata is the plugin's for good: an lcore's in a checked build.
		packet.Own(packet.Handle(in.env.base+uintptr(k*packet.MetaSize)), packet.OpAlloc, packet.NoOwner, -1)
	}
	return in, nil
}

// useEmitPool gives the instance the stage's pool, and room for a burst's
// emits and frees of all its buffers.
func (in *instance) useEmitPool(ep *emitPool) {
	in.emit = ep
	in.env.pool = ep
	in.env.emits = make([]emitRec, 0, len(ep.bufs))
	in.env.freed = make([]int, 0, len(ep.bufs))
}

// serve runs the instance on c, replacing a connection it had.
func (in *instance) serve(c *memif.Conn, wg *sync.WaitGroup) {
	in.stop()
	in.mu.Lock()
	in.conn = c
	in.quit = make(chan struct{})
	quit := in.quit
	in.running.Add(1)
	in.mu.Unlock()
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer in.running.Done()
		in.run(c, quit)
		c.Close()
	}()
}

func (in *instance) stop() {
	in.mu.Lock()
	if in.quit != nil {
		close(in.quit)
		in.quit = nil
	}
	in.mu.Unlock()
	in.running.Wait()
}

// env is a plugin's Env. Emit sends a packet the stage made (of its
// Setup.Pool) back to linerate, to a port; no handoff. Freeing a lent packet
// is the Consume verdict's business (linerate frees the buffer); a packet the
// stage made goes back to the pool at the end of the burst. It keeps the
// marks of the running burst's packets.
type env struct {
	refused stats.Counter
	base    uintptr // the metadata of the burst's packet 0
	marked  uint64  // bit i: the burst's packet i

	pool  *emitPool
	emits []emitRec   // the running burst's emits, in order
	freed []int       // ids of the pool's buffers freed in the running burst
	ring  *memif.Ring // S2C ring 1: emits
	tail  uint16      // its tail
}

// emitRec is one emit: buffer id, ExtForward to port, or ExtContinue.
type emitRec struct {
	id   int
	code uint32
	port uint16
}

// Mark marks h, a packet of the running burst.
func (e *env) Mark(h packet.Handle) bool {
	i := (uintptr(h) - e.base) / packet.MetaSize
	if uintptr(h) < e.base || i >= packet.MaxBurst {
		return false
	}
	e.marked |= 1 << i
	return true
}

// Mark marks a packet of the burst for linerate, which counts it (the
// external stage's marked counter): the sampler's mark. It reports false,
// and does nothing, where nobody counts marks (a stage run in process).
func Mark(ctx *plugins.Context, h packet.Handle) bool {
	if m, ok := ctx.Env.(interface{ Mark(packet.Handle) bool }); ok {
		return m.Mark(h)
	}
	return false
}

// Emit queues h, a packet the stage made, for port: it goes back to linerate
// when the burst is done, in its own buffer. Anything else (a lent packet of
// the burst, a handle emitted or freed already) is refused.
func (e *env) Emit(h packet.Handle, port uint16) bool {
	return e.queue(h, memif.ExtForward, port)
}

func (e *env) queue(h packet.Handle, code uint32, port uint16) bool {
	if e.pool == nil {
		e.refused.Inc()
		return false
	}
	id, ok := e.pool.idOf(h)
	if !ok {
		e.refused.Inc()
		return false
	}
	e.pool.bufs[id].state = spareOut
	e.emits = append(e.emits, emitRec{id, code, port})
	return true
}

// Free gives up a packet the stage made: back to the pool when the burst is
// done. A lent packet's buffer is linerate's: its verdict (Consume) frees it.
func (e *env) Free(h packet.Handle) {
	if e.pool == nil {
		return
	}
	if id, ok := e.pool.idOf(h); ok {
		e.pool.bufs[id].state = spareOut
		e.freed = append(e.freed, id)
	}
}

// flush writes the burst's emits on the emit ring and publishes them, and
// puts what the stage freed back in the pool: at the end of each burst,
// before its results, so that linerate sees a packet's emits no later than
// its result.
func (e *env) flush() {
	if e.pool == nil {
		return
	}
	for _, r := range e.emits {
		*e.ring.D(e.tail) = e.pool.desc(r.id, memif.ExtEmit(r.code, r.port, uint16(r.id)))
		e.tail++
		e.pool.gone(r.id)
	}
	if len(e.emits) > 0 {
		e.ring.SetTail(e.tail)
		e.emits = e.emits[:0]
	}
	for _, id := range e.freed {
		e.pool.release(id)
	}
	e.freed = e.freed[:0]
}

func (e *env) TxDepth(uint16) int              { return 0 }
func (e *env) Owner(uint64) int                { return 0 }
func (e *env) Handoff(packet.Handle, int) bool { e.refused.Inc(); return false }
func (e *env) NumInstances() int               { return 1 }

// idleBeforeSleep is how long the instance's thread polls an empty ring
// before it sleeps on the ring's eventfd. Busy, linerate lends every few
// microseconds, and the thread never sleeps. A gap longer than this is
// linerate off its CPU, or traffic too thin to pay for a CPU: polling
// through it (it was a millisecond) burnt the plugin's CPU for nothing, and
// on a shared machine made the scheduler treat the thread as a hog, so it
// was preempted for longer, with its ring full, when packets came back.
// Asleep, it costs the lcore one eventfd write per burst until it wakes.
const idleBeforeSleep = 50 * time.Microsecond

// run is the instance's thread: locked, pinned, polling its C2S ring.
func (in *instance) run(c *memif.Conn, quit chan struct{}) {
	runtime.LockOSThread() // the thread ends with the goroutine: its pinning goes with it
	if in.cpu >= 0 {
		var set unix.CPUSet
		set.Set(in.cpu)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			in.log.Warn("plugin: cannot pin the instance's thread", "cpu", in.cpu, "err", err)
		}
	}
	ctx := &plugins.Context{Instance: in.idx, Clock: in.clk, Log: in.log, Env: &in.env}
	if s, ok := in.stage.(plugins.Starter); ok {
		if err := s.Start(ctx); err != nil {
			in.log.Error("plugin: stage start", "err", err)
			return
		}
	}
	defer func() {
		if s, ok := in.stage.(plugins.Stopper); ok {
			s.Stop(ctx)
		}
		in.counters.Publish()
	}()
	rx, tx := c.C2S[0], c.S2C[0]
	in.spans = spansOf(c.Regions)
	var last uint16 // next C2S slot to read; the S2C slot of its result
	var spareLast uint16
	if in.emit != nil {
		// A new connection lends afresh: linerate took back what the last
		// one had.
		in.emit.reset()
		in.env.emits, in.env.freed = in.env.emits[:0], in.env.freed[:0]
		in.env.ring, in.env.tail = c.S2C[1], 0
	}
	ticker, _ := in.stage.(plugins.Ticker)
	producer := in.producer
	nextTick := int64(0)
	idle, idleSince := 0, int64(0)
	var b packet.Burst
	for {
		n := min(rx.Head()-last, packet.MaxBurst)
		if in.emit != nil {
			// After the lent packets' head: linerate lends spare buffers
			// before the packets they are for.
			in.emit.take(c.Regions, c.C2S[1], &spareLast)
		}
		if producer != nil {
			ctx.Now = in.clk.Now()
			if in.produce(ctx) {
				idle, idleSince = 0, 0
				in.counters.Publish()
				in.env.refused.Publish()
			}
		}
		if n == 0 {
			// The channels every 64th empty poll: a select locks both, which
			// costs more than the poll and delays the burst that comes.
			if idle&63 == 0 {
				select {
				case <-quit:
					return
				case <-c.Done():
					return
				default:
				}
			}
			if ticker != nil {
				if now := in.clk.Now(); now >= nextTick {
					ctx.Now = now
					ticker.Tick(ctx)
					nextTick = now + plugins.TickInterval
				}
			}
			// Poll while busy; after idleBeforeSleep without a packet, sleep
			// on the ring's eventfd until linerate lends again (memif's
			// interrupt mode). The lcore never waits for us either way.
			if idle++; idle&255 == 0 {
				now := in.clk.Now()
				if idleSince == 0 {
					idleSince = now
				} else if now-idleSince > int64(idleBeforeSleep) {
					wait := 10 * time.Millisecond
					if ticker != nil || producer != nil {
						wait = time.Millisecond
					}
					if sleep(rx, last, wait) {
						in.kicked.Add(1)
					}
				}
			}
			continue
		}
		idle, idleSince = 0, 0
		ctx.Now = in.clk.Now()
		in.burst(ctx, c, rx, tx, last, n, &b)
		last += n
		rx.SetTail(last)
		in.bursts.Add(1)
		in.packets.Add(uint64(n))
		in.counters.Publish()
		in.env.refused.Publish()
	}
}

// burst runs the stage over n lent packets from slot first and writes a
// result for each into the S2C ring, in order.
func (in *instance) burst(ctx *plugins.Context, c *memif.Conn, rx, tx *memif.Ring, first, n uint16, b *packet.Burst) {
	b.N = 0
	bad := uint64(0) // packets whose descriptor names memory outside the regions: refused
	in.env.marked = 0
	pool := in.pool.ID()
	// The burst's descriptor lines, linerate's writes, fetched all at once.
	in.touched ^= rx.Touch(first, n)
	for k := uint16(0); k < n; k++ {
		d := rx.Load(first + k)
		p := (*packet.Packet)(unsafe.Pointer(&in.meta[int(k)*packet.MetaSize]))
		base, size, head, ok := lentBuffer(in.spans, d)
		if !ok {
			bad++
			p.Init(0, 0, 0, pool, 0)
		} else {
			p.Init(base, size, head, pool, 0)
			p.SetWindow(head, int(d.Length))
		}
		in.lent[k].start, in.lent[k].region = d.Offset-uint32(head), d.Region
		b.H[b.N] = p.Handle()
		b.N++
	}
	if bad == 0 {
		in.stage.Process(ctx, b)
	}
	in.env.flush()
	if in.producer != nil {
		// What the burst made for the next stage goes before the burst's
		// results: linerate's drain, once it has the results, waits for
		// emits it sees.
		in.produce(ctx)
	}
	for k := uint16(0); k < n; k++ {
		// Packet k's own metadata, whatever the stage did to the burst's order.
		p := (*packet.Packet)(unsafe.Pointer(&in.meta[int(k)*packet.MetaSize]))
		var word uint32
		switch {
		case bad != 0:
			word = memif.ExtVerdict(memif.ExtDrop, 0)
		case p.Verdict() == packet.Forward:
			word = memif.ExtVerdict(memif.ExtForward, p.OutPort)
		case p.Verdict() == packet.Drop:
			word = memif.ExtVerdict(memif.ExtDrop, uint16(p.Reason))
		case p.Verdict() == packet.Consume:
			word = memif.ExtVerdict(memif.ExtConsume, 0)
		default:
			word = memif.ExtVerdict(memif.ExtContinue, 0)
		}
		if in.env.marked&(1<<k) != 0 {
			word |= memif.ExtMarked
		}
		// The window afterwards, from the buffer's start in the region.
		l := &in.lent[k]
		*tx.D(first + k) = memif.Desc{Region: l.region, Offset: l.start + uint32(p.Offset()), Length: uint32(p.Len()), Metadata: word}
	}
	tx.SetTail(first + n)
}

// produce runs the stage's Produce: what it makes goes to linerate on the
// emit ring, on to the stage after the external one (Continue) or to a port
// (Forward); what it drops or consumes goes back to the pool. It reports
// whether anything was made.
func (in *instance) produce(ctx *plugins.Context) bool {
	b := &in.made
	b.N = 0
	in.producer.Produce(ctx, b)
	for _, h := range b.Handles() {
		q := h.P()
		switch q.Verdict() {
		case packet.Continue:
			in.env.queue(h, memif.ExtContinue, 0)
		case packet.Forward:
			in.env.queue(h, memif.ExtForward, q.OutPort)
		default:
			in.env.Free(h)
		}
	}
	made := b.N > 0
	b.N = 0
	in.env.flush()
	return made
}

// regionSpan is where a region is mapped: what the check of every lent
// packet reads, without the Region's indirections.
type regionSpan struct {
	base uintptr
	size uint64 // 0: no such region
}

func spansOf(regions []*memif.Region) []regionSpan {
	s := make([]regionSpan, len(regions))
	for i, r := range regions {
		if r != nil && len(r.Mem) > 0 {
			s[i] = regionSpan{uintptr(unsafe.Pointer(&r.Mem[0])), uint64(len(r.Mem))}
		}
	}
	return s
}

// lentBuffer is the whole buffer of a lent packet (headroom, data, tailroom,
// from the descriptor extension): its address and size, and the packet's
// headroom, when it lies inside the regions.
func lentBuffer(spans []regionSpan, d memif.Desc) (base uintptr, size, head int, ok bool) {
	h, tail := uint64(d.Metadata&0xFFFF), uint64(d.Metadata>>16)
	if int(d.Region) >= len(spans) || uint64(d.Offset) < h {
		return 0, 0, 0, false
	}
	s := spans[d.Region]
	start, whole := uint64(d.Offset)-h, h+uint64(d.Length)+tail
	if whole == 0 || start+whole > s.size { // no buffer at all, or past the region
		return 0, 0, 0, false
	}
	return s.base + uintptr(start), int(whole), int(h), true
}

// sleep waits on rx's eventfd, for up to d, unless a packet is there already;
// it reports whether linerate kicked it.
// Interrupts are asked for (the mask cleared) before head is read again, and
// linerate reads the mask after it publishes head, so a packet lent meanwhile
// either is seen here or kicks the eventfd.
func sleep(rx *memif.Ring, last uint16, d time.Duration) bool {
	if rx.Intr < 0 {
		time.Sleep(50 * time.Microsecond)
		return false
	}
	kicked := false
	rx.SetFlags(0)
	if rx.Head() == last {
		fds := []unix.PollFd{{Fd: int32(rx.Intr), Events: unix.POLLIN}}
		_, _ = unix.Poll(fds, int(d/time.Millisecond))
		var b [8]byte
		n, _ := unix.Read(rx.Intr, b[:]) // non-blocking: clears a kick, if any
		kicked = n == 8
	}
	rx.SetFlags(memif.RingFlagMaskInt)
	return kicked
}
