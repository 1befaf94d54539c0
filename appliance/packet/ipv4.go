package packet

import (
	"encoding/binary"
	"net/netip"
)

// IPv4 is an IPv4 header (RFC 791 §3.1):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|Version|  IHL  |Type of Service|          Total Length         |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|         Identification        |Flags|      Fragment Offset    |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  Time to Live |    Protocol   |         Header Checksum       |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                       Source Address                          |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                    Destination Address                        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                    Options                    |    Padding    |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// Validate it once; the other accessors then read without checks.
type IPv4 []byte

// IPv4 sizes, offsets and flags.
const (
	IPv4MinLen = 20
	IPv4MaxLen = 60 // IHL 15

	ipv4VersIHL   = 0
	ipv4TOS       = 1
	ipv4TotalLen  = 2
	ipv4ID        = 4
	ipv4FlagsFrag = 6
	ipv4TTL       = 8
	ipv4Protocol  = 9
	ipv4Checksum  = 10
	ipv4Src       = 12
	ipv4Dst       = 16

	IPv4FlagMoreFragments = 1 << 0 // in the 3-bit Flags field
	IPv4FlagDontFragment  = 1 << 1
)

// Validate checks the version, the IHL and the total length against len(b).
// Bytes after the total length (Ethernet padding) are allowed.
func (b IPv4) Validate() error {
	if len(b) < IPv4MinLen {
		return ErrTruncated
	}
	if b[0]>>4 != 4 {
		return ErrBadVersion
	}
	hl := b.HeaderLen()
	if hl < IPv4MinLen {
		return ErrBadLength
	}
	tl := int(b.TotalLength())
	if tl < hl {
		return ErrBadLength
	}
	if tl > len(b) {
		return ErrTruncated
	}
	return nil
}

// IsValid reports whether Validate finds no fault.
func (b IPv4) IsValid() bool { return b.Validate() == nil }

// Version is the IP version field.
func (b IPv4) Version() uint8 { return b[ipv4VersIHL] >> 4 }

// HeaderLen is the header length in bytes (IHL × 4).
func (b IPv4) HeaderLen() int { return int(b[ipv4VersIHL]&0xf) * 4 }

// TOS is the Type of Service byte (DSCP and ECN).
func (b IPv4) TOS() uint8 { return b[ipv4TOS] }

// TotalLength is the length of header and payload.
func (b IPv4) TotalLength() uint16 { return binary.BigEndian.Uint16(b[ipv4TotalLen:]) }

// ID is the Identification field.
func (b IPv4) ID() uint16 { return binary.BigEndian.Uint16(b[ipv4ID:]) }

// Flags is the 3-bit Flags field.
func (b IPv4) Flags() uint8 { return b[ipv4FlagsFrag] >> 5 }

// FragmentOffset is the fragment's offset in bytes.
func (b IPv4) FragmentOffset() uint16 {
	return binary.BigEndian.Uint16(b[ipv4FlagsFrag:]) << 3
}

// More reports the More Fragments flag.
func (b IPv4) More() bool { return b.Flags()&IPv4FlagMoreFragments != 0 }

// TTL is the Time to Live.
func (b IPv4) TTL() uint8 { return b[ipv4TTL] }

// Protocol is the upper-layer protocol number.
func (b IPv4) Protocol() uint8 { return b[ipv4Protocol] }

// Checksum is the Header Checksum field.
func (b IPv4) Checksum() uint16 { return binary.BigEndian.Uint16(b[ipv4Checksum:]) }

// Src is the source address.
func (b IPv4) Src() [4]byte { return [4]byte(b[ipv4Src : ipv4Src+4]) }

// Dst is the destination address.
func (b IPv4) Dst() [4]byte { return [4]byte(b[ipv4Dst : ipv4Dst+4]) }

// SrcAddr is the source address as a netip.Addr.
func (b IPv4) SrcAddr() netip.Addr { return netip.AddrFrom4(b.Src()) }

// DstAddr is the destination address as a netip.Addr.
func (b IPv4) DstAddr() netip.Addr { return netip.AddrFrom4(b.Dst()) }

// Options are the bytes between the fixed header and HeaderLen.
func (b IPv4) Options() []byte { return b[IPv4MinLen:b.HeaderLen()] }

// Payload is the data after the header, up to TotalLength.
func (b IPv4) Payload() []byte { return b[b.HeaderLen():b.TotalLength()] }

// SetTOS sets the Type of Service byte.
func (b IPv4) SetTOS(v uint8) { b[ipv4TOS] = v }

