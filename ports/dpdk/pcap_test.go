//go:build dpdk

package dpdk

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/linerate/linerate/appliance"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/appliance/stats"
	"github.com/linerate/linerate/plugins"
)

// The gap stage opens (or closes) two gaps in every packet: gapA bytes after the
// Ethernet header and gapB bytes 20 bytes further on, filled with known
// patterns. It counts which way each gap was made.
const (
	gapAt1, gapA = 14, 64
	gapAt2, gapB = gapAt1 + gapA + 20, 200
)

func pattern(n int, seed byte) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = seed + byte(i)*7
	}
	return p
}

var patA, patB = pattern(gapA, 0x11), pattern(gapB, 0x80)

type gapStage struct {
	remove                 bool
	head, tail, copy, fail *stats.Counter
}

func (g *gapStage) Process(ctx *plugins.Context, b *packet.Burst) {
	for i := 0; i < b.N; i++ {
		if g.remove {
			p := b.P(i)
			if p.RemoveGap(gapAt2, gapB) != nil || p.RemoveGap(gapAt1, gapA) != nil {
				g.fail.Inc()
				p.Drop(packet.ReasonMalformed)
				continue
			}
			p.Forward(p.InPort)
			continue
		}
		for _, gp := range []struct {
			at  int
			pat []byte
		}{{gapAt1, patA}, {gapAt2, patB}} {
			old := b.H[i]
			room := b.P(i).Headroom()
			gap, err := b.InsertGap(i, gp.at, len(gp.pat), nil)
			if err != nil {
				g.fail.Inc()
				b.P(i).Drop(packet.ReasonMalformed)
				break
			}
			copy(gap, gp.pat)
			switch {
			case b.H[i] != old:
				g.copy.Inc()
			case b.P(i).Headroom() < room:
				g.head.Inc()
			default:
				g.tail.Inc()
			}
		}
		if p := b.P(i); p.Verdict() == packet.Continue {
			p.Forward(p.InPort)
		}
	}
}

func init() {
	plugins.Register(plugins.Kind{Name: "dpdktest.gap", Summary: "test: open or close two patterned gaps",
		New: func(s *plugins.Setup) (plugins.Stage, error) {
			var c struct {
				Remove bool `toml:"remove"`
			}
			if err := s.Config.Decode(&c); err != nil {
				return nil, err
			}
			return &gapStage{remove: c.Remove, head: s.Counters.New("gap_head", "gap opened by moving the head"),
				tail: s.Counters.New("gap_tail", "gap opened by moving the tail"),
				copy: s.Counters.New("gap_copy", "gap opened in a copy"),
				fail: s.Counters.New("gap_fail", "no room for the gap")}, nil
		}})
}

// inputFrames builds the test's packets with gopacket: IPv6/UDP and IPv4/UDP of
// sizes that make the second gap move the tail (most) or need a copy (1900).
func inputFrames(t *testing.T) [][]byte {
	t.Helper()
	var out [][]byte
	src, _ := net.ParseMAC("02:00:00:00:00:01")
	dst, _ := net.ParseMAC("02:00:00:00:00:02")
	for i, size := range []int{60, 64, 128, 500, 1000, 1400, 1514, 1800, 1900, 1900, 333} {
		eth := &layers.Ethernet{SrcMAC: src, DstMAC: dst}
		udp := &layers.UDP{SrcPort: layers.UDPPort(1000 + i), DstPort: 4791}
		var ip gopacket.SerializableLayer
		hdr := 14 + 8
		if i%3 == 2 {
			eth.EthernetType = layers.EthernetTypeIPv4
			v4 := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: net.IP{10, 0, 0, 1}, DstIP: net.IP{10, 0, 0, 2}}
			_ = udp.SetNetworkLayerForChecksum(v4)
			ip, hdr = v4, hdr+20
		} else {
			eth.EthernetType = layers.EthernetTypeIPv6
			v6 := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolUDP,
				SrcIP: net.ParseIP("2001:db8::1"), DstIP: net.ParseIP("2001:db8::2")}
			_ = udp.SetNetworkLayerForChecksum(v6)
			ip, hdr = v6, hdr+40
		}
		payload := pattern(max(size-hdr, 0), byte(i))
		buf := gopacket.NewSerializeBuffer()
		opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
		if err := gopacket.SerializeLayers(buf, opts, eth, ip, udp, gopacket.Payload(payload)); err != nil {
			t.Fatal(err)
		}
		out = append(out, append([]byte(nil), buf.Bytes()...))
	}
	return out
}

