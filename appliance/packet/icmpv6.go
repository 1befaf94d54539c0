package packet

import "encoding/binary"

// ICMPv6 is an ICMPv6 message (RFC 4443 §2.1), from its Type field to the end
// of the IPv6 payload:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|     Type      |     Code      |          Checksum             |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                                                               |
//	+                         Message Body                          +
//	|                                                               |
//
// Every message type linerate handles has at least one 32-bit word of body:
// Unused, MTU or Pointer for errors (§3), Identifier and Sequence Number for
// Echo (§4), Reserved or flags for NDP (RFC 4861 §4). Its meaning depends on
// the type; the accessors name each use.
//
// Validate it once; the other accessors then read without checks.
type ICMPv6 []byte

// ICMPv6 sizes and types (IANA "ICMPv6 Parameters").
const (
	ICMPv6MinLen = 8 // the header and the first word of the body

	// ICMPv6ErrorMaxLen is the largest error message body (header included)
	// that keeps the whole error within the IPv6 minimum MTU (RFC 4443 §2.4 (c)).
	ICMPv6ErrorMaxLen = 1280 - IPv6Len

	ICMPv6DstUnreachable  = 1
	ICMPv6PacketTooBig    = 2
	ICMPv6TimeExceeded    = 3
	ICMPv6ParamProblem    = 4
	ICMPv6EchoRequest     = 128
	ICMPv6EchoReply       = 129
	ICMPv6RouterSolicit   = 133
	ICMPv6RouterAdvert    = 134
	ICMPv6NeighborSolicit = 135
	ICMPv6NeighborAdvert  = 136
	ICMPv6Redirect        = 137

	// Destination Unreachable codes (§3.1).
	ICMPv6NoRoute            = 0
	ICMPv6AdminProhibited    = 1
	ICMPv6BeyondScope        = 2
	ICMPv6AddressUnreachable = 3
	ICMPv6PortUnreachable    = 4

	// Time Exceeded codes (§3.3).
	ICMPv6HopLimitExceeded  = 0
	ICMPv6ReassemblyTimeout = 1

	icmpType     = 0
	icmpCode     = 1
	icmpChecksum = 2
	icmpRest     = 4
)

// Validate checks that b holds the header and the first word of the body.
func (b ICMPv6) Validate() error {
	if len(b) < ICMPv6MinLen {
		return ErrTruncated
	}
	return nil
}

// IsValid reports whether Validate finds no fault.
func (b ICMPv6) IsValid() bool { return b.Validate() == nil }

// Type is the message type.
func (b ICMPv6) Type() uint8 { return b[icmpType] }

// Code is the message code.
func (b ICMPv6) Code() uint8 { return b[icmpCode] }

// Checksum is the Checksum field.
func (b ICMPv6) Checksum() uint16 { return binary.BigEndian.Uint16(b[icmpChecksum:]) }

// IsError reports whether the type is an error message (RFC 4443 §2.1: the
// high-order bit of the type is zero).
func (b ICMPv6) IsError() bool { return b[icmpType] < 128 }

// Rest is the first word of the body, whatever it means for the type.
func (b ICMPv6) Rest() uint32 { return binary.BigEndian.Uint32(b[icmpRest:]) }

// Ident is an Echo message's Identifier.
func (b ICMPv6) Ident() uint16 { return binary.BigEndian.Uint16(b[icmpRest:]) }

// Seq is an Echo message's Sequence Number.
func (b ICMPv6) Seq() uint16 { return binary.BigEndian.Uint16(b[icmpRest+2:]) }

// MTU is a Packet Too Big message's MTU.
func (b ICMPv6) MTU() uint32 { return b.Rest() }

// Pointer is a Parameter Problem message's Pointer.
func (b ICMPv6) Pointer() uint32 { return b.Rest() }

// Payload is what follows the first word: an Echo's data, or as much of the
// invoking packet as an error carries.
func (b ICMPv6) Payload() []byte { return b[ICMPv6MinLen:] }

