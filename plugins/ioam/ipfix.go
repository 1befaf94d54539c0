package ioam

import "github.com/linerate/linerate/appliance/ipfix"

// IPFIX export (RFC 7011) of the records: one flat data record per hop of a
// record's trace, oldest hop (the encapsulating node) first, all of a
// packet's hops sharing ioamRecordId. Flat, not an RFC 6313 list, so that
// collectors that cannot decode structured data (pmacct's nfacctd) print
// every field. IANA elements where one exists; linerate's own, under the
// [ipfix] enterprise number, otherwise. A field the trace type leaves out
// is all ones, IOAM's "unavailable"; docs/operations.md lists them.

// HopTemplateID is the IOAM hop template's ID.
const HopTemplateID = 256

func pen(id uint16, n uint16, name, typ string) ipfix.Field {
	return ipfix.Field{ID: id, Enterprise: ipfix.DocumentationPEN, Len: n, Name: name, Type: typ}
}

// HopTemplate is the template of the hop records.
var HopTemplate = &ipfix.Template{ID: HopTemplateID, Name: "ioamHop", Fields: []ipfix.Field{
	ipfix.ObservationTimeNanoseconds, // when this appliance made the record
	ipfix.SourceIPv6Address,          // of the header that carries the IOAM data
	ipfix.DestinationIPv6Address,
	ipfix.IngressInterface, // the hop's
	ipfix.EgressInterface,
	pen(1, 8, "ioamRecordId", "unsigned64"), // the exporter's count of records: a packet's hops share it
	pen(2, 1, "ioamRole", "unsigned8"),      // 1 decap, 2 transit (DEX), 3 loopback
	pen(3, 2, "ioamNamespaceId", "unsigned16"),
	pen(4, 4, "ioamTraceType", "unsigned32"),
	pen(5, 1, "ioamHopIndex", "unsigned8"), // 0 is the encapsulating node
	pen(6, 1, "ioamHopCount", "unsigned8"),
	pen(7, 1, "ioamHopLimit", "unsigned8"),
	pen(8, 8, "ioamNodeId", "unsigned64"),
	pen(9, 8, "ioamHopTimestampNanoseconds", "unsigned64"), // on the namespace's timestamp scale; 0 when none
	pen(10, 8, "ioamHopDelayNanoseconds", "signed64"),      // since the hop before; -1 when either has no timestamp
	pen(11, 4, "ioamTransitDelay", "unsigned32"),
	pen(12, 4, "ioamQueueDepth", "unsigned32"),
	pen(13, 8, "ioamNamespaceData", "unsigned64"),
	pen(14, 4, "ioamBufferOccupancy", "unsigned32"),
}}

// hopRecordLen is HopTemplate's record size.
const hopRecordLen = 8 + 16 + 16 + 4 + 4 + 8 + 1 + 2 + 4 + 1 + 1 + 1 + 8 + 8 + 8 + 4 + 4 + 8 + 4

// ipfixHops sends r's hops to x, id being the record's ioamRecordId; buf
// has room for a hop record.
func ipfixHops(x *ipfix.Exporter, r *Record, id uint64, buf []byte) {
	hops := r.Hops()
	tt := r.TraceType
	for i, h := range hops {
		w := ipfix.NewRecord(buf).Nanos(r.Unix).Bytes(r.Src[:]).Bytes(r.Dst[:])
		in, out := uint32(unavailable32), uint32(unavailable32)
		switch {
		case tt&TraceIfIDsWide != 0:
			in, out = h.IngressIfWide, h.EgressIfWide
		case tt&TraceIfIDs != 0:
			in, out = wide16(h.IngressIf), wide16(h.EgressIf)
		}
		w.U32(in).U32(out)
		w.U64(id).U8(r.Role).U16(r.TraceNS).U32(tt).U8(uint8(i)).U8(uint8(len(hops)))
		node := uint64(unavailable64)
		hl := uint8(0xFF)
		switch {
		case tt&TraceHopLimNodeIDWide != 0:
			node, hl = h.NodeIDWide, h.HopLimit
		case tt&TraceHopLimNodeID != 0:
			node, hl = uint64(h.NodeID), h.HopLimit
		}
		w.U8(hl).U64(node).U64(uint64(h.TimeNs)).I64(h.DelayNs)
		w.U32(field32(tt, TraceTransitDelay, h.TransitDelay)).U32(field32(tt, TraceQueueDepth, h.QueueDepth))
		nsd := uint64(unavailable64)
		switch {
		case tt&TraceNamespaceDataWide != 0:
			nsd = h.NamespaceDataWide
		case tt&TraceNamespaceData != 0:
			nsd = uint64(h.NamespaceData)
		}
		w.U64(nsd).U32(field32(tt, TraceBufferOccupancy, h.BufferOccupancy))
		x.Add(HopTemplateID, buf[:w.Len()])
	}
}

// wide16 is a 16-bit field as 32 bits, unavailable staying unavailable.
func wide16(v uint16) uint32 {
	if v == unavailable16 {
		return unavailable32
	}
	return uint32(v)
}

// field32 is v when the trace type has bit, else all ones.
func field32(tt, bit, v uint32) uint32 {
	if tt&bit == 0 {
		return unavailable32
	}
	return v
}
