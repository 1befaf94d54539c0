package rlnc

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"time"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/appliance/stats"
	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/gf"
	"github.com/linerate/linerate/plugins"
)

func init() {
	plugins.Register(plugins.Kind{Name: "rlnc.encoder",
		Summary: "CODED IP source: cut matched IPv6 sessions into generations of K blocks and send random linear combinations over GF(2^8)",
		New:     newEncoder})
}

// matchConfig selects the packets of a session.
type matchConfig struct {
	Src        config.Prefix `toml:"src"`
	Dst        config.Prefix `toml:"dst"`
	NextHeader *int          `toml:"next_header"`
	UDPDstPort int           `toml:"udp_dst_port"`
	Session    int           `toml:"session"`
}

type rule struct {
	src, dst netip.Prefix
	nh       uint8
	port     uint16
	id       uint8
}

type encoderConfig struct {
	storeConfig
	K             int             `toml:"k"`
	Block         int             `toml:"block"`
	Systematic    bool            `toml:"systematic"`
	Coded         int             `toml:"coded"`
	RepairRatio   float64         `toml:"repair_ratio"`
	MTU           int             `toml:"mtu"`
	Flush         config.Duration `toml:"flush"`
	SessionLength int             `toml:"session_length"`
	TooBig        string          `toml:"too_big"`
	PoolBuffers   int             `toml:"pool_buffers"`
	Queue         int             `toml:"queue"`
	Seed          uint64          `toml:"seed"`
	Match         []matchConfig   `toml:"match"`
	Links         []linkConfig    `toml:"links"`
}

// maxBatch bounds the coded packets made in one fused pass.
const maxBatch = 64

// encoder is the CODED IP source (§II.A). Each matched packet becomes source
// block i of its session's open generation: its bytes after the IPv6 header
// chain, with a 2-octet length in front, zero-padded to N, copied into the
// store (the packet itself is freed at once). When a generation has K
// blocks, or is older than flush, every link gets its coded packets, all made
// in fused passes over the generation's blocks.
type encoder struct {
	k, n       int
	systematic bool
	flush      int64
	sessLen    uint16
	dropTooBig bool
	rules      []rule
	links      []outLink
	st         *store
	pool       packet.Pool
	rng        prng
	ctx        *plugins.Context
	stopping   bool

	coef  []byte
	wire  [maxHdr + FixedLen + MaxK]byte
	alloc packet.Burst
	dsts  [][]byte
	srcs  [][]byte
	outH  []packet.Handle
	outL  []uint8

	cBlocks, cGens, cShort, cCoded, cSystematic             *stats.Counter
	cUncodedExt, cUncodedBig, cUncodedChain, cEnded, cNoBuf *stats.Counter
	cNoMemory                                               *stats.Counter
}

