package rlnc

import (
	"fmt"
	"time"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/appliance/stats"
	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/gf"
	"github.com/linerate/linerate/plugins"
)

func init() {
	plugins.Register(plugins.Kind{Name: "rlnc.recoder",
		Summary: "CODED IP forwarder: keep innovative packets per generation and send fresh random combinations of them on each output link",
		New:     newRecoder})
}

type recoderConfig struct {
	storeConfig
	K           int             `toml:"k"`
	Block       int             `toml:"block"`
	Coded       int             `toml:"coded"`
	RepairRatio float64         `toml:"repair_ratio"`
	MTU         int             `toml:"mtu"`
	Flush       config.Duration `toml:"flush"`
	PoolBuffers int             `toml:"pool_buffers"`
	Queue       int             `toml:"queue"`
	Seed        uint64          `toml:"seed"`
	Links       []linkConfig    `toml:"links"`
}

// recoder is a CODED IP forwarder (§II.B). It checks each packet's
// innovativeness on its coefficients alone (an Echelon without payloads) and
// keeps only innovative ones, as they came: vector and block. Each innovative
// arrival owes every link one packet, within the link's budget for the
// generation; at full rank a link is owed the rest of its budget (its
// redundancy). A packet owed is made when it is sent: a fresh random
// combination of every packet held then, coding vector included, in one fused
// pass. On a paced link (rate) that is the link's next transmit opportunity,
// so it mixes everything that arrived meanwhile.
type recoder struct {
	receiver
	links   []outLink
	pool    packet.Pool
	rng     prng
	ctx     *plugins.Context
	pending int // packets owed on paced links
	paced   bool
	flush   int64

	coef []byte
	srcs [][]byte
	one  [][]byte

	cRecoded, cNoBuf, cTooBig *stats.Counter
}

func newRecoder(s *plugins.Setup) (plugins.Stage, error) {
	c := recoderConfig{storeConfig: defaultStoreConfig(), Flush: config.Duration(20 * time.Millisecond), PoolBuffers: 8192, Queue: 4096, Seed: 2}
	if err := s.Config.Decode(&c); err != nil {
		return nil, err
	}
	if err := checkHints(c.K, c.Block, c.MaxBlock); err != nil {
		return nil, fmt.Errorf("rlnc.recoder: %w", err)
	}
	switch {
	case c.Flush <= 0:
		return nil, fmt.Errorf("rlnc.recoder: flush must be positive")
	case c.PoolBuffers < 64:
		return nil, fmt.Errorf("rlnc.recoder: pool_buffers %d is below 64", c.PoolBuffers)
	case c.Queue < packet.MaxBurst:
		return nil, fmt.Errorf("rlnc.recoder: queue %d is below %d", c.Queue, packet.MaxBurst)
	}
	links, err := buildLinks(s, c.Links, linkConfig{Coded: c.Coded, RepairRatio: c.RepairRatio, MTU: c.MTU}, c.K, c.Block, c.Queue)
	if err != nil {
		return nil, fmt.Errorf("rlnc.recoder: %w", err)
	}
	seed := s.Shared("seed", func() any { return c.Seed * 0x9E3779B97F4A7C15 }).(uint64)
	st, err := newStore(c.storeConfig, seed, func(k int) int { return k }, newStoreCounters(s.Counters))
	if err != nil {
		return nil, fmt.Errorf("rlnc.recoder: %w", err)
	}
	r := &recoder{receiver: newReceiver(s, st), links: links, flush: int64(time.Duration(c.Flush))}
	for i := range r.links {
		if r.links[i].bitsPerNs > 0 {
			r.links[i].fifo.init(c.MaxGenerations + 1)
			r.paced = true
		}
	}
	st.onFree = r.dropCredits
	r.pool, err = s.Pool("rlnc/"+s.Name, c.PoolBuffers, max(2048, maxHdr+FixedLen+MaxK+c.MaxBlock))
	if err != nil {
		return nil, fmt.Errorf("rlnc.recoder: pool: %w", err)
	}
	r.rng = prng{s: c.Seed ^ uint64(s.Instance+1)*0xD1B54A32D192ED03}
	r.coef = make([]byte, MaxK)
	r.srcs = make([][]byte, MaxK)
	r.one = make([][]byte, 1)
	cs := s.Counters
	r.cRecoded = cs.New("recoded_sent", "recoded packets made")
	r.cNoBuf = cs.New("no_buffer", "recoded packets not made: the pool was empty")
	r.cTooBig = cs.New("too_big", "recoded packets not made: larger than the link's MTU")
	return r, nil
}

