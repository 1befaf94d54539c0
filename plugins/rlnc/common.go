package rlnc

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/appliance/stats"
	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/plugins"
)

// coded finds the CODED IP header of p. ok is false for any packet that is not
// CODED IP over IPv6 (those pass untouched); err is a malformed header.
func coded(p *packet.Packet) (l *packet.Layers, h Header, ok bool, err error) {
	l, perr := p.ParseLayers()
	if perr != nil {
		ok, err = cutShort(p.Data(), l)
		return l, nil, ok, err
	}
	if l.Flags&packet.FlagIPv6 == 0 || l.Proto != NextHeader ||
		l.Flags&(packet.FlagFragment|packet.FlagESP) != 0 || l.AH != 0 {
		return l, nil, false, nil
	}
	h, err = Parse(p.Data()[l.L4:l.End])
	return l, h, true, err
}

// cutShort recognises a CODED IP packet whose frame ends before its IPv6
// header or Payload Length says (a cut frame): the packet parse failed, but
// the Next Header chain, as far as the frame goes, names CODED IP. Its error
// is what Parse makes of the CODED IP bytes there are; a header that would
// parse is still ErrLength, since its IPv6 Payload Length says more.
func cutShort(d []byte, l *packet.Layers) (bool, error) {
	if l.EtherType != packet.EtherTypeIPv6 || int(l.L3) >= len(d) || d[l.L3]>>4 != 6 {
		return false, nil
	}
	ip := d[l.L3:]
	if len(ip) < packet.IPv6Len {
		if len(ip) > 6 && ip[6] == NextHeader {
			return true, ErrTruncated
		}
		return false, nil
	}
	if packet.IPv6Len+int(binary.BigEndian.Uint16(ip[4:])) <= len(ip) {
		return false, nil // not cut short: some other fault, not ours
	}
	nh, off := ip[6], packet.IPv6Len
	for n := 0; n < packet.MaxExtHeaders; n++ {
		switch nh {
		case NextHeader:
			if _, err := Parse(ip[off:]); err != nil {
				return true, err
			}
			return true, ErrLength
		case packet.ProtocolHopByHop, packet.ProtocolDestOpts, packet.ProtocolRouting:
			if len(ip)-off < 8 {
				return false, nil
			}
			nh, off = ip[off], off+(int(ip[off+1])+1)*8
			if off > len(ip) {
				return false, nil
			}
		default:
			return false, nil
		}
	}
	return false, nil
}

// nextHeaderOffset is where the Next Header field that names the upper layer
// is: the IPv6 header's, or the last extension header's.
func nextHeaderOffset(l *packet.Layers) int {
	last := 0
	for _, o := range [...]uint16{l.HopByHop, l.DestOpts1, l.Routing, l.DestOpts2} {
		last = max(last, int(o))
	}
	if last == 0 {
		return int(l.L3) + 6
	}
	return last
}

// setTemplate copies the headers of p up to l.L4 as generation ge's template.
func setTemplate(ge *generation, d []byte, l *packet.Layers) {
	ge.hdrLen = copy(ge.hdr[:], d[:l.L4])
	ge.l3 = int(l.L3)
	ge.nhOff = nextHeaderOffset(l)
}

// linkConfig is one output link of an encoder or recoder.
type linkConfig struct {
	// Port to emit coded packets on; "" sends them down the chain, to the
	// stages after this one.
	Port string `toml:"port"`
	// Coded packets per generation of K blocks on this link (scaled for a
	// generation flushed with k′ < K); 0 = K plus the repair ratio.
	Coded int `toml:"coded"`
	// RepairRatio adds ceil(ratio·k′) packets to the k′ of a generation.
	RepairRatio float64 `toml:"repair_ratio"`
	// Rate paces this link at its capacity (recoder): each packet is coded
	// at its transmit opportunity from everything held then.
	Rate config.Rate `toml:"rate"`
	// MTU of a chain link ("" port), for the size check; 0 = unchecked.
	MTU int `toml:"mtu"`
}

