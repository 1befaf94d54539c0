package packet

import (
	"net/netip"
	"testing"
)

func TestIPv6(t *testing.T) {
	// Traffic class 0xb8, flow label 0x12345, payload 8, UDP, hop limit 64,
	// 2001:db8::1 → 2001:db8::2.
	hdr := "6b812345 0008 11 40 20010db8000000000000000000000001 20010db8000000000000000000000002"
	rows := []struct {
		name string
		mod  func(b []byte) []byte
		err  error
	}{
		{"valid", func(b []byte) []byte { return b }, nil},
		{"padding after payload", func(b []byte) []byte { return append(b, 0, 0) }, nil},
		{"short", func(b []byte) []byte { return b[:39] }, ErrTruncated},
		{"version 4", func(b []byte) []byte { b[0] = 0x4b; return b }, ErrBadVersion},
		{"payload past data", func(b []byte) []byte { return b[:47] }, ErrTruncated},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			b := row.mod(append(mustHex(t, hdr), make([]byte, 8)...))
			if err := IPv6(b).Validate(); err != row.err {
				t.Fatalf("Validate = %v, want %v", err, row.err)
			}
			if IPv6(b).IsValid() != (row.err == nil) {
				t.Fatal("IsValid disagrees with Validate")
			}
		})
	}
	b := IPv6(append(mustHex(t, hdr), make([]byte, 8)...))
	if b.Version() != 6 || b.TrafficClass() != 0xb8 || b.FlowLabel() != 0x12345 || b.PayloadLength() != 8 ||
		b.NextHeader() != ProtocolUDP || b.HopLimit() != 64 || len(b.Payload()) != 8 {
		t.Fatalf("fields %+v", b.Fields())
	}
	if b.SrcAddr() != netip.MustParseAddr("2001:db8::1") || b.DstAddr() != netip.MustParseAddr("2001:db8::2") {
		t.Fatalf("addrs %v %v", b.SrcAddr(), b.DstAddr())
	}
	// Setters touch only their field.
	b.SetTrafficClass(0x01)
	if b.TrafficClass() != 1 || b.FlowLabel() != 0x12345 || b.Version() != 6 {
		t.Fatal("SetTrafficClass")
	}
	b.SetFlowLabel(0xfffff0 | 0xabcde)
	if b.FlowLabel() != (0xfffff0|0xabcde)&0xfffff || b.TrafficClass() != 1 || b.Version() != 6 {
		t.Fatal("SetFlowLabel")
	}
	b.SetPayloadLength(7)
	b.SetNextHeader(ProtocolRouting)
	b.SetHopLimit(1)
	b.SetSrc(netip.MustParseAddr("2001:db8::a").As16())
	b.SetDst(netip.MustParseAddr("2001:db8::b").As16())
	f := b.Fields()
	out := make(IPv6, IPv6Len)
	out.Encode(&f)
	if string(out) != string(b[:IPv6Len]) {
		t.Fatalf("Encode(Fields()) = %x\nwant %x", []byte(out), []byte(b[:IPv6Len]))
	}
	if f.PayloadLength != 7 || f.NextHeader != ProtocolRouting || f.HopLimit != 1 ||
		b.DstAddr() != netip.MustParseAddr("2001:db8::b") || b.SrcAddr() != netip.MustParseAddr("2001:db8::a") {
		t.Fatalf("setters: %+v", f)
	}
}