// checkHints checks a receiver's optional k and block, used only for the MTU
// check at setup.
func checkHints(k, n, maxBlock int) error {
	switch {
	case k < 0 || k > MaxK:
		return fmt.Errorf("k %d is outside 0..%d", k, MaxK)
	case n < 0 || n > 65535:
		return fmt.Errorf("block %d is outside 0..65535", n)
	case n > 0 && maxBlock > 0 && n > maxBlock:
		return fmt.Errorf("block %d exceeds max_block %d", n, maxBlock)
	case (k == 0) != (n == 0):
		return fmt.Errorf("give k and block together (for the MTU check), or neither")
	}
	return nil
}

// Process keeps innovative packets and sends what each link is owed.
func (r *recoder) Process(ctx *plugins.Context, b *packet.Burst) {
	r.ctx = ctx
	r.warm(b)
	for i := 0; i < b.N; i++ {
		r.take(ctx, b.H[i])
	}
	flushLinks(ctx, r.links)
}

func (r *recoder) take(ctx *plugins.Context, h packet.Handle) {
	p := h.P()
	l, hd, isCoded, err := coded(p)
	if !isCoded {
		r.cPassed.Inc()
		return
	}
	if err != nil {
		p.Drop(reasonOf(err))
		return
	}
	gi, drop, handed := r.generation(ctx, h, l, hd)
	if handed {
		return
	}
	if drop != 0 {
		p.Drop(drop)
		return
	}
	st := r.st
	ge := &st.gens[gi]
	if ge.spent && ge.kk == ge.k {
		p.Drop(reasonLate)
		return
	}
	if ge.spent || ge.ech.Rank() >= ge.kk {
		if ge.granted && r.toldAll(ge) {
			p.Drop(reasonNonInnov)
			return
		}
		// This packet brought k′, and what is held already spans the
		// generation (or no budget is left for more): the links hear of k′.
		p.Consume()
		ctx.Env.Free(h)
		st.touchGen(gi, ctx.Now)
		r.grant(gi)
		return
	}
	slot, ok := st.allocSlot(gi)
	if !ok {
		p.Drop(reasonNoMemory)
		return
	}
	if innov, _ := ge.ech.Insert(hd.Vector(), nil); !innov {
		st.slotFree.push(slot)
		p.Drop(reasonNonInnov)
		return
	}
	r.keep(gi, slot, hd)
	p.Consume()
	ctx.Env.Free(h)
	st.touchGen(gi, ctx.Now)
	if ge.fresh {
		// Links deliver in order: a newer generation means the session's
		// older ones will get nothing more from this upstream.
		ge.fresh = false
		for o := st.gs.next[gi]; o >= 0; {
			next := st.gs.next[o]
			if og := &st.gens[o]; !og.granted && serialDiff(og.id, ge.id) > 0 {
				r.grant(o)
			}
			o = next
		}
	}
	if ge.ech.Rank() >= ge.kk {
		r.grant(gi)
		return
	}
	for li := range r.links {
		if r.owed(ge, li) > 0 {
			r.credit(gi, li, 1)
		}
	}
	r.maybeFinish(gi)
}

// owed is what link li may still carry of generation ge now: its limit at
// the rank held, less what was sent and what is owed already.
func (r *recoder) owed(ge *generation, li int) int {
	return r.links[li].limit(ge.k, ge.kk, len(ge.rows)) - int(ge.sent[li]) - int(ge.credits[li])
}

// left is what remains of link li's budget for generation ge.
func (r *recoder) left(ge *generation, li int) int {
	return r.links[li].budget(ge.k, ge.kk) - int(ge.sent[li]) - int(ge.credits[li])
}

// untold reports whether link li has yet to hear generation ge's k′: it is
// short, and no packet that says so went or is owed there.
func untold(ge *generation, li int) bool {
	return ge.kk < ge.k && ge.told&(1<<li) == 0 && ge.credits[li] == 0
}

// toldAll reports whether every link has heard generation ge's k′.
func (r *recoder) toldAll(ge *generation) bool {
	for li := range r.links {
		if untold(ge, li) {
			return false
		}
	}
	return true
}

// credit owes link li n more packets of generation gi: sent at once on an
// unpaced link, queued for its transmit opportunities on a paced one.
func (r *recoder) credit(gi int32, li, n int) {
	ge := &r.st.gens[gi]
	ln := &r.links[li]
	if ln.bitsPerNs == 0 {
		for ; n > 0; n-- {
			r.send(gi, li)
		}
		return
	}
	if ge.credits[li] == 0 {
		ln.fifo.push(genRef{gi, ge.epoch})
	}
	ge.credits[li] += uint16(n)
	r.pending += n
}

// grant owes every link the rest of what it may carry of generation gi at
// the rank held (its redundancy), and finishes the generation when nothing
// is owed. A link that has only carried packets saying k′ = 0 of a short
// generation is owed one more, however spent its budget: downstream learns
// k′ from nothing else.
func (r *recoder) grant(gi int32) {
	ge := &r.st.gens[gi]
	ge.granted = true
	for li := range r.links {
		if n := r.owed(ge, li); n > 0 {
			r.credit(gi, li, n)
		} else if untold(ge, li) {
			r.credit(gi, li, 1)
		}
	}
	r.maybeFinish(gi)
}

