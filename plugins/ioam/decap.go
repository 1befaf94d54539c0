package ioam

import (
	"encoding/binary"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/appliance/stats"
	"github.com/linerate/linerate/plugins"
)

// decap is an IOAM decapsulating node: it adds its own data, verifies POT,
// records the trace (histograms of per-hop and end-to-end delay, export of
// records), and removes the IOAM data: the outer header of an encapsulated
// packet, or the IOAM options of an inline one.
type decap struct {
	*node
	exported
	mode    int
	fill    bool
	remove  bool
	pot     potKeys
	loop    *loopback
	hops    []*stats.Histogram
	e2e     *stats.Histogram
	wantRec bool

	scan   scan
	rec    Record
	ts     tsLayout
	layout traceLayout

	cDecap, cStripped, cNoIOAM, cPOTValid, cPOTInvalid, cOverflow, cUnknownNS, cExported *stats.Counter
}

// Process reads and removes the IOAM data of every packet: packets of the
// remembered layout through quick, other packets with one pre-allocated
// trace through fast, the rest through one, the general path.
func (dc *decap) Process(ctx *plugins.Context, b *packet.Burst) {
	dc.begin()
	general := dc.general
	for i := 0; i < b.N; i++ {
		if p := b.H[i].P(); general || !dc.quick(ctx, p) && !dc.fast(ctx, p) {
			dc.one(ctx, p)
		}
	}
	dc.countDropped()
}

func (dc *decap) one(ctx *plugins.Context, p *packet.Packet) {
	d := p.Data()
	s := &dc.scan
	if !loadScratch(p, s) {
		l3 := ipv6At14(p, d)
		if l3 < 0 || (d[l3+6] != packet.ProtocolHopByHop && d[l3+6] != packet.ProtocolDestOpts) {
			dc.cNoIOAM.Inc()
			return
		}
		if dc.general || !dc.scanLayout(d, l3, s) {
			if err := scanPacket(d, l3, s); err != nil {
				p.Drop(dropReason(err))
				return
			}
		}
	}
	if s.nTrace == 0 && s.pot == 0 && s.dex == 0 && s.e2e == 0 {
		dc.cNoIOAM.Inc()
		return
	}
	own := dc.owned(d, s)
	if !own.any {
		return // another domain's IOAM: not this node's to read or remove
	}
	dc.cDecap.Inc()
	hl := d[s.l3+7]
	// The first trace of a known namespace is the one recorded.
	rec := -1
	var recNS *nsState
	var recPlan *nodePlan // own data for an incremental trace: in the record, not the packet
	loopNS := -1
	for k := 0; k < s.nTrace; k++ {
		opt := Option(d[s.trace[k]:])
		tr := Trace(opt.Body())
		ns := dc.ns.lookup(tr.NamespaceID())
		if ns == nil {
			continue
		}
		if rec < 0 {
			rec, recNS = k, ns
		}
		if tr.Loopback() && loopNS < 0 {
			loopNS = k
		}
		// The decapsulating node's own data goes into pre-allocated traces;
		// an incremental one would grow only to be removed, so the node's
		// data goes into the record instead.
		if !dc.fill {
			continue
		}
		pl := dc.planOf(ns, tr)
		if pl == nil {
			dc.cOverflow.Inc()
			continue
		}
		if opt.IOAMType() == TypeIncrementalTrace {
			if k == rec && !tr.Overflow() && tr.RemainingLen() >= pl.words {
				recPlan = pl
			}
			continue
		}
		if !dc.fillPrealloc(ctx, p, tr, pl, hl) {
			dc.cOverflow.Inc()
		}
	}
	potResult := POTUnchecked
	if own.pot {
		pot := POT(Option(d[s.pot:]).Body())
		if key := dc.pot.lookup(pot.NamespaceID()); key != nil && pot.POTType() == 0 {
			cml := key.Update(pot.Random(), pot.Cumulative())
			pot.SetCumulative(cml)
			if key.Verifier {
				if key.Verify(pot.Random(), cml) {
					potResult = POTValid
					dc.cPOTValid.Inc()
				} else {
					potResult = POTInvalid
					dc.cPOTInvalid.Inc()
				}
			}
		}
	}
	if dc.wantRec || recPlan != nil && (dc.hops != nil || dc.e2e != nil) {
		dc.record(ctx, p, d, s, own, rec, recNS, recPlan, potResult)
		if rec >= 0 && (dc.hops != nil || dc.e2e != nil) {
			dc.delays(dc.rec.TraceType, dc.rec.Data[:dc.rec.DataLen], recNS.Timestamp)
		}
		if dc.wantRec && dc.exp.ring.Offer(&dc.rec) {
			dc.cExported.Inc()
		}
	} else if rec >= 0 && (dc.hops != nil || dc.e2e != nil) {
		tr := Trace(Option(d[s.trace[rec]:]).Body())
		dc.delays(tr.TraceType(), tr.filled(), recNS.Timestamp)
	}
	if loopNS >= 0 && dc.loop != nil {
		dc.loop.send(ctx, p, s, loopNS)
	}
	if dc.remove {
		dc.strip(p, s)
	}
}

