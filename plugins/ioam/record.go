package ioam

import (
	"encoding/hex"
	"encoding/json"
	"net/netip"
	"strconv"
	"time"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/plugins"
)

// Record is one packet's IOAM data as a node saw it. It is a flat value with no
// pointers, so the per-lcore export rings copy it without the garbage
// collector's help; the node data stays raw until a control goroutine decodes
// it.
type Record struct {
	Mono     int64  // monotonic ns when this node handled the packet
	Unix     int64  // the same instant, Unix ns
	Role     uint8  // RoleDecap, RoleTransit or RoleLoopback
	Instance uint8  // the pipeline instance (plugins.Context.Instance)
	Len      uint16 // packet length, as it arrived
	Have     uint8  // HaveTrace | HavePOT | HaveE2E | HaveDEX | HaveInner
	// Src and Dst are those of the IPv6 header that carries the IOAM data
	// (the outer one of an encapsulated packet); InnerSrc and InnerDst those
	// of the inner header, with HaveInner.
	Src      [16]byte
	Dst      [16]byte
	InnerSrc [16]byte
	InnerDst [16]byte

	TraceNS     uint16
	TraceOption uint8 // TypePreallocatedTrace or TypeIncrementalTrace
	TraceFlags  uint8
	TraceType   uint32
	NodeLen     uint8
	RemLen      uint8
	Format      TimestampFormat // how this node's namespace reads timestamps
	DataLen     uint8
	Data        [MaxTraceData]byte // the filled node data, newest node first

	POTNS         uint16
	POTResult     uint8 // POTUnchecked, POTValid or POTInvalid
	POTRandom     uint64
	POTCumulative uint64

	E2ENS   uint16
	E2EType uint16
	E2E     E2EFields

	DEXNS   uint16
	DEXExt  uint8
	DEXType uint32
	DEXFlow uint32
	DEXSeq  uint32
}

// Roles of the node that made a record.
const (
	RoleDecap    uint8 = 1
	RoleTransit  uint8 = 2 // a DEX export
	RoleLoopback uint8 = 3 // a looped-back copy reached the encapsulating node
)

// What a record holds.
const (
	HaveTrace uint8 = 1 << iota
	HavePOT
	HaveE2E
	HaveDEX
	HaveInner // the packet is IPv6-in-IPv6
)

// begin starts the record of what a node of role saw of packet p, d its
// data, whose IOAM s describes: when, where, and its addresses. What it holds
// (Have, and those fields) comes after; the fields of what it does not hold
// are left as they were.
func (r *Record) begin(ctx *plugins.Context, role uint8, p *packet.Packet, d []byte, s *scan) {
	r.Mono, r.Unix, r.Role, r.Instance, r.Len, r.Have = ctx.Now, ctx.Now+ctx.Clock.UnixOffset(), role, uint8(ctx.Instance), uint16(p.Len()), 0
	r.setAddrs(d, s)
}

// setTrace records the trace option opt, whose timestamps are in format f:
// its header. It returns the trace's filled node data, for the caller to
// copy into Data.
func (r *Record) setTrace(opt Option, f TimestampFormat) []byte {
	tr := Trace(opt.Body())
	r.Have |= HaveTrace
	r.TraceNS, r.TraceOption, r.TraceFlags, r.TraceType = tr.NamespaceID(), opt.IOAMType(), tr.Flags(), tr.TraceType()
	r.NodeLen, r.RemLen, r.Format = uint8(tr.NodeLen()), uint8(tr.RemainingLen()), f
	if opt.IOAMType() == TypePreallocatedTrace {
		return tr.filled()
	}
	return tr.Data()
}

// setDEX records the DEX option x.
func (r *Record) setDEX(x DEX) {
	r.Have |= HaveDEX
	r.DEXNS, r.DEXExt, r.DEXType = x.NamespaceID(), x.ExtensionFlags(), x.TraceType()
	if r.DEXExt&DEXFlowID != 0 {
		r.DEXFlow = x.FlowID()
	}
	if r.DEXExt&DEXSequence != 0 {
		r.DEXSeq = x.Sequence()
	}
}

// setAddrs sets the record's addresses from the packet d whose IOAM s
// describes: those of the header that carries it, and of the inner header
// of an encapsulated packet. Every role records the same ones.
func (r *Record) setAddrs(d []byte, s *scan) {
	ip := packet.IPv6(d[s.l3:])
	r.Src, r.Dst = ip.Src(), ip.Dst()
	if s.next == packet.ProtocolIPv6 && s.nextOff+packet.IPv6Len <= len(d) {
		in := packet.IPv6(d[s.nextOff:])
		r.InnerSrc, r.InnerDst = in.Src(), in.Dst()
		r.Have |= HaveInner
	}
}

// POT results.
const (
	POTUnchecked uint8 = iota
	POTValid
	POTInvalid
)

