package appliance_test

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/linerate/linerate/appliance"
	"github.com/linerate/linerate/appliance/cpuset"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/appliance/ring"
	"github.com/linerate/linerate/internal/cputime"
	"github.com/linerate/linerate/internal/enginetest"
)

const forwardMemConfig = `
version = 1
[engine]
pin = false
[control]
listen = ""
[[pools]]
name = "default"
buffers = 16384
[[ports]]
name = "m0"
driver = "mem"
peer = "m1"
[[ports]]
name = "m1"
driver = "mem"
peer = "m0"
[[ports]]
name = "null0"
driver = "null"
[[pipelines]]
name = "source"
lcores = [0]
[[pipelines.stages]]
kind = "generator"
ip_version = 4
src = "192.0.2.1"
dst = "198.51.100.1"
src_mac = "02:00:00:00:00:01"
dst_mac = "02:00:00:00:00:02"
flows = 16
sizes = [64]
[[pipelines.stages]]
kind = "forward"
port = "m0"
swap_mac = true
[[pipelines]]
name = "forward"
lcores = [0]
rx = ["m1"]
[[pipelines.stages]]
kind = "forward"
port = "null0"
swap_mac = true
`

// BenchmarkForwardMem: one lcore generates 64-byte frames (every header written),
// forwards them over a mem link, receives them, swaps their MACs and transmits them
// to a null port. The baseline in the same run is the floor under it: a bare
// loop that allocates, writes and frees the same frames with no engine at all.
func BenchmarkForwardMem(b *testing.B) {
	b.Run("engine", func(b *testing.B) {
		defer pinToLast(b)()
		e := enginetest.Start(b, forwardMemConfig, appliance.Options{Manual: true})
		for i := 0; i < 100; i++ {
			e.Step()
		}
		null, _ := e.Port("null0")
		before := null.Stats().TxPackets
		b.ResetTimer()
		start, cpu0 := time.Now(), cputime.Thread()
		for i := 0; i < b.N; i++ {
			e.Step()
		}
		el, cpu := time.Since(start), cputime.Thread()-cpu0
		b.StopTimer()
		n := null.Stats().TxPackets - before
		report(b, n, el, cpu)
		e.Stop()
		if err := e.Close(); err != nil {
			b.Fatal(err)
		}
	})
	b.Run("baseline=alloc-write-swap-free", func(b *testing.B) {
		pool, err := packet.NewSlab(packet.SlabConfig{Name: "bench-baseline", Buffers: 1024})
		if err != nil {
			b.Fatal(err)
		}
		defer pool.Close()
		var tmpl [60]byte
		for i := range tmpl {
			tmpl[i] = byte(i)
		}
		var bu packet.Burst
		defer pinToLast(b)()
		b.ResetTimer()
		start, cpu0 := time.Now(), cputime.Thread()
		for i := 0; i < b.N; i++ {
			pool.Alloc(&bu, packet.MaxBurst)
			for j := 0; j < bu.N; j++ {
				p := bu.H[j].P()
				d, _ := p.Append(len(tmpl))
				copy(d, tmpl[:])
				packet.Ethernet(d).SwapMAC()
			}
			pool.Free(&bu)
		}
		report(b, uint64(b.N)*packet.MaxBurst, time.Since(start), cputime.Thread()-cpu0)
	})
}

// pinToLast locks the goroutine to its thread and pins the thread to the last
// CPU the process may use, where the engine puts a pipeline that names no
// lcores. The CPUs of a shared VM differ: on the one these figures come from
// the first gives 26 or 42 Mpps from run to run, the last 43. It returns the
// undo.
func pinToLast(b *testing.B) func() {
	runtime.LockOSThread()
	var old unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		b.Fatal(err)
	}
	cpus := cpuset.Allowed()
	var one unix.CPUSet
	one.Set(cpus[len(cpus)-1])
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		b.Fatal(err)
	}
	return func() {
		_ = unix.SchedSetaffinity(0, &old)
		runtime.UnlockOSThread()
	}
}

// report gives packets per second of the core's own CPU time (Mpps: what one
// core does, whatever else a shared machine runs) and of wall time (wall-Mpps).
func report(b *testing.B, n uint64, wall, cpu time.Duration) {
	if cpu <= 0 {
		cpu = wall
	}
	b.ReportMetric(float64(n)/cpu.Seconds()/1e6, "Mpps")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(n), "cpu-ns/pkt")
	b.ReportMetric(float64(n)/wall.Seconds()/1e6, "wall-Mpps")
}

// BenchmarkRing: a producer and a consumer lcore (goroutines locked to their
// threads, pinned when the machine has two CPUs) move bursts of 32 handles
// through an SPSC ring. ns/burst is the producer's time per burst; the baseline
// in the same run is a Go channel of bursts between the same two threads.
func BenchmarkRing(b *testing.B) {
	const burst = 32
	pin := func(cpu int) {
		runtime.LockOSThread()
		if runtime.NumCPU() >= 2 {
			pinTo(cpu)
		}
	}
	b.Run("spsc", func(b *testing.B) {
		r := ring.NewHandles(1024)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			pin(1)
			defer runtime.UnlockOSThread()
			var out [burst]packet.Handle
			got := 0
			for got < b.N*burst {
				got += r.Dequeue(out[:])
			}
		}()
		pin(0)
		defer runtime.UnlockOSThread()
		var in [burst]packet.Handle
		for i := range in {
			in[i] = packet.Handle(i + 1)
		}
		b.ResetTimer()
		start := time.Now()
		for i := 0; i < b.N; i++ {
			for sent := 0; sent < burst; {
				sent += r.Enqueue(in[sent:])
			}
		}
		wg.Wait()
		el := time.Since(start)
		b.ReportMetric(float64(el.Nanoseconds())/float64(b.N), "ns/burst")
	})
	b.Run("baseline=chan", func(b *testing.B) {
		c := make(chan [burst]packet.Handle, 1024/burst)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			pin(1)
			defer runtime.UnlockOSThread()
			for i := 0; i < b.N; i++ {
				<-c
			}
		}()
		pin(0)
		defer runtime.UnlockOSThread()
		var in [burst]packet.Handle
		b.ResetTimer()
		start := time.Now()
		for i := 0; i < b.N; i++ {
			c <- in
		}
		wg.Wait()
		el := time.Since(start)
		b.ReportMetric(float64(el.Nanoseconds())/float64(b.N), "ns/burst")
	})
}
