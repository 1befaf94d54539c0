//go:build dpdk

// Command dpdk measures linerate's DPDK path against DPDK itself, on one core:
//
//   - C: cref/ref.c, the classic rx → MAC swap → tx loop between two net_null
//     ports, in C, in its own process;
//   - (a) the same loop in Go through ports/dpdk (one cgo call per rx burst and
//     one per tx burst, metadata synced in C), on an EAL-registered thread;
//   - (b) the engine: two net_null ports and a forward stage with swap_mac =
//     true, on one busy-polling pinned lcore.
//
// All three use bursts of 64 (linerate's packet.MaxBurst) and pools of the same
// shape (8191 mbufs, priv_size 128, 2048-byte data room, cache 256). Runs are
// interleaved in rounds, so a neighbour on a shared machine disturbs all three
// alike; each figure is the median over rounds, and each ratio the median of
// the rounds' own ratios. Run it with `make bench-dpdk`.
//
// A figure is given twice: per wall-clock second, and per second of CPU time of
// the polling thread ("per core"). On a dedicated core the two agree; on a
// shared machine the scheduler gives each run a different share of the core,
// and only the second compares the code paths. The ratios use the second.
//
// With -lcore-model it also compares the two ways an lcore can be an EAL thread
// (see ports/dpdk/eal.go): the (a) loop on a Go thread registered with
// rte_thread_register, and the same loop in an exported Go function started on
// an EAL worker with rte_eal_remote_launch.
//
// With -generator it compares linerate test's generator with C loops sending
// the same frames instead (generator.go); -cpuprofile writes a pprof profile
// of the run.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/linerate/linerate/appliance"
	"github.com/linerate/linerate/appliance/cpuset"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/internal/cputime"
	"github.com/linerate/linerate/ports/dpdk"

	_ "github.com/linerate/linerate/plugins/builtin" // forward
)

const poolSize = 8191

func main() {
	ref := flag.String("ref", "bin/dpdk-ref", "the C reference `binary` (built from bench/dpdk/cref)")
	rounds := flag.Int("rounds", 5, "interleaved rounds")
	dur := flag.Duration("dur", 2*time.Second, "length of one run")
	cpuFlag := flag.Int("cpu", -1, "the one CPU every loop runs on (default: the last this process may use)")
	lcoreModel := flag.Bool("lcore-model", false, "also compare rte_thread_register with rte_eal_remote_launch")
	generator := flag.Bool("generator", false, "instead, compare linerate test's generator with a C loop sending the same frames")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to `file` (go tool pprof)")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fail("%v", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fail("%v", err)
		}
		defer pprof.StopCPUProfile()
	}

	cpus := cpuset.Allowed()
	cpu := cpus[len(cpus)-1]
	if *cpuFlag >= 0 {
		cpu = *cpuFlag
	}
	main := cpus[0]
	if main == cpu && len(cpus) > 1 {
		main = cpus[1]
	}
	lcores := strconv.Itoa(main)
	if *lcoreModel {
		lcores += "," + strconv.Itoa(cpu) // a worker lcore on the bench CPU, for remote launch
	}
	eal := []string{"--no-huge", "--in-memory", "--no-pci", "--no-telemetry", "-m", "1024", "--log-level", "warning"}
	if err := dpdk.Start(append([]string{"-l", lcores}, eal...), dpdk.EAL{PoolSize: poolSize, PoolCache: 256}); err != nil {
		fail("%v", err)
	}
	defer dpdk.Cleanup()

	in, err := dpdk.Open(dpdk.Options{Name: "in", Device: "net_null10"})
	if err != nil {
		fail("%v", err)
	}
	out, err := dpdk.Open(dpdk.Options{Name: "out", Device: "net_null11"})
	if err != nil {
		fail("%v", err)
	}
	pair := &loopPorts{in: in, out: out}
	if *generator {
		benchGenerator(out, cpu, *rounds, *dur)
		_ = in.Close()
		_ = out.Close()
		return
	}

	c, a, b := &series{name: "C reference"}, &series{name: "(a) Go loop via ports/dpdk"}, &series{name: "(b) engine, forward swap_mac"}
	reg, rem := &series{name: "rte_thread_register"}, &series{name: "rte_eal_remote_launch"}
	cin := &series{name: "C loop in this process"}
	csync := &series{name: "C loop via linerate's C layer"}
	var ratioA, ratioB, ratioModel, ratioModelWall, ratioIn, ratioSync []float64
	for r := 0; r < *rounds; r++ {
		cm, err := runRef(*ref, cpu, *dur)
		if err != nil {
			fail("C reference: %v", err)
		}
		am := pair.runRegistered(cpu, *dur)
		bm, err := runEngine(cpu, *dur)
		if err != nil {
			fail("engine: %v", err)
		}
		im := pair.runCInProcess(cpu, *dur, false)
		sm := pair.runCInProcess(cpu, *dur, true)
		c.add(cm)
		a.add(am)
		b.add(bm)
		cin.add(im)
		csync.add(sm)
		ratioIn = append(ratioIn, am.perCore()/im.perCore())
		ratioSync = append(ratioSync, am.perCore()/sm.perCore())
		ratioA, ratioB = append(ratioA, am.perCore()/cm.perCore()), append(ratioB, bm.perCore()/cm.perCore())
		fmt.Fprintf(os.Stderr, "round %d: C %v  (a) %v  (b) %v  C in-process %v  C via linerate's C %v\n", r+1, cm, am, bm, im, sm)
		if *lcoreModel {
			// Back to back, so both meet the same neighbours.
			gm := pair.runRegistered(cpu, *dur)
			rm, err := pair.runRemote(cpu, *dur)
			if err != nil {
				fail("remote launch: %v", err)
			}
			reg.add(gm)
			rem.add(rm)
			ratioModel = append(ratioModel, rm.perCore()/gm.perCore())
			ratioModelWall = append(ratioModelWall, rm.perWall()/gm.perWall())
			fmt.Fprintf(os.Stderr, "round %d: registered %v  remote launch %v\n", r+1, gm, rm)
		}
	}
	if err := in.Close(); err != nil {
		fail("%v", err)
	}
	if err := out.Close(); err != nil {
		fail("%v", err)
	}

	fmt.Printf("DPDK forwarding, rx → MAC swap → tx on net_null, one core (CPU %d), bursts of %d, %d rounds of %s\n\n",
		cpu, packet.MaxBurst, *rounds, *dur)
	fmt.Printf("  %-30s %14s %14s %9s\n", "", "Mpps per core", "Mpps (wall)", "core use")
	for _, s := range []*series{c, a, b} {
		s.print()
	}
	fmt.Printf("\n  (a)/C = %.2f   (goal ≥ 0.85)\n", median(ratioA))
	fmt.Printf("  (b)/C = %.2f   (goal ≥ 0.70)\n", median(ratioB))
	fmt.Printf("\nthe same loop in C inside this process, on (a)'s ports and pools: plain DPDK, and through\n")
	fmt.Printf("linerate's C layer (metadata sync included, no Go):\n")
	cin.print()
	csync.print()
	fmt.Printf("  (a)/(C in-process) = %.2f   (a)/(C via linerate's C layer) = %.2f\n", median(ratioIn), median(ratioSync))
	if *lcoreModel {
		fmt.Printf("\nlcore model, the (a) loop on the same CPU:\n")
		reg.print()
		rem.print()
		fmt.Printf("  remote/registered = %.2f per core, %.2f wall\n", median(ratioModel), median(ratioModelWall))
	}
}

