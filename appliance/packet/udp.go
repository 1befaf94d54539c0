package packet

import "encoding/binary"

// UDP is a UDP header and its payload (RFC 768):
//
//	 0      7 8     15 16    23 24    31
//	+--------+--------+--------+--------+
//	|     Source      |   Destination   |
//	|      Port       |      Port       |
//	+--------+--------+--------+--------+
//	|                 |                 |
//	|     Length      |    Checksum     |
//	+--------+--------+--------+--------+
//	|
//	|          data octets ...
//	+---------------- ...
//
// Validate it once; the other accessors then read without checks.
type UDP []byte

// UDPLen is the UDP header's length.
const UDPLen = 8

// Validate checks the header and that Length is at least UDPLen and at most
// len(b). Bytes past Length are allowed.
func (b UDP) Validate() error {
	if len(b) < UDPLen {
		return ErrTruncated
	}
	l := int(b.Length())
	if l < UDPLen {
		return ErrBadLength
	}
	if l > len(b) {
		return ErrTruncated
	}
	return nil
}

// IsValid reports whether Validate finds no fault.
func (b UDP) IsValid() bool { return b.Validate() == nil }

// SrcPort is the source port.
func (b UDP) SrcPort() uint16 { return binary.BigEndian.Uint16(b[0:]) }

// DstPort is the destination port.
func (b UDP) DstPort() uint16 { return binary.BigEndian.Uint16(b[2:]) }

// Length is the length of header and data.
func (b UDP) Length() uint16 { return binary.BigEndian.Uint16(b[4:]) }

// Checksum is the Checksum field.
func (b UDP) Checksum() uint16 { return binary.BigEndian.Uint16(b[6:]) }

// Payload is the data, up to Length.
func (b UDP) Payload() []byte { return b[UDPLen:b.Length()] }

// SetSrcPort sets the source port.
func (b UDP) SetSrcPort(v uint16) { binary.BigEndian.PutUint16(b[0:], v) }

// SetDstPort sets the destination port.
func (b UDP) SetDstPort(v uint16) { binary.BigEndian.PutUint16(b[2:], v) }

// SetLength sets the length.
func (b UDP) SetLength(v uint16) { binary.BigEndian.PutUint16(b[4:], v) }

// SetChecksum sets the Checksum field.
func (b UDP) SetChecksum(v uint16) { binary.BigEndian.PutUint16(b[6:], v) }

// CalculateChecksum is the checksum the datagram should carry, given the sum of
// its pseudo-header (PseudoHeaderChecksum): the complemented sum over the first
// Length bytes, the checksum field taken as zero. A computed zero is sent as
// 0xFFFF (RFC 768), since zero means "no checksum".
func (b UDP) CalculateChecksum(pseudo uint16) uint16 {
	s := Checksum(b[:6], pseudo)
	s = Checksum(b[UDPLen:b.Length()], s)
	if c := ^s; c != 0 {
		return c
	}
	return 0xffff
}

// IsChecksumValid reports whether the checksum is right, given the pseudo-header
// sum. A zero checksum is not valid here: IPv4 callers that accept "no checksum"
// test for it first.
func (b UDP) IsChecksumValid(pseudo uint16) bool {
	return b.Checksum() != 0 && Checksum(b[:b.Length()], pseudo) == 0xffff
}

// ChecksumIPv6 is CalculateChecksum with the IPv6 pseudo-header of src and dst.
func (b UDP) ChecksumIPv6(src, dst [16]byte) uint16 {
	return b.CalculateChecksum(PseudoHeaderChecksum(ProtocolUDP, src[:], dst[:], uint32(b.Length())))
}

// ChecksumIPv4 is CalculateChecksum with the IPv4 pseudo-header of src and dst.
func (b UDP) ChecksumIPv4(src, dst [4]byte) uint16 {
	return b.CalculateChecksum(PseudoHeaderChecksum(ProtocolUDP, src[:], dst[:], uint32(b.Length())))
}

// UDPFields are the fields of a UDP header, for Encode.
type UDPFields struct {
	SrcPort, DstPort, Length, Checksum uint16
}

// Fields returns the header's fields.
func (b UDP) Fields() UDPFields {
	return UDPFields{SrcPort: b.SrcPort(), DstPort: b.DstPort(), Length: b.Length(), Checksum: b.Checksum()}
}

// Encode writes f into b, which is at least UDPLen bytes.
func (b UDP) Encode(f *UDPFields) {
	_ = b[UDPLen-1]
	b.SetSrcPort(f.SrcPort)
	b.SetDstPort(f.DstPort)
	b.SetLength(f.Length)
	b.SetChecksum(f.Checksum)
}
