package ioam

import (
	"encoding/binary"
	"math/rand/v2"
	"net/netip"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/appliance/stats"
	"github.com/linerate/linerate/plugins"
)

// profile is one encap profile on one lcore: which packets, how often, and the
// header templates it inserts, built once.
type profile struct {
	name     string
	mode     int
	src      []netip.Prefix
	proto    int // -1: any
	sport    int
	dport    int
	needL4   bool
	k, n     uint32
	count    uint32
	hopLimit int // outer; 0 copies

	// The HbH option block (trace, POT, DEX; each 4n-aligned) and the E2E
	// block, with the offsets of their options (-1: absent).
	opts     []byte
	e2eBlock []byte
	traceOff int
	potOff   int
	dexOff   int
	// Templates: the outer IPv6 header and fresh options headers (encap mode),
	// and the fresh options headers alone (inline mode).
	tmplEncap  []byte
	tmplInline []byte
	hbhLen     int
	destLen    int

	trace     *nsState
	plan      *nodePlan // the encapsulating node's own data; nil: none
	nodeAt    int       // its offset in the trace option
	nodeOff   int       // and in the HbH option block
	traceType uint32
	incr      bool

	potKey *POTKey

	e2eType uint16
	e2eFmt  TimestampFormat
	seq     uint64

	dexExt uint8
	// fields: the profile has POT, a DEX sequence number or E2E, fields of
	// its own to write per packet (fillFields).
	fields bool

	cInserted *stats.Counter

	// hbhOnly: the options are all in the Hop-by-Hop header, where the IOAM
	// scratch can say where they are.
	hbhOnly bool
	// quick: the profile is one encap.quick encapsulates with (see setQuick),
	// and these are the parse record and scratch of its output for an
	// untagged frame, but for the lengths and the window: encapRecord(14)
	// and encapScratch(14).
	quick     bool
	layers14  packet.Layers
	scratch14 scratch
}

// lpmEntry is one destination prefix of a profile; the table is sorted
// longest first, so the first match is the longest.
type lpmEntry struct {
	prefix netip.Prefix
	prof   *profile
}

// encap is an IOAM encapsulating node: it picks a profile per packet (longest
// destination prefix, then flow fields, then the k-out-of-n rate) and inserts
// the profile's template, IPv6-in-IPv6 or inline, through InsertGap, then
// writes the per-packet fields: its own node data, the POT random and first
// cumulative value, E2E sequence numbers and timestamps, the DEX sequence.
type encap struct {
	*node
	exported
	lpm           []lpmEntry
	defaults      []*profile
	inlineTransit bool
	mtu           int
	rng           *rand.Rand
	lcore         uint64
	lcores        uint64
	loopAddr      [16]byte
	receiveLoop   bool
	rec           Record
	scan          scan

	cEncap, cInline, cGrown, cNoMatch, cRate, cNotIPv6, cNotLocal, cMTU, cNoRoom, cLoopRecv *stats.Counter
}

// Process gives IOAM to the packets its profiles select.
func (e *encap) Process(ctx *plugins.Context, b *packet.Burst) {
	e.begin()
	var quick *profile
	if len(e.defaults) == 1 && e.defaults[0].quick && !e.receiveLoop && !e.general {
		quick = e.defaults[0]
	}
	for i := 0; i < b.N; i++ {
		if quick == nil || !e.quick(ctx, b.H[i].P(), quick) {
			e.one(ctx, b, i)
		}
	}
	e.countDropped()
}

// match picks the profile for a packet: the longest destination prefix whose
// profile's flow fields match, else the first profile without a prefix that
// matches.
func (e *encap) match(p *packet.Packet, d []byte, l3 int) *profile {
	if len(e.lpm) == 0 && len(e.defaults) == 1 && !e.defaults[0].needL4 && e.defaults[0].src == nil {
		return e.defaults[0]
	}
	var dst netip.Addr
	if len(e.lpm) > 0 {
		dst = netip.AddrFrom16([16]byte(d[l3+24 : l3+40]))
	}
	for i := range e.lpm {
		if e.lpm[i].prefix.Contains(dst) && e.lpm[i].prof.flowMatch(p, d, l3) {
			return e.lpm[i].prof
		}
	}
	for _, pr := range e.defaults {
		if pr.flowMatch(p, d, l3) {
			return pr
		}
	}
	return nil
}

