package builtin

import (
	"testing"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/plugins/stagetest"
)

// BenchmarkForward: the forward stage rewriting MACs (swap_mac) on bursts of
// 64 IPv6/UDP frames, in the figures every stage benchmark reports
// (plugins/stagetest): alone on a burst loop (stage-ns/pkt), and inside an
// engine on mem ports (engine+stage-ns/pkt), each beside the bare loop in the
// same run.
func BenchmarkForward(b *testing.B) {
	const keys = "port = \"eth1\"\nswap_mac = true"
	frame := udp6(1000, 2000).bytes()
	b.Run("alone", func(b *testing.B) {
		h := newHarness(b)
		st := h.mustBuild("forward", keys)
		var bu packet.Burst
		for range packet.MaxBurst {
			bu.Push(h.Pkt(frame, portEth0))
		}
		h.Ctx.Now = h.Clock.Now()
		stagetest.Alone(b, packet.MaxBurst, len(frame), func() {
			bu.N = packet.MaxBurst
			for i := range bu.N {
				bu.H[i].P().Continue()
			}
		}, func() { st.Process(&h.Ctx, &bu) })
		if p := bu.P(0); p.Verdict() != packet.Forward || p.OutPort != portEth1 {
			b.Fatalf("verdict %v to port %d", p.Verdict(), p.OutPort)
		}
		bu.N = packet.MaxBurst
		packet.Free(&bu)
	})
	b.Run("engine", func(b *testing.B) {
		stagetest.InEngine(b, stagetest.EngineSpec{Kind: "forward", Keys: keys, Frames: [][]byte{frame},
			Ports: []string{"eth1"}})
	})
}