// SetTotalLength sets the total length.
func (b IPv4) SetTotalLength(v uint16) { binary.BigEndian.PutUint16(b[ipv4TotalLen:], v) }

// SetID sets the Identification field.
func (b IPv4) SetID(v uint16) { binary.BigEndian.PutUint16(b[ipv4ID:], v) }

// SetFlagsFragmentOffset sets the 3-bit flags and the offset in bytes (a multiple
// of 8).
func (b IPv4) SetFlagsFragmentOffset(flags uint8, offset uint16) {
	binary.BigEndian.PutUint16(b[ipv4FlagsFrag:], uint16(flags)<<13|offset>>3)
}

// SetTTL sets the Time to Live.
func (b IPv4) SetTTL(v uint8) { b[ipv4TTL] = v }

// SetProtocol sets the protocol number.
func (b IPv4) SetProtocol(v uint8) { b[ipv4Protocol] = v }

// SetChecksum sets the Header Checksum field.
func (b IPv4) SetChecksum(v uint16) { binary.BigEndian.PutUint16(b[ipv4Checksum:], v) }

// SetSrc sets the source address.
func (b IPv4) SetSrc(a [4]byte) { copy(b[ipv4Src:ipv4Src+4], a[:]) }

// SetDst sets the destination address.
func (b IPv4) SetDst(a [4]byte) { copy(b[ipv4Dst:ipv4Dst+4], a[:]) }

// CalculateChecksum is the header checksum the header should carry, computed over
// HeaderLen bytes with the checksum field taken as zero.
func (b IPv4) CalculateChecksum() uint16 {
	hl := b.HeaderLen()
	s := Checksum(b[:ipv4Checksum], 0)
	s = Checksum(b[ipv4Checksum+2:hl], s)
	return ^s
}

// IsChecksumValid reports whether the header checksum is right.
func (b IPv4) IsChecksumValid() bool { return Checksum(b[:b.HeaderLen()], 0) == 0xffff }

// DecTTL decrements the TTL and patches the checksum incrementally (RFC 1624),
// as a router does. It returns the new TTL; a TTL of 0 stays 0.
func (b IPv4) DecTTL() uint8 {
	t := b[ipv4TTL]
	if t == 0 {
		return 0
	}
	old := binary.BigEndian.Uint16(b[ipv4TTL:])
	b[ipv4TTL] = t - 1
	b.SetChecksum(ChecksumUpdate16(b.Checksum(), old, binary.BigEndian.Uint16(b[ipv4TTL:])))
	return t - 1
}

// IPv4Fields are the fields of an IPv4 header, for Encode.
type IPv4Fields struct {
	TOS            uint8
	TotalLength    uint16
	ID             uint16
	Flags          uint8
	FragmentOffset uint16 // bytes, a multiple of 8
	TTL            uint8
	Protocol       uint8
	Checksum       uint16
	Src, Dst       [4]byte
	Options        []byte // up to 40 bytes, padded with zeros to 4-byte units
}

// HeaderLen is the length Encode writes.
func (f *IPv4Fields) HeaderLen() int { return IPv4MinLen + (len(f.Options)+3)&^3 }

// Fields returns the header's fields. Options alias b.
func (b IPv4) Fields() IPv4Fields {
	return IPv4Fields{
		TOS: b.TOS(), TotalLength: b.TotalLength(), ID: b.ID(), Flags: b.Flags(),
		FragmentOffset: b.FragmentOffset(), TTL: b.TTL(), Protocol: b.Protocol(),
		Checksum: b.Checksum(), Src: b.Src(), Dst: b.Dst(), Options: b.Options(),
	}
}

// Encode writes f into b, which is at least f.HeaderLen() bytes. It writes the
// checksum given; use SetChecksum(CalculateChecksum()) for a fresh one. Options
// longer than 40 bytes are ErrBadLength.
func (b IPv4) Encode(f *IPv4Fields) error {
	hl := f.HeaderLen()
	if hl > IPv4MaxLen {
		return ErrBadLength
	}
	if len(b) < hl {
		return ErrNoSpace
	}
	b[ipv4VersIHL] = 4<<4 | uint8(hl/4)
	b.SetTOS(f.TOS)
	b.SetTotalLength(f.TotalLength)
	b.SetID(f.ID)
	b.SetFlagsFragmentOffset(f.Flags, f.FragmentOffset)
	b.SetTTL(f.TTL)
	b.SetProtocol(f.Protocol)
	b.SetChecksum(f.Checksum)
	b.SetSrc(f.Src)
	b.SetDst(f.Dst)
	n := copy(b[IPv4MinLen:hl], f.Options)
	clear(b[IPv4MinLen+n : hl])
	return nil
}