// owned is which of a packet's IOAM options are of namespaces this node
// knows: those it reads and removes.
type owned struct {
	any, pot, e2e, dex bool
}

// owned finds the packet's options of namespaces this node knows, and counts
// the others.
func (dc *decap) owned(d []byte, s *scan) (o owned) {
	unknown := 0
	mine := func(off int) bool {
		if off == 0 {
			return false
		}
		if ownOption(d[off:], &dc.ns) {
			o.any = true
			return true
		}
		unknown++
		return false
	}
	for k := 0; k < s.nTrace; k++ {
		mine(s.trace[k])
	}
	o.pot, o.e2e, o.dex = mine(s.pot), mine(s.e2e), mine(s.dex)
	if unknown > 0 {
		dc.cUnknownNS.Add(uint64(unknown))
	}
	return o
}

// scanLayout is scanPacket for a packet of fastTrace's layout. It reports
// false, leaving s to scanPacket, for other packets.
func (dc *decap) scanLayout(d []byte, l3 int, s *scan) bool {
	opt, hl := dc.layout.find(d, l3)
	if opt == 0 {
		return false
	}
	fastScan(d, l3, opt, hl, s)
	return true
}

// fast is one for a packet without a parse record whose Hop-by-Hop header
// holds one pre-allocated trace option of a namespace this node knows, and
// padding (fastTrace's layout), when there is no record to export and no
// copy to loop back. It reports false, having changed nothing, to leave the
// packet to one.
func (dc *decap) fast(ctx *plugins.Context, p *packet.Packet) bool {
	if p.LayersValid() || dc.wantRec {
		return false
	}
	d := p.Data()
	l3 := ipv6At14(p, d)
	if l3 < 0 || d[l3+6] != packet.ProtocolHopByHop {
		return false
	}
	opt, hl := dc.layout.find(d, l3)
	if opt == 0 {
		return false
	}
	tr := Trace(d[opt+OptionHeaderLen : opt+2+int(d[opt+1])])
	if tr.Loopback() && dc.loop != nil {
		return false
	}
	ns := dc.ns.lookup(binary.BigEndian.Uint16(tr))
	if ns == nil {
		return false
	}
	dc.cDecap.Inc()
	var pl *nodePlan
	if dc.fill {
		if pl = dc.planOf(ns, tr); pl == nil {
			dc.cOverflow.Inc()
		} else {
			dc.layout.remember(ns, pl)
		}
	}
	dc.fastRest(ctx, p, d, l3, hl, tr, ns, pl)
	return true
}

// quick is fast for a packet of the remembered layout, with its namespace and
// plan known: the checks fastTrace would make of its lengths, then fast's
// work. It reports false, having changed nothing, to leave the packet to one.
func (dc *decap) quick(ctx *plugins.Context, p *packet.Packet) bool {
	m := &dc.layout
	if m.pl == nil || dc.wantRec || !dc.fill {
		return false
	}
	d := p.Data()
	if !untaggedIPv6(p, d) || !m.match(d, 14) {
		return false
	}
	ns, pl := m.known()
	if pl == nil {
		return false
	}
	const opt = 14 + packet.IPv6Len + 4
	tr := Trace(d[opt+OptionHeaderLen : opt+OptionHeaderLen+TraceHeaderLen+m.data])
	if tr.Loopback() && dc.loop != nil {
		return false
	}
	dc.cDecap.Inc()
	dc.fastRest(ctx, p, d, 14, m.hl, tr, ns, pl)
	return true
}

// fastRest is the rest of fast: this node's data into tr (pl nil: none),
// the delays, and the removal of the Hop-by-Hop header of hbhLen bytes, which
// holds nothing but tr and padding.
func (dc *decap) fastRest(ctx *plugins.Context, p *packet.Packet, d []byte, l3, hbhLen int, tr Trace, ns *nsState, pl *nodePlan) {
	hbh := l3 + packet.IPv6Len
	outer := dc.stripsOuter(d[hbh], hbh+hbhLen, hbh+int(binary.BigEndian.Uint16(d[l3+4:])))
	if pl != nil {
		// Without delays to record, data about to be removed with its header
		// need not be written: only whether it had room counts.
		removed := dc.remove && (outer || dc.mode != decapEncap) && dc.hops == nil && dc.e2e == nil
		if removed {
			if !preallocRoom(tr, pl.words) {
				dc.cOverflow.Inc()
			}
		} else if off, ok := claimPrealloc(tr, pl.words); ok {
			dc.writeNode(ctx, p, pl, tr[off:], d[l3+7])
		} else {
			dc.cOverflow.Inc()
		}
	}
	if dc.hops != nil || dc.e2e != nil {
		dc.delays(tr.TraceType(), tr.filled(), ns.Timestamp)
	}
	switch {
	case !dc.remove:
	case outer:
		dc.removeOuter(p, l3, packet.IPv6Len+hbhLen)
	case dc.mode != decapEncap:
		dc.removed(p, l3, removeHeader(p, l3+6, hbh, hbhLen))
	}
}

