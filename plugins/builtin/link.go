package builtin

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/appliance/stats"
	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/plugins"
)

func init() {
	plugins.Register(plugins.Kind{Name: "link", Summary: "lab link emulation: delay, jitter, reordering, loss and a token-bucket capacity", New: newLink})
}

// link emulates a network link in the lab, where the kernel has no netem: a
// bottleneck queue served at a capacity (token bucket), then a propagation delay
// with jitter, random or patterned loss, and optional reordering. Everything is
// deterministic for a given seed and packet sequence, in real or virtual time.
type link struct {
	linkParams
	patIdx     int
	tat        int64 // when the bottleneck has sent what it took so far (GCRA)
	lastDepart int64
	lastDue    int64
	seed, pool string // what Reload may not change: the queue's buffers and the loss stream
	rng        *rand.Rand
	buffers    packet.Pool
	holdable   []bool // by port id: buffers of internal ports need no copy

	fifo  fifo
	heap  dueHeap
	order uint64

	cLoss, cFull, cCopied, cNoBuf, cDelivered *stats.Counter
}

type linkConfig struct {
	Delay       config.Duration `toml:"delay"`
	Jitter      config.Duration `toml:"jitter"`
	Reorder     float64         `toml:"reorder"`
	KeepOrder   bool            `toml:"keep_order"`
	Loss        float64         `toml:"loss"`
	LossPattern string          `toml:"loss_pattern"`
	Seed        uint64          `toml:"seed"`
	Rate        config.Rate     `toml:"rate"`
	Burst       config.ByteSize `toml:"burst"`
	Queue       int             `toml:"queue"`
	Pool        string          `toml:"pool"`
}

// maxFrame is the largest standard Ethernet frame with its FCS: the bucket
// depth of a link that only serialises.
const maxFrame = 1518

// Drop reasons of the link.
var (
	reasonLinkLoss  = packet.Expected(packet.RegisterReason("link_loss"), "the loss a link stage emulates (its loss key)")
	reasonLinkQueue = packet.RegisterReason("link_queue_full")
)

// linkParams are what a link's table sets, and what Reload changes.
type linkParams struct {
	delay, jitter int64
	reorder       float64
	keepOrder     bool
	useHeap       bool // packets may overtake each other: a heap by due time
	loss          float64
	pattern       []bool  // loss pattern, repeated: true = drop
	bitsPerNs     float64 // capacity; 0 = unlimited
	creditNs      int64   // the bucket's depth beyond one frame, as time at capacity
	limit         int
}

// readLink decodes and checks a link's table.
func readLink(cfg plugins.Config) (linkConfig, linkParams, error) {
	c := linkConfig{Queue: 65536, Seed: 1}
	if err := cfg.Decode(&c); err != nil {
		return c, linkParams{}, err
	}
	l := linkParams{delay: int64(time.Duration(c.Delay)), jitter: int64(time.Duration(c.Jitter)), reorder: c.Reorder,
		keepOrder: c.KeepOrder, loss: c.Loss, limit: c.Queue}
	// As netem: jitter draws each packet's delay on its own, so packets closer
	// than the jitter may swap, unless keep_order holds them in sequence; reorder
	// sends a fraction of packets at once, ahead of the queue.
	l.useHeap = (l.jitter > 0 && !l.keepOrder) || l.reorder > 0
	switch {
	case l.delay < 0 || l.jitter < 0:
		return c, l, fmt.Errorf("link: delay and jitter must not be negative")
	case l.jitter > l.delay:
		return c, l, fmt.Errorf("link: jitter %v exceeds delay %v (delay ± jitter must stay ≥ 0)", time.Duration(l.jitter), time.Duration(l.delay))
	case c.Loss < 0 || c.Loss > 1:
		return c, l, fmt.Errorf("link: loss %g is outside 0..1", c.Loss)
	case c.Reorder < 0 || c.Reorder > 1:
		return c, l, fmt.Errorf("link: reorder %g is outside 0..1", c.Reorder)
	case c.Queue < 1 || c.Queue > 1<<22:
		return c, l, fmt.Errorf("link: queue %d is outside 1..%d", c.Queue, 1<<22)
	}
	for _, ch := range strings.TrimSpace(c.LossPattern) {
		switch ch {
		case '0', '.':
			l.pattern = append(l.pattern, false)
		case '1', 'x':
			l.pattern = append(l.pattern, true)
		default:
			return c, l, fmt.Errorf("link: loss_pattern %q: use 0 (pass) and 1 (drop)", c.LossPattern)
		}
	}
	if len(l.pattern) > 0 && c.Loss > 0 {
		return c, l, fmt.Errorf("link: set loss or loss_pattern, not both")
	}
	if r := float64(c.Rate); r > 0 {
		l.bitsPerNs = r / 1e9
		burst := int64(c.Burst)
		if burst == 0 {
			burst = maxFrame // one frame: a plain serialising link
		}
		if burst < maxFrame {
			return c, l, fmt.Errorf("link: burst %d is below one frame (%d bytes)", burst, maxFrame)
		}
		l.creditNs = int64(float64((burst-maxFrame)*8) / l.bitsPerNs)
	}
	return c, l, nil
}

