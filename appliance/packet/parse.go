package packet

import (
	"encoding/binary"
	"errors"
	"unsafe"
)

// Errors of the header views and of Parse. They are plain values, so reporting a
// malformed packet costs no allocation; callers add context as they rise.
var (
	ErrTruncated     = errors.New("packet: header truncated")
	ErrBadVersion    = errors.New("packet: IP version does not match its EtherType")
	ErrBadLength     = errors.New("packet: impossible length field")
	ErrTooManyVLANs  = errors.New("packet: more than two VLAN tags")
	ErrExtTooLong    = errors.New("packet: extension header runs past the IP payload")
	ErrTooManyExt    = errors.New("packet: too many IPv6 extension headers")
	ErrExtOrder      = errors.New("packet: Hop-by-Hop Options header not first")
	ErrBadSRH        = errors.New("packet: malformed segment routing header")
	ErrOptionTooLong = errors.New("packet: option runs past its header")
	ErrNoSpace       = errors.New("packet: buffer too small for the header")
)

// MaxExtHeaders bounds the IPv6 extension headers Parse walks. RFC 8200 names
// six kinds, each at most once (Destination Options twice); more is an attack
// or a fault (RFC 8504 §5.3 lets hosts limit it).
const MaxExtHeaders = 16

// LayerFlags say what Parse found.
type LayerFlags uint16

const (
	FlagIPv4          LayerFlags = 1 << iota
	FlagIPv6                     // IPv6, and extension header offsets are meaningful
	FlagIPv4Options              // IHL > 5
	FlagSRH                      // the Routing header is an SRH (type 4), its lengths checked
	FlagFragment                 // a fragment: IPv6 Fragment header, or IPv4 MF or offset
	FlagLaterFragment            // not the first fragment: L4 is where data resumes, no header
	FlagESP                      // ESP ends the walk: what follows it is opaque
	FlagUDP                      // L4 is a UDP header whose Length fits the IP payload
	FlagExtRepeated              // an extension header kind came twice; offsets hold the first
	FlagTrailer                  // bytes follow the IP packet (Ethernet padding, trailers)
)

// Layers is one parse of a packet: where each header starts, as an offset from
// the first byte of data, and what the packet carries. An offset of 0 means the
// header is absent. It is small and holds no pointers, so it lives in the
// packet's Scratch area (Packet.Layers) and travels with the packet down the
// chain; Scratch[LayersSize:] stays free for stages, and a new parse clears it.
type Layers struct {
	Len uint32 // bytes parsed
	End uint32 // offset one past the IP packet, by its length field

	Flags     LayerFlags
	EtherType uint16              // after the VLAN tags
	VLAN      [MaxVLANTags]uint16 // Tag Control Information, outer tag first
	L3        uint16              // offset of the IP header: the L2 header's length
	L4        uint16              // offset of the upper-layer header (Proto)

	HopByHop  uint16
	DestOpts1 uint16 // Destination Options before a Routing header (RFC 8200 §4.1 note 1)
	Routing   uint16
	Fragment  uint16
	AH        uint16
	ESP       uint16
	DestOpts2 uint16 // Destination Options for the final destination (RFC 8200 §4.1 note 2)

	VLANs     uint8 // number of VLAN tags
	IPVersion uint8 // 4, 6, or 0 when the EtherType is neither
	Proto     uint8 // last next-header value: upper-layer protocol, ESP or No Next Header
	NumExt    uint8 // IPv6 extension headers (or IPv4 AH) walked
}

// LayersSize is the size of Layers in Scratch.
const LayersSize = int(unsafe.Sizeof(Layers{}))

// Layers must fit Scratch.
var _ [ScratchSize - LayersSize]byte

// L2Len is the length of the link-layer header.
func (l *Layers) L2Len() int { return int(l.L3) }

// Ethernet is the Ethernet header of data, the bytes l was parsed from.
func (l *Layers) Ethernet(data []byte) Ethernet { return Ethernet(data[:l.L3]) }

// IPv4 is the IPv4 header and payload of data; valid when FlagIPv4 is set.
func (l *Layers) IPv4(data []byte) IPv4 { return IPv4(data[l.L3:l.End]) }

