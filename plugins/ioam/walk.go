package ioam

import (
	"encoding/binary"

	"github.com/linerate/linerate/appliance/packet"
)

// maxTraces is how many trace options of one packet the scan keeps; those
// beyond it (scan.extra, rare) are found again by nthTrace, which walks the
// header, so that every trace is filled, as the kernel fills them.
const maxTraces = 4

// scan is where a packet's IOAM options are: offsets from the first byte of
// data, 0 for none.
type scan struct {
	l3      int // the IPv6 header
	end     int // one past the IPv6 packet
	hbh     int // Hop-by-Hop header, right after the IPv6 header
	hbhLen  int
	dest    int // Destination Options header right after the HbH (or IPv6) header
	destLen int
	nTrace  int
	trace   [maxTraces]int // trace options, in order
	pot     int
	dex     int
	e2e     int // E2E option, in the Destination Options header
	next    uint8
	nextOff int  // the header after HbH and Dest
	hbhMore bool // the HbH header holds options other than IOAM and padding
	dstMore bool // ... and so does the Dest header
	extra   int  // trace options beyond maxTraces
}

// ipv6At returns the offset of the IPv6 header of d: from a valid Layers
// record, or from the Ethernet header (up to two VLAN tags) without a full
// parse. It returns -1 when d is not IPv6.
func ipv6At(p *packet.Packet, d []byte) int {
	if p.LayersValid() {
		l := p.Layers()
		if l.IPVersion != 6 {
			return -1
		}
		return int(l.L3)
	}
	off := 12
	for range 3 {
		if len(d) < off+2 {
			return -1
		}
		switch binary.BigEndian.Uint16(d[off:]) {
		case packet.EtherTypeIPv6:
			if len(d) < off+2+packet.IPv6Len || d[off+2]>>4 != 6 {
				return -1
			}
			return off + 2
		case packet.EtherTypeVLAN, packet.EtherTypeQinQ:
			off += 4
		default:
			return -1
		}
	}
	return -1
}

// fastTrace recognises the layout linerate and the kernel insert: a Hop-by-Hop
// header holding a 2-byte PadN, one pre-allocated trace option and nothing
// but padding after it, and no Destination Options header after it. It
// returns the offset of the trace option, whose trace it has validated, and
// the header's length; 0 leaves the packet to scanPacket (other layouts,
// faults).
func fastTrace(d []byte, l3 int) (opt, hl int) {
	hbh := l3 + packet.IPv6Len
	if l3 < 0 || hbh+16 > len(d) {
		return 0, 0
	}
	// Fixed-size views: one bounds check for the fields read below.
	ip := (*[packet.IPv6Len]byte)(d[l3:])
	h := (*[16]byte)(d[hbh:])
	if ip[6] != packet.ProtocolHopByHop {
		return 0, 0
	}
	hl = (int(h[1]) + 1) << 3
	end := hbh + (int(ip[4])<<8 | int(ip[5]))
	if hbh+hl > end || end > len(d) {
		return 0, 0
	}
	// Next header, PadN of 2, option type 0x31, its length, reserved, type 0.
	if h[0] == packet.ProtocolDestOpts || binary.BigEndian.Uint32(h[2:6])&0xFFFFFF00 != 0x01003100 || h[7] != TypePreallocatedTrace {
		return 0, 0
	}
	optEnd := 6 + int(h[5])
	if optEnd > hl || h[5] < 2+TraceHeaderLen {
		return 0, 0
	}
	switch rest := hl - optEnd; {
	case rest == 0:
	case rest == 1:
		if d[hbh+optEnd] != packet.IPv6OptPad1 {
			return 0, 0
		}
	default:
		if d[hbh+optEnd] != packet.IPv6OptPadN || int(d[hbh+optEnd+1]) != rest-2 {
			return 0, 0
		}
	}
	// The trace header: h[8:16].
	data := optEnd - 8 - TraceHeaderLen
	tt := uint32(h[12])<<16 | uint32(h[13])<<8 | uint32(h[14])
	if data > MaxTraceData || int(h[10]>>3) != NodeLen(tt) || int(h[11]&0x7F)*4 > data {
		return 0, 0
	}
	return hbh + 4, hl
}

// fastScan is scanPacket for a packet in which fastTrace found the trace
// option at opt and a Hop-by-Hop header of hl bytes.
func fastScan(d []byte, l3, opt, hl int, s *scan) {
	hbh := l3 + packet.IPv6Len
	s.l3, s.end, s.hbh, s.hbhLen = l3, hbh+int(binary.BigEndian.Uint16(d[l3+4:])), hbh, hl
	s.dest, s.destLen, s.nTrace, s.trace[0] = 0, 0, 1, opt
	s.pot, s.dex, s.e2e, s.extra = 0, 0, 0, 0
	s.next, s.nextOff, s.hbhMore, s.dstMore = d[hbh], hbh+hl, false, false
}