func newLink(s *plugins.Setup) (plugins.Stage, error) {
	c, params, err := readLink(s.Config)
	if err != nil {
		return nil, err
	}
	l := &link{linkParams: params, seed: fmt.Sprint(c.Seed), pool: c.Pool}
	// Each lcore's instance draws from its own stream.
	l.rng = rand.New(rand.NewPCG(c.Seed, uint64(s.Instance)+0x9E3779B97F4A7C15))
	name := c.Pool
	if name == "" {
		name = "link/" + s.Name
	}
	pool, err := s.Pool(name, c.Queue+packet.MaxBurst, 9216)
	if err != nil {
		return nil, fmt.Errorf("link: pool: %w", err)
	}
	l.buffers = pool
	for _, pi := range s.Ports.All() {
		for int(pi.ID) >= len(l.holdable) {
			l.holdable = append(l.holdable, false)
		}
		l.holdable[pi.ID] = pi.Internal
	}
	if !l.useHeap {
		l.fifo.init(c.Queue)
	} else {
		l.heap = make(dueHeap, 0, c.Queue)
	}
	l.cLoss = s.Counters.New("lost", "packets the link dropped as lost")
	l.cFull = s.Counters.New("queue_full", "packets dropped at a full link queue")
	l.cCopied = s.Counters.New("copied", "packets copied so as not to hold a port's rx buffers")
	l.cNoBuf = s.Counters.New("no_buffer", "packets dropped because the link's pool was empty")
	l.cDelivered = s.Counters.New("delivered", "packets released after their delay")
	return l, nil
}

// Process takes every packet into the link.
func (l *link) Process(ctx *plugins.Context, b *packet.Burst) {
	now := ctx.Now
	for i := 0; i < b.N; i++ {
		h := b.H[i]
		p := h.P()
		if l.lost() {
			l.cLoss.Inc()
			p.Drop(reasonLinkLoss)
			continue
		}
		if l.Held() >= l.limit {
			l.cFull.Inc()
			p.Drop(reasonLinkQueue)
			continue
		}
		hold := h
		if int(p.InPort) < len(l.holdable) && !l.holdable[p.InPort] {
			// Never hold a port's rx buffer: copy what we keep into our own pool.
			// Before the capacity and the delay: a packet dropped here takes
			// no link time.
			q, ok := l.buffers.AllocOne()
			if !ok {
				l.cNoBuf.Inc()
				p.Drop(packet.ReasonNoBuffer)
				continue
			}
			if err := q.P().CopyFrom(p, l.buffers.Headroom()); err != nil {
				l.buffers.FreeOne(q)
				p.Drop(packet.ReasonTooBig)
				continue
			}
			l.cCopied.Inc()
			ctx.Env.Free(h)
			b.H[i] = q
			hold = q
		}
		// Capacity: the bottleneck sends at rate, so the packet's last bit is out
		// at tat. A bucket deeper than one frame lets it leave up to creditNs
		// earlier, never before its own serialisation, never before the packet
		// ahead of it.
		depart := now
		if l.bitsPerNs > 0 {
			ser := int64(float64((p.Len()+24)*8) / l.bitsPerNs) // + FCS, preamble and inter-frame gap
			l.tat = max(l.tat, now) + ser
			depart = max(now+ser, l.tat-l.creditNs, l.lastDepart)
			l.lastDepart = depart
		}
		due := depart + l.delay
		if l.jitter > 0 {
			due += l.rng.Int64N(2*l.jitter+1) - l.jitter
		}
		if l.reorder > 0 && l.rng.Float64() < l.reorder {
			due = depart // jumps the delay line
		} else if l.keepOrder {
			if due < l.lastDue {
				due = l.lastDue
			}
			l.lastDue = due
		}
		hold.P().Consume()
		ctx.Hold(hold)
		if !l.useHeap {
			l.fifo.push(hold, due)
		} else {
			l.order++
			l.heap.push(dueItem{h: hold, due: due, order: l.order})
		}
	}
}

// lost draws the loss decision for one packet.
func (l *link) lost() bool {
	if len(l.pattern) > 0 {
		d := l.pattern[l.patIdx]
		l.patIdx++
		if l.patIdx == len(l.pattern) {
			l.patIdx = 0
		}
		return d
	}
	return l.loss > 0 && l.rng.Float64() < l.loss
}

