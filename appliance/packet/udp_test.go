package packet

import (
	"encoding/binary"
	"math/rand/v2"
	"net"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

func TestUDP(t *testing.T) {
	rows := []struct {
		name string
		hex  string
		err  error
	}{
		{"valid", "1f40 4e20 000c 0000 01020304", nil},
		{"bytes past length", "1f40 4e20 0008 0000 0102", nil},
		{"short", "1f40 4e20 0008 00", ErrTruncated},
		{"length 7", "1f40 4e20 0007 0000", ErrBadLength},
		{"length past data", "1f40 4e20 000d 0000 01020304", ErrTruncated},
	}
	for _, row := range rows {
		if err := UDP(mustHex(t, row.hex)).Validate(); err != row.err {
			t.Errorf("%s: Validate = %v, want %v", row.name, err, row.err)
		}
		if UDP(mustHex(t, row.hex)).IsValid() != (row.err == nil) {
			t.Errorf("%s: IsValid disagrees", row.name)
		}
	}
	u := UDP(mustHex(t, "1f40 4e20 000c abcd 01020304 ffff"))
	if u.SrcPort() != 8000 || u.DstPort() != 20000 || u.Length() != 12 || u.Checksum() != 0xabcd || len(u.Payload()) != 4 {
		t.Fatalf("fields %+v", u.Fields())
	}
	f := UDPFields{SrcPort: 1, DstPort: 2, Length: 8, Checksum: 3}
	u.Encode(&f)
	if u.Fields() != f {
		t.Fatalf("Encode/Fields %+v", u.Fields())
	}
}

// TestUDPChecksumGopacket: gopacket serialises IPv4/UDP and IPv6/UDP with
// checksums; the views read them back and compute the same.
func TestUDPChecksumGopacket(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	opts := gopacket.SerializeOptions{ComputeChecksums: true, FixLengths: true}
	for i := 0; i < 500; i++ {
		payload := gopacket.Payload(randBytes(r, r.IntN(300)))
		udp := &layers.UDP{SrcPort: layers.UDPPort(r.Uint32()), DstPort: layers.UDPPort(r.Uint32())}
		var net_ gopacket.SerializableLayer
		v4 := i%2 == 0
		if v4 {
			ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP,
				SrcIP: net.IP(randBytes(r, 4)), DstIP: net.IP(randBytes(r, 4))}
			udp.SetNetworkLayerForChecksum(ip)
			net_ = ip
		} else {
			ip := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolUDP,
				SrcIP: net.IP(randBytes(r, 16)), DstIP: net.IP(randBytes(r, 16))}
			udp.SetNetworkLayerForChecksum(ip)
			net_ = ip
		}
		buf := gopacket.NewSerializeBuffer()
		if err := gopacket.SerializeLayers(buf, opts, net_, udp, payload); err != nil {
			t.Fatal(err)
		}
		data := buf.Bytes()
		var l Layers
		if err := ParseIP(data, &l); err != nil {
			t.Fatal(err)
		}
		u := l.UDP(data)
		if u == nil || u.Checksum() != udp.Checksum {
			t.Fatalf("UDP %v, gopacket checksum %#04x", u, udp.Checksum)
		}
		if got := l.UDPChecksum(data); got != udp.Checksum {
			t.Fatalf("UDPChecksum = %#04x, gopacket %#04x", got, udp.Checksum)
		}
		if !u.IsChecksumValid(udpPseudo(&l, data)) {
			t.Fatal("IsChecksumValid = false")
		}
		if v4 && !l.IPv4(data).IsChecksumValid() {
			t.Fatal("gopacket's IPv4 checksum does not verify")
		}
		if len(u.Payload()) > 0 {
			u.Payload()[0] ^= 0x40
			if u.IsChecksumValid(udpPseudo(&l, data)) {
				t.Fatal("IsChecksumValid = true after a flipped bit")
			}
		}
	}
}

// A datagram whose sum is all ones carries 0xffff, never 0 (RFC 768).
func TestUDPChecksumZero(t *testing.T) {
	var src, dst [16]byte
	src[15], dst[15] = 1, 2
	u := UDP(make([]byte, 12))
	u.Encode(&UDPFields{SrcPort: 1, DstPort: 2, Length: 12})
	ph := PseudoHeaderChecksum(ProtocolUDP, src[:], dst[:], 12)
	s := Checksum(u[:6], ph)
	binary.BigEndian.PutUint16(u[8:], ^s) // makes the total sum 0xffff
	if got := u.ChecksumIPv6(src, dst); got != 0xffff {
		t.Fatalf("ChecksumIPv6 = %#04x, want 0xffff", got)
	}
	u.SetChecksum(0xffff)
	if !u.IsChecksumValid(ph) {
		t.Fatal("0xffff does not verify")
	}
	u.SetChecksum(0)
	if u.IsChecksumValid(ph) {
		t.Fatal("zero checksum verifies")
	}
}
