// Command ioam is `make bench-ioam`: the cost of IOAM in the engine, answering
// the seed paper's weak points (one packet size, minimum delays only).
//
// For each frame size it runs the engine on mem ports, one lcore stepped on
// one locked goroutine (Options.Manual, so nothing else shares the work):
//
//	generator → [ioam.encap] → forward m0 ~~ m1 → [ioam.decap] → sink
//
// plain (no IOAM stages) and with IOAM on 0%, 1% and 100% of the packets
// (IPv6-in-IPv6 with a pre-allocated trace of type 0xF00000, room for 4 nodes,
// the encapsulating and decapsulating nodes' data written). It prints the CPU
// time per packet, what IOAM adds to it, and the p50/p99 per-packet latency
// the sink measures from the generator's timestamp.
//
// Then the line-rate check: with IOAM on every packet, the generator offers
// 10 GbE line rate for the size to a device under test on its own lcore —
//
//	generator → link (10Gbit) → a0 ~~ a1 → ioam.encap → b0 ~~ b1 → ioam.decap → sink
//
// through a link stage capped at rate = "10Gbit" (the 10 GbE port; the
// device's egress must be faster, since IOAM makes every packet longer). Time
// is virtual and advances by the CPU time the device's lcore really takes: it
// is one core's worth, and the traffic source and sink (the tester, on the
// other lcore) cost it nothing, as a hardware tester would. The device's time
// is the monotonic clock around each of its loops (≈ 55 ns to read here; the
// thread CPU clock costs 1.4 µs a read in this VM, more than a loop), scaled by
// the share of wall time the thread had a CPU over the last thousand loops. A run passes when
// every offered packet reaches the sink at the offered rate.
//
// Sizes are Ethernet frames with their FCS. The smallest IPv6/UDP frame is
// 66 bytes (14 + 40 + 8 + 4): no 64-byte IPv6 frame exists, so 66 stands for
// 64 (14.2 Mpps at 10 GbE instead of 14.88).
package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/linerate/linerate/appliance"
	"github.com/linerate/linerate/appliance/clock"
	"github.com/linerate/linerate/appliance/stats"
	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/internal/cputime"

	_ "github.com/linerate/linerate/plugins/builtin" // generator, forward, link, sink
	_ "github.com/linerate/linerate/plugins/ioam"    // ioam.encap, ioam.decap
	_ "github.com/linerate/linerate/ports/mem"
)