// Produce releases the packets whose time has come.
func (l *link) Produce(ctx *plugins.Context, b *packet.Burst) {
	now := ctx.Now
	n0 := b.N
	if !l.useHeap {
		for b.N < packet.MaxBurst {
			h, ok := l.fifo.popDue(now)
			if !ok {
				break
			}
			h.P().Continue()
			b.H[b.N] = h
			b.N++
		}
	} else {
		for b.N < packet.MaxBurst && len(l.heap) > 0 && l.heap[0].due <= now {
			it := l.heap.pop()
			it.h.P().Continue()
			b.H[b.N] = it.h
			b.N++
		}
	}
	l.cDelivered.Add(uint64(b.N - n0))
}

// Reload takes a new table between bursts: delay, jitter, reordering, loss
// and capacity change for the packets that enter from now on; those on the
// link keep their due times, and none is dropped. The queue's size, its pool
// and the seed stay as they are until a restart.
func (l *link) Reload(_ *plugins.Context, cfg plugins.Config) (func(), error) {
	c, params, err := readLink(cfg)
	switch {
	case err != nil:
		return nil, err
	case params.limit != l.limit:
		return nil, fmt.Errorf("link: queue %d: the queue's size changes only with a restart (it is %d)", params.limit, l.limit)
	case c.Pool != l.pool:
		return nil, fmt.Errorf("link: pool %q: the pool changes only with a restart", c.Pool)
	case fmt.Sprint(c.Seed) != l.seed:
		return nil, fmt.Errorf("link: seed %d: the seed changes only with a restart (it is %s)", c.Seed, l.seed)
	}
	return func() { l.take(params) }, nil
}

// take switches to new parameters: the packets on the link move to the delay
// line they use, in due order.
func (l *link) take(params linkParams) {
	switch {
	case params.useHeap && !l.useHeap:
		if l.heap == nil {
			l.heap = make(dueHeap, 0, l.limit)
		}
		for {
			h, due, ok := l.fifo.pop()
			if !ok {
				break
			}
			l.order++
			l.heap.push(dueItem{h: h, due: due, order: l.order})
		}
	case !params.useHeap && l.useHeap:
		if l.fifo.h == nil {
			l.fifo.init(l.limit)
		}
		for len(l.heap) > 0 {
			it := l.heap.pop()
			l.fifo.push(it.h, it.due)
			l.lastDue = max(l.lastDue, it.due)
		}
	}
	if len(params.pattern) != len(l.pattern) {
		l.patIdx = 0
	}
	l.linkParams = params
}

// Held is the number of packets in flight on the link.
func (l *link) Held() int {
	if !l.useHeap {
		return l.fifo.len()
	}
	return len(l.heap)
}

// Stop frees what is still on the link.
func (l *link) Stop(ctx *plugins.Context) {
	for {
		h, ok := l.fifo.popDue(1<<63 - 1)
		if !ok {
			break
		}
		packet.FreeOne(h)
	}
	for len(l.heap) > 0 {
		packet.FreeOne(l.heap.pop().h)
	}
}

// fifo is a ring of (handle, due) in due order: the delay line when the link
// does not reorder.
type fifo struct {
	h          []packet.Handle
	due        []int64
	head, tail int
	n          int
}

func (f *fifo) init(size int) {
	f.h = make([]packet.Handle, size)
	f.due = make([]int64, size)
}

func (f *fifo) len() int { return f.n }

func (f *fifo) push(h packet.Handle, due int64) {
	f.h[f.tail] = h
	f.due[f.tail] = due
	f.tail++
	if f.tail == len(f.h) {
		f.tail = 0
	}
	f.n++
}

// pop takes the first packet, whenever it is due.
func (f *fifo) pop() (packet.Handle, int64, bool) {
	if f.n == 0 {
		return 0, 0, false
	}
	due := f.due[f.head]
	h, _ := f.popDue(due)
	return h, due, true
}

func (f *fifo) popDue(now int64) (packet.Handle, bool) {
	if f.n == 0 || f.due[f.head] > now {
		return 0, false
	}
	h := f.h[f.head]
	f.head++
	if f.head == len(f.h) {
		f.head = 0
	}
	f.n--
	return h, true
}

// dueHeap orders held packets by due time, then arrival: the delay line when
// the link reorders.
type dueItem struct {
	h     packet.Handle
	due   int64
	order uint64
}

type dueHeap []dueItem

func (d dueHeap) less(i, j int) bool {
	if d[i].due != d[j].due {
		return d[i].due < d[j].due
	}
	return d[i].order < d[j].order
}

// push and pop are a binary heap written out, since container/heap would box
// every item into an interface: an allocation per packet.
func (d *dueHeap) push(it dueItem) {
	h := append(*d, it)
	for i := len(h) - 1; i > 0; {
		up := (i - 1) / 2
		if !h.less(i, up) {
			break
		}
		h[i], h[up] = h[up], h[i]
		i = up
	}
	*d = h
}

func (d *dueHeap) pop() dueItem {
	h := *d
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(h) && h.less(l, m) {
			m = l
		}
		if r < len(h) && h.less(r, m) {
			m = r
		}
		if m == i {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	*d = h
	return top
}
