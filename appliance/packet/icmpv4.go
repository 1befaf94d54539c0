package packet

import "encoding/binary"

// ICMPv4 is an ICMP message for IPv4 (RFC 792), from its Type field to the end of
// the IP payload:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|     Type      |     Code      |          Checksum             |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|   Identifier / unused / Pointer / Gateway / Next-Hop MTU      |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|     Data: echo data, or the invoking IP header and 8+ bytes ...
//	+-+-+-+-+-+-+-+-+-+-+-+-+-
//
// Unlike ICMPv6, the checksum covers the message only, with no pseudo-header.
//
// Validate it once; the other accessors then read without checks.
type ICMPv4 []byte

// ICMPv4 sizes, types and codes.
const (
	ICMPv4MinLen = 8

	ICMPv4EchoReply      = 0
	ICMPv4DstUnreachable = 3
	ICMPv4Redirect       = 5
	ICMPv4Echo           = 8
	ICMPv4TimeExceeded   = 11
	ICMPv4ParamProblem   = 12

	// Destination Unreachable codes (RFC 792, RFC 1812 §5.2.7.1).
	ICMPv4NetUnreachable  = 0
	ICMPv4HostUnreachable = 1
	ICMPv4PortUnreachable = 3
	ICMPv4FragNeeded      = 4 // with the next-hop MTU (RFC 1191)

	// Time Exceeded codes.
	ICMPv4TTLExceeded = 0
)

// Validate checks that b holds the header and its second word.
func (b ICMPv4) Validate() error {
	if len(b) < ICMPv4MinLen {
		return ErrTruncated
	}
	return nil
}

// IsValid reports whether Validate finds no fault.
func (b ICMPv4) IsValid() bool { return b.Validate() == nil }

// Type is the message type.
func (b ICMPv4) Type() uint8 { return b[icmpType] }

// Code is the message code.
func (b ICMPv4) Code() uint8 { return b[icmpCode] }

// Checksum is the Checksum field.
func (b ICMPv4) Checksum() uint16 { return binary.BigEndian.Uint16(b[icmpChecksum:]) }

// IsError reports whether the type is an error (Destination Unreachable,
// Source Quench, Redirect, Time Exceeded, Parameter Problem), which no error
// may answer (RFC 1812 §4.3.2.7).
func (b ICMPv4) IsError() bool {
	switch b[icmpType] {
	case ICMPv4DstUnreachable, 4, ICMPv4Redirect, ICMPv4TimeExceeded, ICMPv4ParamProblem:
		return true
	}
	return false
}

// Rest is the second word, whatever it means for the type.
func (b ICMPv4) Rest() uint32 { return binary.BigEndian.Uint32(b[icmpRest:]) }

// Ident is an Echo message's Identifier.
func (b ICMPv4) Ident() uint16 { return binary.BigEndian.Uint16(b[icmpRest:]) }

// Seq is an Echo message's Sequence Number.
func (b ICMPv4) Seq() uint16 { return binary.BigEndian.Uint16(b[icmpRest+2:]) }

// NextHopMTU is a Fragmentation Needed message's Next-Hop MTU (RFC 1191 §4).
func (b ICMPv4) NextHopMTU() uint16 { return binary.BigEndian.Uint16(b[icmpRest+2:]) }

// Payload is what follows the second word.
func (b ICMPv4) Payload() []byte { return b[ICMPv4MinLen:] }

// SetType sets the type.
func (b ICMPv4) SetType(v uint8) { b[icmpType] = v }

// SetCode sets the code.
func (b ICMPv4) SetCode(v uint8) { b[icmpCode] = v }

// SetChecksum sets the Checksum field.
func (b ICMPv4) SetChecksum(v uint16) { binary.BigEndian.PutUint16(b[icmpChecksum:], v) }

// SetRest sets the second word.
func (b ICMPv4) SetRest(v uint32) { binary.BigEndian.PutUint32(b[icmpRest:], v) }

// CalculateChecksum is the checksum the message should carry: the complemented
// sum of the whole message, the checksum field taken as zero.
func (b ICMPv4) CalculateChecksum() uint16 {
	s := Checksum(b[:icmpChecksum], 0)
	s = Checksum(b[icmpRest:], s)
	return ^s
}

// IsChecksumValid reports whether the checksum is right.
func (b ICMPv4) IsChecksumValid() bool { return Checksum(b, 0) == 0xffff }

// SetTypeUpdate changes the type and patches the checksum incrementally (RFC
// 1624): an Echo becomes an Echo Reply in place. Eqn. 3 gives 0x0000 where the
// message is all zeros and the checksum must be 0xFFFF (an Echo Reply with
// zero identifier and sequence and no data); that case is summed afresh.
func (b ICMPv4) SetTypeUpdate(v uint8) {
	old := binary.BigEndian.Uint16(b[icmpType:])
	b[icmpType] = v
	c := ChecksumUpdate16(b.Checksum(), old, binary.BigEndian.Uint16(b[icmpType:]))
	if c == 0 {
		c = b.CalculateChecksum()
	}
	b.SetChecksum(c)
}

// ICMPv4Fields are the fields of an ICMP header and its second word, for Encode.
type ICMPv4Fields struct {
	Type, Code uint8
	Checksum   uint16
	Rest       uint32
}

// Fields returns the header's fields.
func (b ICMPv4) Fields() ICMPv4Fields {
	return ICMPv4Fields{Type: b.Type(), Code: b.Code(), Checksum: b.Checksum(), Rest: b.Rest()}
}

// Encode writes f into b, which is at least ICMPv4MinLen bytes.
func (b ICMPv4) Encode(f *ICMPv4Fields) {
	_ = b[ICMPv4MinLen-1]
	b[icmpType] = f.Type
	b[icmpCode] = f.Code
	b.SetChecksum(f.Checksum)
	b.SetRest(f.Rest)
}