func main() {
	sizesFlag := flag.String("sizes", "66,256,512,1200,1500", "frame sizes, with FCS")
	count := flag.Int("count", 400000, "packets per cost run")
	runs := flag.Int("runs", 3, "cost runs per case; the median is printed")
	lineDur := flag.Duration("line", 500*time.Millisecond, "length of each line-rate run")
	flag.Parse()
	var sizes []int
	for _, f := range strings.Split(*sizesFlag, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 66 || n > 1518 {
			fmt.Fprintf(os.Stderr, "bench-ioam: size %q: 66..1518\n", f)
			os.Exit(2)
		}
		sizes = append(sizes, n)
	}
	runtime.LockOSThread()

	fmt.Printf("bench-ioam: one lcore, mem ports, %d packets a run; %s, %d CPUs\n\n", *count, cpuModel(), runtime.NumCPU())
	tw := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "size\tIOAM\tns/pkt\tadded ns/pkt\tMpps\tp50 latency\tp99 latency\tdelivered\t")
	for _, size := range sizes {
		var plain float64
		for _, sc := range []struct {
			name string
			rate string // "" = no IOAM stages
		}{{"none", ""}, {"0%", "0/1"}, {"1%", "1/100"}, {"100%", "1/1"}} {
			var rs []costResult
			for range max(*runs, 1) {
				r, err := costRun(size, *count, sc.rate)
				if err != nil {
					fmt.Fprintf(os.Stderr, "bench-ioam: size %d IOAM %s: %v\n", size, sc.name, err)
					os.Exit(1)
				}
				rs = append(rs, r)
			}
			sort.Slice(rs, func(i, j int) bool { return rs[i].nsPerPkt < rs[j].nsPerPkt })
			r := rs[len(rs)/2]
			added := "-"
			if sc.rate == "" {
				plain = r.nsPerPkt
			} else {
				added = fmt.Sprintf("%+.1f", r.nsPerPkt-plain)
			}
			p50, p99 := "-", "-"
			if r.p50 > 0 {
				p50, p99 = dur(r.p50), dur(r.p99)
			}
			fmt.Fprintf(tw, "%d\t%s\t%.1f\t%s\t%.2f\t%s\t%s\t%d/%d\t\n", size, sc.name, r.nsPerPkt, added,
				1e3/r.nsPerPkt, p50, p99, r.delivered, *count)
		}
	}
	tw.Flush()
	fmt.Println("\n(66-byte frames have no room for the generator's timestamp: the sink cannot time them.)")

	fmt.Printf("\nline rate: 10 GbE (a link capped at \"10Gbit\") offered to encap on one core (time = that core's loops), IOAM on every packet, %v a run\n\n", *lineDur)
	tw = tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "size\toffered Mpps\tachieved Mpps\tdelivered\tlost\tbudget ns/pkt\tdevice ns/pkt\tverdict\t")
	for _, size := range sizes {
		r, err := lineRun(size, *lineDur)
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench-ioam: line rate, size %d: %v\n", size, err)
			os.Exit(1)
		}
		// 1% for the clock: the lcore's CPU time still counts what a core
		// shared with other work loses to it (caches, a sibling thread).
		verdict := "no loss at line rate"
		if r.lost > 0 || r.achieved < r.offered*0.99 {
			verdict = "FALLS SHORT"
		}
		fmt.Fprintf(tw, "%d\t%.3f\t%.3f (%.1f%%)\t%d\t%d\t%.1f\t%.1f\t%s\t\n", size, r.offered/1e6, r.achieved/1e6, 100*r.achieved/r.offered,
			r.delivered, r.lost, 1e9/r.offered, r.devNs, verdict)
	}
	tw.Flush()
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	for _, l := range strings.Split(string(b), "\n") {
		if name, ok := strings.CutPrefix(l, "model name"); ok {
			return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(name), ":"))
		}
	}
	return runtime.GOARCH
}

func dur(ns uint64) string { return time.Duration(ns).Round(10 * time.Nanosecond).String() }

// prelude is every run's engine: one lcore loop per Step, no control API, a
// pool of %d buffers.
const prelude = `
version = 1
[engine]
pin = false
poll = "busy"
[control]
listen = ""
[[pools]]
name = "default"
buffers = %d
`

const head = `[[ports]]
name = "m0"
driver = "mem"
peer = "m1"
[[ports]]
name = "m1"
driver = "mem"
peer = "m0"
`

const encapStage = `
[[pipelines.stages]]
kind = "ioam.encap"
name = "encap"
node_id = 1
mode = "encap"
src = "2001:db8:e::1"
dst = "2001:db8:d::1"
namespaces = [ { id = 1 } ]
[[pipelines.stages.profiles]]
rate = %q
trace = { namespace = 1, type = "0xF00000", hops = 4 }
`

const decapStage = `
[[pipelines.stages]]
kind = "ioam.decap"
name = "decap"
node_id = 4
histograms = false
namespaces = [ { id = 1 } ]
`

// buildConfig is one cost run's engine: source pipeline (generator, the
// optional encap, forward) and sink pipeline (optional decap, sink).
func buildConfig(size, count int, rate string) string {
	var b strings.Builder
	fmt.Fprintf(&b, prelude, 65536)
	b.WriteString(head)
	b.WriteString("\n[[pipelines]]\nname = \"source\"\nlcores = [0]\n")
	fmt.Fprintf(&b, "[[pipelines.stages]]\nkind = \"generator\"\nsrc = \"2001:db8:1::1\"\ndst = \"2001:db8:2::1\"\nsizes = [%d]\ncount = %d\nflows = 16\n", size, count)
	if rate != "" {
		fmt.Fprintf(&b, encapStage, rate)
	}
	b.WriteString("[[pipelines.stages]]\nkind = \"forward\"\nport = \"m0\"\n")
	b.WriteString("\n[[pipelines]]\nname = \"sink\"\nlcores = [0]\nrx = [\"m1\"]\n")
	if rate != "" {
		b.WriteString(decapStage)
	}
	b.WriteString("[[pipelines.stages]]\nkind = \"sink\"\nname = \"sink\"\nflows = 16\n")
	return b.String()
}