func writePcap(t *testing.T, path string, frames [][]byte) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := pcapgo.NewWriter(f)
	if err := w.WriteFileHeader(65535, layers.LinkTypeEthernet); err != nil {
		t.Fatal(err)
	}
	ts := time.Unix(1700000000, 0)
	for i, fr := range frames {
		ci := gopacket.CaptureInfo{Timestamp: ts.Add(time.Duration(i) * time.Millisecond), CaptureLength: len(fr), Length: len(fr)}
		if err := w.WritePacket(ci, fr); err != nil {
			t.Fatal(err)
		}
	}
}

func readPcap(t *testing.T, path string) [][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if r.LinkType() != layers.LinkTypeEthernet {
		t.Fatalf("%s: link type %v", path, r.LinkType())
	}
	var out [][]byte
	for {
		data, ci, err := r.ReadPacketData()
		if err != nil {
			break
		}
		if ci.CaptureLength != ci.Length {
			t.Fatalf("%s: record %d truncated (%d of %d)", path, len(out), ci.CaptureLength, ci.Length)
		}
		out = append(out, data)
	}
	return out
}

func samePackets(t *testing.T, what string, got, want [][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d packets, want %d", what, len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("%s: packet %d differs (%d bytes, want %d)", what, i, len(got[i]), len(want[i]))
		}
	}
}

// runPcap passes rx through one stage and writes tx, over a net_pcap port.
func runPcap(t *testing.T, rx, tx string, stage string, n int) *stats.Snapshot {
	t.Helper()
	dev := fmt.Sprintf("%s,rx_pcap=%s,tx_pcap=%s", vdev("net_pcap"), rx, tx)
	e := buildEngine(t, fmt.Sprintf(`version = 1
[engine]
pin = false
[control]
listen = ""
[[ports]]
name = "p"
driver = "dpdk"
device = %q
[[pipelines]]
name = "gap"
rx = ["p"]
[[pipelines.stages]]
kind = "dpdktest.gap"
%s
`, dev, stage), appliance.Options{})
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	if p, ok := e.Port("p"); !ok || p.Info().TimestampSource != TimestampEngine {
		t.Errorf("net_pcap timestamp source: %+v", p.Info())
	}
	deadline := time.Now().Add(20 * time.Second)
	for portSnap(e.Snapshot(), "p").TxPackets < uint64(n) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	e.Stop()
	s := e.Snapshot()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if got := portSnap(s, "p").TxPackets; got != uint64(n) {
		t.Fatalf("%d packets out, want %d; drops %+v", got, n, s.Drops)
	}
	return s
}

func gapCounter(s *stats.Snapshot, name string) uint64 {
	var n uint64
	for _, st := range s.Stages {
		for _, c := range st.Counters {
			if c.Name == name {
				n += c.Value
			}
		}
	}
	return n
}