// record fills dc.rec with the packet's IOAM data. own is this node's data
// for an incremental trace, which goes first in the record's node list.
func (dc *decap) record(ctx *plugins.Context, p *packet.Packet, d []byte, s *scan, mine owned, rec int, ns *nsState, own *nodePlan, pot uint8) {
	r := &dc.rec
	r.begin(ctx, RoleDecap, p, d, s)
	if rec >= 0 {
		data := r.setTrace(Option(d[s.trace[rec]:]), ns.Timestamp)
		n := 0
		if own != nil {
			dc.writeNode(ctx, p, own, r.Data[:], d[s.l3+7])
			n = own.size
			r.RemLen -= uint8(own.words)
		}
		r.DataLen = uint8(n + copy(r.Data[n:], data))
	}
	if mine.pot {
		pt := POT(Option(d[s.pot:]).Body())
		r.Have |= HavePOT
		r.POTNS, r.POTRandom, r.POTCumulative, r.POTResult = pt.NamespaceID(), pt.Random(), pt.Cumulative(), pot
	}
	if mine.e2e {
		e := E2E(Option(d[s.e2e:]).Body())
		r.Have |= HaveE2E
		r.E2ENS, r.E2EType, r.E2E = e.NamespaceID(), e.E2EType(), e.Fields()
	}
	if mine.dex {
		r.setDEX(DEX(Option(d[s.dex:]).Body()))
	}
}

// strip removes this node's IOAM data from p: the outer header of an
// encapsulated packet, or its IOAM options of the namespaces it knows (the
// whole options header when nothing else is in it).
func (dc *decap) strip(p *packet.Packet, s *scan) {
	if dc.stripsOuter(s.next, s.nextOff, s.end) {
		dc.removeOuter(p, s.l3, s.nextOff-s.l3)
		return
	}
	if dc.mode == decapEncap {
		return
	}
	d := p.Data()
	removed := 0
	// The Destination Options header first: it lies after the Hop-by-Hop
	// header, so removing it moves nothing the second step needs.
	if s.dest != 0 {
		if onlyOwn(d[s.dest:s.dest+s.destLen], &dc.ns) {
			prev := s.l3 + 6
			if s.hbh != 0 {
				prev = s.hbh
			}
			removed += removeHeader(p, prev, s.dest, s.destLen)
		} else if n, err := stripHeader(p, s.dest, &dc.ns); err == nil {
			removed += n
		}
		d = p.Data()
	}
	if s.hbh != 0 && (s.nTrace > 0 || s.pot != 0 || s.dex != 0) {
		if onlyOwn(d[s.hbh:s.hbh+s.hbhLen], &dc.ns) {
			removed += removeHeader(p, s.l3+6, s.hbh, s.hbhLen)
		} else if n, err := stripHeader(p, s.hbh, &dc.ns); err == nil {
			removed += n
		}
	}
	dc.removed(p, s.l3, removed)
}

// stripsOuter reports whether strip takes off the outer header of an IPv6
// packet that ends at end, whose options headers end at nextOff with next
// header next: an IPv6-in-IPv6 packet, in a mode that removes the outer
// header.
func (dc *decap) stripsOuter(next uint8, nextOff, end int) bool {
	return next == packet.ProtocolIPv6 && dc.mode != decapInline && nextOff+packet.IPv6Len <= end
}

// removeOuter removes the n bytes of the outer IPv6 header at l3 and its
// options headers, and counts them.
func (dc *decap) removeOuter(p *packet.Packet, l3, n int) {
	if removeGap(p, l3, n, !dc.general) == nil {
		dc.cStripped.Add(uint64(n))
	}
}

// removed lowers the payload length of the IPv6 header at l3 by the n bytes
// of options headers removed after it, and counts them.
func (dc *decap) removed(p *packet.Packet, l3, n int) {
	if n > 0 {
		addPayloadLength(p.Data(), l3, -n)
		dc.cStripped.Add(uint64(n))
	}
}
