package packet

import (
	"math/rand/v2"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// walkPackets are 64 distinct packets with mixed chains: Ethernet with 0–2 VLAN
// tags, IPv6, Hop-by-Hop sometimes, an SRH of 1–5 segments with a Destination
// Options header before it sometimes, Destination Options sometimes, and UDP.
func walkPackets(tb testing.TB) [][]byte {
	r := rand.New(rand.NewPCG(64, 1))
	pkts := make([][]byte, 64)
	for i := range pkts {
		c := chain{
			tags: i % 3, hbh: -1, srh: 1 + i%5, proto: ProtocolUDP, payload: 16 + r.IntN(200),
		}
		if i%2 == 0 {
			c.hbh = 4 + r.IntN(40)
		}
		c.dest1 = i%7 == 0
		c.dest2 = i%3 == 1
		pkts[i], _ = genPacket(r, c)
		var l Layers
		if err := Parse(pkts[i], &l); err != nil || l.Flags&FlagUDP == 0 {
			tb.Fatalf("packet %d: %v, flags %#x", i, err, l.Flags)
		}
	}
	return pkts
}

// BenchmarkHeaderWalk is one Parse per packet over 64 distinct packets, against
// gopacket's DecodingLayerParser on the same packets.
func BenchmarkHeaderWalk(b *testing.B) {
	pkts := walkPackets(b)
	b.Run("impl=linerate", func(b *testing.B) {
		var l Layers
		var sink uint16
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if Parse(pkts[i&63], &l) != nil {
				b.Fatal("parse failed")
			}
			sink += l.L4
		}
		b.StopTimer()
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/pkt")
		_ = sink
	})
	b.Run("impl=gopacket-DecodingLayerParser", func(b *testing.B) {
		var (
			eth   layers.Ethernet
			dot1q layers.Dot1Q
			ip6   layers.IPv6
			// gopacket's only DecodingLayer for extension headers; its
			// HopByHop, Routing and Destination layers are not ones.
			skip layers.IPv6ExtensionSkipper
			udp  layers.UDP
			pl   gopacket.Payload
		)
		p := gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet, &eth, &dot1q, &ip6, &skip, &udp, &pl)
		p.IgnoreUnsupported = true
		decoded := make([]gopacket.LayerType, 0, 16)
		for i, pkt := range pkts {
			if err := p.DecodeLayers(pkt, &decoded); err != nil || decoded[len(decoded)-2] != layers.LayerTypeUDP {
				b.Fatalf("packet %d: gopacket decoded %v: %v", i, decoded, err)
			}
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			_ = p.DecodeLayers(pkts[i&63], &decoded)
		}
		b.StopTimer()
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/pkt")
	})
}

// BenchmarkAccessors: the data accessors a checked build hooks (Data,
// DataTail, Append, Prepend), over a burst. In an ordinary build the hook is
// compiled out: this must not move.
func BenchmarkAccessors(b *testing.B) {
	s, err := NewSlab(SlabConfig{Name: "bench-accessors", Buffers: MaxBurst})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var bu Burst
	s.Alloc(&bu, MaxBurst)
	defer s.Free(&bu)
	var sink byte
	b.ReportAllocs()
	for b.Loop() {
		for _, h := range bu.Handles() {
			p := h.P()
			d, _ := p.Append(64)
			d[0]++
			hd, _ := p.Prepend(14)
			hd[0] = d[0]
			sink += p.Data()[1] + p.DataTail()[2]
			_ = p.Adj(14)
			_ = p.Trim(64)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*MaxBurst), "ns/pkt")
	_ = sink
}
