package stamp

import (
	"slices"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/linerate/linerate/internal/testenv"
	"github.com/linerate/linerate/plugins/stamp/bpf"
)

// BenchmarkXDPPrograms runs the XDP reflector and collector in prog.Run
// (BPF_PROG_TEST_RUN, the kernel's own timing of each run) beside an XDP_TX
// MAC-swap program, alternating the three over rounds in one run, and
// reports each one's ns/pkt and the ratios to the MAC swap (goal: at most
// 2). The reflector and the MAC swap each restore the request first (see
// bench.c); restore_ns is that alone, and the net ratio leaves it out.
func BenchmarkXDPPrograms(b *testing.B) {
	testenv.RequireRoot(b)
	h := newHarness(b)
	// A stateful session, no allow list, no rate limit: what reflecting
	// costs.
	r := h.MustBuildNamed("stamp.reflector", "refl", `
forward = "in"
rate_limit = "0"
synchronized = true
clock_error = "1us"
[[sessions]]
ssid = 7
mode = "stateful"
`).(*reflector)
	frame := stampFrame(b, addrS, addrR, 40000, DefaultPort, 61, 0, senderPayload(1, eeNTP, 7))
	bn, err := bpf.LoadBench(frame)
	if err != nil {
		b.Fatal(err)
	}
	defer bn.Close()
	if err := bn.Reflector.Configure(r.xdpConfig()); err != nil {
		b.Fatal(err)
	}
	if err := r.syncXDP(bn.Reflector, r.reg.rf.Load()); err != nil {
		b.Fatal(err)
	}
	// The collector, with a reply of a session it has.
	cp := newXDPCollectorPair(b, nil)
	var reply []byte
	for _, f := range cp.replies(b) {
		if pay, _ := payloadOf(b, f); len(pay) == BaseLen {
			reply = f
			break
		}
	}
	run := func(p *ebpf.Program, in []byte, n int) float64 {
		b.Helper()
		_, d, err := p.Benchmark(in, n, nil)
		if err != nil {
			b.Fatal(err)
		}
		return float64(d.Nanoseconds())
	}
	// The collector's ring holds 4096 records: runs of at most 4000, drained
	// between them (outside the kernel's timing).
	collect := func(n int) float64 {
		var sum float64
		for done := 0; done < n; {
			k := min(4000, n-done)
			sum += run(cp.prog.Program, reply, k) * float64(k)
			if _, err := cp.prog.Poll(0, func(*bpf.Event) {}); err != nil {
				b.Fatal(err)
			}
			done += k
		}
		return sum / float64(n)
	}
	const rounds = 7
	var restore, reflect, swap, coll []float64
	n := max(b.N, 1000)
	b.ResetTimer()
	for range rounds {
		restore = append(restore, run(bn.Restore, frame, n))
		reflect = append(reflect, run(bn.Reflect, frame, n))
		swap = append(swap, run(bn.MacSwap, frame, n))
		coll = append(coll, collect(n))
	}
	b.StopTimer()
	c, err := bn.Reflector.Counters()
	if err != nil || c[0] != uint64(rounds*n) {
		b.Fatalf("the reflector reflected %v of %d: %v", c, rounds*n, err)
	}
	med := func(v []float64) float64 { v = slices.Clone(v); slices.Sort(v); return v[len(v)/2] }
	rs, rf, sw, co := med(restore), med(reflect), med(swap), med(coll)
	b.ReportMetric(rf, "reflector_ns/pkt")
	b.ReportMetric(co, "collector_ns/pkt")
	b.ReportMetric(sw, "macswap_ns/pkt")
	b.ReportMetric(rs, "restore_ns/pkt")
	b.ReportMetric(rf/sw, "reflector/macswap")
	b.ReportMetric(co/sw, "collector/macswap")
	if net := sw - rs; net > 0 {
		b.ReportMetric((rf-rs)/net, "reflector/macswap_net")
	}
	b.ReportMetric(1e9/rf, "reflector_pkts/s")
	b.ReportMetric(1e9/co, "collector_pkts/s")
}