// SetType sets the type.
func (b ICMPv6) SetType(v uint8) { b[icmpType] = v }

// SetCode sets the code.
func (b ICMPv6) SetCode(v uint8) { b[icmpCode] = v }

// SetChecksum sets the Checksum field.
func (b ICMPv6) SetChecksum(v uint16) { binary.BigEndian.PutUint16(b[icmpChecksum:], v) }

// SetRest sets the first word of the body (Unused, MTU, Pointer).
func (b ICMPv6) SetRest(v uint32) { binary.BigEndian.PutUint32(b[icmpRest:], v) }

// SetIdent sets an Echo message's Identifier.
func (b ICMPv6) SetIdent(v uint16) { binary.BigEndian.PutUint16(b[icmpRest:], v) }

// SetSeq sets an Echo message's Sequence Number.
func (b ICMPv6) SetSeq(v uint16) { binary.BigEndian.PutUint16(b[icmpRest+2:], v) }

// CalculateChecksum is the checksum the message should carry between src and
// dst: the complemented sum of the IPv6 pseudo-header (RFC 8200 §8.1) and of
// the whole message, the checksum field taken as zero.
func (b ICMPv6) CalculateChecksum(src, dst [16]byte) uint16 {
	s := PseudoHeaderChecksum(ProtocolICMPv6, src[:], dst[:], uint32(len(b)))
	s = Checksum(b[:icmpChecksum], s)
	s = Checksum(b[icmpRest:], s)
	return ^s
}

// IsChecksumValid reports whether the checksum is right between src and dst.
func (b ICMPv6) IsChecksumValid(src, dst [16]byte) bool {
	s := PseudoHeaderChecksum(ProtocolICMPv6, src[:], dst[:], uint32(len(b)))
	return Checksum(b, s) == 0xffff
}

// SetTypeUpdate changes the type and patches the checksum incrementally (RFC
// 1624), as turning an Echo Request into a Reply in place does. The pseudo-header
// is unchanged when the addresses are only swapped.
func (b ICMPv6) SetTypeUpdate(v uint8) {
	old := binary.BigEndian.Uint16(b[icmpType:])
	b[icmpType] = v
	b.SetChecksum(ChecksumUpdate16(b.Checksum(), old, binary.BigEndian.Uint16(b[icmpType:])))
}

// ICMPv6Fields are the fields of an ICMPv6 header and its first body word, for
// Encode.
type ICMPv6Fields struct {
	Type, Code uint8
	Checksum   uint16
	Rest       uint32
}

// Fields returns the header's fields.
func (b ICMPv6) Fields() ICMPv6Fields {
	return ICMPv6Fields{Type: b.Type(), Code: b.Code(), Checksum: b.Checksum(), Rest: b.Rest()}
}

// Encode writes f into b, which is at least ICMPv6MinLen bytes.
func (b ICMPv6) Encode(f *ICMPv6Fields) {
	_ = b[ICMPv6MinLen-1]
	b[icmpType] = f.Type
	b[icmpCode] = f.Code
	b.SetChecksum(f.Checksum)
	b.SetRest(f.Rest)
}

// SolicitedNode is the solicited-node multicast address of a (RFC 4291 §2.7.1):
// ff02::1:ffXX:XXXX with a's low 24 bits.
func SolicitedNode(a [16]byte) [16]byte {
	return [16]byte{0xff, 0x02, 10: 0, 11: 1, 12: 0xff, 13: a[13], 14: a[14], 15: a[15]}
}

// MulticastMAC is the Ethernet address an IPv6 multicast address maps to
// (RFC 2464 §7): 33:33 and the address's low 32 bits.
func MulticastMAC(a [16]byte) MAC { return MAC{0x33, 0x33, a[12], a[13], a[14], a[15]} }

// AllNodes is ff02::1, the link-local all-nodes multicast address.
var AllNodes = [16]byte{0xff, 0x02, 15: 1}

// BroadcastMAC is ff:ff:ff:ff:ff:ff.
var BroadcastMAC = MAC{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
