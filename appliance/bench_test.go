package appliance_test

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
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

// multiCoreConfig is two independent pipelines, each a generator of 64-byte
// frames whose MACs a forward stage swaps on the way to a null port of its
// own, on the lcores (CPUs) cpuA and cpuB: one lcore runs both when they are
// the same.
func multiCoreConfig(cpuA, cpuB int) string {
	c := "version = 1\n[engine]\npin = true\npoll = \"busy\"\n[control]\nlisten = \"\"\n" +
		"[[pools]]\nname = \"default\"\nbuffers = 16384\n"
	for i, cpu := range []int{cpuA, cpuB} {
		c += fmt.Sprintf("[[ports]]\nname = \"null%d\"\ndriver = \"null\"\n", i)
		c += fmt.Sprintf("[[pipelines]]\nname = \"p%d\"\nlcores = [%d]\n", i, cpu)
		c += "[[pipelines.stages]]\nkind = \"generator\"\nip_version = 4\nsrc = \"192.0.2.1\"\n" +
			"dst = \"198.51.100.1\"\nsrc_mac = \"02:00:00:00:00:01\"\ndst_mac = \"02:00:00:00:00:02\"\n" +
			"flows = 16\nsizes = [64]\n"
		c += fmt.Sprintf("[[pipelines.stages]]\nkind = \"forward\"\nport = \"null%d\"\nswap_mac = true\n", i)
	}
	return c
}

// BenchmarkMultiCore: the two pipelines of multiCoreConfig on one lcore, then
// on two (the last two CPUs the process may use), each run for a fixed wall
// time, alternately, b.N rounds of both (-benchtime 10x). It reports both
// rates in wall-clock Mpps, the ratio two/one (the goal is 1.9 where two
// CPUs are free for the lcores), and how free each CPU was just before each
// round, from /proc/stat (1 = idle): on a shared machine the lcores get only
// what the others leave, and the Go runtime, the benchmark's own goroutine
// and the kernel share the same CPUs.
func BenchmarkMultiCore(b *testing.B) {
	cpus := processCPUs
	if len(cpus) < 2 {
		b.Skipf("needs two CPUs; this process may use %v", cpus)
	}
	c0, c1 := cpus[len(cpus)-2], cpus[len(cpus)-1]
	const trial = 200 * time.Millisecond
	var one, two float64
	free := map[int]float64{}
	for range b.N {
		for cpu, f := range cpuFree(b, []int{c0, c1}, 100*time.Millisecond) {
			free[cpu] += f / float64(b.N)
		}
		r1 := multiCoreRate(b, multiCoreConfig(c1, c1), trial)
		r2 := multiCoreRate(b, multiCoreConfig(c0, c1), trial)
		one += r1 / float64(b.N)
		two += r2 / float64(b.N)
	}
	b.ReportMetric(one, "1lcore-Mpps")
	b.ReportMetric(two, "2lcores-Mpps")
	b.ReportMetric(two/one, "2/1")
	b.ReportMetric(free[c0], fmt.Sprintf("cpu%d-free", c0))
	b.ReportMetric(free[c1], fmt.Sprintf("cpu%d-free", c1))
}

// processCPUs are the CPUs the process may use, read as it starts: a thread
// a benchmark pinned may have become another's since.
var processCPUs = cpuset.Allowed()

// multiCoreRate runs an engine of config for d and returns what its null
// ports took, in Mpps of wall time.
func multiCoreRate(b *testing.B, config string, d time.Duration) float64 {
	e := enginetest.Start(b, config, appliance.Options{})
	time.Sleep(20 * time.Millisecond) // past the start
	count := func() uint64 {
		n := uint64(0)
		for _, name := range []string{"null0", "null1"} {
			p, _ := e.Port(name)
			n += p.Stats().TxPackets
		}
		return n
	}
	n0, t0 := count(), time.Now()
	time.Sleep(d)
	n, el := count()-n0, time.Since(t0)
	e.Stop()
	return float64(n) / el.Seconds() / 1e6
}

// cpuFree is how idle each of cpus was over d (idle and iowait over all
// time, from /proc/stat), while this process waits.
func cpuFree(b *testing.B, cpus []int, d time.Duration) map[int]float64 {
	read := func() map[int][2]uint64 {
		data, err := os.ReadFile("/proc/stat")
		if err != nil {
			b.Fatal(err)
		}
		out := map[int][2]uint64{}
		for _, line := range strings.Split(string(data), "\n") {
			f := strings.Fields(line)
			if len(f) < 6 || !strings.HasPrefix(f[0], "cpu") || f[0] == "cpu" {
				continue
			}
			cpu, err := strconv.Atoi(f[0][3:])
			if err != nil {
				continue
			}
			var total, idle uint64
			for i, v := range f[1:] {
				n, _ := strconv.ParseUint(v, 10, 64)
				total += n
				if i == 3 || i == 4 { // idle, iowait
					idle += n
				}
			}
			out[cpu] = [2]uint64{idle, total}
		}
		return out
	}
	a := read()
	time.Sleep(d)
	z := read()
	free := map[int]float64{}
	for _, cpu := range cpus {
		if dt := z[cpu][1] - a[cpu][1]; dt > 0 {
			free[cpu] = float64(z[cpu][0]-a[cpu][0]) / float64(dt)
		}
	}
	return free
}