func newEngine(cfgText string) (*appliance.Engine, error) { return newEngineClock(cfgText, nil) }

func newEngineClock(cfgText string, c clock.Clock) (*appliance.Engine, error) {
	cfg, err := config.Parse("bench-ioam.toml", []byte(cfgText))
	if err != nil {
		return nil, err
	}
	e, err := appliance.New(cfg, appliance.Options{Manual: true, Clock: c, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return nil, err
	}
	return e, e.Start()
}

func counter(s *stats.Snapshot, stage, name string) uint64 {
	var v uint64
	for _, st := range s.Stages {
		if st.Name == stage {
			for _, c := range st.Counters {
				if c.Name == name {
					v += c.Value
				}
			}
		}
	}
	return v
}

func drops(s *stats.Snapshot) uint64 {
	var n uint64
	for _, d := range s.Drops {
		n += d.Count
	}
	return n
}

type costResult struct {
	nsPerPkt  float64
	p50, p99  uint64
	delivered uint64
}

// costRun sends count packets as fast as one lcore can and returns its CPU
// time per packet and the sink's latency percentiles.
func costRun(size, count int, rate string) (costResult, error) {
	e, err := newEngine(buildConfig(size, count, rate))
	if err != nil {
		return costResult{}, err
	}
	// Warm up the pools and caches, then count from a clean snapshot.
	for range 64 {
		e.Step()
	}
	c0 := cputime.Thread()
	var s *stats.Snapshot
	for i := 0; ; i++ {
		if e.Step() == 0 {
			s = e.Snapshot()
			if counter(s, "sink", "received") >= uint64(count) || i > 1<<26 {
				break
			}
		}
		if i%4096 == 4095 {
			s = e.Snapshot()
			if counter(s, "sink", "received") >= uint64(count) {
				break
			}
		}
	}
	cpu := cputime.Thread() - c0
	s = e.Snapshot()
	r := costResult{nsPerPkt: float64(cpu) / float64(count), delivered: counter(s, "sink", "received")}
	if rate == "1/1" {
		if n := counter(s, "encap", "encapsulated"); n != uint64(count) {
			return r, fmt.Errorf("encap gave IOAM to %d of %d packets", n, count)
		}
	}
	for _, h := range s.Histogram {
		if h.Name == "latency" && strings.HasSuffix(h.Owner, "/sink") {
			r.p50, r.p99 = h.Hist.Quantile(0.5), h.Hist.Quantile(0.99)
		}
	}
	if d := drops(s); d != 0 {
		return r, fmt.Errorf("%d packets dropped", d)
	}
	e.Stop()
	return r, e.Close()
}

type lineResult struct {
	offered, achieved float64 // packets per second
	delivered, lost   uint64
	devNs             float64 // the device's time per packet when it runs flat out
}

// lineConfig is the line-rate rig: the tester's lcore (generator, the 10 GbE
// link when paced at genRate, decap, sink) and the device under test's (encap,
// forward).
func lineConfig(size, count int, genRate string) string {
	var b strings.Builder
	fmt.Fprintf(&b, prelude, 131072)
	for _, p := range [][2]string{{"a0", "a1"}, {"a1", "a0"}, {"b0", "b1"}, {"b1", "b0"}} {
		fmt.Fprintf(&b, "[[ports]]\nname = %q\ndriver = \"mem\"\npeer = %q\n", p[0], p[1])
	}
	b.WriteString("\n[[pipelines]]\nname = \"source\"\nlcores = [0]\n")
	fmt.Fprintf(&b, "[[pipelines.stages]]\nkind = \"generator\"\nsrc = \"2001:db8:1::1\"\ndst = \"2001:db8:2::1\"\nsizes = [%d]\ncount = %d\nflows = 16\n", size, count)
	if genRate != "" {
		fmt.Fprintf(&b, "rate = %q\n[[pipelines.stages]]\nkind = \"link\"\nrate = \"10Gbit\"\nqueue = 65536\n", genRate)
	}
	b.WriteString("[[pipelines.stages]]\nkind = \"forward\"\nport = \"a0\"\n")
	b.WriteString("\n[[pipelines]]\nname = \"dut\"\nlcores = [1]\nrx = [\"a1\"]\n")
	fmt.Fprintf(&b, encapStage, "1/1")
	b.WriteString("[[pipelines.stages]]\nkind = \"forward\"\nport = \"b0\"\n")
	b.WriteString("\n[[pipelines]]\nname = \"sink\"\nlcores = [0]\nrx = [\"b1\"]\n")
	b.WriteString(decapStage)
	b.WriteString("[[pipelines.stages]]\nkind = \"sink\"\nname = \"sink\"\nflows = 16\n")
	return b.String()
}

// lineRun offers 10 GbE line rate for the size, with IOAM on every packet, for
// d of the device's lcore time (see the package comment). A device that cannot
// keep up falls behind the generator's schedule (achieved < offered) or
// overflows a queue (lost).
func lineRun(size int, d time.Duration) (lineResult, error) {
	pps := 10e9 / float64((size+20)*8) // + preamble, start delimiter and inter-frame gap
	count := int(pps * d.Seconds())
	sim := clock.NewSim(time.Now().UnixNano())
	e, err := newEngineClock(lineConfig(size, count, fmt.Sprintf("%dpps", int(pps))), sim)
	if err != nil {
		return lineResult{}, err
	}
	gen, ok := e.Stages("generator#0")[0].(interface{ Done() bool })
	if !ok {
		return lineResult{}, fmt.Errorf("no generator")
	}
	const tester, dut = 0, 1
	start := sim.Now()
	var sentAt int64
	var s *stats.Snapshot
	cs := cputime.NewShare()
	for i := 1; ; i++ {
		e.StepLcore(tester)
		t0 := time.Now()
		e.StepLcore(dut)
		sim.Advance(cs.Scale(time.Since(t0)))
		if sentAt == 0 && gen.Done() {
			sentAt = sim.Now() - start
		}
		if sentAt != 0 && i%4096 == 0 {
			// Snapshots are the control plane's, off the lcore's clock.
			s = e.Snapshot()
			if counter(s, "sink", "received")+drops(s) >= uint64(count) || sim.Now()-start > 10*int64(d) {
				break
			}
		}
	}
	s = e.Snapshot()
	r := lineResult{offered: pps, delivered: counter(s, "sink", "received")}
	r.lost = uint64(count) - min(uint64(count), r.delivered)
	if sentAt > 0 {
		r.achieved = float64(count) / (float64(sentAt) / 1e9)
	}
	e.Stop()
	if err := e.Close(); err != nil {
		return r, err
	}
	r.devNs, err = deviceCost(size, count)
	return r, err
}

// deviceCost is the device's time per packet when the tester sends as fast as
// it can (no rate, no link): its headroom under the line-rate budget.
func deviceCost(size, count int) (float64, error) {
	e, err := newEngine(lineConfig(size, count, ""))
	if err != nil {
		return 0, err
	}
	const tester, dut = 0, 1
	var busy time.Duration
	cs := cputime.NewShare()
	for i := 1; ; i++ {
		e.StepLcore(tester)
		t0 := time.Now()
		e.StepLcore(dut)
		busy += cs.Scale(time.Since(t0))
		if i%4096 == 0 {
			s := e.Snapshot()
			if counter(s, "sink", "received")+drops(s) >= uint64(count) {
				break
			}
		}
	}
	n := counter(e.Snapshot(), "sink", "received")
	e.Stop()
	if err := e.Close(); err != nil || n == 0 {
		return 0, err
	}
	return float64(busy) / float64(n), nil
}
