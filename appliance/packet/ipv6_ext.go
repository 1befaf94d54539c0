package packet

import "encoding/binary"

// IP protocol numbers and IPv6 extension header types (IANA "Assigned Internet
// Protocol Numbers").
const (
	ProtocolHopByHop = 0
	ProtocolICMP     = 1
	ProtocolIPv4     = 4 // IPv4 encapsulation
	ProtocolTCP      = 6
	ProtocolUDP      = 17
	ProtocolIPv6     = 41 // IPv6 encapsulation
	ProtocolRouting  = 43
	ProtocolFragment = 44
	ProtocolESP      = 50
	ProtocolAH       = 51
	ProtocolICMPv6   = 58
	ProtocolNoNext   = 59
	ProtocolDestOpts = 60
)

// ipv6ExtMaxLen is the longest header the 8-bit Hdr Ext Len can describe.
const ipv6ExtMaxLen = (255 + 1) * 8

// IPv6Options is a Hop-by-Hop Options or Destination Options header (RFC 8200
// §4.3, §4.6):
//
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  Next Header  |  Hdr Ext Len  |                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+                               +
//	|                                                               |
//	.                                                               .
//	.                            Options                            .
//	.                                                               .
//	|                                                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// Its length is (Hdr Ext Len + 1) × 8 bytes. The options are TLVs (§4.2), but for
// Pad1, a single zero byte.
type IPv6Options []byte

// IPv6 option types with a meaning here (RFC 8200 §4.2).
const (
	IPv6OptPad1 = 0
	IPv6OptPadN = 1
)

// Validate checks that b holds the whole header and that its options are
// well-formed TLVs that end exactly at the header's end.
func (b IPv6Options) Validate() error {
	if len(b) < 8 {
		return ErrTruncated
	}
	if b.Len() > len(b) {
		return ErrExtTooLong
	}
	it := b.Options()
	for {
		if _, ok := it.Next(); !ok {
			return it.Err()
		}
	}
}

// NextHeader is the type of the next header.
func (b IPv6Options) NextHeader() uint8 { return b[0] }

// SetNextHeader sets the type of the next header.
func (b IPv6Options) SetNextHeader(v uint8) { b[0] = v }

// HdrExtLen is the Hdr Ext Len field: the length in 8-byte units, less one.
func (b IPv6Options) HdrExtLen() uint8 { return b[1] }

// Len is the header's length in bytes.
func (b IPv6Options) Len() int { return (int(b[1]) + 1) * 8 }

// Options iterates over the options, padding included.
func (b IPv6Options) Options() IPv6OptionIter {
	return IPv6OptionIter{b: b[:b.Len()], off: 2}
}

// IPv6Option is one option of a Hop-by-Hop or Destination Options header.
type IPv6Option struct {
	Type uint8
	Data []byte // nil for Pad1; aliases the packet when it comes from an iterator
}

// Len is the option's encoded length.
func (o IPv6Option) Len() int {
	if o.Type == IPv6OptPad1 {
		return 1
	}
	return 2 + len(o.Data)
}

// Action is what a node that does not know the option must do: the two high-order
// bits of its type (RFC 8200 §4.2): 0 skip, 1 discard, 2 discard and send ICMP,
// 3 discard and send ICMP unless multicast.
func (o IPv6Option) Action() uint8 { return o.Type >> 6 }

// MayChange reports whether the option's data may change en route (RFC 8200 §4.2).
func (o IPv6Option) MayChange() bool { return o.Type&0x20 != 0 }

// IsPadding reports whether the option is Pad1 or PadN.
func (o IPv6Option) IsPadding() bool { return o.Type == IPv6OptPad1 || o.Type == IPv6OptPadN }

// IPv6OptionIter walks the options of a Hop-by-Hop or Destination Options header.
type IPv6OptionIter struct {
	b    []byte
	off  int // of the next option
	last int // of the option Next last returned
	err  error
}

