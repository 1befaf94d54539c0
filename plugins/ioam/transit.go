package ioam

import (
	"fmt"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/appliance/stats"
	"github.com/linerate/linerate/plugins"
	"github.com/linerate/linerate/plugins/route"
)

// transit is an IOAM transit node (RFC 9197 §4, RFC 9486): for every IOAM
// option of a namespace it knows, it writes its node data into traces, folds
// its POT share into the cumulative value, and exports DEX data. Options of
// other namespaces pass untouched.
type transit struct {
	*node
	exported
	decHL bool
	icmp  *route.ErrorSender // Time Exceeded, in routed mode
	pot   potKeys
	loop  *loopback

	scan   scan
	rec    Record
	layout traceLayout
	sink   uint64 // what warm read, kept so that its reads stay

	cFilled, cOverflow, cUnknownNS, cNoIOAM, cPOT, cDEX, cGrown, cExtra *stats.Counter

	xdp *trXDP // the in-kernel part, nil without offload
}

// Process fills this node's data into every packet's IOAM options: runs of
// packets of the remembered layout through quickRun, other packets with one
// pre-allocated trace through fast, the rest through one, the general path.
func (t *transit) Process(ctx *plugins.Context, b *packet.Burst) {
	t.begin()
	t.warm(b)
	if t.general {
		for i := range b.N {
			t.one(ctx, b, i)
		}
	} else {
		for i := t.quickRun(ctx, b, 0); i < b.N; i = t.quickRun(ctx, b, i+1) {
			if !t.fast(ctx, b.H[i].P()) {
				t.one(ctx, b, i)
			}
		}
	}
	t.countDropped()
}

func (t *transit) one(ctx *plugins.Context, b *packet.Burst, i int) {
	p := b.H[i].P()
	d := p.Data()
	s := &t.scan
	scanned := loadScratch(p, s)
	l3 := s.l3
	if !scanned {
		if l3 = ipv6At14(p, d); l3 < 0 {
			t.cNoIOAM.Inc()
			return
		}
	}
	hl, ok := t.hopLimit(d, l3)
	if !ok {
		t.expire(ctx, p)
		return
	}
	if !scanned {
		if d[l3+6] != packet.ProtocolHopByHop {
			t.cNoIOAM.Inc()
			return
		}
		if err := scanPacket(d, l3, s); err != nil {
			p.Drop(dropReason(err))
			return
		}
		storeScratch(p, s)
	}
	if s.nTrace == 0 && s.pot == 0 && s.dex == 0 {
		t.cNoIOAM.Inc()
		return
	}
	if s.extra > 0 {
		t.cExtra.Add(uint64(s.extra))
	}
	incr := -1
	var incrPlan *nodePlan
	loopNS := -1
	for k := 0; k < s.nTrace+s.extra; k++ {
		o := s.traceAt(d, k)
		if o == 0 {
			break
		}
		opt := Option(d[o:])
		tr := Trace(opt.Body())
		ns := t.ns.lookup(tr.NamespaceID())
		if ns == nil {
			t.cUnknownNS.Inc()
			continue
		}
		if tr.Loopback() && loopNS < 0 && k < s.nTrace {
			loopNS = k
		}
		pl := t.planOf(ns, tr)
		if pl == nil {
			t.cOverflow.Inc()
			continue
		}
		if opt.IOAMType() == TypeIncrementalTrace {
			if incr < 0 {
				incr, incrPlan = o, pl
			}
			continue
		}
		t.fill(ctx, p, tr, pl, hl)
	}
	if s.pot != 0 {
		pot := POT(Option(d[s.pot:]).Body())
		if key := t.pot.lookup(pot.NamespaceID()); key != nil && pot.POTType() == 0 {
			pot.SetCumulative(key.Update(pot.Random(), pot.Cumulative()))
			t.cPOT.Inc()
		}
	}
	if s.dex != 0 && t.exp != nil {
		dex := DEX(Option(d[s.dex:]).Body())
		if t.ns.lookup(dex.NamespaceID()) != nil {
			t.exportDEX(ctx, p, d, s, dex, hl)
		}
	}
	if incr >= 0 {
		switch slot, err := growIncremental(b, i, s, incr, incrPlan, ctx.Env); err {
		case nil:
			t.writeNode(ctx, b.H[i].P(), incrPlan, slot, hl)
			t.cGrown.Inc()
			t.cFilled.Inc()
			if loopNS >= 0 {
				// The options moved: find them again for the copy.
				p = b.H[i].P()
				if scanPacket(p.Data(), s.l3, s) != nil {
					loopNS = -1
				}
			}
		case errOverflow:
			t.cOverflow.Inc()
		default:
			b.H[i].P().Drop(dropReason(err))
			return
		}
	}
	if loopNS >= 0 && t.loop != nil {
		t.loop.send(ctx, b.H[i].P(), s, loopNS)
	}
}

