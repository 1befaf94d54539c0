// Package ioam is linerate's In situ OAM for IPv6: the encapsulating, transit
// and decapsulating node roles (stage kinds ioam.encap, ioam.transit and
// ioam.decap), the option codecs of RFC 9197, RFC 9486, RFC 9326 and RFC 9322,
// Proof of Transit (draft-ietf-sfc-proof-of-transit), and the export of trace
// records.
//
// The codecs are header views in the manner of gVisor's header package: a named
// byte slice, one Validate up front, then unchecked accessors named after the
// RFC figures. The stages never allocate per packet: encap copies a header
// template built per profile at setup and opens room with InsertGap; transit
// writes its node data in place from a node image built per trace type; decap
// closes the room with RemoveGap.
package ioam

import (
	"encoding/binary"
	"errors"
)

// IPv6 option types that carry IOAM (RFC 9486 §4.1, §8). The third bit of an
// option type says whether its data may change en route (RFC 8200 §4.2).
const (
	OptionTypeChanging uint8 = 0x31 // pre-allocated and incremental traces, POT
	OptionTypeStatic   uint8 = 0x11 // E2E and DEX
)

// IOAM Option-Types (RFC 9197 §4.1, RFC 9326 §3).
const (
	TypePreallocatedTrace uint8 = 0
	TypeIncrementalTrace  uint8 = 1
	TypePOT               uint8 = 2
	TypeE2E               uint8 = 3
	TypeDEX               uint8 = 4
)

// Sizes.
const (
	// OptionHeaderLen is Option Type, Opt Data Len, Reserved and IOAM
	// Option-Type.
	OptionHeaderLen = 4
	// MaxTraceData is the most node data a trace option holds: Opt Data Len
	// (255) less the reserved byte, the IOAM type and the 8-byte trace header,
	// rounded down to 4 octets (RFC 9486 §4.1; the kernel's
	// IOAM6_TRACE_DATA_SIZE_MAX).
	MaxTraceData = 244
)

// Errors of the codecs. They are plain values, so a malformed packet costs no
// allocation; each maps to a drop reason of the stages.
var (
	ErrTruncated     = errors.New("ioam: option truncated")
	ErrNodeLen       = errors.New("ioam: NodeLen does not match the trace type")
	ErrRemainingLen  = errors.New("ioam: RemainingLen beyond the option")
	ErrTooLong       = errors.New("ioam: trace data beyond 244 bytes")
	ErrHopByHop      = errors.New("ioam: options header runs past the packet")
	ErrMisaligned    = errors.New("ioam: option not 4n-aligned")
	ErrNotIPv6       = errors.New("ioam: not an IPv6 packet")
	ErrNoRoom        = errors.New("ioam: no room for the IOAM data")
	ErrHeaderTooLong = errors.New("ioam: options header would exceed 2048 bytes")
	ErrOptionOverrun = errors.New("ioam: an option runs past its options header")
)

// IsIOAM reports whether an IPv6 option type carries IOAM.
func IsIOAM(optType uint8) bool { return optType == OptionTypeChanging || optType == OptionTypeStatic }

// Option is one IPv6 IOAM option (RFC 9486 §4.1):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  Option Type  |  Opt Data Len |   Reserved    |   IOAM Type   |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	.                                                               .
//	.                          Option Data                          .
//	.                                                               .
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// Opt Data Len counts the bytes after it: the reserved byte, the IOAM type and
// the Option Data. Body is the Option Data, which the IOAM type's own view reads.
type Option []byte

// Validate checks that b holds the whole option and its fixed fields.
func (b Option) Validate() error {
	if len(b) < OptionHeaderLen || b[1] < 2 || 2+int(b[1]) > len(b) {
		return ErrTruncated
	}
	return nil
}

// OptionType is the IPv6 option type, 0x31 or 0x11.
func (b Option) OptionType() uint8 { return b[0] }

// OptDataLen is the Opt Data Len field.
func (b Option) OptDataLen() uint8 { return b[1] }

// IOAMType is the IOAM Option-Type.
func (b Option) IOAMType() uint8 { return b[3] }

// Len is the option's length, its type and length bytes included.
func (b Option) Len() int { return 2 + int(b[1]) }

// Body is the IOAM Option Data.
func (b Option) Body() []byte { return b[OptionHeaderLen:b.Len()] }

