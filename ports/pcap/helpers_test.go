package pcap

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/linerate/linerate/appliance/packet"
)

// capture is one packet of a test file, as the oracle sees it.
type capture struct {
	data []byte
	ts   time.Time
}

// testFrames are the frames every file test carries: VLAN-tagged IPv4, plain
// IPv4, IPv6 and a 9000-byte jumbo frame.
func testFrames(t testing.TB) [][]byte {
	t.Helper()
	src, _ := net.ParseMAC("02:00:00:00:00:01")
	dst, _ := net.ParseMAC("02:00:00:00:00:02")
	ser := func(ls ...gopacket.SerializableLayer) []byte {
		buf := gopacket.NewSerializeBuffer()
		opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
		if err := gopacket.SerializeLayers(buf, opts, ls...); err != nil {
			t.Fatal(err)
		}
		return append([]byte(nil), buf.Bytes()...)
	}
	ip4 := func() *layers.IPv4 {
		return &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP,
			SrcIP: net.IP{192, 0, 2, 1}, DstIP: net.IP{198, 51, 100, 2}}
	}
	udp := func(l gopacket.NetworkLayer) *layers.UDP {
		u := &layers.UDP{SrcPort: 4000, DstPort: 862}
		_ = u.SetNetworkLayerForChecksum(l)
		return u
	}
	payload := func(n int) gopacket.Payload {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(i * 7)
		}
		return p
	}
	var frames [][]byte
	{
		ip := ip4()
		frames = append(frames, ser(&layers.Ethernet{SrcMAC: src, DstMAC: dst, EthernetType: layers.EthernetTypeDot1Q},
			&layers.Dot1Q{VLANIdentifier: 100, Priority: 3, Type: layers.EthernetTypeIPv4}, ip, udp(ip), payload(60)))
	}
	{
		ip := ip4()
		frames = append(frames, ser(&layers.Ethernet{SrcMAC: src, DstMAC: dst, EthernetType: layers.EthernetTypeIPv4},
			ip, udp(ip), payload(18)))
	}
	{
		ip := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolUDP,
			SrcIP: net.ParseIP("2001:db8::1"), DstIP: net.ParseIP("2001:db8::2")}
		frames = append(frames, ser(&layers.Ethernet{SrcMAC: src, DstMAC: dst, EthernetType: layers.EthernetTypeIPv6},
			ip, udp(ip), payload(1200)))
	}
	{
		ip := ip4()
		frames = append(frames, ser(&layers.Ethernet{SrcMAC: src, DstMAC: dst, EthernetType: layers.EthernetTypeIPv4},
			ip, udp(ip), payload(9000-14-20-8)))
	}
	if len(frames[3]) != 9000 {
		t.Fatalf("jumbo frame is %d bytes", len(frames[3]))
	}
	return frames
}

// testCaptures stamps frames with irregular gaps from a fixed start.
func testCaptures(t testing.TB, frames [][]byte) []capture {
	base := time.Unix(1_700_000_000, 123_456_000)
	gaps := []time.Duration{0, 1500 * time.Microsecond, 2 * time.Millisecond, 10 * time.Microsecond, 3 * time.Second}
	var cs []capture
	ts := base
	for i, f := range frames {
		ts = ts.Add(gaps[i%len(gaps)])
		cs = append(cs, capture{data: f, ts: ts})
	}
	return cs
}

// writeOracle writes caps with gopacket's pcap writer.
func writeOracle(t testing.TB, caps []capture, nanos bool) string {
	t.Helper()
	var buf bytes.Buffer
	w := pcapgo.NewWriter(&buf)
	if nanos {
		w = pcapgo.NewWriterNanos(&buf)
	}
	if err := w.WriteFileHeader(65536, layers.LinkTypeEthernet); err != nil {
		t.Fatal(err)
	}
	for _, c := range caps {
		ci := gopacket.CaptureInfo{Timestamp: c.ts, CaptureLength: len(c.data), Length: len(c.data)}
		if err := w.WritePacket(ci, c.data); err != nil {
			t.Fatal(err)
		}
	}
	return writeTemp(t, "in.pcap", buf.Bytes())
}

// writeOracleNg writes caps with gopacket's pcapng writer, alternating between
// two interfaces.
func writeOracleNg(t testing.TB, caps []capture) string {
	t.Helper()
	var buf bytes.Buffer
	w, err := pcapgo.NewNgWriter(&buf, layers.LinkTypeEthernet)
	if err != nil {
		t.Fatal(err)
	}
	id, err := w.AddInterface(pcapgo.NgInterface{Name: "second", LinkType: layers.LinkTypeEthernet, SnapLength: 65535})
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range caps {
		ci := gopacket.CaptureInfo{Timestamp: c.ts, CaptureLength: len(c.data), Length: len(c.data)}
		if i%2 == 1 {
			ci.InterfaceIndex = id
		}
		if err := w.WritePacket(ci, c.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return writeTemp(t, "in.pcapng", buf.Bytes())
}

func writeTemp(t testing.TB, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// readOracle reads a classic pcap file with gopacket.
func readOracle(t testing.TB, path string) []capture {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var cs []capture
	for {
		data, ci, err := r.ReadPacketData()
		if err != nil {
			break
		}
		if ci.CaptureLength != ci.Length {
			t.Errorf("record %d: captured %d of %d", len(cs), ci.CaptureLength, ci.Length)
		}
		cs = append(cs, capture{data: data, ts: ci.Timestamp})
	}
	return cs
}

// drain polls p until it is done or gives nothing max times in a row, and
// returns copies of what it received with RxTime. It frees every packet.
func drain(t testing.TB, p *Port, limit int) (out []capture, rxTimes []int64) {
	t.Helper()
	var b packet.Burst
	idle := 0
	for len(out) < limit && idle < 3 {
		b.Reset()
		n := p.RxBurst(0, &b)
		if n == 0 {
			idle++
			continue
		}
		idle = 0
		if b.N != n {
			t.Fatalf("RxBurst returned %d but burst holds %d", n, b.N)
		}
		for i := 0; i < n; i++ {
			pk := b.P(i)
			if pk.Headroom() < packet.MinHeadroom {
				t.Errorf("packet headroom %d", pk.Headroom())
			}
			out = append(out, capture{data: append([]byte(nil), pk.Data()...)})
			rxTimes = append(rxTimes, pk.RxTime)
		}
		packet.Free(&b)
	}
	return out, rxTimes
}