// scanPacket finds the IOAM options of the IPv6 packet at l3: in a Hop-by-Hop
// header, and E2E in a Destination Options header after it. It checks lengths,
// alignment and the fixed fields of every IOAM option, and returns the first
// fault.
func scanPacket(d []byte, l3 int, s *scan) error {
	*s = scan{l3: l3}
	ip := packet.IPv6(d[l3:])
	end := l3 + packet.IPv6Len + int(ip.PayloadLength())
	if end > len(d) {
		return ErrHopByHop
	}
	s.end = end
	nh := ip.NextHeader()
	off := l3 + packet.IPv6Len
	if nh == packet.ProtocolHopByHop {
		n, more, next, err := scanHeader(d[:end], l3, off, s, false)
		if err != nil {
			return err
		}
		s.hbh, s.hbhLen, s.hbhMore = off, n, more
		off += n
		nh = next
	}
	if nh == packet.ProtocolDestOpts {
		e2e := s.e2e
		n, more, next, err := scanHeader(d[:end], l3, off, s, true)
		if err != nil {
			return err
		}
		if s.e2e != e2e {
			s.dest, s.destLen, s.dstMore = off, n, more
			off += n
			nh = next
		}
	}
	s.next, s.nextOff = nh, off
	return nil
}

// scanHeader walks the options header at off. In a Destination Options header
// (dest) only E2E counts; in a Hop-by-Hop header, traces, POT and DEX.
func scanHeader(d []byte, l3, off int, s *scan, dest bool) (n int, more bool, next uint8, err error) {
	if len(d)-off < 8 {
		return 0, false, 0, ErrHopByHop
	}
	n = (int(d[off+1]) + 1) * 8
	if n > len(d)-off {
		return 0, false, 0, ErrHopByHop
	}
	next = d[off]
	h := d[off : off+n]
	for i := 2; i < n; {
		t := h[i]
		if t == packet.IPv6OptPad1 {
			i++
			continue
		}
		if i+2 > n || i+2+int(h[i+1]) > n {
			return 0, false, 0, ErrTruncated
		}
		ol := 2 + int(h[i+1])
		if t == packet.IPv6OptPadN {
			i += ol
			continue
		}
		if !IsIOAM(t) {
			more = true
			i += ol
			continue
		}
		at := off + i
		if (at-l3)&3 != 0 {
			return 0, false, 0, ErrMisaligned
		}
		o := Option(h[i : i+ol])
		if err := o.Validate(); err != nil {
			return 0, false, 0, err
		}
		body := o.Body()
		switch o.IOAMType() {
		case TypePreallocatedTrace, TypeIncrementalTrace:
			if dest {
				more = true
				break
			}
			if err := Trace(body).Validate(o.IOAMType() == TypeIncrementalTrace); err != nil {
				return 0, false, 0, err
			}
			if s.nTrace < maxTraces {
				s.trace[s.nTrace] = at
				s.nTrace++
			} else {
				s.extra++
			}
		case TypePOT:
			if dest {
				more = true
				break
			}
			if err := POT(body).Validate(); err != nil {
				return 0, false, 0, err
			}
			if s.pot == 0 {
				s.pot = at
			}
		case TypeDEX:
			if dest {
				more = true
				break
			}
			if err := DEX(body).Validate(); err != nil {
				return 0, false, 0, err
			}
			if s.dex == 0 {
				s.dex = at
			}
		case TypeE2E:
			if !dest {
				more = true
				break
			}
			if err := E2E(body).Validate(); err != nil {
				return 0, false, 0, err
			}
			if s.e2e == 0 {
				s.e2e = at
			}
		default:
			more = true
		}
		i += ol
	}
	return n, more, next, nil
}

// untaggedIPv6 reports whether d, without a parse record, is an untagged
// Ethernet frame of IPv6: the usual case, the IPv6 header at 14.
func untaggedIPv6(p *packet.Packet, d []byte) bool {
	return len(d) >= 14+packet.IPv6Len && d[12] == 0x86 && d[13] == 0xDD && d[14]>>4 == 6 && !p.LayersValid()
}

// ipv6At14 is ipv6At for the usual case in one check; anything else goes to
// ipv6At.
func ipv6At14(p *packet.Packet, d []byte) int {
	if untaggedIPv6(p, d) {
		return 14
	}
	return ipv6At(p, d)
}

// traceAt is the offset of the packet's k-th trace option (0-based, k below
// s.nTrace+s.extra): kept by the scan for the first maxTraces, found again
// in the Hop-by-Hop header, which the scan validated, for the others.
func (s *scan) traceAt(d []byte, k int) int {
	if k < s.nTrace {
		return s.trace[k]
	}
	n := 0
	h := d[s.hbh : s.hbh+s.hbhLen]
	for i := 2; i+1 < len(h); {
		t := h[i]
		if t == packet.IPv6OptPad1 {
			i++
			continue
		}
		if IsIOAM(t) {
			switch Option(h[i:]).IOAMType() {
			case TypePreallocatedTrace, TypeIncrementalTrace:
				if n == k {
					return s.hbh + i
				}
				n++
			}
		}
		i += 2 + int(h[i+1])
	}
	return 0
}
