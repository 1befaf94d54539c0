package ioam

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"reflect"
	"slices"
	"testing"
)

// recordNode is one node's data of trace type 0xFFFFFE (every field), with
// fields of each kind: values, all ones (unknown), both sizes of ids.
func recordNode(delay uint32) []byte {
	var b []byte
	w := func(v uint32) { b = binary.BigEndian.AppendUint32(b, v) }
	w(63<<24 | 0x000123)   // bit 0: hop limit, node id
	w(7<<16 | 0xFFFF)      // bit 1: ingress 7, egress unknown
	w(1700000000)          // bit 2
	w(0xFFFFFFFF)          // bit 3: unknown
	w(delay)               // bit 4
	w(0xDA7A0001)          // bit 5
	w(5)                   // bit 6
	w(0x1234)              // bit 7: a checksum complement
	w(62<<24 | 0x00C0FFEE) // bit 8: wide hop limit and id
	w(0x12345678)
	w(0x0B0B0B0B) // bit 9: wide ingress, egress unknown
	w(0xFFFFFFFF)
	w(0x11223344) // bit 10
	w(0x55667788)
	w(0xFFFFFFFF) // bit 11: unknown
	w(0x42)       // bit 12: undefined, but not all ones
	for range 9 { // bits 13-21
		w(0xFFFFFFFF)
	}
	w(1<<24 | 0xABC) // bit 22: one word of snapshot, schema 0xABC
	w(0xDEADBEEF)
	return b
}

// A record's JSON line and its control API form carry every field of the
// trace type, short and wide (neither hides the other), the checksum
// complement too, and name the fields a node wrote as all ones instead of
// showing them as values: the kernel's 0xFFFFFFFF is no transit delay.
func TestRecordEveryField(t *testing.T) {
	const tt = 0xFFFFFE
	r := &Record{Role: RoleDecap, Have: HaveTrace, TraceNS: 9, TraceType: tt, NodeLen: uint8(NodeLen(tt)), Format: TimestampPOSIX}
	nodes := append(recordNode(0x80000000), recordNode(0xFFFFFFFF)...) // newest first
	r.DataLen = uint8(copy(r.Data[:], nodes))
	line, err := r.MarshalLine("dec")
	if err != nil {
		t.Fatal(err)
	}
	var j struct {
		Trace struct {
			Hops []map[string]any `json:"hops"`
		} `json:"trace"`
	}
	if err := json.Unmarshal(line, &j); err != nil {
		t.Fatal(err)
	}
	if len(j.Trace.Hops) != 2 {
		t.Fatalf("%d hops: %s", len(j.Trace.Hops), line)
	}
	want := map[string]any{
		"hop_limit": 63.0, "node_id": float64(0x123), "ingress_if": 7.0, "ts_sec": 1700000000.0, "namespace_data": float64(0xDA7A0001),
		"queue_depth": 5.0, "checksum_complement": float64(0x1234), "hop_limit_wide": 62.0, "node_id_wide": float64(0xC0FFEE12345678),
		"ingress_if_wide": float64(0x0B0B0B0B), "namespace_data_wide": float64(0x1122334455667788), "undefined": map[string]any{"bit12": float64(0x42)},
		"schema_id": float64(0xABC), "opaque": "deadbeef",
		"unknown": []any{"egress_if", "ts_frac", "transit_delay_ns", "egress_if_wide", "buffer_occupancy",
			"bit13", "bit14", "bit15", "bit16", "bit17", "bit18", "bit19", "bit20", "bit21"},
	}
	// The encapsulating node (oldest, last in the data) wrote 0xFFFFFFFF as
	// its delay: unknown. The newer one overflowed.
	if !reflect.DeepEqual(j.Trace.Hops[0], want) {
		t.Errorf("hop 0\n got %v\nwant %v", j.Trace.Hops[0], want)
	}
	want["unknown"] = slices.DeleteFunc(slices.Clone(want["unknown"].([]any)), func(v any) bool { return v == "transit_delay_ns" })
	want["transit_delay_overflow"] = true
	if !reflect.DeepEqual(j.Trace.Hops[1], want) {
		t.Errorf("hop 1\n got %v\nwant %v", j.Trace.Hops[1], want)
	}

	// The control API: the same fields, zero where unknown.
	p := RecordProto("dec", r)
	h := p.Trace.Hops[0]
	if h.NodeId != 0x123 || h.NodeIdWide != 0xC0FFEE12345678 || h.HopLimit != 63 || h.HopLimitWide != 62 ||
		h.IngressIf != 7 || h.IngressIfWide != 0x0B0B0B0B || h.EgressIf != 0 || h.NamespaceData != 0xDA7A0001 ||
		h.NamespaceDataWide != 0x1122334455667788 || h.ChecksumComplement != 0x1234 || h.TransitDelayNs != 0 ||
		h.TransitDelayOverflow || h.Undefined[12] != 0x42 || len(h.Undefined) != 1 || !bytes.Equal(h.Opaque, []byte{0xDE, 0xAD, 0xBE, 0xEF}) ||
		!slices.Equal(h.Unknown, []string{"egress_if", "ts_frac", "transit_delay_ns", "egress_if_wide", "buffer_occupancy",
			"bit13", "bit14", "bit15", "bit16", "bit17", "bit18", "bit19", "bit20", "bit21"}) {
		t.Errorf("control API hop %v", h)
	}
	if !p.Trace.Hops[1].TransitDelayOverflow {
		t.Error("control API: no overflow on hop 1")
	}
}