// IPv6 is the IPv6 packet of data; valid when FlagIPv6 is set.
func (l *Layers) IPv6(data []byte) IPv6 { return IPv6(data[l.L3:l.End]) }

// SRH is the SRH of data, or nil when there is none.
func (l *Layers) SRH(data []byte) SRH {
	if l.Flags&FlagSRH == 0 {
		return nil
	}
	return SRH(data[l.Routing:l.End])
}

// UDP is the UDP datagram of data, or nil when there is none.
func (l *Layers) UDP(data []byte) UDP {
	if l.Flags&FlagUDP == 0 {
		return nil
	}
	return UDP(data[l.L4:l.End])
}

// FinalDst is the IPv6 destination the upper-layer pseudo-header uses (RFC 8200
// §8.1): while a Routing header has segments left, the last address of the
// route — Segment List[0] of an SRH, the last address of types 0 and 2 —
// otherwise the Destination Address. Valid when FlagIPv6 is set.
func (l *Layers) FinalDst(data []byte) [16]byte {
	if r := l.Routing; r != 0 {
		rt := IPv6Routing(data[r:l.End])
		if rt.SegmentsLeft() > 0 {
			n := (rt.Len() - 8) / 16
			switch rt.RoutingType() {
			case RoutingTypeSRH:
				return SRH(rt).Segment(0)
			case 0, 2:
				if n > 0 {
					return [16]byte(rt[8+(n-1)*16 : 8+n*16])
				}
			}
		}
	}
	return IPv6(data[l.L3:l.End]).Dst()
}

// UDPChecksum is the checksum the UDP datagram of data should carry, over the
// IPv4 or IPv6 pseudo-header (with FinalDst for IPv6). Valid when FlagUDP is set.
func (l *Layers) UDPChecksum(data []byte) uint16 {
	u := UDP(data[l.L4:l.End])
	if l.IPVersion == 4 {
		ip := IPv4(data[l.L3:l.End])
		return u.ChecksumIPv4(ip.Src(), ip.Dst())
	}
	return u.ChecksumIPv6(IPv6(data[l.L3:l.End]).Src(), l.FinalDst(data))
}

// Parse walks data from its Ethernet header: up to two VLAN tags, IPv4 or IPv6,
// the IPv6 extension headers (Hop-by-Hop, Destination Options, Routing/SRH,
// Fragment and AH walked, ESP ending the walk), and UDP. It fills l and reports
// the first fault as one of the Err values. A non-IP EtherType is no fault: l
// then holds the L2 fields only.
//
// Parse reads each header after one bounds check, never allocates and never
// panics. On a fault, l holds what was parsed before it.
func Parse(data []byte, l *Layers) error { return parse(data, l, true) }

// ParseIP is Parse for data that starts with the IP header (a TUN device, a raw
// pcap): the version nibble picks IPv4 or IPv6, and EtherType is set to match.
func ParseIP(data []byte, l *Layers) error { return parse(data, l, false) }

