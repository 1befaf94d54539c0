package rlnc

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/appliance/stats"
	"github.com/linerate/linerate/gf"
	"github.com/linerate/linerate/plugins"
)

func init() {
	plugins.Register(plugins.Kind{Name: "rlnc.decoder",
		Summary: "CODED IP destination: decode each generation by progressive Gauss–Jordan elimination and deliver the original IPv6 packets",
		New:     newDecoder})
}

type decoderConfig struct {
	storeConfig
	K           int    `toml:"k"`
	Block       int    `toml:"block"`
	Port        string `toml:"port"`
	PoolBuffers int    `toml:"pool_buffers"`
	Queue       int    `toml:"queue"`
}

// decoder is a CODED IP destination (§II.C). Each arriving coefficient vector
// is reduced against the generation's rows at once (gf.Echelon), and only an
// innovative packet's bytes are touched: they are copied into the store, as
// they came. The Echelon's rows are augmented with a column per packet, so
// that at full rank the row with pivot i says how source block i is made of
// the packets kept (see insert). Every block still owed is then written by
// one fused dot product over the kept blocks, straight into the buffers of
// the packets delivered: the payload work of a generation is one pass,
// whatever the arrival order.
//
// A systematic packet (an uncoded source block) is delivered at once, in
// place: its CODED IP header is cut out and the Next Header restored.
type decoder struct {
	receiver
	port    int     // -1: down the chain
	out     outLink // where decoded packets go: the chain, or port
	pool    packet.Pool
	ctx     *plugins.Context
	coef    []byte
	alloc   packet.Burst
	aug     []byte
	pivRow  []int32
	dsts    [][]byte
	srcs    [][]byte
	outH    []packet.Handle
	latency *stats.Histogram

	cDecoded, cDelivered, cSystematic, cUnfinished, cBadPrefix, cNoBuf, cRebuilds *stats.Counter
}

func newDecoder(s *plugins.Setup) (plugins.Stage, error) {
	c := decoderConfig{storeConfig: defaultStoreConfig(), PoolBuffers: 8192, Queue: 4096}
	if err := s.Config.Decode(&c); err != nil {
		return nil, err
	}
	if err := checkHints(c.K, c.Block, c.MaxBlock); err != nil {
		return nil, fmt.Errorf("rlnc.decoder: %w", err)
	}
	switch {
	case c.PoolBuffers < 64:
		return nil, fmt.Errorf("rlnc.decoder: pool_buffers %d is below 64", c.PoolBuffers)
	case c.Queue < 2*MaxK:
		return nil, fmt.Errorf("rlnc.decoder: queue %d is below %d (two generations of the largest K)", c.Queue, 2*MaxK)
	}
	d := &decoder{port: -1}
	if c.Port != "" {
		pi, ok := s.Ports.Port(c.Port)
		if !ok {
			return nil, fmt.Errorf("rlnc.decoder: port %q does not exist", c.Port)
		}
		d.port = int(pi.ID)
		// A decoded packet is the coded one less its header: it fits where the
		// coded one did; only its own size matters here.
		if c.Block > 0 && pi.MTU > 0 && c.Block-LenPrefix+packet.IPv6Len > pi.MTU {
			return nil, fmt.Errorf("rlnc.decoder: port %q: packets of up to %d bytes at IPv6 (block %d) exceed its MTU %d",
				c.Port, c.Block-LenPrefix+packet.IPv6Len, c.Block, pi.MTU)
		}
	}
	seed := s.Shared("seed", func() any { return uint64(0x9E3779B97F4A7C15) }).(uint64)
	st, err := newStore(c.storeConfig, seed, augmentedWidth, newStoreCounters(s.Counters))
	if err != nil {
		return nil, fmt.Errorf("rlnc.decoder: %w", err)
	}
	d.receiver = newReceiver(s, st)
	st.onFree = d.unfinished
	d.pool, err = s.Pool("rlnc/"+s.Name, c.PoolBuffers, max(2048, maxHdr+c.MaxBlock))
	if err != nil {
		return nil, fmt.Errorf("rlnc.decoder: pool: %w", err)
	}
	if d.pool.DataRoom() < maxHdr+c.MaxBlock {
		return nil, fmt.Errorf("rlnc.decoder: pool %q has data room %d, below %d", d.pool.Name(), d.pool.DataRoom(), maxHdr+c.MaxBlock)
	}
	d.out = outLink{name: "chain", chain: true}
	if d.port >= 0 {
		d.out = outLink{name: c.Port, port: uint16(d.port)}
	}
	d.out.q.init(c.Queue)
	d.coef = make([]byte, MaxK*MaxK)
	d.aug = make([]byte, augmentedWidth(MaxK))
	d.pivRow = make([]int32, MaxK)
	d.dsts = make([][]byte, MaxK)
	d.srcs = make([][]byte, MaxK)
	d.outH = make([]packet.Handle, MaxK)
	d.latency = s.Histograms("decode_latency", "time from a generation's first packet to its decoding", "ns")
	cs := s.Counters
	d.cDecoded = cs.New("generations_decoded", "generations decoded")
	d.cDelivered = cs.New("delivered", "original packets delivered (decoded or systematic): handed to the port's tx buffer or the chain")
	d.cSystematic = cs.New("delivered_systematic", "systematic packets delivered at once")
	d.cUnfinished = cs.New("blocks_undelivered", "source blocks of generations dropped before they were decoded")
	d.cBadPrefix = cs.New("bad_length_prefix", "decoded blocks whose length prefix exceeds N − 2 (not delivered)")
	d.cNoBuf = cs.New("no_buffer", "decoded packets not delivered: the pool was empty")
	d.out.cSent = d.cDelivered
	d.out.cFull = cs.New("queue_full", "decoded packets dropped: the queue was full")
	d.cRebuilds = cs.New("echelon_rebuilds", "eliminations restarted from the packets kept, after many non-innovative arrivals")
	return d, nil
}