// result is one run: packets sent, wall time, and CPU time of the polling thread.
type result struct {
	packets   uint64
	wall, cpu float64 // seconds
}

func (r result) perCore() float64 { return float64(r.packets) / r.cpu / 1e6 }
func (r result) perWall() float64 { return float64(r.packets) / r.wall / 1e6 }

func (r result) String() string {
	return fmt.Sprintf("%.2f Mpps/core (%.2f wall, %.0f%% of the core)", r.perCore(), r.perWall(), 100*r.cpu/r.wall)
}

type series struct {
	name    string
	results []result
}

func (s *series) add(r result) { s.results = append(s.results, r) }

func (s *series) print() {
	var core, wall, use []float64
	for _, r := range s.results {
		core, wall, use = append(core, r.perCore()), append(wall, r.perWall()), append(use, r.cpu/r.wall)
	}
	fmt.Printf("  %-30s %14.2f %14.2f %8.0f%%\n", s.name, median(core), median(wall), 100*median(use))
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench/dpdk: "+format+"\n", args...)
	os.Exit(1)
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// runRef runs the C reference in a process of its own (an EAL of its own) on cpu.
func runRef(bin string, cpu int, d time.Duration) (result, error) {
	args := []string{"--no-huge", "--no-shconf", "--no-pci", "--no-telemetry", "-m", "512", "--log-level", "warning",
		"-l", strconv.Itoa(cpu), "--", strconv.FormatFloat(d.Seconds(), 'f', 3, 64), strconv.Itoa(packet.MaxBurst)}
	cmd := exec.Command(bin, args...)
	cmd.Stderr = os.Stderr
	outp, err := cmd.Output()
	if err != nil {
		return result{}, fmt.Errorf("%s: %w", bin, err)
	}
	var r result
	sc := bufio.NewScanner(strings.NewReader(string(outp)))
	for sc.Scan() {
		if _, err := fmt.Sscanf(sc.Text(), "packets %d seconds %f cpu %f", &r.packets, &r.wall, &r.cpu); err == nil && r.cpu > 0 {
			return r, nil
		}
	}
	return result{}, fmt.Errorf("%s printed %q", bin, outp)
}

// loopPorts is the (a) loop's pair of ports.
type loopPorts struct {
	in, out *dpdk.Port
	b       packet.Burst
}

// loop forwards for d: rx a burst, swap each packet's MACs, tx, free what the
// port did not take. The calling thread must be locked: its CPU time is read.
func (l *loopPorts) loop(d time.Duration) result {
	b := &l.b
	var sent uint64
	start, cpu0 := time.Now(), cputime.Thread()
	end := start.Add(d)
	for iter := 0; ; iter++ {
		if iter&1023 == 0 && time.Now().After(end) {
			break
		}
		b.N = 0
		n := l.in.RxBurst(0, b)
		for i := 0; i < n; i++ {
			swapMAC(b.H[i].P().Data())
		}
		k := l.out.TxBurst(0, b)
		if k < n {
			packet.FreeHandles(b.H[k:n])
		}
		sent += uint64(k)
	}
	return result{packets: sent, wall: time.Since(start).Seconds(), cpu: (cputime.Thread() - cpu0).Seconds()}
}

// pin pins the calling (locked) thread to cpu.
func pin(cpu int) {
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		fail("pin to CPU %d: %v", cpu, err)
	}
}