// outLink is a configured output link.
type outLink struct {
	name      string
	port      uint16
	chain     bool
	coded     int
	ratio     float64
	mtu       int
	bitsPerNs float64
	tat       int64 // when the paced link is free again (GCRA)
	fifo      genFIFO
	// q holds packets made for the link until they go: to the chain at
	// Produce, or to the port while its tx buffer has room (send).
	q            outQueue
	cSent, cFull *stats.Counter
}

// budget is how many packets a generation of kk (of k) blocks gets on l.
func (l *outLink) budget(k, kk int) int {
	if l.coded > 0 {
		return (l.coded*kk + k - 1) / k
	}
	return kk + int(math.Ceil(l.ratio*float64(kk)-1e-9))
}

// limit is what link l may carry of a generation of kk (of k) blocks of which
// the stage holds rank: its budget, but at most the rank, which is all it can
// send there that is innovative, plus the link's redundancy for that much
// (the share of its budget beyond kk). A link whose budget is a share of
// the generation (coded < K) gets up to that share, as far as the rank goes.
func (l *outLink) limit(k, kk, rank int) int {
	b := l.budget(k, kk)
	if rank >= kk {
		return b
	}
	extra := 0
	if b > kk {
		extra = ((b-kk)*rank + kk - 1) / kk
	}
	return min(b, rank+extra)
}

// send hands h, a packet the stage made, to the link. A port takes it at
// once while nothing waits and the lcore's tx buffer towards it holds less
// than a burst, which every tx_buffer has room for; otherwise it waits in
// the link's queue for flush, so the engine never drops it as emit_full.
// The chain's packets wait for Produce.
func (l *outLink) send(ctx *plugins.Context, h packet.Handle) {
	if !l.chain && l.q.n == 0 && ctx.Env.TxDepth(l.port) < packet.MaxBurst {
		if ctx.Emit(h, l.port) {
			l.cSent.Inc()
		}
		return
	}
	ctx.Hold(h)
	if !l.q.push(h) {
		l.cFull.Inc()
		packet.FreeOne(h)
	}
}

// flush emits what waits for a port while its tx buffer holds less than a
// burst.
func (l *outLink) flush(ctx *plugins.Context) {
	for !l.chain && l.q.n > 0 && ctx.Env.TxDepth(l.port) < packet.MaxBurst {
		if ctx.Emit(l.q.pop(), l.port) {
			l.cSent.Inc()
		}
	}
}

// produce hands the chain what waits for it (into b, from Produce), or
// emits what waits for the port.
func (l *outLink) produce(ctx *plugins.Context, b *packet.Burst) {
	if l.chain {
		l.cSent.Add(uint64(l.q.drain(b)))
		return
	}
	l.flush(ctx)
}

// flushLinks emits what waits on every port link; the chain's packets wait
// for Produce.
func flushLinks(ctx *plugins.Context, links []outLink) {
	for i := range links {
		links[i].flush(ctx)
	}
}

// queued counts the packets waiting on links.
func queued(links []outLink) int {
	n := 0
	for i := range links {
		n += links[i].q.n
	}
	return n
}

// freeQueued returns what waits on links to its pools.
func freeQueued(links []outLink) {
	for i := range links {
		links[i].q.free()
	}
}

// serialise is how long l takes to send a frame of n bytes, as the link stage
// counts it (with FCS, preamble and inter-frame gap).
func (l *outLink) serialise(n int) int64 { return int64(float64((n+24)*8) / l.bitsPerNs) }