// One packet's records carry the same addresses whoever makes them: a
// transit's DEX record and the decap's both have the outer header's, which
// carries the IOAM data, and the inner header's.
func TestRecordAddresses(t *testing.T) {
	h := newHarness(t)
	enc := h.MustBuild("ioam.encap", encapKeys(1, "encap", `{ namespace = 123, type = "0xC00000", hops = 3 }`)+
		"dex = { namespace = 123, type = \"0x800000\", sequence = true }\n")
	tr := h.MustBuild("ioam.transit", nodeKeys(2)+"export = true\n")
	dec := h.MustBuild("ioam.decap", nodeKeys(3)+"export = true\n")
	in := buildFrame(t, frameSpec{payload: 40, src: "2001:db8:1::7", dst: "2001:db8:2::9"})
	h.run(in, 0, false, enc, tr, dec)
	recs := append(drainRecords(t, tr), drainRecords(t, dec)...)
	if len(recs) != 2 {
		t.Fatalf("%d records", len(recs))
	}
	for _, r := range recs {
		j := r.JSON("x")
		if j.Src != "2001:db8:e::1" || j.Dst != "2001:db8:d::1" || j.InnerSrc != "2001:db8:1::7" || j.InnerDst != "2001:db8:2::9" {
			t.Errorf("%s record: %s → %s, inner %s → %s", j.Role, j.Src, j.Dst, j.InnerSrc, j.InnerDst)
		}
		p := RecordProto("x", &r)
		if !bytes.Equal(p.Src, r.Src[:]) || !bytes.Equal(p.InnerDst, r.InnerDst[:]) {
			t.Errorf("%s record: control API addresses %x %x", j.Role, p.Src, p.InnerDst)
		}
	}
	// Inline: no inner header.
	enc2 := h.MustBuildNamed("ioam.encap", "inline", encapKeys(1, "inline", `{ namespace = 123, type = "0xC00000", hops = 3 }`))
	h.run(in, 0, true, enc2, dec)
	j := drainRecords(t, dec)[0].JSON("x")
	if j.Src != "2001:db8:1::7" || j.Dst != "2001:db8:2::9" || j.InnerSrc != "" {
		t.Errorf("inline record: %s → %s, inner %q", j.Src, j.Dst, j.InnerSrc)
	}
}
