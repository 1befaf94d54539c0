package packet

import (
	"bytes"
	"testing"
)

// FuzzNDP parses any bytes as an ND message. What parses must encode back to the
// same bytes and parse again to the same fields; the typed view of its type
// must agree.
func FuzzNDP(f *testing.F) {
	for _, r := range ndpRows {
		f.Add(mustHex(f, r.hex))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var arr [8]NDPOption
		fl, err := ParseNDP(data, arr[:0])
		if err != nil {
			return
		}
		var verr error
		switch fl.Type {
		case ICMPv6NeighborSolicit:
			verr = NDPNeighborSolicit(data).Validate()
			_, _ = NDPNeighborSolicit(data).Options().LinkAddr(NDPOptSourceLinkAddr)
		case ICMPv6NeighborAdvert:
			verr = NDPNeighborAdvert(data).Validate()
			_, _ = NDPNeighborAdvert(data).Options().LinkAddr(NDPOptTargetLinkAddr)
		case ICMPv6RouterSolicit:
			verr = NDPRouterSolicit(data).Validate()
		case ICMPv6RouterAdvert:
			verr = NDPRouterAdvert(data).Validate()
		}
		if verr != nil {
			t.Fatalf("ParseNDP ok, view %v", verr)
		}
		out := make([]byte, fl.Len())
		n, err := fl.Encode(out)
		if err != nil || n != len(data) || !bytes.Equal(out, data) {
			t.Fatalf("Encode: %d %v\n got %x\nwant %x", n, err, out, data)
		}
		var arr2 [8]NDPOption
		fl2, err := ParseNDP(out, arr2[:0])
		if err != nil || fl2.Type != fl.Type || fl2.Rest != fl.Rest || fl2.Target != fl.Target || len(fl2.Options) != len(fl.Options) {
			t.Fatalf("reparse %v: %+v vs %+v", err, fl2, fl)
		}
		if !ICMPv6(data).IsChecksumValid(ndpSrc, ndpDst) == (ICMPv6(data).CalculateChecksum(ndpSrc, ndpDst) == fl.Checksum) {
			t.Fatal("IsChecksumValid disagrees with CalculateChecksum")
		}
	})
}

// FuzzICMPv6 round-trips the header, and checks that the checksum functions
// agree and that SetTypeUpdate keeps a right checksum right.
func FuzzICMPv6(f *testing.F) {
	for _, r := range ndpRows {
		f.Add(mustHex(f, r.hex))
	}
	f.Add([]byte{ICMPv6EchoRequest, 0, 0, 0, 0x12, 0x34, 0, 1, 'h', 'i', '!'})
	f.Add([]byte{ICMPv6TimeExceeded, 0, 0, 0, 0, 0, 0, 0, 0x60, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		data = bytes.Clone(data)
		m := ICMPv6(data)
		if m.Validate() != nil {
			return
		}
		fl := m.Fields()
		out := make(ICMPv6, ICMPv6MinLen)
		out.Encode(&fl)
		if !bytes.Equal(out, data[:ICMPv6MinLen]) || out.Fields() != fl {
			t.Fatalf("Encode(Fields) = %x, want %x", []byte(out), data[:ICMPv6MinLen])
		}
		m.SetChecksum(m.CalculateChecksum(ndpSrc, ndpDst))
		if !m.IsChecksumValid(ndpSrc, ndpDst) {
			t.Fatal("calculated checksum does not validate")
		}
		m.SetTypeUpdate(m.Type() ^ 0x81)
		if !m.IsChecksumValid(ndpSrc, ndpDst) {
			t.Fatal("SetTypeUpdate broke the checksum")
		}
		_ = m.Payload()
	})
}

// FuzzICMPv4 is FuzzICMPv6 for ICMP over IPv4.
func FuzzICMPv4(f *testing.F) {
	f.Add([]byte{ICMPv4Echo, 0, 0, 0, 0x12, 0x34, 0, 1, 'h', 'i', '!'})
	f.Add([]byte{ICMPv4TimeExceeded, 0, 0, 0, 0, 0, 0, 0, 0x45, 0, 0, 28})
	f.Fuzz(func(t *testing.T, data []byte) {
		data = bytes.Clone(data)
		m := ICMPv4(data)
		if m.Validate() != nil {
			return
		}
		fl := m.Fields()
		out := make(ICMPv4, ICMPv4MinLen)
		out.Encode(&fl)
		if !bytes.Equal(out, data[:ICMPv4MinLen]) || out.Fields() != fl {
			t.Fatalf("Encode(Fields) = %x, want %x", []byte(out), data[:ICMPv4MinLen])
		}
		if m.IsChecksumValid() != (m.CalculateChecksum() == m.Checksum()) && m.Checksum() != 0 && m.Checksum() != 0xffff {
			t.Fatalf("IsChecksumValid %v, checksum %#x, calculated %#x", m.IsChecksumValid(), m.Checksum(), m.CalculateChecksum())
		}
		m.SetChecksum(m.CalculateChecksum())
		if !m.IsChecksumValid() {
			t.Fatal("calculated checksum does not validate")
		}
		m.SetTypeUpdate(m.Type() ^ ICMPv4Echo)
		if !m.IsChecksumValid() {
			t.Fatal("SetTypeUpdate broke the checksum")
		}
	})
}

// FuzzARP round-trips valid ARP packets through Fields and Encode.
func FuzzARP(f *testing.F) {
	a := make(ARP, ARPLen)
	a.Encode(&ARPFields{Op: ARPRequest, SenderMAC: ndpMAC, SenderIP: [4]byte{192, 0, 2, 2}, TargetIP: [4]byte{192, 0, 2, 1}})
	f.Add([]byte(a))
	a.Encode(&ARPFields{Op: ARPReply, SenderMAC: ndpMAC2, SenderIP: [4]byte{192, 0, 2, 1}, TargetMAC: ndpMAC, TargetIP: [4]byte{192, 0, 2, 2}})
	f.Add(append([]byte(a), make([]byte, 18)...)) // Ethernet padding
	f.Fuzz(func(t *testing.T, data []byte) {
		b := ARP(data)
		if b.Validate() != nil {
			return
		}
		fl := b.Fields()
		out := make(ARP, ARPLen)
		out.Encode(&fl)
		if !bytes.Equal(out, data[:ARPLen]) || out.Fields() != fl {
			t.Fatalf("Encode(Fields) = %x, want %x", []byte(out), data[:ARPLen])
		}
	})
}