func newEncoder(s *plugins.Setup) (plugins.Stage, error) {
	c := encoderConfig{storeConfig: defaultStoreConfig(), K: 16, Block: 1400, Flush: config.Duration(10 * time.Millisecond),
		TooBig: "pass", PoolBuffers: 8192, Queue: 4096, Seed: 1}
	c.MaxBlock = 0
	if err := s.Config.Decode(&c); err != nil {
		return nil, err
	}
	if c.MaxBlock == 0 {
		c.MaxBlock = c.Block
	}
	switch {
	case c.K < 1 || c.K > MaxK:
		return nil, fmt.Errorf("rlnc.encoder: k %d is outside 1..%d", c.K, MaxK)
	case c.Block < LenPrefix+1 || c.Block > 65535-FixedLen-MaxK:
		return nil, fmt.Errorf("rlnc.encoder: block %d is outside %d..%d", c.Block, LenPrefix+1, 65535-FixedLen-MaxK)
	case c.Block > c.MaxBlock:
		return nil, fmt.Errorf("rlnc.encoder: block %d exceeds max_block %d", c.Block, c.MaxBlock)
	case c.Flush <= 0:
		return nil, fmt.Errorf("rlnc.encoder: flush must be positive")
	case c.SessionLength < 0 || c.SessionLength > 65535:
		return nil, fmt.Errorf("rlnc.encoder: session_length %d is outside 0..65535", c.SessionLength)
	case c.TooBig != "pass" && c.TooBig != "drop":
		return nil, fmt.Errorf("rlnc.encoder: too_big %q: use \"pass\" (send uncoded) or \"drop\"", c.TooBig)
	case c.PoolBuffers < 64:
		return nil, fmt.Errorf("rlnc.encoder: pool_buffers %d is below 64", c.PoolBuffers)
	case c.Queue < packet.MaxBurst:
		return nil, fmt.Errorf("rlnc.encoder: queue %d is below %d", c.Queue, packet.MaxBurst)
	case c.Systematic && c.Coded > 0 && c.Coded < c.K:
		return nil, fmt.Errorf("rlnc.encoder: systematic with coded %d < k %d: every link carries the K source blocks", c.Coded, c.K)
	}
	e := &encoder{k: c.K, n: c.Block, systematic: c.Systematic, flush: int64(time.Duration(c.Flush)),
		sessLen: uint16(c.SessionLength), dropTooBig: c.TooBig == "drop"}
	if len(c.Match) == 0 {
		c.Match = []matchConfig{{Session: 1}}
	}
	ids := map[uint8]uint8{}
	for i, m := range c.Match {
		r := rule{src: m.Src.Prefix, dst: m.Dst.Prefix, nh: 17, port: uint16(m.UDPDstPort), id: uint8(m.Session)}
		if m.NextHeader != nil {
			if *m.NextHeader < 0 || *m.NextHeader > 255 {
				return nil, fmt.Errorf("rlnc.encoder: match[%d]: next_header %d is outside 0..255", i, *m.NextHeader)
			}
			r.nh = uint8(*m.NextHeader)
		}
		switch {
		case m.Session < 0 || m.Session > 255:
			return nil, fmt.Errorf("rlnc.encoder: match[%d]: session %d is outside 0..255", i, m.Session)
		case m.UDPDstPort < 0 || m.UDPDstPort > 65535:
			return nil, fmt.Errorf("rlnc.encoder: match[%d]: udp_dst_port %d is outside 0..65535", i, m.UDPDstPort)
		case m.UDPDstPort != 0 && r.nh != packet.ProtocolUDP:
			return nil, fmt.Errorf("rlnc.encoder: match[%d]: udp_dst_port needs next_header 17", i)
		case r.src.IsValid() && !r.src.Addr().Is6() || r.dst.IsValid() && !r.dst.Addr().Is6():
			return nil, fmt.Errorf("rlnc.encoder: match[%d]: CODED IP runs over IPv6: use IPv6 prefixes", i)
		}
		if nh, dup := ids[r.id]; dup && nh != r.nh {
			return nil, fmt.Errorf("rlnc.encoder: match[%d]: session %d already carries next header %d; a session carries one upper-layer protocol", i, r.id, nh)
		}
		ids[r.id] = r.nh
		e.rules = append(e.rules, r)
	}
	for i, l := range c.Links {
		if l.Rate != 0 {
			return nil, fmt.Errorf("rlnc.encoder: links[%d]: rate paces a recoder's links; an encoder sends at once", i)
		}
	}
	var err error
	e.links, err = buildLinks(s, c.Links, linkConfig{Coded: c.Coded, RepairRatio: c.RepairRatio, MTU: c.MTU}, c.K, c.Block, c.Queue)
	if err != nil {
		return nil, fmt.Errorf("rlnc.encoder: %w", err)
	}
	seed := s.Shared("seed", func() any { return c.Seed * 0x9E3779B97F4A7C15 }).(uint64)
	e.st, err = newStore(c.storeConfig, seed, nil, newStoreCounters(s.Counters))
	if err != nil {
		return nil, fmt.Errorf("rlnc.encoder: %w", err)
	}
	e.st.onFree = e.generationDone
	e.pool, err = s.Pool("rlnc/"+s.Name, c.PoolBuffers, max(2048, maxHdr+FixedLen+c.K+c.Block))
	if err != nil {
		return nil, fmt.Errorf("rlnc.encoder: pool: %w", err)
	}
	if e.pool.DataRoom() < maxHdr+FixedLen+c.K+c.Block {
		return nil, fmt.Errorf("rlnc.encoder: pool %q has data room %d, below the %d a coded packet may need", e.pool.Name(), e.pool.DataRoom(), maxHdr+FixedLen+c.K+c.Block)
	}
	e.rng = prng{s: c.Seed ^ uint64(s.Instance+1)*0xD1B54A32D192ED03}
	e.coef = make([]byte, maxBatch*MaxK)
	e.dsts = make([][]byte, maxBatch)
	e.srcs = make([][]byte, MaxK)
	e.outH = make([]packet.Handle, maxBatch)
	e.outL = make([]uint8, maxBatch)
	cs := s.Counters
	e.cBlocks = cs.New("source_blocks", "packets taken as source blocks")
	e.cGens = cs.New("generations_sent", "generations coded and sent")
	e.cShort = cs.New("generations_short", "generations sent with k′ < K (flush timer, memory or session end)")
	e.cCoded = cs.New("coded_sent", "coded packets made")
	e.cSystematic = cs.New("systematic_sent", "uncoded source blocks sent (systematic mode)")
	e.cUncodedExt = cs.New("uncoded_ext", "matched packets passed uncoded: Fragment, ESP or AH, or a header chain too long")
	e.cUncodedBig = cs.New("uncoded_too_big", "matched packets passed uncoded: longer than N − 2 after the header chain")
	e.cUncodedChain = cs.New("uncoded_chain", "matched packets passed uncoded: extension headers differ from their generation's")
	e.cEnded = cs.New("uncoded_session_ended", "matched packets passed uncoded after session_length generations")
	e.cNoBuf = cs.New("no_buffer", "coded packets not made: the pool was empty")
	e.cNoMemory = cs.New("uncoded_no_memory", "matched packets passed uncoded: no block memory")
	return e, nil
}