// buildLinks checks the links of a stage and their MTU against a coded
// packet of K = k, N = n (n = 0: unknown, unchecked). With no links the stage
// has one: down the chain, with the stage's own coded and repair_ratio.
func buildLinks(s *plugins.Setup, cfgs []linkConfig, def linkConfig, k, n, queue int) ([]outLink, error) {
	if len(cfgs) == 0 {
		cfgs = []linkConfig{def}
	}
	if len(cfgs) > maxLinks {
		return nil, fmt.Errorf("%d links: at most %d", len(cfgs), maxLinks)
	}
	var out []outLink
	chains := 0
	full := s.Counters.New("queue_full", "packets dropped: a link's queue was full")
	for i, c := range cfgs {
		if c.Coded == 0 {
			c.Coded = def.Coded
		}
		if c.RepairRatio == 0 {
			c.RepairRatio = def.RepairRatio
		}
		l := outLink{name: c.Port, chain: c.Port == "", coded: c.Coded, ratio: c.RepairRatio, mtu: c.MTU}
		switch {
		case c.Coded < 0 || c.Coded > 4*MaxK:
			return nil, fmt.Errorf("links[%d]: coded %d is outside 0..%d", i, c.Coded, 4*MaxK)
		case c.RepairRatio < 0 || c.RepairRatio > 4:
			return nil, fmt.Errorf("links[%d]: repair_ratio %g is outside 0..4", i, c.RepairRatio)
		case c.MTU < 0:
			return nil, fmt.Errorf("links[%d]: mtu %d is negative", i, c.MTU)
		}
		if l.chain {
			l.name = "chain"
			chains++
			if chains > 1 {
				return nil, fmt.Errorf("links[%d]: only one link may go down the chain (port \"\")", i)
			}
		} else {
			pi, ok := s.Ports.Port(c.Port)
			if !ok {
				return nil, fmt.Errorf("links[%d]: port %q does not exist", i, c.Port)
			}
			l.port = pi.ID
			if l.mtu == 0 {
				l.mtu = pi.MTU
			}
		}
		if r := float64(c.Rate); r > 0 {
			l.bitsPerNs = r / 1e9
		}
		if n > 0 && l.mtu > 0 && n > l.mtu-Overhead-k {
			return nil, fmt.Errorf("links[%d] (%s): a coded packet with K = %d and N = %d is %d bytes at IPv6, over the MTU of %d: "+
				"N must be at most MTU − 52 − K = %d (lower block or k, or raise the port's mtu)",
				i, l.name, k, n, Overhead+k+n, l.mtu, l.mtu-Overhead-k)
		}
		l.cSent = s.Counters.New("sent_"+sanitize(l.name), "coded packets handed to link "+l.name+
			" (the port's tx buffer, or the stages after this one)")
		l.cFull = full
		l.q.init(queue)
		out = append(out, l)
	}
	return out, nil
}

func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			b[i] = '_'
		}
	}
	return string(b)
}

// genRef names a generation slot at one use of it.
type genRef struct {
	gi    int32
	epoch uint32
}

// genFIFO is a ring of generations waiting for a paced link, oldest first.
type genFIFO struct {
	r       []genRef
	head, n int
}

func (f *genFIFO) init(n int) { f.r = make([]genRef, n) }

func (f *genFIFO) push(x genRef) bool {
	if f.n == len(f.r) {
		return false
	}
	f.r[(f.head+f.n)%len(f.r)] = x
	f.n++
	return true
}

func (f *genFIFO) front() (genRef, bool) {
	if f.n == 0 {
		return genRef{}, false
	}
	return f.r[f.head], true
}

func (f *genFIFO) pop() {
	f.head = (f.head + 1) % len(f.r)
	f.n--
}

// outQueue holds packets a stage made for the chain until Produce hands them
// on: a fixed ring of handles.
type outQueue struct {
	h       []packet.Handle
	head, n int
}

func (q *outQueue) init(n int) { q.h = make([]packet.Handle, n) }

func (q *outQueue) push(h packet.Handle) bool {
	if q.n == len(q.h) {
		return false
	}
	q.h[(q.head+q.n)%len(q.h)] = h
	q.n++
	return true
}

// pop takes the oldest queued packet; the queue must not be empty.
func (q *outQueue) pop() packet.Handle {
	h := q.h[q.head]
	q.head = (q.head + 1) % len(q.h)
	q.n--
	return h
}

// drain appends queued packets to b, as many as fit, and returns how many.
func (q *outQueue) drain(b *packet.Burst) int {
	n := 0
	for q.n > 0 && b.N < packet.MaxBurst {
		b.H[b.N] = q.pop()
		b.N++
		n++
	}
	return n
}

// free returns what is queued to its pools.
func (q *outQueue) free() {
	for q.n > 0 {
		packet.FreeOne(q.pop())
	}
}

// putIPv6PayloadLen sets the Payload Length of the IPv6 header at l3 of d.
func putIPv6PayloadLen(d []byte, l3, n int) { binary.BigEndian.PutUint16(d[l3+4:], uint16(n)) }
