//go:build dpdk

package dpdk

import (
	"runtime"
	"testing"
	"time"

	"github.com/linerate/linerate/appliance"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/internal/cputime"
)

// BenchmarkForwardNull forwards between two net_null ports, swapping MACs, on
// the benchmark's own thread registered as an EAL lcore: loop=bare is a plain Go
// loop over RxBurst/TxBurst (bench/dpdk's (a)), loop=engine steps an engine with
// a forward stage (bench/dpdk's (b)). cpu-ns/pkt is the thread's CPU time per
// packet, which a shared machine's scheduling does not inflate.
func BenchmarkForwardNull(b *testing.B) {
	requireEAL(b)
	b.Run("loop=bare", func(b *testing.B) {
		onLcore(b, func() func() {
			in, err := Open(Options{Name: "a", Device: vdev("net_null")})
			if err != nil {
				b.Fatal(err)
			}
			out, err := Open(Options{Name: "b", Device: vdev("net_null")})
			if err != nil {
				b.Fatal(err)
			}
			var bu packet.Burst
			return func() {
				defer in.Close()
				defer out.Close()
				n := 0
				b.ResetTimer()
				c0 := cputime.Thread()
				for i := 0; i < b.N; i++ {
					bu.N = 0
					k := in.RxBurst(0, &bu)
					for j := 0; j < k; j++ {
						d := bu.H[j].P().Data()
						d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7], d[8], d[9], d[10], d[11] =
							d[6], d[7], d[8], d[9], d[10], d[11], d[0], d[1], d[2], d[3], d[4], d[5]
					}
					s := out.TxBurst(0, &bu)
					if s < k {
						packet.FreeHandles(bu.H[s:k])
					}
					n += s
				}
				report(b, n, cputime.Thread()-c0)
			}
		})
	})
	b.Run("loop=engine", func(b *testing.B) {
		onLcore(b, func() func() {
			e := buildEngine(b, nullConfig(vdev("net_null"), vdev("net_null"), 8191, ""), appliance.Options{Manual: true})
			if err := e.Start(); err != nil {
				b.Fatal(err)
			}
			return func() {
				defer e.Close()
				for i := 0; i < 1000; i++ {
					e.Step()
				}
				n := 0
				b.ResetTimer()
				c0 := cputime.Thread()
				for i := 0; i < b.N; i++ {
					n += e.Step()
				}
				report(b, n, cputime.Thread()-c0)
				e.Stop()
			}
		})
	})
}

// onLcore runs setup and then the returned loop on a locked thread registered
// with the EAL, as the engine runs its lcores.
func onLcore(b *testing.B, setup func() func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := RegisterThread(); err != nil {
		b.Fatal(err)
	}
	defer UnregisterThread()
	setup()()
}

func report(b *testing.B, packets int, cpu time.Duration) {
	b.StopTimer()
	if packets == 0 {
		b.Fatal("no packets")
	}
	b.ReportMetric(float64(cpu)/float64(packets), "cpu-ns/pkt")
	b.ReportMetric(float64(packets)/float64(cpu)*1e3, "Mpps/core")
}