// match returns the rule the packet matches, or nil.
func (e *encoder) match(l *packet.Layers, d []byte) *rule {
	ip := packet.IPv6(d[l.L3:])
	for i := range e.rules {
		r := &e.rules[i]
		if l.Proto != r.nh {
			continue
		}
		if r.port != 0 && (l.Flags&packet.FlagUDP == 0 || binary.BigEndian.Uint16(d[l.L4+2:]) != r.port) {
			continue
		}
		if r.src.IsValid() && !r.src.Contains(netip.AddrFrom16(ip.Src())) {
			continue
		}
		if r.dst.IsValid() && !r.dst.Contains(netip.AddrFrom16(ip.Dst())) {
			continue
		}
		return r
	}
	return nil
}

// Process takes matched packets as source blocks; others pass.
func (e *encoder) Process(ctx *plugins.Context, b *packet.Burst) {
	e.ctx = ctx
	for i := 0; i < b.N; i++ {
		e.take(ctx, b.H[i])
	}
	flushLinks(ctx, e.links)
}

func (e *encoder) take(ctx *plugins.Context, h packet.Handle) {
	p := h.P()
	l, err := p.ParseLayers()
	if err != nil || l.Flags&packet.FlagIPv6 == 0 {
		return
	}
	d := p.Data()
	r := e.match(l, d)
	if r == nil {
		return
	}
	if l.Flags&(packet.FlagFragment|packet.FlagESP|packet.FlagExtRepeated) != 0 || l.AH != 0 || int(l.L4) > maxHdr-FixedLen {
		e.cUncodedExt.Inc()
		return
	}
	upper := d[l.L4:l.End]
	if LenPrefix+len(upper) > e.n || !e.fits(l) {
		if e.dropTooBig {
			p.Drop(reasonTooBig)
			return
		}
		e.cUncodedBig.Inc()
		return
	}
	ip := packet.IPv6(d[l.L3:])
	key := sessionKey{src: ip.Src(), dst: ip.Dst(), id: r.id}
	hs, si := e.st.keyHash(&key)
	if !ctx.Mine(hs) {
		ctx.Handoff(h, ctx.Owner(hs))
		return
	}
	now := ctx.Now
	if si < 0 {
		si = e.st.session(&key, hs, now)
	}
	s := &e.st.sess[si]
	gi := s.open
	if gi < 0 {
		if e.sessLen > 0 && s.finished >= uint64(e.sessLen) {
			e.cEnded.Inc()
			return
		}
		gi, err = e.st.newGen(si, s.newest, e.k, e.n, now)
		if err != nil {
			e.cNoMemory.Inc()
			return
		}
		s.newest++
		s.nextHdr = l.Proto
		s.open = gi
		setTemplate(&e.st.gens[gi], d, l)
	} else if !sameChain(&e.st.gens[gi], d, l) {
		e.cUncodedChain.Inc()
		return
	}
	ge := &e.st.gens[gi]
	slot, ok := e.st.allocSlot(gi)
	if !ok {
		e.cNoMemory.Inc()
		return
	}
	blk := e.st.slot(slot)[:e.n]
	binary.BigEndian.PutUint16(blk, uint16(len(upper)))
	clear(blk[LenPrefix+copy(blk[LenPrefix:], upper):])
	ge.rows = append(ge.rows, slot)
	e.st.touchSession(si, now)
	s.packets++
	e.cBlocks.Inc()
	p.Consume()
	ctx.Env.Free(h)
	if e.systematic {
		e.sendSystematic(ge, len(ge.rows)-1)
	}
	if len(ge.rows) == e.k {
		e.st.freeGen(gi) // generationDone sends it
	}
}