// Hop is one node's data of a trace, decoded, with the time since the node
// before it.
type Hop struct {
	Node
	// Opaque is the opaque state snapshot's data, in the record.
	Opaque []byte
	// TimeNs is the node's timestamp in ns on its format's scale; 0 when the
	// trace type or the node left it out.
	TimeNs int64
	// DelayNs is TimeNs less the previous node's (the one nearer the
	// encapsulating node); -1 when either is missing.
	DelayNs int64
}

// Hops decodes the node data, oldest node (the encapsulating node) first. A
// node whose data cannot be decoded ends the list.
func (r *Record) Hops() []Hop {
	if r.Have&HaveTrace == 0 {
		return nil
	}
	var out []Hop
	b := r.Data[:r.DataLen]
	for len(b) > 0 {
		n, size, ok := DecodeNode(b, r.TraceType)
		if !ok || size == 0 {
			break
		}
		h := Hop{Node: n, DelayNs: -1, Opaque: b[n.OpaqueOff : n.OpaqueOff+n.OpaqueLen]}
		if r.TraceType&(TraceTimestampSeconds|TraceTimestampFraction) == TraceTimestampSeconds|TraceTimestampFraction &&
			n.Seconds != unavailable32 && n.Fraction != unavailable32 {
			h.TimeNs = TimestampNs(r.Format, n.Seconds, n.Fraction)
		}
		out = append(out, h)
		b = b[size:]
	}
	// Newest first in the packet: reverse.
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	for i := 1; i < len(out); i++ {
		if out[i].TimeNs != 0 && out[i-1].TimeNs != 0 {
			out[i].DelayNs = out[i].TimeNs - out[i-1].TimeNs
		}
	}
	return out
}

// E2EDelayNs is the time from the first node's timestamp to the last's, or
// -1.
func (r *Record) E2EDelayNs() int64 {
	h := r.Hops()
	if len(h) < 2 || h[0].TimeNs == 0 || h[len(h)-1].TimeNs == 0 {
		return -1
	}
	return h[len(h)-1].TimeNs - h[0].TimeNs
}

// RecordJSON is the JSON line of a record.
type RecordJSON struct {
	Time     time.Time `json:"time"`
	Role     string    `json:"role"`
	Stage    string    `json:"stage,omitempty"`
	Instance int       `json:"instance"`
	// Lcore is Instance under its old name, deprecated (docs/compatibility.md).
	Lcore    int        `json:"lcore"`
	Len      int        `json:"len"`
	Src      string     `json:"src"`
	Dst      string     `json:"dst"`
	InnerSrc string     `json:"inner_src,omitempty"`
	InnerDst string     `json:"inner_dst,omitempty"`
	Trace    *TraceJSON `json:"trace,omitempty"`
	POT      *POTJSON   `json:"pot,omitempty"`
	E2E      *E2EJSON   `json:"e2e,omitempty"`
	DEX      *DEXJSON   `json:"dex,omitempty"`
	E2EDly   *int64     `json:"e2e_delay_ns,omitempty"`
}

// TraceJSON is a trace in a JSON line.
type TraceJSON struct {
	Namespace    uint16    `json:"namespace"`
	Option       string    `json:"option"`
	Flags        []string  `json:"flags,omitempty"`
	Type         string    `json:"type"`
	NodeLen      int       `json:"node_len"`
	RemainingLen int       `json:"remaining_len"`
	Hops         []HopJSON `json:"hops"`
}

// HopJSON is one node in a JSON line: every field of the trace type, short
// and wide. Fields the trace type leaves out are omitted; so are those the
// node wrote as all ones (RFC 9197 §4.4.2: it had no value), which Unknown
// names.
type HopJSON struct {
	HopLimit             *uint8            `json:"hop_limit,omitempty"`
	NodeID               *uint32           `json:"node_id,omitempty"`
	IngressIf            *uint16           `json:"ingress_if,omitempty"`
	EgressIf             *uint16           `json:"egress_if,omitempty"`
	Seconds              *uint32           `json:"ts_sec,omitempty"`
	Fraction             *uint32           `json:"ts_frac,omitempty"`
	TransitDelay         *uint32           `json:"transit_delay_ns,omitempty"`
	TransitDelayOverflow bool              `json:"transit_delay_overflow,omitempty"`
	NamespaceData        *uint32           `json:"namespace_data,omitempty"`
	QueueDepth           *uint32           `json:"queue_depth,omitempty"`
	ChecksumComplement   *uint32           `json:"checksum_complement,omitempty"`
	HopLimitWide         *uint8            `json:"hop_limit_wide,omitempty"`
	NodeIDWide           *uint64           `json:"node_id_wide,omitempty"`
	IngressIfWide        *uint32           `json:"ingress_if_wide,omitempty"`
	EgressIfWide         *uint32           `json:"egress_if_wide,omitempty"`
	NamespaceDataWide    *uint64           `json:"namespace_data_wide,omitempty"`
	Buffer               *uint32           `json:"buffer_occupancy,omitempty"`
	Undefined            map[string]uint32 `json:"undefined,omitempty"`
	SchemaID             *uint32           `json:"schema_id,omitempty"`
	Opaque               string            `json:"opaque,omitempty"`
	DelayNs              *int64            `json:"hop_delay_ns,omitempty"`
	Unknown              []string          `json:"unknown,omitempty"`
}

