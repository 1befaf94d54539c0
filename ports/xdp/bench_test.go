//go:build linux

package xdp

import (
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"

	"github.com/linerate/linerate/internal/testenv"
)

// BenchmarkDispatcherPass: the dispatcher's verdict on the host's own
// traffic (UDP to a port no rule names, so XDP_PASS), with the STAMP rule
// loaded, in BPF_PROG_TEST_RUN (the plain variant) with repeat; beside it,
// in the same run, an empty XDP_PASS program on the same frame. The ratio
// (pass_ns_per_pkt over empty's) is the program's own cost; bench/xdp
// measures the whole path through a router.
func BenchmarkDispatcherPass(b *testing.B) {
	testenv.RequireRoot(b)
	d, err := loadDispatcher(0, nil, true, false)
	if err != nil {
		b.Fatal(err)
	}
	defer d.close()
	if err := d.setRules([]Rule{{NextHeader: ptr(17), UDPDstPort: ptr(862)}}, false); err != nil {
		b.Fatal(err)
	}
	empty, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.XDP, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 2), asm.Return()}})
	if err != nil {
		b.Fatal(err)
	}
	defer empty.Close()
	frame := frame6(b, "2001:db8::2", nil, 9)
	const repeat = 100_000
	run := func(p *ebpf.Program) float64 {
		var total float64
		for range b.N {
			ret, dur, err := p.Benchmark(frame, repeat, nil)
			if err != nil || ret != xdpPass {
				b.Fatalf("verdict %d, %v", ret, err)
			}
			total += float64(dur.Nanoseconds())
		}
		return total / float64(b.N)
	}
	e := run(empty)
	dp := run(d.prog)
	b.ReportMetric(dp, "pass_ns/pkt")
	b.ReportMetric(e, "empty_ns/pkt")
	b.ReportMetric(dp/e, "ratio")
	b.ReportMetric(0, "ns/op")
}