// fits reports whether a coded packet with l's header chain fits every link.
func (e *encoder) fits(l *packet.Layers) bool {
	size := int(l.L4-l.L3) + FixedLen + e.k + e.n
	for i := range e.links {
		if m := e.links[i].mtu; m > 0 && size > m {
			return false
		}
	}
	return true
}

// sameChain: the packet's extension headers are the generation's.
func sameChain(ge *generation, d []byte, l *packet.Layers) bool {
	if int(l.L4) != ge.hdrLen || int(l.L3) != ge.l3 {
		return false
	}
	x := ge.l3 + packet.IPv6Len
	return string(ge.hdr[x:ge.hdrLen]) == string(d[x:l.L4])
}

// prepare builds generation ge's wire headers in e.wire: its template with
// Next Header 253 and the coded Payload Length, then the fixed CODED IP
// header. Every coded packet of the call starts as a copy of it.
func (e *encoder) prepare(ge *generation, flags, kk uint8) {
	hl := ge.hdrLen
	w := e.wire[:hl+FixedLen+e.k]
	copy(w, ge.hdr[:hl])
	w[ge.nhOff] = NextHeader
	putIPv6PayloadLen(w, ge.l3, hl-ge.l3-packet.IPv6Len+FixedLen+e.k+e.n)
	s := &e.st.sess[ge.sess]
	Header(w[hl:]).Encode(&Fields{NextHeader: s.nextHdr, SessionID: s.key.id, SessionLength: e.sessLen,
		GenerationID: ge.id, K: uint8(e.k), Version: Version, Field: FieldGF256, BlockLen: uint16(e.n),
		Flags: flags, BlocksUsed: kk})
}

// header starts a coded packet as a copy of e.wire (see prepare) and returns
// its vector and block regions.
func (e *encoder) header(q *packet.Packet, hl int) (vec, blk []byte) {
	d, _ := q.Append(hl + FixedLen + e.k + e.n)
	copy(d, e.wire[:hl+FixedLen])
	q.SetFlag(packet.FlagLocal)
	q.RxTime = e.ctx.Now
	return d[hl+FixedLen : hl+FixedLen+e.k], d[hl+FixedLen+e.k:]
}

