package ioam

import (
	"encoding/binary"
	"math/bits"
)

// Trace is a trace option's data (RFC 9197 §4.4.1), pre-allocated or
// incremental: the trace header, then the node data list.
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|        Namespace-ID           |NodeLen  | Flags | RemainingLen|
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|               IOAM-Trace-Type                 |  Reserved     |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                   node data list [0..n]                       |
//	.                                                               .
//
// NodeLen and RemainingLen count 4-octet units. In a pre-allocated trace the
// list has its full size from the start: node k writes the NodeLen words that
// end at RemainingLen, then lowers RemainingLen, so the newest node comes
// first. In an incremental trace each node inserts its data right after the
// header and RemainingLen is the room still allowed.
type Trace []byte

// TraceHeaderLen is the length of the trace header.
const TraceHeaderLen = 8

// Trace flags (RFC 9197 §4.4.1, RFC 9322 §4): the 4-bit Flags field, bit 0
// first.
const (
	FlagOverflow uint8 = 0x8
	FlagLoopback uint8 = 0x4
	FlagActive   uint8 = 0x2
)

// IOAM-Trace-Type bits (RFC 9197 §4.4.1) as a 24-bit value, bit 0 the most
// significant.
const (
	TraceHopLimNodeID       uint32 = 0x800000 // bit 0: hop limit and 24-bit node id
	TraceIfIDs              uint32 = 0x400000 // bit 1: 16-bit ingress and egress interface ids
	TraceTimestampSeconds   uint32 = 0x200000 // bit 2
	TraceTimestampFraction  uint32 = 0x100000 // bit 3
	TraceTransitDelay       uint32 = 0x080000 // bit 4
	TraceNamespaceData      uint32 = 0x040000 // bit 5
	TraceQueueDepth         uint32 = 0x020000 // bit 6
	TraceChecksumComplement uint32 = 0x010000 // bit 7
	TraceHopLimNodeIDWide   uint32 = 0x008000 // bit 8: hop limit and 56-bit node id
	TraceIfIDsWide          uint32 = 0x004000 // bit 9: 32-bit interface ids
	TraceNamespaceDataWide  uint32 = 0x002000 // bit 10
	TraceBufferOccupancy    uint32 = 0x001000 // bit 11
	TraceUndefined          uint32 = 0x000FFC // bits 12-21: filled with 0xFFFFFFFF
	TraceOpaqueState        uint32 = 0x000002 // bit 22: opaque state snapshot
	TraceReserved           uint32 = 0x000001 // bit 23
)

// Masks of the one-word and two-word fields.
const (
	traceShort = 0xFF0000 | TraceBufferOccupancy | TraceUndefined
	traceWide  = TraceHopLimNodeIDWide | TraceIfIDsWide | TraceNamespaceDataWide
)

// NodeLen is the node data length, in 4-octet units, that a trace type asks of
// each node, without the opaque state snapshot (RFC 9197 §4.4.1).
func NodeLen(traceType uint32) int {
	return bits.OnesCount32(traceType&traceShort) + 2*bits.OnesCount32(traceType&traceWide)
}

// Validate checks the header, NodeLen against the trace type, and
// RemainingLen against the room in b. incremental selects the incremental
// trace's rules: RemainingLen is room still allowed rather than room left in
// b.
func (b Trace) Validate(incremental bool) error {
	if len(b) < TraceHeaderLen {
		return ErrTruncated
	}
	data := len(b) - TraceHeaderLen
	if data > MaxTraceData {
		return ErrTooLong
	}
	if b.NodeLen() != NodeLen(b.TraceType()) {
		return ErrNodeLen
	}
	rem := b.RemainingLen() * 4
	if incremental {
		if data+rem > MaxTraceData {
			return ErrTooLong
		}
		if data%4 != 0 {
			return ErrRemainingLen
		}
		return nil
	}
	if rem > data {
		return ErrRemainingLen
	}
	return nil
}

// NamespaceID is the IOAM namespace.
func (b Trace) NamespaceID() uint16 { return binary.BigEndian.Uint16(b[0:]) }

// NodeLen is the NodeLen field.
func (b Trace) NodeLen() int { return int(b[2] >> 3) }

// Flags is the 4-bit Flags field.
func (b Trace) Flags() uint8 { return (b[2]&7)<<1 | b[3]>>7 }

// Overflow is the O flag: a node found no room for its data.
func (b Trace) Overflow() bool { return b[2]&0x04 != 0 }

// Loopback is the L flag (RFC 9322 §4.1).
func (b Trace) Loopback() bool { return b[2]&0x02 != 0 }

// Active is the A flag (RFC 9322 §4.2).
func (b Trace) Active() bool { return b[2]&0x01 != 0 }

// RemainingLen is the RemainingLen field.
func (b Trace) RemainingLen() int { return int(b[3] & 0x7F) }

// TraceType is the 24-bit IOAM-Trace-Type.
func (b Trace) TraceType() uint32 { return uint32(b[4])<<16 | uint32(b[5])<<8 | uint32(b[6]) }

// Data is the node data list.
func (b Trace) Data() []byte { return b[TraceHeaderLen:] }

