package packet

import (
	"bytes"
	"net/netip"
	"reflect"
	"testing"
)

func TestIPv4(t *testing.T) {
	// 192.168.0.1 → 192.168.0.199, UDP, DF, TTL 64, total length 0x73.
	hdr := "4500 0073 0000 4000 4011 b861 c0a8 0001 c0a8 00c7"
	rows := []struct {
		name string
		mod  func(b []byte) []byte
		err  error
	}{
		{"valid", func(b []byte) []byte { return b }, nil},
		{"padding after total length", func(b []byte) []byte { return append(b, 0, 0, 0) }, nil},
		{"short", func(b []byte) []byte { return b[:19] }, ErrTruncated},
		{"version 6", func(b []byte) []byte { b[0] = 0x65; return b }, ErrBadVersion},
		{"ihl 4", func(b []byte) []byte { b[0] = 0x44; return b }, ErrBadLength},
		{"total below ihl", func(b []byte) []byte { b[2], b[3] = 0, 19; return b }, ErrBadLength},
		{"total past data", func(b []byte) []byte { return b[:0x72] }, ErrTruncated},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			b := append(mustHex(t, hdr), make([]byte, 0x73-20)...)
			b = row.mod(b)
			if err := IPv4(b).Validate(); err != row.err {
				t.Fatalf("Validate = %v, want %v", err, row.err)
			}
			if IPv4(b).IsValid() != (row.err == nil) {
				t.Fatal("IsValid disagrees with Validate")
			}
		})
	}
	b := IPv4(append(mustHex(t, hdr), make([]byte, 0x73-20)...))
	if b.Version() != 4 || b.HeaderLen() != 20 || b.TOS() != 0 || b.TotalLength() != 0x73 || b.ID() != 0 ||
		b.Flags() != IPv4FlagDontFragment || b.More() || b.FragmentOffset() != 0 || b.TTL() != 64 ||
		b.Protocol() != ProtocolUDP || b.Checksum() != 0xb861 {
		t.Fatalf("fields %+v", b.Fields())
	}
	if b.SrcAddr() != netip.MustParseAddr("192.168.0.1") || b.DstAddr() != netip.MustParseAddr("192.168.0.199") {
		t.Fatalf("addrs %v %v", b.SrcAddr(), b.DstAddr())
	}
	if len(b.Options()) != 0 || len(b.Payload()) != 0x73-20 {
		t.Fatalf("options %d payload %d", len(b.Options()), len(b.Payload()))
	}
}

func TestIPv4EncodeRoundTrip(t *testing.T) {
	f := IPv4Fields{
		TOS: 0xb8, TotalLength: 100, ID: 0x1234, Flags: IPv4FlagMoreFragments, FragmentOffset: 1480,
		TTL: 3, Protocol: ProtocolUDP, Src: [4]byte{10, 0, 0, 1}, Dst: [4]byte{10, 0, 0, 2},
		Options: []byte{0x94, 4, 0, 0, 1},
	}
	b := make(IPv4, 100)
	if err := b.Encode(&f); err != nil {
		t.Fatal(err)
	}
	if b.HeaderLen() != 28 || f.HeaderLen() != 28 {
		t.Fatalf("HeaderLen %d", b.HeaderLen())
	}
	b.SetChecksum(b.CalculateChecksum())
	if err := b.Validate(); err != nil || !b.IsChecksumValid() {
		t.Fatalf("Validate %v, checksum ok %v", err, b.IsChecksumValid())
	}
	g := b.Fields()
	if !bytes.Equal(g.Options, []byte{0x94, 4, 0, 0, 1, 0, 0, 0}) {
		t.Fatalf("options %x", g.Options)
	}
	g.Options, f.Options = nil, nil
	f.Checksum = b.Checksum()
	if !reflect.DeepEqual(g, f) {
		t.Fatalf("Fields = %+v\nwant %+v", g, f)
	}
	if !b.More() || b.FragmentOffset() != 1480 {
		t.Fatal("fragment fields")
	}
	b.SetSrc([4]byte{1, 2, 3, 4})
	b.SetDst([4]byte{5, 6, 7, 8})
	b.SetTOS(1)
	b.SetID(2)
	b.SetTTL(9)
	b.SetProtocol(ProtocolTCP)
	b.SetTotalLength(28)
	b.SetFlagsFragmentOffset(IPv4FlagDontFragment, 0)
	if b.Src() != [4]byte{1, 2, 3, 4} || b.Dst() != [4]byte{5, 6, 7, 8} || b.TOS() != 1 || b.ID() != 2 ||
		b.TTL() != 9 || b.Protocol() != ProtocolTCP || b.TotalLength() != 28 || b.Flags() != IPv4FlagDontFragment {
		t.Fatalf("setters: %+v", b.Fields())
	}
	if err := b.Encode(&IPv4Fields{Options: make([]byte, 41)}); err != ErrBadLength {
		t.Fatalf("41 option bytes: %v", err)
	}
	if err := IPv4(make([]byte, 19)).Encode(&IPv4Fields{}); err != ErrNoSpace {
		t.Fatalf("short buffer: %v", err)
	}
}
