package ioam

import (
	"unsafe"

	"github.com/linerate/linerate/appliance/packet"
)

// Scratch: what a stage found out about a packet's IOAM options, kept in
// Packet.Scratch after the Layers record so the next IOAM stage of the chain
// does not walk the options again. It is trusted only with a valid Layers
// record whose Hop-by-Hop offset it matches, and for the data window it was
// written for.
type scratch struct {
	magic  uint8
	traces uint8 // trace options; the offset of the first only
	hbh    uint16
	trace  uint16
	pot    uint16
	dex    uint16
	dest   uint16 // the Destination Options header holding E2E
	winOff uint16
	winLen uint16
}

const scratchMagic = 0xA5

// The scratch record must fit after Layers.
var _ [packet.ScratchSize - packet.LayersSize - int(unsafe.Sizeof(scratch{}))]byte

func scratchOf(p *packet.Packet) *scratch {
	return (*scratch)(unsafe.Pointer(&p.Scratch[packet.LayersSize]))
}

// loadScratch fills s from the packet's scratch record when it is valid, and
// reports whether it was.
func loadScratch(p *packet.Packet, s *scan) bool {
	if !p.LayersValid() {
		return false
	}
	c := scratchOf(p)
	l := p.Layers()
	if c.magic != scratchMagic || c.traces > 1 || c.hbh != l.HopByHop || c.hbh == 0 ||
		c.winOff != uint16(p.Offset()) || c.winLen != uint16(p.Len()) {
		return false
	}
	*s = scan{l3: int(l.L3), end: int(l.End), hbh: int(c.hbh), pot: int(c.pot), dex: int(c.dex)}
	d := p.Data()
	if s.hbh+8 > len(d) || s.end > len(d) {
		return false
	}
	s.hbhLen = (int(d[s.hbh+1]) + 1) * 8
	s.next, s.nextOff = d[s.hbh], s.hbh+s.hbhLen
	if c.traces == 1 {
		s.trace[0], s.nTrace = int(c.trace), 1
	}
	return true
}

// storeScratch records s in the packet's scratch, when the Layers record is
// valid and agrees with it.
func storeScratch(p *packet.Packet, s *scan) {
	if !p.LayersValid() || s.hbh == 0 || s.nTrace > 1 || s.dest != 0 || s.hbhMore {
		return
	}
	l := p.Layers()
	if int(l.HopByHop) != s.hbh {
		return
	}
	c := scratchOf(p)
	*c = scratch{magic: scratchMagic, traces: uint8(s.nTrace), hbh: uint16(s.hbh), trace: uint16(s.trace[0]),
		pot: uint16(s.pot), dex: uint16(s.dex), winOff: uint16(p.Offset()), winLen: uint16(p.Len())}
}

// shiftLayers moves the offsets of l at or after at by n bytes: the record
// after n bytes were inserted at at (n < 0: removed).
func shiftLayers(l *packet.Layers, at, n int) {
	for _, f := range []*uint16{&l.L4, &l.HopByHop, &l.DestOpts1, &l.Routing, &l.Fragment, &l.AH, &l.ESP, &l.DestOpts2} {
		if *f != 0 && int(*f) >= at {
			*f = uint16(int(*f) + n)
		}
	}
	l.Len = uint32(int(l.Len) + n)
	l.End = uint32(int(l.End) + n)
}
