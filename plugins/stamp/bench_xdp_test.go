package stamp

import (
	"errors"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"

	"github.com/linerate/linerate/internal/testenv"
	"github.com/linerate/linerate/plugins/stamp/bpf"
)

// BenchmarkXDPPrograms runs the XDP reflector and collector in prog.Run
// (BPF_PROG_TEST_RUN, the kernel's own timing of each run) beside an XDP_TX
// MAC-swap program, alternating the three over rounds in one run, and
// reports each one's ns/pkt and the ratios to the MAC swap (goal: at most
// 2). The reflector and the MAC swap each restore the request first (see
// bench.c); restore_ns is that alone, and the net ratio leaves it out.
//
// Beside them: macswap_clock2, the MAC swap with the reflector's two clock
// reads (T2 first, T3 last), the floor of an honest reflector on this
// machine's clock; macswap_bare, a MAC swap without the restore; and
// reflector_limited, the reflector with a per-source rate limit, as by
// default (rate_limit = "1000pps"), here too high to refuse any; and
// reflector_edge, with the rate limit and its addresses, as on an edge box
// that forwards other nodes' test packets.
func BenchmarkXDPPrograms(b *testing.B) {
	bn, frame, cfg := loadXDPBench(b)
	limited := cfg
	limited.RateLimit, limited.RateBurst = 1e9, 1<<20
	edge := limited // an edge box's: a rate limit, its addresses
	edge.Addresses = []netip.Addr{netip.MustParseAddr("2001:db8:b::1"), addrR, netip.MustParseAddr("192.0.2.1")}
	configure := func(c bpf.ReflectorConfig) {
		if err := bn.Reflector.Configure(c); err != nil {
			b.Fatal(err)
		}
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
	// The collector's ring holds 4096 records: runs of at most 2000 (twice
	// that if one is run again, see below), drained between them (outside
	// the kernel's timing).
	collect := func(n int) float64 {
		var sum float64
		for done := 0; done < n; {
			k := min(2000, n-done)
			sum += runXDP(b, cp.prog.Program, reply, k) * float64(k)
			if _, err := cp.prog.Poll(0, func(*bpf.Event) {}); err != nil {
				b.Fatal(err)
			}
			done += k
		}
		return sum / float64(n)
	}
	const rounds = 7
	var restore, reflect, reflectL, reflectE, swap, swap2, bare, coll []float64
	n := max(b.N, 1000)
	b.ResetTimer()
	for range rounds {
		restore = append(restore, runXDP(b, bn.Restore, frame, n))
		reflect = append(reflect, runXDP(b, bn.Reflect, frame, n))
		swap = append(swap, runXDP(b, bn.MacSwap, frame, n))
		configure(limited)
		reflectL = append(reflectL, runXDP(b, bn.Reflect, frame, n))
		configure(edge)
		reflectE = append(reflectE, runXDP(b, bn.Reflect, frame, n))
		configure(cfg)
		coll = append(coll, collect(n))
		swap2 = append(swap2, runXDP(b, bn.MacSwapClock2, frame, n))
		bare = append(bare, runXDP(b, bn.MacSwapBare, frame, n))
	}
	b.StopTimer()
	// At least: cilium/ebpf runs a prog.Run again from the start when a
	// signal interrupts it (EINTR), on a busy machine now and then.
	c, err := bn.Reflector.Counters()
	if err != nil || c[0] < uint64(3*rounds*n) {
		b.Fatalf("the reflector reflected %v of %d: %v", c, 3*rounds*n, err)
	}
	rs, rf, sw, co := median(restore), median(reflect), median(swap), median(coll)
	sw2, bs := median(swap2), median(bare)
	b.ReportMetric(rf, "reflector_ns/pkt")
	b.ReportMetric(median(reflectL), "reflector_limited_ns/pkt")
	b.ReportMetric(median(reflectE), "reflector_edge_ns/pkt")
	b.ReportMetric(co, "collector_ns/pkt")
	b.ReportMetric(sw, "macswap_ns/pkt")
	b.ReportMetric(sw2, "macswap_clock2_ns/pkt")
	b.ReportMetric(bs, "macswap_bare_ns/pkt")
	b.ReportMetric(rs, "restore_ns/pkt")
	b.ReportMetric(rf/sw, "reflector/macswap")
	b.ReportMetric(co/sw, "collector/macswap")
	b.ReportMetric(rf/sw2, "reflector/macswap_clock2")
	b.ReportMetric(1e9/rf, "reflector_pkts/s")
	b.ReportMetric(1e9/co, "collector_pkts/s")
}

// loadXDPBench loads bench.c's programs with a stateful session's request
// as the frame they restore, the reflector's maps configured as the Go
// stage configures them: no allow list, no rate limit (what reflecting
// costs).
func loadXDPBench(b *testing.B) (*bpf.Bench, []byte, bpf.ReflectorConfig) {
	testenv.RequireRoot(b)
	requireProgram(b, bpf.BenchNeeds, 0)
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
	b.Cleanup(func() { bn.Close() })
	cfg := r.xdpConfig()
	if err := bn.Reflector.Configure(cfg); err != nil {
		b.Fatal(err)
	}
	if err := r.syncXDP(bn.Reflector, r.reg.rf.Load()); err != nil {
		b.Fatal(err)
	}
	return bn, frame, cfg
}

func runXDP(b *testing.B, p *ebpf.Program, in []byte, n int) float64 {
	b.Helper()
	_, d, err := p.Benchmark(in, n, nil)
	if err != nil {
		b.Fatal(err)
	}
	return float64(d.Nanoseconds())
}

func median(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	return v[len(v)/2]
}

// BenchmarkXDPCosts measures the parts of the reflector and collector in
// prog.Run: each part's program (bench.c) restores the request, does its
// part and sends the frame back; alternating with bench_restore over rounds,
// the difference of the medians is the part's cost (per operation where the
// program does it 8 times). lpm_lookup walks an allow list of 4 prefixes. make bench-xdp-stamp runs it; plugins/stamp's
// README has the breakdown.
func BenchmarkXDPCosts(b *testing.B) {
	bn, frame, cfg := loadXDPBench(b)
	// An allow list of a few prefixes for lpm_lookup to walk: the
	// request's source is in the first.
	cfg.Allow = []netip.Prefix{netip.MustParsePrefix("2001:db8::/32"), netip.MustParsePrefix("2001:db8:a::/48"),
		netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("fd00::/8")}
	if err := bn.Reflector.Configure(cfg); err != nil {
		b.Fatal(err)
	}
	const rounds = 7
	n := max(b.N, 1000)
	var restore, ring []float64
	costs := make([][]float64, len(bn.Costs))
	rd, err := ringbuf.NewReader(bn.Ring)
	if err != nil {
		b.Fatal(err)
	}
	defer rd.Close()
	rd.SetDeadline(time.Unix(1, 0)) // never wait
	var rec ringbuf.Record
	// The ring holds 1 MiB, 14563 records of 72 bytes: runs of at most 5000
	// (twice that if one is run again), drained between them (outside the
	// kernel's timing).
	ringRun := func(n int) float64 {
		var sum float64
		for done := 0; done < n; {
			k := min(5000, n-done)
			sum += runXDP(b, bn.RingBuf, frame, k) * float64(k)
			got := 0
			for ; ; got++ {
				if err := rd.ReadInto(&rec); errors.Is(err, os.ErrDeadlineExceeded) {
					break
				} else if err != nil {
					b.Fatal(err)
				}
			}
			if got < k {
				b.Fatalf("%d records of %d in the ring", got, k)
			}
			done += k
		}
		return sum / float64(n)
	}
	b.ResetTimer()
	for range rounds {
		restore = append(restore, runXDP(b, bn.Restore, frame, n))
		for i, c := range bn.Costs {
			costs[i] = append(costs[i], runXDP(b, c.Prog, frame, n))
		}
		ring = append(ring, ringRun(n))
	}
	b.StopTimer()
	rs := median(restore)
	b.ReportMetric(rs, "restore_ns/pkt")
	b.ReportMetric(median(ring)-rs, "ringbuf_ns")
	for i, c := range bn.Costs {
		d, name := median(costs[i])-rs, c.Name
		if n, ok := strings.CutSuffix(name, "_x8"); ok {
			d, name = d/8, n
		}
		b.ReportMetric(d, name+"_ns")
	}
}