// Process reduces each coded packet and delivers what is decoded.
func (d *decoder) Process(ctx *plugins.Context, b *packet.Burst) {
	d.ctx = ctx
	d.warm(b)
	for i := 0; i < b.N; i++ {
		d.take(ctx, b.H[i])
	}
	d.out.flush(ctx)
}

func (d *decoder) take(ctx *plugins.Context, h packet.Handle) {
	p := h.P()
	l, hd, isCoded, err := coded(p)
	if !isCoded {
		d.cPassed.Inc()
		return
	}
	if err != nil {
		p.Drop(reasonOf(err))
		return
	}
	gi, drop, handed := d.generation(ctx, h, l, hd)
	if handed {
		return
	}
	if drop != 0 {
		p.Drop(drop)
		return
	}
	st := d.st
	ge := &st.gens[gi]
	if ge.rank >= ge.kk {
		// This packet brought k′, and what is held already spans the
		// generation: it decodes now, whatever the packet adds.
		st.touchGen(gi, ctx.Now)
		d.decode(gi)
		p.Consume()
		ctx.Env.Free(h)
		return
	}
	sys := -1
	if hd.Systematic() {
		for i, c := range hd.Vector() {
			if c != 0 {
				sys = i
				break
			}
		}
		if sys >= ge.kk {
			p.Drop(reasonMismatch)
			return
		}
		if bitHas(&ge.delivered, sys) {
			p.Drop(reasonNonInnov)
			return
		}
	}
	innov := false
	if ge.rank < ge.kk {
		var ok bool
		if innov, ok = d.insert(gi, hd); !ok {
			p.Drop(reasonNoMemory)
			return
		}
	}
	if !innov && sys < 0 {
		p.Drop(reasonNonInnov)
		return
	}
	st.touchGen(gi, ctx.Now)
	if sys >= 0 {
		bitSet(&ge.delivered, sys) // in place, below
	}
	if ge.rank >= ge.kk {
		d.decode(gi)
	}
	if sys >= 0 {
		d.unwrap(p, l, hd)
		return
	}
	p.Consume()
	ctx.Env.Free(h)
}