// parse is Parse and ParseIP in one body, so that the IPv6 walk, the common
// case, costs no further call.
func parse(data []byte, l *Layers, eth bool) error {
	*l = Layers{Len: uint32(len(data)), End: uint32(len(data))}
	off := 0
	var et uint16
	if eth {
		if len(data) < EthernetMinLen {
			return ErrTruncated
		}
		et = uint16(data[ethType])<<8 | uint16(data[ethType+1])
		off = EthernetMinLen
		if et == EtherTypeVLAN || et == EtherTypeQinQ {
			if len(data) < EthernetMinLen+VLANTagLen {
				return ErrTruncated
			}
			t := (*[VLANTagLen]byte)(data[EthernetMinLen:])
			l.VLAN[0] = uint16(t[0])<<8 | uint16(t[1])
			et = uint16(t[2])<<8 | uint16(t[3])
			l.VLANs = 1
			off = EthernetMinLen + VLANTagLen
			if et == EtherTypeVLAN || et == EtherTypeQinQ {
				if len(data) < EthernetMaxLen {
					return ErrTruncated
				}
				t = (*[VLANTagLen]byte)(data[EthernetMinLen+VLANTagLen:])
				l.VLAN[1] = uint16(t[0])<<8 | uint16(t[1])
				et = uint16(t[2])<<8 | uint16(t[3])
				l.VLANs = 2
				off = EthernetMaxLen
				if et == EtherTypeVLAN || et == EtherTypeQinQ {
					return ErrTooManyVLANs
				}
			}
		}
	} else {
		if len(data) == 0 {
			return ErrTruncated
		}
		switch data[0] >> 4 {
		case 6:
			et = EtherTypeIPv6
		case 4:
			et = EtherTypeIPv4
		default:
			return ErrBadVersion
		}
	}
	l.EtherType = et
	l.L3 = uint16(off)
	switch et {
	case EtherTypeIPv6:
	case EtherTypeIPv4:
		return parseIPv4(data, off, l)
	default:
		return nil
	}

	// IPv6 and its extension headers.
	if len(data)-off < IPv6Len {
		return ErrTruncated
	}
	h := (*[IPv6Len]byte)(data[off:])
	if h[0]>>4 != 6 {
		return ErrBadVersion
	}
	end := off + IPv6Len + (int(h[ipv6PayLen])<<8 | int(h[ipv6PayLen+1]))
	if end > len(data) {
		return ErrTruncated
	}
	l.IPVersion = 6
	l.End = uint32(end)
	flags := FlagIPv6
	if end < len(data) {
		flags |= FlagTrailer
	}
	data = data[:end]
	nh := h[ipv6NextHdr]
	off += IPv6Len
	n := 0
	for {
		switch nh {
		case ProtocolHopByHop, ProtocolDestOpts, ProtocolRouting, ProtocolFragment, ProtocolAH, ProtocolESP:
		default:
			goto upper
		}
		if n == MaxExtHeaders {
			l.Flags = flags
			return ErrTooManyExt
		}
		// Every extension header is at least 8 bytes: one check covers the
		// fixed fields read below.
		if len(data)-off < 8 {
			l.Flags = flags
			return ErrTruncated
		}
		e := (*[8]byte)(data[off:])
		hl := (int(e[1]) + 1) << 3
		o16 := uint16(off)
		switch nh {
		case ProtocolHopByHop:
			if n != 0 {
				l.Flags = flags
				return ErrExtOrder
			}
			l.HopByHop = o16
		case ProtocolDestOpts:
			p := &l.DestOpts1
			if l.Routing != 0 {
				p = &l.DestOpts2
			}
			if *p != 0 {
				flags |= FlagExtRepeated
			} else {
				*p = o16
			}
		case ProtocolRouting:
			if l.Routing != 0 {
				flags |= FlagExtRepeated
				break
			}
			l.Routing = o16
			if e[2] == RoutingTypeSRH {
				if checkSRH(e[1], e[srhSegmentsLeft], e[srhLastEntry]) != nil {
					l.Flags = flags
					return ErrBadSRH
				}
				flags |= FlagSRH
			}
		case ProtocolFragment:
			hl = IPv6FragmentLen
			if l.Fragment != 0 {
				flags |= FlagExtRepeated
			} else {
				l.Fragment = o16
			}
			flags |= FlagFragment
			if e[2] != 0 || e[3]&^7 != 0 {
				// A later fragment: the rest is a piece of the payload.
				return l.finishIPv6(e[0], off+hl, n+1, flags|FlagLaterFragment)
			}
		case ProtocolAH:
			hl = (int(e[1]) + 2) << 2
			if hl < AHMinLen {
				l.Flags = flags
				return ErrBadLength
			}
			if l.AH != 0 {
				flags |= FlagExtRepeated
			} else {
				l.AH = o16
			}
		case ProtocolESP:
			l.ESP = o16
			return l.finishIPv6(ProtocolESP, off, n, flags|FlagESP)
		}
		if hl > len(data)-off {
			l.Flags = flags
			return ErrExtTooLong
		}
		off += hl
		nh = e[0]
		n++
	}
upper:
	if nh == ProtocolUDP {
		if err := checkUDP(data, off); err != nil {
			l.Flags = flags
			return err
		}
		flags |= FlagUDP
	}
	return l.finishIPv6(nh, off, n, flags)
}