// Next returns the next option. It returns false at the end, and when an option
// runs past the header's end, in which case Err says so.
func (it *IPv6OptionIter) Next() (IPv6Option, bool) {
	if it.off >= len(it.b) || it.err != nil {
		return IPv6Option{}, false
	}
	it.last = it.off
	t := it.b[it.off]
	if t == IPv6OptPad1 {
		it.off++
		return IPv6Option{Type: t}, true
	}
	if it.off+2 > len(it.b) {
		it.err = ErrOptionTooLong
		return IPv6Option{}, false
	}
	end := it.off + 2 + int(it.b[it.off+1])
	if end > len(it.b) {
		it.err = ErrOptionTooLong
		return IPv6Option{}, false
	}
	o := IPv6Option{Type: t, Data: it.b[it.off+2 : end : end]}
	it.off = end
	return o, true
}

// Off is the offset, from the start of the header, of the option Next last
// returned.
func (it *IPv6OptionIter) Off() int { return it.last }

// Err is the fault that stopped the iteration, or nil.
func (it *IPv6OptionIter) Err() error { return it.err }

// IPv6OptionsLen is the length of a header holding opts, padded to 8 bytes.
func IPv6OptionsLen(opts []IPv6Option) int {
	n := 2
	for i := range opts {
		n += opts[i].Len()
	}
	return (n + 7) &^ 7
}

// PutIPv6Options writes a Hop-by-Hop or Destination Options header holding opts,
// in order, into b and returns its length. It pads the end to 8 bytes with Pad1
// or PadN; alignment of the options themselves (RFC 8200 §4.2 xn+y) is the
// caller's, by padding options in opts.
func PutIPv6Options(b []byte, nextHeader uint8, opts []IPv6Option) (int, error) {
	n := IPv6OptionsLen(opts)
	if n > ipv6ExtMaxLen {
		return 0, ErrBadLength
	}
	for i := range opts {
		if len(opts[i].Data) > 255 {
			return 0, ErrBadLength
		}
	}
	if len(b) < n {
		return 0, ErrNoSpace
	}
	b[0] = nextHeader
	b[1] = uint8(n/8 - 1)
	off := 2
	for _, o := range opts {
		b[off] = o.Type
		if o.Type == IPv6OptPad1 {
			off++
			continue
		}
		b[off+1] = uint8(len(o.Data))
		off += 2 + copy(b[off+2:], o.Data)
	}
	putPadding(b[off:n], IPv6OptPad1, IPv6OptPadN)
	return n, nil
}

// putPadding fills b with one Pad1, or with a PadN whose data is zero.
func putPadding(b []byte, pad1, padN uint8) {
	switch len(b) {
	case 0:
	case 1:
		b[0] = pad1
	default:
		b[0] = padN
		b[1] = uint8(len(b) - 2)
		clear(b[2:])
	}
}

// IPv6Routing is a Routing header (RFC 8200 §4.4). Type 4, the Segment Routing
// Header, has its own view, SRH.
//
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  Next Header  |  Hdr Ext Len  |  Routing Type | Segments Left |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                                                               |
//	.                                                               .
//	.                       type-specific data                      .
//	.                                                               .
//	|                                                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
type IPv6Routing []byte

// Validate checks that b holds the whole header.
func (b IPv6Routing) Validate() error {
	if len(b) < 8 {
		return ErrTruncated
	}
	if b.Len() > len(b) {
		return ErrExtTooLong
	}
	return nil
}

// NextHeader is the type of the next header.
func (b IPv6Routing) NextHeader() uint8 { return b[0] }

// SetNextHeader sets the type of the next header.
func (b IPv6Routing) SetNextHeader(v uint8) { b[0] = v }

// HdrExtLen is the length in 8-byte units, less one.
func (b IPv6Routing) HdrExtLen() uint8 { return b[1] }

// Len is the header's length in bytes.
func (b IPv6Routing) Len() int { return (int(b[1]) + 1) * 8 }

// RoutingType is the Routing Type.
func (b IPv6Routing) RoutingType() uint8 { return b[2] }

// SegmentsLeft is the number of route segments still to visit.
func (b IPv6Routing) SegmentsLeft() uint8 { return b[3] }