// unwrap turns a systematic packet into the original in place: the CODED IP
// header and the length prefix are cut out, the padding trimmed, Next Header
// and Payload Length restored.
func (d *decoder) unwrap(p *packet.Packet, l *packet.Layers, hd Header) {
	n, err := SourceLen(hd.Block())
	if err != nil {
		d.cBadPrefix.Inc()
		p.Drop(reasonLength)
		return
	}
	l3, l4, nhOff := int(l.L3), int(l.L4), nextHeaderOffset(l)
	nh, pad := hd.NextHeader(), hd.BlockLen()-LenPrefix-n
	if p.RemoveGap(l4, FixedLen+hd.K()+LenPrefix) != nil || p.Trim(pad) != nil {
		p.Drop(packet.ReasonMalformed)
		return
	}
	b := p.Data()
	b[nhOff] = nh
	putIPv6PayloadLen(b, l3, l4-l3-packet.IPv6Len+n)
	d.cSystematic.Inc()
	d.cDelivered.Inc()
	if d.port >= 0 {
		p.Forward(uint16(d.port))
	}
}

// spareCols are augmented columns beyond K: a generation can take this many
// non-innovative packets before full rank (each uses a column).
const spareCols = 8

// augmentedWidth is the decoder's Echelon width for generation size k: the
// K coefficients, then one column per packet inserted.
func augmentedWidth(k int) int { return 2*k + spareCols }

// insert reduces a packet's coefficient vector, augmented with a 1 in a
// column of its own, and keeps the packet if it is innovative. The augmented
// part of each row records how the row is made of the packets kept, in one
// Echelon pass over short rows. A packet whose coefficients reduce to zero
// leaves a row with its pivot in its own column: the columns run from the
// newest packet to the oldest, so that pivot is the new packet's, and
// back-substitution clears it from every other row; its bytes are never
// needed and never touched. ok is false when no block memory can be had.
func (d *decoder) insert(gi int32, hd Header) (innov, ok bool) {
	st := d.st
	ge := &st.gens[gi]
	k, w := ge.k, ge.k+spareCols
	if ge.ins >= w {
		d.rebuild(gi)
	}
	slot, ok := st.allocSlot(gi)
	if !ok {
		return false, false
	}
	v := d.aug[:k+w]
	copy(v, hd.Vector())
	clear(v[k:])
	c := ge.ins
	v[k+w-1-c] = 1
	ge.ech.Insert(v, nil)
	ge.ins++
	if ge.ech.Pivot(ge.ech.Rank()-1) >= k {
		ge.col[c] = -1
		st.slotFree.push(slot)
		return false, true
	}
	ge.col[c] = int16(len(ge.rows))
	d.keep(gi, slot, hd)
	ge.rank++
	return true, true
}

// rebuild starts generation gi's Echelon again from the packets kept, when
// non-innovative arrivals have used up its augmented columns: each kept
// packet gets a column again, and the spare ones are free. Rare, and bounded
// by K inserts.
func (d *decoder) rebuild(gi int32) {
	st := d.st
	ge := &st.gens[gi]
	k, w := ge.k, ge.k+spareCols
	ge.ech.Reset()
	v := d.aug[:k+w]
	for j, sl := range ge.rows {
		copy(v, st.slot(sl)[:k])
		clear(v[k:])
		v[k+w-1-j] = 1
		ge.ech.Insert(v, nil)
		ge.col[j] = int16(j)
	}
	ge.ins = len(ge.rows)
	d.cRebuilds.Inc()
}