// filled is the node data the nodes of a pre-allocated trace wrote so far:
// the data after RemainingLen's words, newest node first.
func (b Trace) filled() []byte {
	d := b.Data()
	return d[min(b.RemainingLen()*4, len(d)):]
}

// SetOverflow sets the O flag.
func (b Trace) SetOverflow() { b[2] |= 0x04 }

// SetFlags sets the 4-bit Flags field.
func (b Trace) SetFlags(f uint8) {
	b[2] = b[2]&0xF8 | (f>>1)&7
	b[3] = b[3]&0x7F | f<<7
}

// SetRemainingLen sets RemainingLen.
func (b Trace) SetRemainingLen(n int) { b[3] = b[3]&0x80 | uint8(n)&0x7F }

// Encode writes a trace header. The node data is not touched.
func (b Trace) Encode(ns uint16, traceType uint32, flags uint8, remaining int) {
	_ = b[TraceHeaderLen-1]
	binary.BigEndian.PutUint16(b[0:], ns)
	b[2] = uint8(NodeLen(traceType))<<3 | (flags>>1)&7
	b[3] = flags<<7 | uint8(remaining)&0x7F
	b[4], b[5], b[6], b[7] = byte(traceType>>16), byte(traceType>>8), byte(traceType), 0
}

// Node is one node's data, decoded. Fields the trace type does not name are
// zero; Type says which are present.
type Node struct {
	Type               uint32 // the trace type it was decoded with
	HopLimit           uint8  // bit 0's, else bit 8's
	HopLimitWide       uint8  // bit 8's
	NodeID             uint32 // 24 bits
	IngressIf          uint16
	EgressIf           uint16
	Seconds            uint32
	Fraction           uint32
	TransitDelay       uint32
	NamespaceData      uint32
	QueueDepth         uint32
	ChecksumComplement uint32
	NodeIDWide         uint64 // 56 bits
	IngressIfWide      uint32
	EgressIfWide       uint32
	NamespaceDataWide  uint64
	BufferOccupancy    uint32
	Undefined          [10]uint32 // bits 12-21, by bit number − 12
	SchemaID           uint32     // 24 bits, with the opaque state snapshot
	OpaqueLen          int        // bytes of opaque data
	OpaqueOff          int        // offset of the opaque data in the node's bytes
}

// DecodeNode reads one node's data of a trace type from b, which starts at
// the node's first word, and returns it with its length in bytes (the opaque
// snapshot included). It returns ok false when b is too short.
func DecodeNode(b []byte, traceType uint32) (n Node, size int, ok bool) {
	size = NodeLen(traceType) * 4
	if len(b) < size {
		return Node{}, 0, false
	}
	n.Type = traceType
	o := 0
	word := func() uint32 { v := binary.BigEndian.Uint32(b[o:]); o += 4; return v }
	dword := func() uint64 { v := binary.BigEndian.Uint64(b[o:]); o += 8; return v }
	if traceType&TraceHopLimNodeID != 0 {
		v := word()
		n.HopLimit, n.NodeID = uint8(v>>24), v&0xFFFFFF
	}
	if traceType&TraceIfIDs != 0 {
		v := word()
		n.IngressIf, n.EgressIf = uint16(v>>16), uint16(v)
	}
	if traceType&TraceTimestampSeconds != 0 {
		n.Seconds = word()
	}
	if traceType&TraceTimestampFraction != 0 {
		n.Fraction = word()
	}
	if traceType&TraceTransitDelay != 0 {
		n.TransitDelay = word()
	}
	if traceType&TraceNamespaceData != 0 {
		n.NamespaceData = word()
	}
	if traceType&TraceQueueDepth != 0 {
		n.QueueDepth = word()
	}
	if traceType&TraceChecksumComplement != 0 {
		n.ChecksumComplement = word()
	}
	if traceType&TraceHopLimNodeIDWide != 0 {
		v := dword()
		n.HopLimitWide, n.NodeIDWide = uint8(v>>56), v&(1<<56-1)
		if traceType&TraceHopLimNodeID == 0 {
			n.HopLimit = n.HopLimitWide
		}
	}
	if traceType&TraceIfIDsWide != 0 {
		n.IngressIfWide, n.EgressIfWide = word(), word()
	}
	if traceType&TraceNamespaceDataWide != 0 {
		n.NamespaceDataWide = dword()
	}
	if traceType&TraceBufferOccupancy != 0 {
		n.BufferOccupancy = word()
	}
	for bit := 12; bit <= 21; bit++ {
		if traceType&(0x800000>>bit) != 0 {
			n.Undefined[bit-12] = word()
		}
	}
	if traceType&TraceOpaqueState != 0 {
		if len(b) < o+4 {
			return Node{}, 0, false
		}
		v := word()
		n.SchemaID = v & 0xFFFFFF
		n.OpaqueLen = int(v>>24) * 4
		n.OpaqueOff = o
		if len(b) < o+n.OpaqueLen {
			return Node{}, 0, false
		}
		o += n.OpaqueLen
	}
	return n, o, true
}