// hopJSON is a node's fields of trace type tt: their values, or their names
// in Unknown for those written as all ones.
func hopJSON(h *Hop, tt uint32) HopJSON {
	var j HopJSON
	field := func(bit uint32, name string, v, ones uint64) bool {
		if tt&bit == 0 {
			return false
		}
		if v == ones {
			j.Unknown = append(j.Unknown, name)
			return false
		}
		return true
	}
	if tt&TraceHopLimNodeID != 0 {
		j.HopLimit = ptr(h.HopLimit)
	}
	if field(TraceHopLimNodeID, "node_id", uint64(h.NodeID), 1<<24-1) {
		j.NodeID = ptr(h.NodeID)
	}
	if field(TraceIfIDs, "ingress_if", uint64(h.IngressIf), unavailable16) {
		j.IngressIf = ptr(h.IngressIf)
	}
	if field(TraceIfIDs, "egress_if", uint64(h.EgressIf), unavailable16) {
		j.EgressIf = ptr(h.EgressIf)
	}
	if field(TraceTimestampSeconds, "ts_sec", uint64(h.Seconds), unavailable32) {
		j.Seconds = ptr(h.Seconds)
	}
	if field(TraceTimestampFraction, "ts_frac", uint64(h.Fraction), unavailable32) {
		j.Fraction = ptr(h.Fraction)
	}
	if field(TraceTransitDelay, "transit_delay_ns", uint64(h.TransitDelay), unavailable32) {
		// The top bit says the delay did not fit 31 bits (RFC 9197 §4.4.2.5).
		if h.TransitDelay&0x80000000 != 0 {
			j.TransitDelayOverflow = true
		} else {
			j.TransitDelay = ptr(h.TransitDelay)
		}
	}
	if field(TraceNamespaceData, "namespace_data", uint64(h.NamespaceData), unavailable32) {
		j.NamespaceData = ptr(h.NamespaceData)
	}
	if field(TraceQueueDepth, "queue_depth", uint64(h.QueueDepth), unavailable32) {
		j.QueueDepth = ptr(h.QueueDepth)
	}
	if field(TraceChecksumComplement, "checksum_complement", uint64(h.ChecksumComplement), unavailable32) {
		j.ChecksumComplement = ptr(h.ChecksumComplement)
	}
	if tt&TraceHopLimNodeIDWide != 0 {
		j.HopLimitWide = ptr(h.HopLimitWide)
	}
	if field(TraceHopLimNodeIDWide, "node_id_wide", h.NodeIDWide, 1<<56-1) {
		j.NodeIDWide = ptr(h.NodeIDWide)
	}
	if field(TraceIfIDsWide, "ingress_if_wide", uint64(h.IngressIfWide), unavailable32) {
		j.IngressIfWide = ptr(h.IngressIfWide)
	}
	if field(TraceIfIDsWide, "egress_if_wide", uint64(h.EgressIfWide), unavailable32) {
		j.EgressIfWide = ptr(h.EgressIfWide)
	}
	if field(TraceNamespaceDataWide, "namespace_data_wide", h.NamespaceDataWide, unavailable64) {
		j.NamespaceDataWide = ptr(h.NamespaceDataWide)
	}
	if field(TraceBufferOccupancy, "buffer_occupancy", uint64(h.BufferOccupancy), unavailable32) {
		j.Buffer = ptr(h.BufferOccupancy)
	}
	for bit := 12; bit <= 21; bit++ {
		name := "bit" + strconv.Itoa(bit)
		if v := h.Undefined[bit-12]; field(0x800000>>bit, name, uint64(v), unavailable32) {
			if j.Undefined == nil {
				j.Undefined = map[string]uint32{}
			}
			j.Undefined[name] = v
		}
	}
	if field(TraceOpaqueState, "schema_id", uint64(h.SchemaID), 1<<24-1) {
		j.SchemaID = ptr(h.SchemaID)
	}
	if len(h.Opaque) > 0 {
		j.Opaque = hex.EncodeToString(h.Opaque)
	}
	if h.DelayNs >= 0 {
		j.DelayNs = ptr(h.DelayNs)
	}
	return j
}

// POTJSON is a POT option in a JSON line.
type POTJSON struct {
	Namespace  uint16 `json:"namespace"`
	Random     string `json:"random"`
	Cumulative string `json:"cumulative"`
	Result     string `json:"result"`
}

