package ioam

import (
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/plugins"
)

// inline adds the profile's options to the packet itself: a new Hop-by-Hop
// header, or its options appended to the existing one.
func (e *encap) inline(ctx *plugins.Context, b *packet.Burst, i int, pr *profile, l3, ipLen int) {
	p := b.H[i].P()
	d := p.Data()
	valid := p.LayersValid()
	hasHbH := d[l3+6] == packet.ProtocolHopByHop
	hl := d[l3+7]
	if !hasHbH {
		n := len(pr.tmplInline)
		if !e.fits(ipLen, n) {
			e.cMTU.Inc()
			return
		}
		at := l3 + packet.IPv6Len
		gap, err := b.InsertGap(i, at, n, ctx.Env)
		if err != nil {
			e.cNoRoom.Inc()
			return
		}
		p = b.H[i].P()
		d = p.Data()
		copy(gap, pr.tmplInline)
		next := d[l3+6]
		last := 0
		if pr.hbhLen > 0 && pr.destLen > 0 {
			last = pr.hbhLen
		}
		gap[last] = next
		first := uint8(packet.ProtocolHopByHop)
		if pr.hbhLen == 0 {
			first = packet.ProtocolDestOpts
		}
		d[l3+6] = first
		addPayloadLength(d, l3, n)
		e.fill(ctx, p, pr, d, at+4, at+pr.hbhLen+4, hl)
		if valid && pr.destLen == 0 {
			l := p.Layers()
			shiftLayers(l, at, n)
			l.HopByHop = uint16(at)
			l.NumExt++
			p.SetFlag(packet.FlagLayers)
			var s scan
			if scanPacket(d, l3, &s) == nil {
				storeScratch(p, &s)
			}
		}
		e.cInline.Inc()
		pr.cInserted.Inc()
		return
	}
	// Grow the existing Hop-by-Hop header (the kernel leaves such packets
	// alone), then add E2E in a Destination Options header after it. A
	// header whose options run past it cannot take more: the packet is
	// malformed, and the kernel would drop it.
	hbh := l3 + packet.IPv6Len
	if err := checkHeader(d, hbh, l3+ipLen); err != nil {
		p.Drop(dropReason(err))
		return
	}
	if next := hbh + (int(d[hbh+1])+1)*8; pr.destLen > 0 && d[hbh] == packet.ProtocolDestOpts {
		if err := checkHeader(d, next, l3+ipLen); err != nil {
			p.Drop(dropReason(err))
			return
		}
	}
	if !e.fits(ipLen, len(pr.opts)+8+pr.destLen) {
		e.cMTU.Inc()
		return
	}
	optsAt, destAt := -1, -1
	if len(pr.opts) > 0 {
		at, added, err := growHeader(b, i, hbh, pr.opts, ctx.Env)
		if err != nil {
			e.cNoRoom.Inc()
			return
		}
		p = b.H[i].P()
		d = p.Data()
		addPayloadLength(d, l3, added)
		optsAt = at
	}
	if pr.destLen > 0 {
		hlen := (int(d[hbh+1]) + 1) * 8
		next := hbh + hlen
		if d[hbh] == packet.ProtocolDestOpts {
			at, added, err := growHeader(b, i, next, pr.e2eBlock, ctx.Env)
			if err != nil {
				e.cNoRoom.Inc()
				return
			}
			p = b.H[i].P()
			d = p.Data()
			addPayloadLength(d, l3, added)
			destAt = at
		} else {
			gap, err := b.InsertGap(i, next, pr.destLen, ctx.Env)
			if err != nil {
				e.cNoRoom.Inc()
				return
			}
			p = b.H[i].P()
			d = p.Data()
			putFreshHeader(gap, d[hbh], pr.e2eBlock)
			d[hbh] = packet.ProtocolDestOpts
			addPayloadLength(d, l3, pr.destLen)
			destAt = next + 4
		}
	}
	e.fill(ctx, p, pr, d, optsAt, destAt, hl)
	e.cGrown.Inc()
	pr.cInserted.Inc()
}