// PutOptionHeader writes an option header for a body of n bytes.
func PutOptionHeader(b []byte, optType, ioamType uint8, n int) {
	b[0], b[1], b[2], b[3] = optType, uint8(2+n), 0, ioamType
}

// POT is a Proof of Transit option's data (RFC 9197 §4.5), of POT type 0
// (§4.5.1): a 64-bit random number and a 64-bit cumulative value.
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|        Namespace-ID           |IOAM POT Type  |IOAM POT flags |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                    Random (PktID), 64 bits                    |
//	+                                                               +
//	|                                                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                      Cumulative, 64 bits                      |
//	+                                                               +
//	|                                                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
type POT []byte

// POTLen is the length of a POT type 0 option's data.
const POTLen = 20

// Validate checks the length and the POT type.
func (b POT) Validate() error {
	if len(b) < 4 {
		return ErrTruncated
	}
	if b[2] == 0 && len(b) < POTLen {
		return ErrTruncated
	}
	return nil
}

// NamespaceID is the IOAM namespace.
func (b POT) NamespaceID() uint16 { return binary.BigEndian.Uint16(b[0:]) }

// POTType is the IOAM POT Type; 0 is the only one defined.
func (b POT) POTType() uint8 { return b[2] }

// POTFlags is the IOAM POT flags field.
func (b POT) POTFlags() uint8 { return b[3] }

// Random is the per-packet random number (PktID).
func (b POT) Random() uint64 { return binary.BigEndian.Uint64(b[4:]) }

// Cumulative is the cumulative value.
func (b POT) Cumulative() uint64 { return binary.BigEndian.Uint64(b[12:]) }

// SetRandom sets the random number.
func (b POT) SetRandom(v uint64) { binary.BigEndian.PutUint64(b[4:], v) }

// SetCumulative sets the cumulative value.
func (b POT) SetCumulative(v uint64) { binary.BigEndian.PutUint64(b[12:], v) }

// Encode writes a POT type 0 header.
func (b POT) Encode(ns uint16, random, cumulative uint64) {
	_ = b[POTLen-1]
	binary.BigEndian.PutUint16(b[0:], ns)
	b[2], b[3] = 0, 0
	b.SetRandom(random)
	b.SetCumulative(cumulative)
}

// E2E is an edge-to-edge option's data (RFC 9197 §4.6):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|         Namespace-ID          |         IOAM-E2E-Type         |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                    E2E data, in bit order                     |
//	.                                                               .
//
// The data fields follow in the order of the IOAM-E2E-Type bits: a 64-bit
// sequence number (bit 0), a 32-bit sequence number (bit 1), timestamp
// seconds (bit 2) and timestamp subseconds (bit 3).
type E2E []byte

// IOAM-E2E-Type bits (RFC 9197 §4.6): bit 0 is the most significant.
const (
	E2ESeq64    uint16 = 0x8000
	E2ESeq32    uint16 = 0x4000
	E2ESeconds  uint16 = 0x2000
	E2EFraction uint16 = 0x1000
	e2eKnown           = E2ESeq64 | E2ESeq32 | E2ESeconds | E2EFraction
)

// E2EDataLen is the length of the data fields of an E2E type.
func E2EDataLen(t uint16) int {
	n := 0
	if t&E2ESeq64 != 0 {
		n += 8
	}
	if t&E2ESeq32 != 0 {
		n += 4
	}
	if t&E2ESeconds != 0 {
		n += 4
	}
	if t&E2EFraction != 0 {
		n += 4
	}
	return n
}

// Validate checks that b holds the header and every data field its type names.
func (b E2E) Validate() error {
	if len(b) < 4 || len(b) < 4+E2EDataLen(b.E2EType()) {
		return ErrTruncated
	}
	return nil
}

// NamespaceID is the IOAM namespace.
func (b E2E) NamespaceID() uint16 { return binary.BigEndian.Uint16(b[0:]) }

// E2EType is the IOAM-E2E-Type bitfield.
func (b E2E) E2EType() uint16 { return binary.BigEndian.Uint16(b[2:]) }

// E2EFields are the data fields of an E2E option; those the type does not
// name are zero.
type E2EFields struct {
	Seq64             uint64
	Seq32             uint32
	Seconds, Fraction uint32
}

