package ioam

import (
	"fmt"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/appliance/stats"
	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/plugins"
	"github.com/linerate/linerate/plugins/route"
)

// Loopback (RFC 9322 §4.1): a transit or decapsulating node that receives a
// trace with the L flag set sends a copy back to the encapsulating node,
// truncated to the IOAM data: the IPv6 header and its Hop-by-Hop header with
// this node's data already in, No Next Header after it, addressed to the
// packet's source. The copy's L flag is cleared so no node on the way back
// loops it again. Copies are rate-limited per lcore.

type loopbackConfig struct {
	Loopback      bool              `toml:"loopback"`       // answer the L flag
	LoopbackRate  config.PacketRate `toml:"loopback_rate"`  // copies per second per lcore; default 1000
	LoopbackBurst int               `toml:"loopback_burst"` // copies back to back; default one rx burst
	LoopbackSrc   config.Addr       `toml:"loopback_src"`   // source of the copies; default the packet's destination
}

type loopback struct {
	pool   packet.Pool
	src    [16]byte
	hasSrc bool
	limit  *route.Limiter

	cSent, cLimited, cNoBuf *stats.Counter
}

// Loopback's default rate limit: 1000 copies a second per lcore, and as many
// back to back as an rx burst holds, so that a burst of packets with the L
// flag is answered whole.
const (
	defaultLoopbackRate  = 1000
	defaultLoopbackBurst = packet.MaxBurst
)

// loopbackHopLimit is the hop limit of looped-back copies.
const loopbackHopLimit = 64

func (c *loopbackConfig) build(kind string, s *plugins.Setup) (*loopback, error) {
	if !c.Loopback {
		if c.LoopbackRate != 0 || c.LoopbackBurst != 0 || c.LoopbackSrc.IsValid() {
			return nil, fmt.Errorf("%s: loopback_rate, loopback_burst and loopback_src need loopback = true", kind)
		}
		return nil, nil
	}
	rate := uint64(c.LoopbackRate)
	if rate == 0 {
		rate = defaultLoopbackRate
	}
	burst := c.LoopbackBurst
	if burst == 0 {
		burst = defaultLoopbackBurst
	}
	if burst < 1 || burst > 1<<20 {
		return nil, fmt.Errorf("%s: loopback_burst %d is outside 1..%d", kind, burst, 1<<20)
	}
	l := &loopback{limit: route.NewLimiter(rate, burst)}
	if a := c.LoopbackSrc.Addr; a.IsValid() {
		if !a.Is6() || a.Is4In6() {
			return nil, fmt.Errorf("%s: loopback_src must be an IPv6 address", kind)
		}
		l.src, l.hasSrc = a.As16(), true
	}
	pool, err := s.Pool("ioam-loopback", 1024, 2048)
	if err != nil {
		return nil, fmt.Errorf("%s: loopback pool: %w", kind, err)
	}
	l.pool = pool
	l.cSent = s.Counters.New("loopback_sent", "looped-back copies sent to the encapsulating node")
	l.cLimited = s.Counters.New("loopback_limited", "looped-back copies not sent: over loopback_rate")
	l.cNoBuf = s.Counters.New("loopback_no_buffer", "looped-back copies not sent: the pool was empty")
	return l, nil
}

// send emits a looped-back copy of p, whose options s describes, towards the
// port it came in on. trace is the index of the looping trace in s.
func (l *loopback) send(ctx *plugins.Context, p *packet.Packet, s *scan, trace int) {
	if s.hbh == 0 || !l.limit.Allow(ctx.Now) {
		l.cLimited.Inc()
		return
	}
	h, ok := l.pool.AllocOne()
	if !ok {
		l.cNoBuf.Inc()
		return
	}
	d := p.Data()
	n := s.hbh + s.hbhLen
	q := h.P()
	out, err := q.Append(n)
	if err != nil {
		l.pool.FreeOne(h)
		l.cNoBuf.Inc()
		return
	}
	copy(out, d[:n])
	if s.l3 >= 12 {
		packet.Ethernet(out).SwapMAC()
	}
	ip := packet.IPv6(out[s.l3:])
	src, dst := ip.Src(), ip.Dst()
	ip.SetDst(src)
	if l.hasSrc {
		ip.SetSrc(l.src)
	} else {
		ip.SetSrc(dst)
	}
	ip.SetHopLimit(loopbackHopLimit)
	ip.SetPayloadLength(uint16(s.hbhLen))
	out[s.hbh] = packet.ProtocolNoNext
	for k := 0; k < s.nTrace; k++ {
		tr := Trace(Option(out[s.trace[k]:]).Body())
		if tr.Loopback() {
			tr.SetFlags(tr.Flags() &^ FlagLoopback)
		}
	}
	q.SetFlag(packet.FlagLocal)
	q.RxTime = ctx.Now
	if ctx.Emit(h, p.InPort) {
		l.cSent.Inc()
	}
}

// isLoopedBack reports whether the IPv6 packet s describes is a looped-back
// copy: IOAM in its Hop-by-Hop header and nothing after it.
func isLoopedBack(s *scan) bool {
	return s.hbh != 0 && s.nTrace > 0 && s.next == packet.ProtocolNoNext && s.dest == 0
}

// loopedBack consumes a looped-back copy addressed to this node and records
// it. It reports false for packets that are not one.
func (e *encap) loopedBack(ctx *plugins.Context, h packet.Handle, d []byte, l3 int) bool {
	p := h.P()
	s := &e.scan
	if scanPacket(d, l3, s) != nil || !isLoopedBack(s) {
		return false
	}
	e.cLoopRecv.Inc()
	if e.exp != nil {
		r := &e.rec
		r.begin(ctx, RoleLoopback, p, d, s)
		opt := Option(d[s.trace[0]:])
		f := TimestampPTP
		if ns := e.ns.lookup(Trace(opt.Body()).NamespaceID()); ns != nil {
			f = ns.Timestamp
		}
		r.DataLen = uint8(copy(r.Data[:], r.setTrace(opt, f)))
		e.exp.ring.Offer(r)
	}
	p.Consume()
	ctx.Env.Free(h)
	return true
}
