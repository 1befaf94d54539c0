package route

import (
	"fmt"
	"testing"

	"github.com/linerate/linerate/appliance/packet"
)

// BenchmarkRoute routes bursts of 64 frames whose next hop is resolved: parse,
// LPM, neighbour lookup, hop limit (TTL and checksum), MAC rewrite. Each
// iteration first restores the 54 (34) header bytes it changes, which the
// figure includes.
func BenchmarkRoute(b *testing.B) {
	for _, v := range []int{6, 4} {
		b.Run(fmt.Sprintf("ip=%d/size=128", v), func(b *testing.B) {
			h := newHarness(b)
			r := h.build("route", "")
			now := h.Clock.Now()
			h.routed().Neighbors().SetStatic(port1, a16("2001:db8:2::2"), host2, now)
			h.routed().Neighbors().SetStatic(port1, a16("::ffff:198.51.100.2"), host2, now)
			frame := udp6(b, host1, mac0, "2001:db8:1::2", "2001:db8:2::2", 64, 128-62-4)
			if v == 4 {
				frame = udp4(b, host1, mac0, "192.0.2.2", "198.51.100.2", 64, 128-42-4)
			}
			var bu packet.Burst
			for range packet.MaxBurst {
				bu.Push(h.Pkt(frame, port0))
			}
			hdr := 14 + 40
			if v == 4 {
				hdr = 14 + 20
			}
			h.Ctx.Now = now
			b.ResetTimer()
			for b.Loop() {
				for i := 0; i < bu.N; i++ {
					p := bu.H[i].P()
					copy(p.Data()[:hdr], frame)
					p.InvalidateLayers()
					p.Continue()
				}
				r.Process(&h.Ctx, &bu)
			}
			b.StopTimer()
			if bu.P(0).Verdict() != packet.Forward || bu.P(0).OutPort != port1 {
				b.Fatalf("verdict %v", bu.P(0).Verdict())
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*packet.MaxBurst), "ns/pkt")
			b.ReportMetric(float64(b.N*packet.MaxBurst)/b.Elapsed().Seconds()/1e6, "Mpps")
			packet.Free(&bu)
		})
	}
}

// BenchmarkAnswerNS turns bursts of Neighbor Solicitations into Advertisements
// in place: validation, checksum, learning (an update of a known entry), and
// the NA with its checksum.
func BenchmarkAnswerNS(b *testing.B) {
	h := newHarness(b)
	n := h.build("neighbor", `reply_rate = "0"`)
	frame := nsFrame(b, host1, "2001:db8:1::2", "2001:db8:1::1", true)
	var bu packet.Burst
	for range packet.MaxBurst {
		bu.Push(h.Pkt(frame, port0))
	}
	h.Ctx.Now = h.Clock.Now()
	b.ResetTimer()
	for b.Loop() {
		for i := 0; i < bu.N; i++ {
			p := bu.H[i].P()
			p.SetWindow(p.Offset(), len(frame))
			copy(p.Data(), frame)
			p.Continue()
		}
		n.Process(&h.Ctx, &bu)
	}
	b.StopTimer()
	if bu.P(0).Verdict() != packet.Forward {
		b.Fatalf("verdict %v", bu.P(0).Verdict())
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*packet.MaxBurst), "ns/pkt")
	packet.Free(&bu)
}