// swapMAC swaps destination and source as the forward stage does: two loads and
// two stores per address.
func swapMAC(d []byte) {
	_ = d[11]
	d0, d1 := *(*uint32)(ptr(d, 0)), *(*uint16)(ptr(d, 4))
	s0, s1 := *(*uint32)(ptr(d, 6)), *(*uint16)(ptr(d, 10))
	*(*uint32)(ptr(d, 0)), *(*uint16)(ptr(d, 4)) = s0, s1
	*(*uint32)(ptr(d, 6)), *(*uint16)(ptr(d, 10)) = d0, d1
}

// runRegistered runs the loop on a locked thread pinned to cpu and registered
// with the EAL, as the engine runs its lcores.
func (l *loopPorts) runRegistered(cpu int, d time.Duration) result {
	res := make(chan result)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		pin(cpu)
		if err := dpdk.RegisterThread(); err != nil {
			fail("%v", err)
		}
		defer dpdk.UnregisterThread()
		l.loop(200 * time.Millisecond) // warm the caches and the mempool cache
		res <- l.loop(d)
	}()
	return <-res
}

// runEngine runs the engine with a forward stage on one busy pinned lcore and
// measures its transmit rate.
func runEngine(cpu int, d time.Duration) (result, error) {
	seq := engineSeq.Add(1)
	toml := fmt.Sprintf(`version = 1
[engine]
poll = "busy"
[control]
listen = ""
[dpdk]
pool_size = %d
pool_cache = 256
[[ports]]
name = "n0"
driver = "dpdk"
device = "net_null%d"
[[ports]]
name = "n1"
driver = "dpdk"
device = "net_null%d"
[[pipelines]]
name = "forward"
lcores = [%d]
rx = ["n0"]
[[pipelines.stages]]
kind = "forward"
port = "n1"
swap_mac = true
`, poolSize, 2*seq+100, 2*seq+101, cpu)
	return measureEngine("bench-dpdk.toml", toml, "n1", d)
}

// measureEngine runs the engine config text (named name in errors) and
// measures port's transmit rate over d after a warm-up. The CPU time is the
// busiest thread's: the lcore.
func measureEngine(name, text, port string, d time.Duration) (result, error) {
	cfg, err := config.Parse(name, []byte(text))
	if err != nil {
		return result{}, err
	}
	e, err := appliance.New(cfg, appliance.Options{Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return result{}, err
	}
	defer e.Close()
	if err := e.Start(); err != nil {
		return result{}, err
	}
	tx := func() (uint64, time.Time) {
		s := e.Snapshot()
		for _, p := range s.Ports {
			if p.Name == port {
				return p.TxPackets, s.Time
			}
		}
		return 0, s.Time
	}
	time.Sleep(200 * time.Millisecond)
	p0, t0 := tx()
	c0 := threadTimes()
	time.Sleep(d)
	p1, t1 := tx()
	c1 := threadTimes()
	e.Stop()
	busiest := 0.0
	for tid, v := range c1 {
		busiest = max(busiest, v-c0[tid])
	}
	return result{packets: p1 - p0, wall: t1.Sub(t0).Seconds(), cpu: busiest}, nil
}

// threadTimes reads every thread's CPU time (utime + stime) in seconds.
func threadTimes() map[string]float64 {
	out := map[string]float64{}
	tasks, _ := os.ReadDir("/proc/self/task")
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + t.Name() + "/stat")
		if err != nil {
			continue
		}
		// Fields after the command's closing parenthesis; utime and stime are
		// the 14th and 15th of the whole line.
		i := strings.LastIndexByte(string(b), ')')
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 13 {
			continue
		}
		u, _ := strconv.ParseFloat(f[11], 64)
		s, _ := strconv.ParseFloat(f[12], 64)
		out[t.Name()] = (u + s) / 100 // USER_HZ
	}
	return out
}

var engineSeq atomic.Int32