// TestPcapGaps: a pcap goes in through net_pcap; a stage opens a 64-byte and a
// 200-byte gap in every packet. The pcap that comes out must equal the one the
// test builds with gopacket by splicing the same patterns in. A second run
// closes the gaps again and must give back the input, byte for byte.
func TestPcapGaps(t *testing.T) {
	requireEAL(t)
	dir := t.TempDir()
	in, mid, out := filepath.Join(dir, "in.pcap"), filepath.Join(dir, "mid.pcap"), filepath.Join(dir, "out.pcap")
	frames := inputFrames(t)
	writePcap(t, in, frames)
	pool, err := PoolFor(0, 0, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	avail, copies := pool.Available(), pool.Stats().Copies

	s := runPcap(t, in, mid, "", len(frames))
	var want [][]byte
	for _, f := range frames {
		w := append([]byte(nil), f[:gapAt1]...)
		w = append(w, patA...)
		w = append(w, f[gapAt1:gapAt2-gapA]...)
		w = append(w, patB...)
		w = append(w, f[gapAt2-gapA:]...)
		want = append(want, w)
	}
	expected := filepath.Join(dir, "expected.pcap")
	writePcap(t, expected, want)
	samePackets(t, "gaps opened", readPcap(t, mid), readPcap(t, expected))
	// With 320 bytes of headroom (DPDK's 128 and the private area's 192) the
	// head moves for the first gap of every frame, and for the second where it
	// is the smaller side; the tail moves otherwise, and nothing is copied.
	// A window that then starts in front of the mbuf's buffer leaves as a copy
	// (net_pcap does not offer multi-segment tx; TestTxFront has the chain),
	// which the pcap must not show.
	head, tail, cp := gapCounter(s, "gap_head"), gapCounter(s, "gap_tail"), gapCounter(s, "gap_copy")
	if head < uint64(len(frames)) || tail == 0 || cp != 0 || head+tail != uint64(2*len(frames)) {
		t.Errorf("gap paths: head %d, tail %d, copy %d (want ≥ %d, the rest, 0)", head, tail, cp, len(frames))
	}
	if got := pool.Stats().Copies - copies; got != 0 {
		t.Errorf("pool counted %d InsertGap copies, want 0", got)
	}
	x := portSnap(s, "p").Extra
	if x["tx_chained"]+x["tx_copied"] == 0 || x["tx_slow_dropped"] != 0 {
		t.Errorf("tx slow paths: chained %d, copied %d, dropped %d", x["tx_chained"], x["tx_copied"], x["tx_slow_dropped"])
	}

	runPcap(t, mid, out, "remove = true", len(frames))
	samePackets(t, "gaps closed", readPcap(t, out), frames)
	if got := pool.Available(); got != avail {
		t.Errorf("pool: %d available, %d before", got, avail)
	}
}

// TestPcapJumbo: net_pcap hands a frame longer than the data room over as a
// chain. One that fits a whole buffer is linearised (with less headroom); one
// that does not is dropped and counted.
func TestPcapJumbo(t *testing.T) {
	requireEAL(t)
	dir := t.TempDir()
	in := filepath.Join(dir, "in.pcap")
	fits, tooBig, small := pattern(2100, 1), pattern(3000, 2), pattern(100, 3)
	writePcap(t, in, [][]byte{fits, tooBig, small})
	p, err := Open(Options{Name: "jumbo", Device: fmt.Sprintf("%s,rx_pcap=%s,tx_pcap=%s", vdev("net_pcap"), in, os.DevNull)})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var b packet.Burst
	for i := 0; i < 100 && b.N < 2; i++ {
		p.RxBurst(0, &b)
	}
	if b.N != 2 {
		t.Fatalf("received %d packets, want 2", b.N)
	}
	if !bytes.Equal(b.P(0).Data(), fits) || !bytes.Equal(b.P(1).Data(), small) {
		t.Fatalf("received %d and %d bytes", b.P(0).Len(), b.P(1).Len())
	}
	if hr := b.P(0).Headroom(); hr != b.P(0).Cap()-len(fits) {
		t.Errorf("linearised copy has headroom %d, want %d", hr, b.P(0).Cap()-len(fits))
	}
	packet.Free(&b)
	st := p.Stats()
	if st.Extra["rx_linearized"] != 1 || st.Extra["rx_multiseg_dropped"] != 1 || st.RxDropped != 1 {
		t.Fatalf("linearized %d, multiseg dropped %d, rx dropped %d; want 1, 1, 1",
			st.Extra["rx_linearized"], st.Extra["rx_multiseg_dropped"], st.RxDropped)
	}
}