// SetSegmentsLeft sets Segments Left.
func (b IPv6Routing) SetSegmentsLeft(v uint8) { b[3] = v }

// TypeData is the type-specific data.
func (b IPv6Routing) TypeData() []byte { return b[4:b.Len()] }

// IPv6Fragment is a Fragment header (RFC 8200 §4.5):
//
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  Next Header  |   Reserved    |      Fragment Offset    |Res|M|
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                         Identification                        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
type IPv6Fragment []byte

// IPv6FragmentLen is the Fragment header's length.
const IPv6FragmentLen = 8

// Validate checks that b holds the whole header.
func (b IPv6Fragment) Validate() error {
	if len(b) < IPv6FragmentLen {
		return ErrTruncated
	}
	return nil
}

// NextHeader is the type of the next header.
func (b IPv6Fragment) NextHeader() uint8 { return b[0] }

// FragmentOffset is the fragment's offset in bytes.
func (b IPv6Fragment) FragmentOffset() uint16 { return binary.BigEndian.Uint16(b[2:]) &^ 7 }

// More reports the M flag: more fragments follow.
func (b IPv6Fragment) More() bool { return b[3]&1 != 0 }

// ID is the Identification.
func (b IPv6Fragment) ID() uint32 { return binary.BigEndian.Uint32(b[4:]) }

// Encode writes a Fragment header; offset is in bytes, a multiple of 8. Reserved
// fields are zero.
func (b IPv6Fragment) Encode(nextHeader uint8, offset uint16, more bool, id uint32) {
	_ = b[IPv6FragmentLen-1]
	b[0], b[1] = nextHeader, 0
	v := offset &^ 7
	if more {
		v |= 1
	}
	binary.BigEndian.PutUint16(b[2:], v)
	binary.BigEndian.PutUint32(b[4:], id)
}

// AH is an IP Authentication Header (RFC 4302 §2). Its Payload Len counts 4-byte
// words, less two:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	| Next Header   |  Payload Len  |          RESERVED             |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                 Security Parameters Index (SPI)               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                    Sequence Number Field                      |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                                                               |
//	+                Integrity Check Value-ICV (variable)           |
//	|                                                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
type AH []byte

// AHMinLen is the length of AH without an ICV.
const AHMinLen = 12

// Validate checks that b holds the whole header.
func (b AH) Validate() error {
	if len(b) < AHMinLen {
		return ErrTruncated
	}
	if b.Len() < AHMinLen {
		return ErrBadLength
	}
	if b.Len() > len(b) {
		return ErrExtTooLong
	}
	return nil
}

// NextHeader is the type of the next header.
func (b AH) NextHeader() uint8 { return b[0] }

// PayloadLen is the Payload Len field.
func (b AH) PayloadLen() uint8 { return b[1] }

// Len is the header's length in bytes: (Payload Len + 2) × 4.
func (b AH) Len() int { return (int(b[1]) + 2) * 4 }

// SPI is the Security Parameters Index.
func (b AH) SPI() uint32 { return binary.BigEndian.Uint32(b[4:]) }

// Seq is the Sequence Number.
func (b AH) Seq() uint32 { return binary.BigEndian.Uint32(b[8:]) }

// ICV is the Integrity Check Value.
func (b AH) ICV() []byte { return b[AHMinLen:b.Len()] }

// ESP is the start of an Encapsulating Security Payload packet (RFC 4303 §2).
// What follows the sequence number is opaque without the SA.
type ESP []byte

// ESPMinLen is the SPI and the sequence number.
const ESPMinLen = 8

// Validate checks that b holds the SPI and sequence number.
func (b ESP) Validate() error {
	if len(b) < ESPMinLen {
		return ErrTruncated
	}
	return nil
}

// SPI is the Security Parameters Index.
func (b ESP) SPI() uint32 { return binary.BigEndian.Uint32(b[0:]) }

// Seq is the Sequence Number.
func (b ESP) Seq() uint32 { return binary.BigEndian.Uint32(b[4:]) }