// decode writes every source block of generation gi not yet delivered, in one
// fused pass over the packets kept, into fresh packets built on the
// generation's headers, and delivers them.
func (d *decoder) decode(gi int32) {
	st := d.st
	ge := &st.gens[gi]
	s := &st.sess[ge.sess]
	k, w := ge.k, ge.k+spareCols
	kept := len(ge.rows)
	hl, n := ge.hdrLen, ge.n
	// At full rank, the row with pivot i has e_i for coefficients; its
	// augmented part is source block i in terms of the packets kept.
	for i := 0; i < ge.kk; i++ {
		d.pivRow[i] = -1
	}
	for r := 0; r < ge.ech.Rank(); r++ {
		if p := ge.ech.Pivot(r); p < ge.kk {
			d.pivRow[p] = int32(r)
		}
	}
	owed := 0
	for i := 0; i < ge.kk; i++ {
		if !bitHas(&ge.delivered, i) && d.pivRow[i] >= 0 {
			owed++
		}
	}
	// Buffers for every block owed, in batches of one pool lock each.
	got := 0
	for got < owed {
		b := &d.alloc
		b.N = 0
		n := d.pool.Alloc(b, min(owed-got, packet.MaxBurst))
		if n == 0 {
			d.cNoBuf.Add(uint64(owed - got))
			break
		}
		copy(d.outH[got:], b.H[:n])
		got += n
	}
	// Arena slots are whole cache lines: every kept block has this offset
	// in its line.
	srcAlign := int(uintptr(unsafe.Pointer(unsafe.SliceData(st.arena)))+uintptr(k)) & 63
	m := 0
	for i := 0; i < ge.kk && m < got; i++ {
		if bitHas(&ge.delivered, i) || d.pivRow[i] < 0 {
			continue
		}
		h := d.outH[m]
		row, _ := ge.ech.Row(int(d.pivRow[i]))
		t := row[k : k+w]
		cr := d.coef[m*kept : (m+1)*kept]
		for c := 0; c < ge.ins; c++ {
			if j := ge.col[c]; j >= 0 {
				cr[j] = t[w-1-c]
			}
		}
		// The block starts with its length prefix: decoded 2 bytes early, the
		// prefix lands on the end of the headers, written over afterwards.
		// The data start moves (into spare tailroom) so that the block sits
		// where the kept blocks do in a cache line: the fused pass reads
		// every kept block once per 8 written, and no load splits a line.
		p := h.P()
		at := hl - LenPrefix
		if sh := (srcAlign - int(uintptr(unsafe.Pointer(unsafe.SliceData(p.DataTail())))) - at) & 63; sh != 0 && p.Tailroom() >= at+n+sh {
			p.SetWindow(p.Offset()+sh, 0)
		}
		b, _ := p.Append(at + n)
		d.dsts[m] = b[at:]
		bitSet(&ge.delivered, i)
		m++
	}
	for j, sl := range ge.rows {
		d.srcs[j] = st.slot(sl)[k : k+n]
	}
	gf.MulMulti(d.dsts[:m], d.srcs[:kept], d.coef[:m*kept])
	now := d.ctx.Now
	for j := 0; j < m; j++ {
		h := d.outH[j]
		p := h.P()
		b := p.Data()
		ln := int(binary.BigEndian.Uint16(b[hl-LenPrefix:]))
		if ln > n-LenPrefix {
			d.cBadPrefix.Inc()
			packet.FreeOne(h)
			continue
		}
		copy(b, ge.hdr[:hl])
		b[ge.nhOff] = s.nextHdr
		putIPv6PayloadLen(b, ge.l3, hl-ge.l3-packet.IPv6Len+ln)
		_ = p.Trim(n - LenPrefix - ln)
		p.RxTime = now
		d.deliver(h)
	}
	d.cDecoded.Inc()
	d.latency.Record(uint64(now - ge.first))
	d.finish(gi)
}

func (d *decoder) deliver(h packet.Handle) { d.out.send(d.ctx, h) }

// unfinished counts the blocks of a generation dropped before decoding: those
// below its k′, or where k′ never came (it was K, or a short generation whose
// packets with k′ were all lost), those up to the last its packets name.
func (d *decoder) unfinished(gi int32) {
	ge := &d.st.gens[gi]
	kk := ge.kk
	if kk == ge.k {
		kk = 0
		for _, s := range ge.rows {
			v := d.st.slot(s)[:ge.k]
			for i := ge.k - 1; i >= kk; i-- {
				if v[i] != 0 {
					kk = i + 1
					break
				}
			}
		}
	}
	for i := 0; i < kk; i++ {
		if !bitHas(&ge.delivered, i) {
			d.cUnfinished.Inc()
		}
	}
}

// Produce hands the chain the decoded packets, or the port what waits.
func (d *decoder) Produce(ctx *plugins.Context, b *packet.Burst) { d.out.produce(ctx, b) }

// Tick flushes sessions past their timeout.
func (d *decoder) Tick(ctx *plugins.Context) {
	d.ctx = ctx
	d.st.expire(ctx.Now)
}

// Held counts decoded packets not yet handed on.
func (d *decoder) Held() int { return d.out.q.n }

// Stop drops what is buffered.
func (d *decoder) Stop(ctx *plugins.Context) {
	for si := range d.st.sess {
		d.st.freeSession(int32(si))
	}
	d.out.q.free()
}