// send makes one recoded packet of generation gi and sends it on link li.
func (r *recoder) send(gi int32, li int) {
	st := r.st
	ge := &st.gens[gi]
	ln := &r.links[li]
	ge.sent[li]++
	hl := ge.hdrLen
	size := hl + FixedLen + ge.k + ge.n
	if ln.mtu > 0 && size-ge.l3 > ln.mtu {
		r.cTooBig.Inc()
		return
	}
	h, ok := r.pool.AllocOne()
	if !ok {
		r.cNoBuf.Inc()
		return
	}
	q := h.P()
	d, _ := q.Append(size)
	copy(d, ge.hdr[:hl+FixedLen])
	hd := Header(d[hl:])
	hd.SetFlags(0)
	wire := uint8(0)
	if ge.kk < ge.k {
		wire = uint8(ge.kk)
		ge.told |= 1 << li
	}
	hd.SetBlocksUsed(wire)
	rank := len(ge.rows)
	for i, s := range ge.rows {
		r.srcs[i] = st.slot(s)[:ge.k+ge.n]
	}
	r.rng.nonZero(r.coef[:rank])
	r.one[0] = d[hl+FixedLen:]
	gf.MulMulti(r.one, r.srcs[:rank], r.coef[:rank])
	q.SetFlag(packet.FlagLocal)
	q.RxTime = r.ctx.Now
	r.cRecoded.Inc()
	ln.send(r.ctx, h)
}

// Produce sends what paced links may send now, and hands the chain its
// packets.
func (r *recoder) Produce(ctx *plugins.Context, b *packet.Burst) {
	r.ctx = ctx
	if r.paced {
		r.pace(ctx.Now)
	}
	for li := range r.links {
		r.links[li].produce(ctx, b)
	}
}

// pace sends owed packets on each paced link while it is free, oldest
// generation first.
func (r *recoder) pace(now int64) {
	st := r.st
	for li := range r.links {
		ln := &r.links[li]
		if ln.bitsPerNs == 0 {
			continue
		}
		for ln.tat <= now {
			ref, ok := ln.fifo.front()
			if !ok {
				break
			}
			ge := &st.gens[ref.gi]
			if !ge.live || ge.epoch != ref.epoch || ge.credits[li] == 0 {
				ln.fifo.pop()
				continue
			}
			ser := ln.serialise(ge.hdrLen + FixedLen + ge.k + ge.n)
			ln.tat = max(ln.tat, now-ser) + ser
			ge.credits[li]--
			r.pending--
			r.send(ref.gi, li)
			if ge.credits[li] == 0 {
				ln.fifo.pop()
				r.maybeFinish(ref.gi)
			}
		}
	}
}

// maybeFinish frees a generation that owes nothing more: granted (full
// rank, superseded or idle) and sent, or with every link's budget spent and
// its k′ told. A spent generation whose k′ is unknown waits for its grant
// instead, taking no packet but one that brings k′ (a short generation's).
func (r *recoder) maybeFinish(gi int32) {
	ge := &r.st.gens[gi]
	spent := true
	for li := range r.links {
		if ge.credits[li] > 0 {
			return
		}
		if r.left(ge, li) > 0 || untold(ge, li) {
			spent = false
		}
	}
	switch {
	case ge.granted || spent && ge.kk < ge.k:
		r.finish(gi)
	case spent:
		ge.spent = true
	}
}

// dropCredits forgets what a generation the store frees still owes.
func (r *recoder) dropCredits(gi int32) {
	ge := &r.st.gens[gi]
	for li := range r.links {
		r.pending -= int(ge.credits[li])
		ge.credits[li] = 0
	}
}

// Tick grants generations idle for the flush time their remaining budget,
// and flushes sessions past their timeout.
func (r *recoder) Tick(ctx *plugins.Context) {
	r.ctx = ctx
	st := r.st
	for gi := st.genLRU.tail; gi >= 0 && ctx.Now-st.gens[gi].last > r.flush; {
		prev := st.gl.prev[gi]
		if !st.gens[gi].granted {
			r.grant(gi)
		}
		gi = prev
	}
	st.expire(ctx.Now)
	flushLinks(ctx, r.links)
}

// Held counts queued packets and packets owed on paced links.
func (r *recoder) Held() int { return queued(r.links) + r.pending }

// Stop drops what is buffered.
func (r *recoder) Stop(ctx *plugins.Context) {
	for si := range r.st.sess {
		r.st.freeSession(int32(si))
	}
	freeQueued(r.links)
}