// E2EJSON is an E2E option in a JSON line.
type E2EJSON struct {
	Namespace uint16  `json:"namespace"`
	Type      string  `json:"type"`
	Seq64     *uint64 `json:"seq64,omitempty"`
	Seq32     *uint32 `json:"seq32,omitempty"`
	Seconds   *uint32 `json:"ts_sec,omitempty"`
	Fraction  *uint32 `json:"ts_frac,omitempty"`
}

// DEXJSON is a DEX option in a JSON line.
type DEXJSON struct {
	Namespace uint16  `json:"namespace"`
	TraceType string  `json:"trace_type"`
	FlowID    *uint32 `json:"flow_id,omitempty"`
	Seq       *uint32 `json:"seq,omitempty"`
}

func ptr[T any](v T) *T { return &v }

func hex24(v uint32) string {
	return "0x" + hex.EncodeToString([]byte{byte(v >> 16), byte(v >> 8), byte(v)})
}

// RoleName names a record's role.
func RoleName(r uint8) string {
	switch r {
	case RoleDecap:
		return "decap"
	case RoleTransit:
		return "transit"
	case RoleLoopback:
		return "loopback"
	}
	return "unknown"
}

// JSON decodes the record for its JSON line.
func (r *Record) JSON(stage string) RecordJSON {
	j := RecordJSON{Time: time.Unix(0, r.Unix).UTC(), Role: RoleName(r.Role), Stage: stage, Instance: int(r.Instance), Lcore: int(r.Instance), Len: int(r.Len),
		Src: netip.AddrFrom16(r.Src).String(), Dst: netip.AddrFrom16(r.Dst).String()}
	if r.Have&HaveInner != 0 {
		j.InnerSrc, j.InnerDst = netip.AddrFrom16(r.InnerSrc).String(), netip.AddrFrom16(r.InnerDst).String()
	}
	if r.Have&HaveTrace != 0 {
		t := &TraceJSON{Namespace: r.TraceNS, Option: "preallocated", Type: hex24(r.TraceType), NodeLen: int(r.NodeLen), RemainingLen: int(r.RemLen), Hops: []HopJSON{}}
		if r.TraceOption == TypeIncrementalTrace {
			t.Option = "incremental"
		}
		for _, f := range []struct {
			bit  uint8
			name string
		}{{FlagOverflow, "overflow"}, {FlagLoopback, "loopback"}, {FlagActive, "active"}} {
			if r.TraceFlags&f.bit != 0 {
				t.Flags = append(t.Flags, f.name)
			}
		}
		hops := r.Hops()
		for i := range hops {
			t.Hops = append(t.Hops, hopJSON(&hops[i], r.TraceType))
		}
		j.Trace = t
		if d := r.E2EDelayNs(); d >= 0 {
			j.E2EDly = &d
		}
	}
	if r.Have&HavePOT != 0 {
		res := []string{"unchecked", "valid", "invalid"}[min(int(r.POTResult), 2)]
		j.POT = &POTJSON{Namespace: r.POTNS, Random: "0x" + hexU64(r.POTRandom), Cumulative: "0x" + hexU64(r.POTCumulative), Result: res}
	}
	if r.Have&HaveE2E != 0 {
		e := &E2EJSON{Namespace: r.E2ENS, Type: "0x" + hex.EncodeToString([]byte{byte(r.E2EType >> 8), byte(r.E2EType)})}
		if r.E2EType&E2ESeq64 != 0 {
			e.Seq64 = ptr(r.E2E.Seq64)
		}
		if r.E2EType&E2ESeq32 != 0 {
			e.Seq32 = ptr(r.E2E.Seq32)
		}
		if r.E2EType&E2ESeconds != 0 {
			e.Seconds = ptr(r.E2E.Seconds)
		}
		if r.E2EType&E2EFraction != 0 {
			e.Fraction = ptr(r.E2E.Fraction)
		}
		j.E2E = e
	}
	if r.Have&HaveDEX != 0 {
		d := &DEXJSON{Namespace: r.DEXNS, TraceType: hex24(r.DEXType)}
		if r.DEXExt&DEXFlowID != 0 {
			d.FlowID = ptr(r.DEXFlow)
		}
		if r.DEXExt&DEXSequence != 0 {
			d.Seq = ptr(r.DEXSeq)
		}
		j.DEX = d
	}
	return j
}

func hexU64(v uint64) string {
	var b [8]byte
	for i := range b {
		b[i] = byte(v >> (56 - 8*i))
	}
	return hex.EncodeToString(b[:])
}

// MarshalLine is the record's JSON line, newline included.
func (r *Record) MarshalLine(stage string) ([]byte, error) {
	b, err := json.Marshal(r.JSON(stage))
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