// sendSystematic sends source block i uncoded on every link.
func (e *encoder) sendSystematic(ge *generation, i int) {
	e.prepare(ge, FlagSystematic, 0)
	for li := range e.links {
		h, ok := e.pool.AllocOne()
		if !ok {
			e.cNoBuf.Inc()
			continue
		}
		vec, blk := e.header(h.P(), ge.hdrLen)
		clear(vec)
		vec[i] = 1
		copy(blk, e.st.slot(ge.rows[i])[:e.n])
		e.cSystematic.Inc()
		e.send(li, h)
	}
}

// generationDone is the store telling that generation gi goes: it is coded
// and sent on every link, short when it has fewer than K blocks.
func (e *encoder) generationDone(gi int32) {
	ge := &e.st.gens[gi]
	kk := len(ge.rows)
	if e.stopping || kk == 0 || e.ctx == nil {
		return
	}
	e.st.sess[ge.sess].finished++
	e.cGens.Inc()
	wire := uint8(0)
	if kk < e.k {
		e.cShort.Inc()
		wire = uint8(kk)
	}
	for i, s := range ge.rows {
		e.srcs[i] = e.st.slot(s)[:e.n]
	}
	e.prepare(ge, 0, wire)
	m := 0
	for li := range e.links {
		cnt := e.links[li].budget(e.k, kk)
		if e.systematic {
			cnt -= kk
			if kk < e.k {
				// Its systematic packets left saying k′ = 0 (K): receivers
				// learn k′ only from a coded packet.
				cnt = max(cnt, 1)
			}
		}
		for cnt > 0 {
			// Buffers in batches: one pool lock for many packets.
			n := min(cnt, maxBatch-m)
			b := &e.alloc
			b.N = 0
			got := e.pool.Alloc(b, n)
			if got < n {
				e.cNoBuf.Add(uint64(cnt - got))
				cnt = got
			}
			cnt -= got
			e.rng.nonZero(e.coef[m*kk : (m+got)*kk])
			for _, h := range b.H[:got] {
				vec, blk := e.header(h.P(), ge.hdrLen)
				clear(vec[copy(vec, e.coef[m*kk:m*kk+kk]):])
				e.dsts[m], e.outH[m], e.outL[m] = blk, h, uint8(li)
				m++
			}
			if m == maxBatch {
				e.code(m, kk)
				m = 0
			}
		}
	}
	if m > 0 {
		e.code(m, kk)
	}
}

// code fills the m coded blocks of the batch in one fused pass and sends them.
func (e *encoder) code(m, kk int) {
	gf.MulMulti(e.dsts[:m], e.srcs[:kk], e.coef[:m*kk])
	e.cCoded.Add(uint64(m))
	for j := 0; j < m; j++ {
		e.send(int(e.outL[j]), e.outH[j])
	}
}

// send puts a made packet on link li.
func (e *encoder) send(li int, h packet.Handle) { e.links[li].send(e.ctx, h) }

// Produce hands the chain what was coded for it, and ports what waits.
func (e *encoder) Produce(ctx *plugins.Context, b *packet.Burst) {
	for li := range e.links {
		e.links[li].produce(ctx, b)
	}
}

// Tick flushes generations older than flush and sessions past their timeout.
func (e *encoder) Tick(ctx *plugins.Context) {
	e.ctx = ctx
	for gi := e.st.genLRU.tail; gi >= 0 && ctx.Now-e.st.gens[gi].first >= e.flush; gi = e.st.genLRU.tail {
		e.st.freeGen(gi)
	}
	e.st.expire(ctx.Now)
	flushLinks(ctx, e.links)
}

// Held counts queued packets and buffered source blocks, so that a draining
// engine waits for the flush.
func (e *encoder) Held() int { return queued(e.links) + e.st.liveSlots() }

// Stop drops what is buffered.
func (e *encoder) Stop(ctx *plugins.Context) {
	e.stopping = true
	for si := range e.st.sess {
		e.st.freeSession(int32(si))
	}
	freeQueued(e.links)
}
