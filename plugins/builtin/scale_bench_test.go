package builtin

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/internal/cputime"
	"github.com/linerate/linerate/plugins"
	"github.com/linerate/linerate/plugins/stagetest"
)

// The flow-scaling benchmarks of the tester's two ends: the generator makes
// and the sink takes 64-byte IPv4 frames of N flows. 65536 flows is the
// limit of both (the generator fields' Flow ID is 16 bits), and stands for
// the 1M. The smallest size runs first: x-smallest is each size's
// ns/pkt (thread CPU time per packet) over the same run's smallest size's.

var flowSizes = []int{1, 1024, 16384, 65536}

// 64-byte IPv4 frames: the generator's common shape (fillFast's).
const flowAddrs = "ip_version = 4\nsrc = \"198.18.0.1\"\ndst = \"198.19.0.1\"\n"

// BenchmarkGeneratorFlows makes bursts of 64 frames flat out, round-robin
// over N flows as the generator always does (every flow in turn: the whole
// state), each with its own sequence number.
func BenchmarkGeneratorFlows(b *testing.B) {
	var base float64
	for si, n := range flowSizes {
		b.Run(fmt.Sprintf("flows=%d", n), func(b *testing.B) {
			h := newHarness(b)
			g := h.mustBuild("generator", fmt.Sprintf("flows = %d\nsizes = [64]\n%s", n, flowAddrs)).(plugins.Producer)
			bu := &packet.Burst{}
			ctx := &h.Ctx
			poll := func() {
				ctx.Now++
				g.Produce(ctx, bu)
				if bu.N != packet.MaxBurst {
					b.Fatalf("made %d of %d", bu.N, packet.MaxBurst)
				}
				packet.Free(bu)
			}
			ctx.Now = h.Clock.Now() + 1
			for range max(2*n/packet.MaxBurst, 16) { // every flow, twice
				poll()
			}
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			b.ReportAllocs()
			b.ResetTimer()
			c0 := cputime.Thread()
			for range b.N {
				poll()
			}
			cpu := cputime.Thread() - c0
			b.StopTimer()
			ns := float64(cpu) / (float64(b.N) * packet.MaxBurst)
			b.ReportMetric(ns, "ns/pkt")
			if si == 0 {
				base = ns
			}
			b.ReportMetric(ns/base, "x-smallest")
		})
	}
}

// BenchmarkSinkFlows takes bursts of 64 generator frames of N flows, in a
// seeded random order that visits every flow once per N packets, each with
// the next sequence number of its flow: the parse, the latency and the
// flow's loss and reorder tracking. Every round puts the frames back (a
// copy, the flow and sequence written); that is timed on its own and taken
// out of ns/pkt.
func BenchmarkSinkFlows(b *testing.B) {
	var base float64
	for si, n := range flowSizes {
		b.Run(fmt.Sprintf("flows=%d", n), func(b *testing.B) {
			h := newHarness(b)
			g := h.mustBuild("generator", "sizes = [64]\n"+flowAddrs).(plugins.Producer)
			k := h.mustBuild("sink", fmt.Sprintf("flows = %d\n", n))
			made := h.produce(g)
			frame := append([]byte(nil), made.H[0].P().Data()...)
			packet.Free(made)
			var l packet.Layers
			if err := packet.Parse(frame, &l); err != nil {
				b.Fatal(err)
			}
			fields := int(l.L4) + 8
			r := rand.New(rand.NewPCG(uint64(n), 28))
			order := make([]uint16, 0, max(n, 1<<12))
			for len(order) < cap(order) {
				for _, f := range r.Perm(n) {
					order = append(order, uint16(f))
				}
			}
			seqs := make([]uint64, n)
			bu := &packet.Burst{}
			if got := h.Pools["default"].Alloc(bu, packet.MaxBurst); got != packet.MaxBurst {
				b.Fatalf("allocated %d", got)
			}
			defer packet.Free(bu)
			headroom := bu.H[0].P().Offset()
			at := 0
			reset := func() {
				bu.N = packet.MaxBurst
				for i := range bu.N {
					p := bu.H[i].P()
					p.SetWindow(headroom, len(frame))
					d := p.Data()
					copy(d, frame)
					f := order[at]
					if at++; at == len(order) {
						at = 0
					}
					binary.BigEndian.PutUint64(d[fields:], uint64(f)<<48|seqs[f])
					seqs[f]++
					p.RxTime = 2
					p.Continue()
				}
			}
			ctx := &h.Ctx
			ctx.Env = &keepEnv{Env: h.Env}
			for range max(len(order)/packet.MaxBurst, 1) { // every flow seen
				reset()
				k.Process(ctx, bu)
			}
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			t0 := h.Counter("tracked")
			// The resets alone, then the sequence numbers put back: the
			// timed rounds continue every flow's series.
			seqs0, at0 := append([]uint64(nil), seqs...), at
			c0 := cputime.Thread()
			for range b.N {
				reset()
			}
			resetNs := cputime.Thread() - c0
			copy(seqs, seqs0)
			at = at0
			b.ReportAllocs()
			b.ResetTimer()
			c0 = cputime.Thread()
			for range b.N {
				reset()
				k.Process(ctx, bu)
			}
			cpu := cputime.Thread() - c0
			b.StopTimer()
			if got, want := h.Counter("tracked")-t0, uint64(b.N)*packet.MaxBurst; got != want {
				b.Fatalf("tracked %d of %d", got, want)
			}
			if lost, dup := h.Counter("lost"), h.Counter("duplicates"); lost != 0 || dup != 0 {
				b.Fatalf("lost %d, duplicates %d", lost, dup)
			}
			ns := float64(cpu-resetNs) / (float64(b.N) * packet.MaxBurst)
			b.ReportMetric(ns, "ns/pkt")
			b.ReportMetric(float64(resetNs)/(float64(b.N)*packet.MaxBurst), "reset_ns/pkt")
			if si == 0 {
				base = ns
			}
			b.ReportMetric(ns/base, "x-smallest")
		})
	}
}

// keepEnv is an Env whose Free keeps the packet: the benchmark reuses them.
type keepEnv struct{ *stagetest.Env }

func (e *keepEnv) Free(h packet.Handle) {}