// fast is one for a packet without a parse record whose Hop-by-Hop header
// holds one pre-allocated trace option and padding (fastTrace's layout). It
// reports false, having changed nothing, for the packets it leaves to one:
// other layouts, and a looped-back copy to send.
func (t *transit) fast(ctx *plugins.Context, p *packet.Packet) bool {
	d := p.Data()
	if p.LayersValid() {
		return false
	}
	l3 := ipv6At14(p, d)
	if l3 < 0 || d[l3+6] != packet.ProtocolHopByHop {
		return false
	}
	opt, _ := t.layout.find(d, l3)
	if opt == 0 {
		return false
	}
	tr := Trace(d[opt+OptionHeaderLen : opt+2+int(d[opt+1])])
	if tr.Loopback() && t.loop != nil {
		return false
	}
	hl, ok := t.hopLimit(d, l3)
	if !ok {
		t.expire(ctx, p)
		return true
	}
	ns := t.ns.lookup(tr.NamespaceID())
	if ns == nil {
		t.cUnknownNS.Inc()
		return true
	}
	pl := t.planOf(ns, tr)
	if pl == nil {
		t.cOverflow.Inc()
		return true
	}
	t.layout.remember(ns, pl)
	t.fill(ctx, p, tr, pl, hl)
	return true
}

// fill writes this node's data into the pre-allocated trace tr, and counts
// it.
func (t *transit) fill(ctx *plugins.Context, p *packet.Packet, tr Trace, pl *nodePlan, hl uint8) {
	if t.fillPrealloc(ctx, p, tr, pl, hl) {
		t.cFilled.Inc()
	} else {
		t.cOverflow.Inc()
	}
}

// quickRun is fast for the packets of b from i on that have the remembered
// layout, its namespace and plan known: the checks fastTrace would make of
// their lengths, then fast's work, with what a burst shares (the plan, its
// per-burst image, the counters) held once. It returns the index of the first
// packet it leaves, unchanged, to fast and one: another layout, or a copy to
// loop back.
func (t *transit) quickRun(ctx *plugins.Context, b *packet.Burst, i int) int {
	m := &t.layout
	if m.pl == nil || i >= b.N {
		return i
	}
	_, pl := m.known()
	if pl == nil {
		return i
	}
	const at = 14 + packet.IPv6Len + 4 + OptionHeaderLen // the trace, in the layout
	filled, overflow := 0, 0
	for ; i < b.N; i++ {
		p := b.H[i].P()
		d := p.Data()
		if !untaggedIPv6(p, d) || !m.match(d, 14) {
			break
		}
		// The trace header; match checked the data's length.
		tr := Trace(d[at : at+TraceHeaderLen])
		if tr.Loopback() && t.loop != nil {
			break
		}
		hl, ok := t.hopLimit(d, 14)
		if !ok {
			t.expire(ctx, p)
			continue
		}
		off, ok := claimPrealloc(tr, pl.words)
		switch {
		case !ok:
			overflow++
			continue
		case pl.cached(t.gen, p.InPort):
			pl.writeCur(d[at+off:], hl) // writeNode's common case, without the call
		default:
			t.writeNode(ctx, p, pl, d[at+off:], hl)
		}
		filled++
	}
	t.cFilled.Add(uint64(filled))
	t.cOverflow.Add(uint64(overflow))
	return i
}

