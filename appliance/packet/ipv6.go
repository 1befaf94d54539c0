package packet

import (
	"encoding/binary"
	"net/netip"
)

// IPv6 is the fixed IPv6 header (RFC 8200 §3):
//
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|Version| Traffic Class |           Flow Label                  |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|         Payload Length        |  Next Header  |   Hop Limit   |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                                                               |
//	+                                                               +
//	|                                                               |
//	+                         Source Address                        +
//	|                                                               |
//	+                                                               +
//	|                                                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                                                               |
//	+                                                               +
//	|                                                               |
//	+                      Destination Address                      +
//	|                                                               |
//	+                                                               +
//	|                                                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// Validate it once; the other accessors then read without checks.
type IPv6 []byte

// IPv6 sizes and offsets.
const (
	IPv6Len = 40 // the fixed header

	ipv6VersTCFL  = 0
	ipv6PayLen    = 4
	ipv6NextHdr   = 6
	ipv6HopLimit  = 7
	ipv6Src       = 8
	ipv6Dst       = 24
	ipv6AddrLen   = 16
	ipv6FlowLabel = 0x000fffff
)

// Validate checks the version and the payload length against len(b). Bytes after
// the payload (Ethernet padding) are allowed. A zero payload length, which a
// jumbogram (RFC 2675) carries, is taken at its word.
func (b IPv6) Validate() error {
	if len(b) < IPv6Len {
		return ErrTruncated
	}
	if b[0]>>4 != 6 {
		return ErrBadVersion
	}
	if IPv6Len+int(b.PayloadLength()) > len(b) {
		return ErrTruncated
	}
	return nil
}

// IsValid reports whether Validate finds no fault.
func (b IPv6) IsValid() bool { return b.Validate() == nil }

// Version is the IP version field.
func (b IPv6) Version() uint8 { return b[0] >> 4 }

// TrafficClass is the Traffic Class (DSCP and ECN).
func (b IPv6) TrafficClass() uint8 {
	return uint8(binary.BigEndian.Uint16(b[ipv6VersTCFL:]) >> 4)
}

// FlowLabel is the 20-bit Flow Label.
func (b IPv6) FlowLabel() uint32 {
	return binary.BigEndian.Uint32(b[ipv6VersTCFL:]) & ipv6FlowLabel
}

// PayloadLength is the length of everything after the fixed header.
func (b IPv6) PayloadLength() uint16 { return binary.BigEndian.Uint16(b[ipv6PayLen:]) }

// NextHeader is the type of the header after the fixed header.
func (b IPv6) NextHeader() uint8 { return b[ipv6NextHdr] }

// HopLimit is the Hop Limit.
func (b IPv6) HopLimit() uint8 { return b[ipv6HopLimit] }

// Src is the source address.
func (b IPv6) Src() [16]byte { return [16]byte(b[ipv6Src : ipv6Src+ipv6AddrLen]) }

// Dst is the destination address.
func (b IPv6) Dst() [16]byte { return [16]byte(b[ipv6Dst : ipv6Dst+ipv6AddrLen]) }

// SrcAddr is the source address as a netip.Addr.
func (b IPv6) SrcAddr() netip.Addr { return netip.AddrFrom16(b.Src()) }

// DstAddr is the destination address as a netip.Addr.
func (b IPv6) DstAddr() netip.Addr { return netip.AddrFrom16(b.Dst()) }

// Payload is the data after the fixed header, up to PayloadLength.
func (b IPv6) Payload() []byte { return b[IPv6Len : IPv6Len+int(b.PayloadLength())] }

// SetTrafficClass sets the Traffic Class.
func (b IPv6) SetTrafficClass(v uint8) {
	w := binary.BigEndian.Uint32(b[ipv6VersTCFL:])
	binary.BigEndian.PutUint32(b[ipv6VersTCFL:], w&^0x0ff00000|uint32(v)<<20)
}

// SetFlowLabel sets the Flow Label (its low 20 bits).
func (b IPv6) SetFlowLabel(v uint32) {
	w := binary.BigEndian.Uint32(b[ipv6VersTCFL:])
	binary.BigEndian.PutUint32(b[ipv6VersTCFL:], w&^ipv6FlowLabel|v&ipv6FlowLabel)
}

// SetPayloadLength sets the payload length.
func (b IPv6) SetPayloadLength(v uint16) { binary.BigEndian.PutUint16(b[ipv6PayLen:], v) }

// SetNextHeader sets the next header type.
func (b IPv6) SetNextHeader(v uint8) { b[ipv6NextHdr] = v }

// SetHopLimit sets the Hop Limit.
func (b IPv6) SetHopLimit(v uint8) { b[ipv6HopLimit] = v }

// SetSrc sets the source address.
func (b IPv6) SetSrc(a [16]byte) { copy(b[ipv6Src:ipv6Src+ipv6AddrLen], a[:]) }

// SetDst sets the destination address.
func (b IPv6) SetDst(a [16]byte) { copy(b[ipv6Dst:ipv6Dst+ipv6AddrLen], a[:]) }

// IPv6Fields are the fields of the fixed IPv6 header, for Encode.
type IPv6Fields struct {
	TrafficClass  uint8
	FlowLabel     uint32
	PayloadLength uint16
	NextHeader    uint8
	HopLimit      uint8
	Src, Dst      [16]byte
}

// Fields returns the header's fields.
func (b IPv6) Fields() IPv6Fields {
	return IPv6Fields{
		TrafficClass: b.TrafficClass(), FlowLabel: b.FlowLabel(),
		PayloadLength: b.PayloadLength(), NextHeader: b.NextHeader(),
		HopLimit: b.HopLimit(), Src: b.Src(), Dst: b.Dst(),
	}
}

// Encode writes f into b, which is at least IPv6Len bytes.
func (b IPv6) Encode(f *IPv6Fields) {
	_ = b[IPv6Len-1]
	binary.BigEndian.PutUint32(b[ipv6VersTCFL:], 6<<28|uint32(f.TrafficClass)<<20|f.FlowLabel&ipv6FlowLabel)
	b.SetPayloadLength(f.PayloadLength)
	b.SetNextHeader(f.NextHeader)
	b.SetHopLimit(f.HopLimit)
	b.SetSrc(f.Src)
	b.SetDst(f.Dst)
}