// Fields reads the data fields the type names.
func (b E2E) Fields() E2EFields {
	var f E2EFields
	t := b.E2EType()
	o := 4
	if t&E2ESeq64 != 0 {
		f.Seq64 = binary.BigEndian.Uint64(b[o:])
		o += 8
	}
	if t&E2ESeq32 != 0 {
		f.Seq32 = binary.BigEndian.Uint32(b[o:])
		o += 4
	}
	if t&E2ESeconds != 0 {
		f.Seconds = binary.BigEndian.Uint32(b[o:])
		o += 4
	}
	if t&E2EFraction != 0 {
		f.Fraction = binary.BigEndian.Uint32(b[o:])
	}
	return f
}

// Encode writes the header and the data fields t names; b holds
// 4+E2EDataLen(t) bytes.
func (b E2E) Encode(ns, t uint16, f *E2EFields) {
	binary.BigEndian.PutUint16(b[0:], ns)
	binary.BigEndian.PutUint16(b[2:], t)
	o := 4
	if t&E2ESeq64 != 0 {
		binary.BigEndian.PutUint64(b[o:], f.Seq64)
		o += 8
	}
	if t&E2ESeq32 != 0 {
		binary.BigEndian.PutUint32(b[o:], f.Seq32)
		o += 4
	}
	if t&E2ESeconds != 0 {
		binary.BigEndian.PutUint32(b[o:], f.Seconds)
		o += 4
	}
	if t&E2EFraction != 0 {
		binary.BigEndian.PutUint32(b[o:], f.Fraction)
	}
}

// DEX is a Direct Exporting option's data (RFC 9326 §3.2):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|        Namespace-ID           |     Flags     |Extension-Flags|
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|               IOAM-Trace-Type                 |   Reserved    |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                         Flow ID (optional)                    |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                     Sequence Number  (Optional)               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
type DEX []byte

// DEX Extension-Flags (RFC 9326 §3.2, §5.3): bit 0 is the most significant.
const (
	DEXFlowID   uint8 = 0x80
	DEXSequence uint8 = 0x40
)

// DEXLen is the length of a DEX option's data with the extensions flags names.
func DEXLen(ext uint8) int {
	n := 8
	if ext&DEXFlowID != 0 {
		n += 4
	}
	if ext&DEXSequence != 0 {
		n += 4
	}
	return n
}

// Validate checks that b holds the header and the extension fields its flags
// name.
func (b DEX) Validate() error {
	if len(b) < 8 || len(b) < DEXLen(b.ExtensionFlags()) {
		return ErrTruncated
	}
	return nil
}

// NamespaceID is the IOAM namespace.
func (b DEX) NamespaceID() uint16 { return binary.BigEndian.Uint16(b[0:]) }

// Flags is the Flags field (none defined).
func (b DEX) Flags() uint8 { return b[2] }

// ExtensionFlags is the Extension-Flags field.
func (b DEX) ExtensionFlags() uint8 { return b[3] }

// TraceType is the IOAM-Trace-Type: the data each node exports.
func (b DEX) TraceType() uint32 { return uint32(b[4])<<16 | uint32(b[5])<<8 | uint32(b[6]) }

// FlowID is the Flow ID, when ExtensionFlags has DEXFlowID.
func (b DEX) FlowID() uint32 { return binary.BigEndian.Uint32(b[8:]) }

// Sequence is the Sequence Number, when ExtensionFlags has DEXSequence.
func (b DEX) Sequence() uint32 {
	if b[3]&DEXFlowID != 0 {
		return binary.BigEndian.Uint32(b[12:])
	}
	return binary.BigEndian.Uint32(b[8:])
}

// SetSequence sets the Sequence Number.
func (b DEX) SetSequence(v uint32) {
	if b[3]&DEXFlowID != 0 {
		binary.BigEndian.PutUint32(b[12:], v)
		return
	}
	binary.BigEndian.PutUint32(b[8:], v)
}

// Encode writes a DEX option's data; b holds DEXLen(ext) bytes.
func (b DEX) Encode(ns uint16, ext uint8, traceType, flowID, seq uint32) {
	binary.BigEndian.PutUint16(b[0:], ns)
	b[2], b[3] = 0, ext
	b[4], b[5], b[6], b[7] = byte(traceType>>16), byte(traceType>>8), byte(traceType), 0
	o := 8
	if ext&DEXFlowID != 0 {
		binary.BigEndian.PutUint32(b[o:], flowID)
		o += 4
	}
	if ext&DEXSequence != 0 {
		binary.BigEndian.PutUint32(b[o:], seq)
	}
}