func (l *Layers) finishIPv6(proto uint8, off, n int, flags LayerFlags) error {
	if l.Routing == 0 && l.DestOpts1 != 0 {
		// No Routing header followed: these options are for the final
		// destination.
		l.DestOpts2, l.DestOpts1 = l.DestOpts1, 0
	}
	l.Proto = proto
	l.L4 = uint16(off)
	l.NumExt = uint8(n)
	l.Flags = flags
	return nil
}

// checkUDP checks the UDP header at off of data, which ends with the IP packet.
func checkUDP(data []byte, off int) error {
	if len(data)-off < UDPLen {
		return ErrTruncated
	}
	u := (*[UDPLen]byte)(data[off:])
	ul := int(u[4])<<8 | int(u[5])
	if ul < UDPLen {
		return ErrBadLength
	}
	if ul > len(data)-off {
		return ErrTruncated
	}
	return nil
}

func parseIPv4(data []byte, off int, l *Layers) error {
	if len(data)-off < IPv4MinLen {
		return ErrTruncated
	}
	h := data[off : off+IPv4MinLen]
	if h[0]>>4 != 4 {
		return ErrBadVersion
	}
	hl := int(h[0]&0xf) << 2
	tl := int(binary.BigEndian.Uint16(h[ipv4TotalLen : ipv4TotalLen+2]))
	if hl < IPv4MinLen || tl < hl {
		return ErrBadLength
	}
	end := off + tl
	if end > len(data) {
		return ErrTruncated
	}
	l.IPVersion = 4
	l.End = uint32(end)
	flags := FlagIPv4
	if end < len(data) {
		flags |= FlagTrailer
	}
	if hl > IPv4MinLen {
		flags |= FlagIPv4Options
	}
	data = data[:end]
	nh := h[ipv4Protocol]
	off += hl
	l.L4 = uint16(off)
	l.Proto = nh
	if ff := binary.BigEndian.Uint16(h[ipv4FlagsFrag : ipv4FlagsFrag+2]); ff&0x3fff != 0 {
		flags |= FlagFragment
		if ff&0x1fff != 0 {
			l.Flags = flags | FlagLaterFragment
			return nil
		}
	}
	if nh == ProtocolAH {
		if len(data)-off < AHMinLen {
			l.Flags = flags
			return ErrTruncated
		}
		e := data[off : off+AHMinLen]
		ahl := (int(e[1]) + 2) << 2
		if ahl < AHMinLen {
			l.Flags = flags
			return ErrBadLength
		}
		if ahl > len(data)-off {
			l.Flags = flags
			return ErrExtTooLong
		}
		l.AH = uint16(off)
		l.NumExt = 1
		off += ahl
		nh = e[0]
		l.L4 = uint16(off)
		l.Proto = nh
	}
	switch nh {
	case ProtocolESP:
		if len(data)-off < ESPMinLen {
			l.Flags = flags
			return ErrTruncated
		}
		l.ESP = uint16(off)
		flags |= FlagESP
	case ProtocolUDP:
		if err := checkUDP(data, off); err != nil {
			l.Flags = flags
			return err
		}
		flags |= FlagUDP
	}
	l.Flags = flags
	return nil
}

// Layers is the parse record in p's Scratch area. It is meaningful only while
// LayersValid; ParseLayers fills it.
func (p *Packet) Layers() *Layers { return (*Layers)(unsafe.Pointer(&p.Scratch)) }

// LayersValid reports whether Layers holds a parse of the current data. Any
// change of the data window (Prepend, Adj, Append, Trim, InsertGap, RemoveGap,
// SetWindow) ends it; a stage that moves headers some other way calls
// InvalidateLayers.
func (p *Packet) LayersValid() bool { return p.flags&FlagLayers != 0 }

// InvalidateLayers marks Layers stale.
func (p *Packet) InvalidateLayers() { p.flags &^= FlagLayers }

// ParseLayers returns the packet's parse record, parsing its data from the
// Ethernet header first unless a valid record is there already.
func (p *Packet) ParseLayers() (*Layers, error) {
	l := p.Layers()
	if p.flags&FlagLayers != 0 {
		return l, nil
	}
	if err := Parse(p.Data(), l); err != nil {
		return l, err
	}
	// What stages left after a parse record is about that record's packet;
	// a buffer keeps it from the packet it held before.
	clear(p.Scratch[LayersSize:])
	p.flags |= FlagLayers
	return l, nil
}