// flowMatch checks the source prefix, protocol and ports.
func (pr *profile) flowMatch(p *packet.Packet, d []byte, l3 int) bool {
	if pr.src != nil {
		src := netip.AddrFrom16([16]byte(d[l3+8 : l3+24]))
		ok := false
		for _, px := range pr.src {
			if px.Contains(src) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	if !pr.needL4 {
		return true
	}
	l, err := p.ParseLayers()
	if err != nil || l.IPVersion != 6 {
		return false
	}
	if pr.proto >= 0 && int(l.Proto) != pr.proto {
		return false
	}
	if pr.sport >= 0 || pr.dport >= 0 {
		if l.Proto != packet.ProtocolUDP && l.Proto != packet.ProtocolTCP || l.Flags&packet.FlagLaterFragment != 0 || int(l.L4)+4 > len(d) {
			return false
		}
		if pr.sport >= 0 && int(binary.BigEndian.Uint16(d[l.L4:])) != pr.sport {
			return false
		}
		if pr.dport >= 0 && int(binary.BigEndian.Uint16(d[l.L4+2:])) != pr.dport {
			return false
		}
	}
	return true
}

func (e *encap) one(ctx *plugins.Context, b *packet.Burst, i int) {
	p := b.H[i].P()
	d := p.Data()
	l3 := ipv6At14(p, d)
	if l3 < 0 {
		e.cNotIPv6.Inc()
		return
	}
	if e.receiveLoop && d[l3+6] == packet.ProtocolHopByHop && [16]byte(d[l3+24:l3+40]) == e.loopAddr && e.loopedBack(ctx, b.H[i], d, l3) {
		return
	}
	pr := e.match(p, d, l3)
	if pr == nil {
		e.cNoMatch.Inc()
		return
	}
	if pr.n > 1 {
		c := pr.count
		if pr.count++; pr.count == pr.n {
			pr.count = 0
		}
		if c >= pr.k {
			e.cRate.Inc()
			return
		}
	} else if pr.k == 0 {
		e.cRate.Inc()
		return
	}
	local := p.Flags()&packet.FlagLocal != 0
	mode := pr.modeFor(local)
	if mode == modeInline && !local && !e.inlineTransit {
		e.cNotLocal.Inc()
		return
	}
	ipLen := packet.IPv6Len + int(binary.BigEndian.Uint16(d[l3+4:]))
	if l3+ipLen > len(d) {
		p.Drop(reasonHbHTooLong)
		return
	}
	if mode == modeEncap {
		e.encapsulate(ctx, b, i, pr, l3, ipLen)
		return
	}
	e.inline(ctx, b, i, pr, l3, ipLen)
}

// quick is encapsulate for profile pr, the only one (see setQuick), and an
// untagged frame without a parse record whose head moves in words: one
// gives it the same bytes, parse record and scratch, by more general steps.
// It reports false, having changed nothing, to leave the packet to one.
func (e *encap) quick(ctx *plugins.Context, p *packet.Packet, pr *profile) bool {
	const l3 = 14
	d := p.Data()
	if !untaggedIPv6(p, d) || pr.modeFor(p.Flags()&packet.FlagLocal != 0) != modeEncap {
		return false
	}
	ipLen := packet.IPv6Len + int(binary.BigEndian.Uint16(d[l3+4:]))
	n := len(pr.tmplEncap)
	if l3+ipLen > len(d) || !e.fits(ipLen, n) || !wordHead(p, l3, n) {
		return false
	}
	_, _ = p.Prepend(n)
	d = p.Data()
	moveHead(d, 0, n, l3)
	hl := pr.writeOuter(d[l3:l3+n], d[l3+n:], ipLen)
	if pr.plan != nil {
		e.writeNode(ctx, p, pr.plan, d[l3+packet.IPv6Len+4+pr.nodeOff:], hl)
	}
	l := p.Layers()
	*l = pr.layers14
	pr.finishRecord(p, d, l, l3, ipLen, &pr.scratch14)
	e.cEncap.Inc()
	pr.cInserted.Inc()
	return true
}

// modeFor is the mode the profile gives a packet: auto is inline for a
// packet linerate made (local), encap for a forwarded one.
func (pr *profile) modeFor(local bool) int {
	switch {
	case pr.mode != modeAuto:
		return pr.mode
	case local:
		return modeInline
	}
	return modeEncap
}

// fits reports whether an IPv6 packet of ipLen bytes, grown by n, still fits
// the payload length field and the egress MTU.
func (e *encap) fits(ipLen, n int) bool {
	return ipLen+n <= 0xFFFF+packet.IPv6Len && (e.mtu == 0 || ipLen+n <= e.mtu)
}

// writeOuter writes the outer IPv6 header and options into gap, in front of
// the inner header: the profile's template, with the inner header's version,
// traffic class and flow label, the payload length of an inner packet of
// ipLen bytes, and the hop limit, which it returns.
func (pr *profile) writeOuter(gap, inner []byte, ipLen int) uint8 {
	copy(gap, pr.tmplEncap)
	copy(gap[:4], inner[:4])
	binary.BigEndian.PutUint16(gap[4:], uint16(len(pr.tmplEncap)-packet.IPv6Len+ipLen))
	hl := inner[7]
	if pr.hopLimit != 0 {
		hl = uint8(pr.hopLimit)
	}
	gap[7] = hl
	return hl
}

// encapsulate puts the packet in an outer IPv6 header with the profile's
// options: the kernel's ip6ip6 encapsulation (ioam6_do_encap), the outer
// header a copy of the inner one but for the addresses and next header. It
// writes the packet's Layers record and IOAM scratch from what it knows,
// without a parse: the engine's own parse would find the outer header, its
// options headers, and IPv6 as the upper layer.
func (e *encap) encapsulate(ctx *plugins.Context, b *packet.Burst, i int, pr *profile, l3, ipLen int) {
	n := len(pr.tmplEncap)
	if !e.fits(ipLen, n) {
		e.cMTU.Inc()
		return
	}
	p := b.H[i].P()
	valid := p.LayersValid() // the record stays in Scratch, a copy's too, once the window moves
	var gap []byte
	if !e.general && wordHead(p, l3, n) {
		_, _ = p.Prepend(n)
		d := p.Data()
		moveHead(d, 0, n, l3)
		gap = d[l3 : l3+n]
	} else {
		var err error
		if gap, err = b.InsertGap(i, l3, n, ctx.Env); err != nil {
			e.cNoRoom.Inc()
			return
		}
		p = b.H[i].P()
	}
	d := p.Data()
	hl := pr.writeOuter(gap, d[l3+n:], ipLen)
	e.fill(ctx, p, pr, d, l3+packet.IPv6Len+4, l3+packet.IPv6Len+pr.hbhLen+4, hl)
	l := p.Layers()
	if valid {
		et, tags, vlans := l.EtherType, l.VLAN, l.VLANs
		*l = pr.encapRecord(l3)
		l.EtherType, l.VLAN, l.VLANs = et, tags, vlans
	} else {
		*l = pr.encapRecord(l3)
		for v := 0; v < (l3-14)/4 && v < packet.MaxVLANTags; v++ {
			l.VLAN[v] = binary.BigEndian.Uint16(d[14+4*v:])
			l.VLANs++
		}
	}
	c := pr.encapScratch(l3)
	pr.finishRecord(p, d, l, l3, ipLen, &c)
	e.cEncap.Inc()
	pr.cInserted.Inc()
}

// finishRecord completes the Layers record l of a packet encapsulated at l3
// into d, whose link layer and headers the caller wrote, with its lengths,
// and gives the packet its IOAM scratch, c with the window.
func (pr *profile) finishRecord(p *packet.Packet, d []byte, l *packet.Layers, l3, ipLen int, c *scratch) {
	end := l3 + len(pr.tmplEncap) + ipLen
	l.Len, l.End = uint32(len(d)), uint32(end)
	if end < len(d) {
		l.Flags |= packet.FlagTrailer
	}
	p.SetFlag(packet.FlagLayers)
	if pr.hbhOnly {
		sc := scratchOf(p)
		*sc = *c
		sc.winOff, sc.winLen = uint16(p.Offset()), uint16(p.Len())
	}
}

// encapRecord is the Layers record of a packet encapsulated at l3, but for
// the link layer's tags and the lengths.
func (pr *profile) encapRecord(l3 int) packet.Layers {
	l := packet.Layers{EtherType: packet.EtherTypeIPv6, L3: uint16(l3), IPVersion: 6, Flags: packet.FlagIPv6,
		L4: uint16(l3 + len(pr.tmplEncap)), Proto: packet.ProtocolIPv6}
	hbh := l3 + packet.IPv6Len
	if pr.hbhLen > 0 {
		l.HopByHop = uint16(hbh)
		l.NumExt++
	}
	if pr.destLen > 0 {
		// No Routing header follows: the parse calls it the final
		// destination's.
		l.DestOpts2 = uint16(hbh + pr.hbhLen)
		l.NumExt++
	}
	return l
}

// encapScratch is the IOAM scratch of a packet encapsulated at l3, but for
// the window, when its options are all in the Hop-by-Hop header.
func (pr *profile) encapScratch(l3 int) scratch {
	hbh := l3 + packet.IPv6Len
	opts := hbh + 4
	c := scratch{magic: scratchMagic, hbh: uint16(hbh)}
	if pr.traceOff >= 0 {
		c.traces, c.trace = 1, uint16(opts+pr.traceOff)
	}
	if pr.potOff >= 0 {
		c.pot = uint16(opts + pr.potOff)
	}
	if pr.dexOff >= 0 {
		c.dex = uint16(opts + pr.dexOff)
	}
	return c
}

// fill writes the per-packet fields of the profile's options: the node's
// own data and fillFields'. opts is the offset of the HbH option block in d,
// e2e that of the E2E block (-1 or unused when the profile has none).
func (e *encap) fill(ctx *plugins.Context, p *packet.Packet, pr *profile, d []byte, opts, e2e int, hopLimit uint8) {
	if pr.plan != nil && opts >= 0 {
		e.writeNode(ctx, p, pr.plan, d[opts+pr.nodeOff:], hopLimit)
	}
	if pr.fields {
		e.fillFields(ctx, pr, d, opts, e2e)
	}
}

// fillFields writes the POT random and first cumulative value, the DEX
// sequence number and the E2E data of a profile that has them.
func (e *encap) fillFields(ctx *plugins.Context, pr *profile, d []byte, opts, e2e int) {
	if pr.potKey != nil && opts >= 0 {
		pot := POT(d[opts+pr.potOff+OptionHeaderLen:])
		r := pr.potKey.Random(e.rng)
		pot.SetRandom(r)
		pot.SetCumulative(pr.potKey.Update(r, 0))
	}
	if pr.dexExt&DEXSequence != 0 && opts >= 0 {
		DEX(d[opts+pr.dexOff+OptionHeaderLen:]).SetSequence(uint32(pr.seq*e.lcores + e.lcore))
	}
	if pr.e2eType != 0 && pr.destLen > 0 && e2e >= 0 {
		var f E2EFields
		seq := pr.seq*e.lcores + e.lcore
		f.Seq64, f.Seq32 = seq, uint32(seq)
		if pr.e2eType&(E2ESeconds|E2EFraction) != 0 {
			t := e.now(ctx)
			f.Seconds, f.Fraction = t.sec[pr.e2eFmt], t.frac[pr.e2eFmt]
		}
		ee := E2E(d[e2e+OptionHeaderLen:])
		ee.Encode(ee.NamespaceID(), pr.e2eType, &f)
	}
	pr.seq++
}
