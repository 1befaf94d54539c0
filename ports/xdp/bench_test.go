//go:build linux

package xdp

import (
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/gopacket/gopacket/layers"

	"github.com/linerate/linerate/internal/testenv"
)

// BenchmarkDispatcherPass: the dispatcher's verdict on the host's own
// traffic (UDP to a port no rule names; TCP behind a Hop-by-Hop router
// alert, as MLD has: both XDP_PASS), with the STAMP and IOAM rules of the
// docs loaded, in BPF_PROG_TEST_RUN (the plain variant) with repeat. Beside it, in the same run and interleaved, an empty XDP_PASS
// program on the same frame (the baseline) and the dispatcher walking the
// rules for every packet (as it did before the summary). pass_ns/pkt over
// empty_ns/pkt is the program's own cost; bench/xdp measures the whole path
// through a router.
func BenchmarkDispatcherPass(b *testing.B) {
	testenv.RequireRoot(b)
	rules := []Rule{{NextHeader: ptr(17), UDPDstPort: ptr(862)},
		{DstPrefix: netip.MustParsePrefix("2001:db8:aa::/48"), IOAM: ptr(true)}}
	via, _, _ := carrier()
	var ds [2]*dispatcher
	for i, walk := range []bool{false, true} {
		d, err := loadDispatcher(dispatcherConfig{via: via, walk: walk}, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer d.close()
		if err := d.setRules(rules, false); err != nil {
			b.Fatal(err)
		}
		ds[i] = d
	}
	empty, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.XDP, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 2), asm.Return()}})
	if err != nil {
		b.Fatal(err)
	}
	defer empty.Close()
	const repeat = 100_000
	progs := []*ebpf.Program{empty, ds[0].prog, ds[1].prog}
	for _, c := range []struct {
		name  string
		frame []byte
	}{
		{"udp", frame6(b, "2001:db8::2", nil, 9)},
		// Extension headers: decided on the summary once parsed.
		{"hop-by-hop", frame6(b, "2001:db8::2", []layers.IPv6HopByHopOption{
			{OptionType: 5, OptionLength: 2, OptionData: []byte{0, 0}}}, 0)},
	} {
		b.Run(c.name, func(b *testing.B) {
			var total [3]float64
			for i := range b.N {
				for j := range progs {
					k := (i + j) % len(progs) // rotate: a drift weighs on each alike
					ret, dur, err := progs[k].Benchmark(c.frame, repeat, nil)
					if err != nil || ret != xdpPass {
						b.Fatalf("verdict %d, %v", ret, err)
					}
					total[k] += float64(dur.Nanoseconds())
				}
			}
			e, dp, walk := total[0]/float64(b.N), total[1]/float64(b.N), total[2]/float64(b.N)
			b.ReportMetric(e, "empty_ns/pkt")
			b.ReportMetric(dp, "pass_ns/pkt")
			b.ReportMetric(walk, "walk_ns/pkt")
			b.ReportMetric(dp/e, "pass/empty")
			b.ReportMetric(walk/e, "walk/empty")
			b.ReportMetric(0, "ns/op")
		})
	}
}