// hopLimit is the forwarding rule of decrement_hop_limit, for every IPv6
// packet whatever its IOAM (as the kernel's ip6_forward): it lowers the hop
// limit of the IPv6 header at l3 and returns the new one, or reports false,
// changing nothing, for a packet whose hop limit is 1 or less. Without
// decrement_hop_limit it returns the hop limit as it is.
func (t *transit) hopLimit(d []byte, l3 int) (uint8, bool) {
	hl := d[l3+7]
	if !t.decHL {
		return hl, true
	}
	if hl <= 1 {
		return hl, false
	}
	hl--
	d[l3+7] = hl
	return hl, true
}

// expire drops a packet whose hop limit ran out, and in routed mode answers
// with an ICMPv6 Time Exceeded from the port it came in on.
func (t *transit) expire(ctx *plugins.Context, p *packet.Packet) {
	if t.icmp != nil {
		t.icmp.SendAbout(ctx, p, packet.ICMPv6TimeExceeded, packet.ICMPv6HopLimitExceeded, 0)
	}
	p.Drop(reasonHopLimit)
}

// exportDEX offers a record of a DEX option: this node's data of the DEX
// trace type (RFC 9326 §3) as the first and only hop.
func (t *transit) exportDEX(ctx *plugins.Context, p *packet.Packet, d []byte, s *scan, dex DEX, hl uint8) {
	r := &t.rec
	r.begin(ctx, RoleTransit, p, d, s)
	r.setDEX(dex)
	if ns := t.ns.lookup(r.DEXNS); ns != nil {
		if pl := ns.plan(r.DEXType, t.eg); pl != nil {
			t.writeNode(ctx, p, pl, r.Data[:], hl)
			r.Have |= HaveTrace
			r.TraceNS, r.TraceOption, r.TraceFlags, r.TraceType = r.DEXNS, TypePreallocatedTrace, 0, r.DEXType
			r.NodeLen, r.RemLen, r.DataLen, r.Format = uint8(NodeLen(r.DEXType)), 0, uint8(pl.size), ns.Timestamp
		}
	}
	if t.exp.ring.Offer(r) {
		t.cDEX.Inc()
	}
}

// errOverflow: the trace had no room; the O flag is set.
var errOverflow = fmt.Errorf("ioam: overflow")

// growIncremental opens room for the node data of pl right after the header
// of the incremental trace option at off (RFC 9197 §4.4), and returns it: the
// option, its options header and the IPv6 payload grow, the header keeping
// its 8-byte multiple by absorbing or adding trailing padding.
func growIncremental(b *packet.Burst, i int, s *scan, off int, pl *nodePlan, f packet.Freer) ([]byte, error) {
	p := b.H[i].P()
	d := p.Data()
	opt := Option(d[off:])
	tr := Trace(opt.Body())
	if tr.Overflow() {
		return nil, errOverflow
	}
	rem := tr.RemainingLen()
	need := pl.size
	if rem < pl.words || int(opt.OptDataLen())+need > 255 || len(tr)-TraceHeaderLen+need > MaxTraceData {
		tr.SetOverflow()
		return nil, errOverflow
	}
	hdr := s.hbh
	old := s.hbhLen
	end := optionsEnd(d[hdr : hdr+old])
	newLen := max((end+need+7)&^7, old)
	if newLen > maxOptionsHeader {
		tr.SetOverflow()
		return nil, errOverflow
	}
	gap := newLen - old
	ins := off + OptionHeaderLen + TraceHeaderLen
	valid := p.LayersValid()
	scratchOf(p).magic = 0 // the options after this one move
	if gap > 0 {
		if _, err := b.InsertGap(i, ins, gap, f); err != nil {
			tr.SetOverflow()
			return nil, errOverflow
		}
		p = b.H[i].P()
		d = p.Data()
	}
	// What followed the insertion point, up to the end of the options, moves
	// to ins+need; the trailing padding takes up the difference.
	copy(d[ins+need:hdr+end+need], d[ins+gap:hdr+end+gap])
	putPad(d[hdr+end+need : hdr+newLen])
	d[hdr+1] = uint8(newLen/8 - 1)
	opt = Option(d[off:])
	opt[1] += uint8(need)
	Trace(opt.Body()).SetRemainingLen(rem - pl.words)
	if gap > 0 {
		addPayloadLength(d, s.l3, gap)
		if valid {
			shiftLayers(p.Layers(), ins, gap)
			p.SetFlag(packet.FlagLayers)
		}
	}
	return d[ins : ins+need], nil
}
