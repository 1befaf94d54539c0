// Command external is `make bench-external`: what running a stage out of
// process costs (issue 17), side by side in one run.
//
//	in process:      generator → bench.pass → sink          one lcore (CPU 0)
//	out of process:  generator → external(bench.pass) → sink the same lcore,
//	                 and the plugin's thread pinned to CPU 1
//	naive:           one gRPC call through go-plugin per burst, carrying the
//	                 burst's bytes and its verdicts: why packets go over memif
//
// bench.pass is the same stage in both: a forwarding stage that gives every
// packet Continue, so it reaches the sink. Frames are 64 bytes (IPv4/UDP),
// bursts of 64; the generator is unpaced, so out of process the plugin is
// the bottleneck and what the ring cannot take is dropped (plugin_ring_full):
// the rate is what reaches the sink per second, the rate the path sustains.
// Each case runs -runs times; the median is printed with its rate per busy
// core and, out of process, the added latency (the external stage's
// plugin_latency histogram: from lending a packet to taking its result back;
// in process the stage adds none beyond its Process call). The naive case's
// latency is its round trip per burst. Ratios are to the in-process rate of
// the same run (goal: ≥ 0.5×). CPU ns/pkt is the CPU time of linerate's
// process and the plugin's together per packet that reached the sink: on a
// machine shared with other work it holds better than rates do (saturated,
// it also carries the packets the full ring dropped).
//
// Where the CPU goes: -cpuprofile writes linerate's side (the saturated
// runs; the in-process ones to the same name with .in), and
// -plugin-cpuprofile has each plugin process profile itself for its first
// -plugin-profile-for (the bench passes both in the child's environment,
// BENCH_PLUGIN_CPUPROFILE and BENCH_PLUGIN_PROFILE_FOR) into the name with
// its pid appended. With -count large enough that a run outlasts it:
//
//	bench-external -runs 1 -count 40000000 -cases sat \
//		-cpuprofile /tmp/eng.prof -plugin-cpuprofile /tmp/plug.prof -plugin-profile-for 1500ms
//
// -cases picks the cases run beside the in-process one (sat, loss, naive).
//
// The binary is its own plugin: go-plugin starts it again with its magic
// cookie in the environment, and then it serves bench.pass.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/linerate/linerate/appliance"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/appliance/stats"
	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/plugins"
	"github.com/linerate/linerate/plugins/external/api"
	"github.com/linerate/linerate/plugins/sdk"

	_ "github.com/linerate/linerate/plugins/builtin" // generator, sink
	"github.com/linerate/linerate/plugins/external"
)

var pass = plugins.Kind{Name: "bench.pass", Summary: "give every packet Continue", New: func(*plugins.Setup) (plugins.Stage, error) {
	return passStage{}, nil
}}

type passStage struct{}

func (passStage) Process(_ *plugins.Context, b *packet.Burst) {
	for i := 0; i < b.N; i++ {
		b.H[i].P().Continue()
	}
}

func main() {
	if os.Getenv(api.Handshake.MagicCookieKey) != "" {
		if os.Getenv("BENCH_NAIVE") != "" {
			serveNaive()
		}
		profilePlugin()
		sdk.Serve(pass)
	}
	plugins.Register(pass)
	count := flag.Int("count", 4_000_000, "packets per run")
	runs := flag.Int("runs", 3, "runs per case; the median is printed")
	cpuProfile := flag.String("cpuprofile", "",
		"write linerate's CPU profile of the saturated out-of-process runs here, and of the in-process ones here.in")
	pluginProfile := flag.String("plugin-cpuprofile", "",
		"write each plugin process's CPU profile here, its pid appended (its first -plugin-profile-for)")
	flag.DurationVar(&pluginProfileFor, "plugin-profile-for", 2*time.Second, "how long a plugin profiles from its start")
	cases := flag.String("cases", "sat,loss,naive", "the cases run beside in process (always run): sat, loss, naive")
	flag.Parse()
	self, err := os.Executable()
	if err != nil {
		fail(err)
	}
	if *pluginProfile != "" {
		os.Setenv("BENCH_PLUGIN_CPUPROFILE", *pluginProfile)
		os.Setenv("BENCH_PLUGIN_PROFILE_FOR", pluginProfileFor.String())
	}
	run := func(name string) bool { return strings.Contains(","+*cases+",", ","+name+",") }
	fmt.Printf("bench-external: 64-byte frames, bursts of 64, %d packets a run, median of %d; %d CPUs\n\n", *count, *runs, runtime.NumCPU())
	stop := startProfile(suffix(*cpuProfile, ".in"))
	in := median(*runs, func() result { return engineRun(*count, "", 0) })
	stop()
	var sat, out, naive result
	if run("sat") {
		stop := startProfile(*cpuProfile)
		sat = median(*runs, func() result { return engineRun(*count, self, 0) })
		stop()
	}
	if run("loss") {
		out = lossless(self, *count, in.mpps)
	}
	if run("naive") {
		naive = median(*runs, func() result { return naiveRun(self, *count/20) })
	}
	fmt.Printf("%-16s %8s %6s %11s %11s %11s %9s %11s %9s\n", "case", "Mpps", "cores", "Mpps/core", "p50 lat", "p99 lat", "vs in", "CPU ns/pkt", "vs in")
	for _, r := range []struct {
		name  string
		r     result
		cores int
		ran   bool
	}{{"in process", in, 1, true}, {"out, saturated", sat, 2, run("sat")}, {"out, <1% loss", out, 2, run("loss")},
		{"naive gRPC", naive, 2, run("naive")}} {
		if !r.ran {
			continue
		}
		p50, p99 := "-", "-"
		if r.r.p50 > 0 {
			p50, p99 = time.Duration(r.r.p50).String(), time.Duration(r.r.p99).String()
		}
		cpu, cpuRatio := "-", "-"
		if r.r.cpuNs > 0 {
			cpu, cpuRatio = fmt.Sprintf("%.1f", r.r.cpuNs), fmt.Sprintf("%.2fx", r.r.cpuNs/in.cpuNs)
		}
		fmt.Printf("%-16s %8.3f %6d %11.3f %11s %11s %8.2fx %11s %9s\n", r.name, r.r.mpps, r.cores, r.r.mpps/float64(r.cores),
			p50, p99, r.r.mpps/in.mpps, cpu, cpuRatio)
	}
	if in.p50 > 0 && out.p50 > 0 {
		fmt.Printf("\nadded latency out of process: p50 %v, p99 %v\n", time.Duration(out.p50)-time.Duration(in.p50), time.Duration(out.p99)-time.Duration(in.p99))
	}
}

var pluginProfileFor time.Duration

// suffix is path+s, or "" when path is.
func suffix(path, s string) string {
	if path == "" {
		return ""
	}
	return path + s
}

// startProfile profiles this process's CPU into path ("": nothing) until the
// function it returns is called.
func startProfile(path string) func() {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		fail(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		fail(err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			fail(err)
		}
	}
}

// profilePlugin, in a plugin process that BENCH_PLUGIN_CPUPROFILE names a
// file for, profiles its CPU for BENCH_PLUGIN_PROFILE_FOR from its start
// into that file, its pid appended: the plugin is killed at the end of a
// run, so the profile ends by the clock, not at its stop.
func profilePlugin() {
	path := os.Getenv("BENCH_PLUGIN_CPUPROFILE")
	if path == "" {
		return
	}
	d, err := time.ParseDuration(os.Getenv("BENCH_PLUGIN_PROFILE_FOR"))
	if err != nil {
		d = 2 * time.Second
	}
	stop := startProfile(fmt.Sprintf("%s.%d", path, os.Getpid()))
	time.AfterFunc(d, stop)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "bench-external:", err)
	os.Exit(1)
}

type result struct {
	mpps     float64
	loss     float64 // share of the packets offered that did not reach the sink
	p50, p99 uint64
	// cpuNs is the CPU time, linerate's process and the plugin's together,
	// per packet that reached the sink: what a packet costs in busy cores,
	// whatever else the machine runs.
	cpuNs float64
	drops []stats.DropCount // by reason
}

// lossless is the out-of-process path's sustained rate: the highest offered
// rate, as a share of the in-process rate, at which less than 1% of the
// packets are lost (a full ring drops what it cannot take). A ladder finds
// the first share that passes; bisection between it and the share above,
// which failed, narrows it to 0.02× (the ladder alone reports 0.4× for a
// path that holds 0.49×). What the failing trial just above lost, by drop
// reason, says what loses packets before saturation.
func lossless(self string, count int, inMpps float64) result {
	trial := func(share float64) result {
		r := engineRun(count, self, share*inMpps*1e3)
		if os.Getenv("BENCH_DEBUG") != "" {
			fmt.Fprintf(os.Stderr, "offered %.2f Mpps (%.2fx): %.2f Mpps, loss %.4f %v\n", share*inMpps, share, r.mpps, r.loss, r.drops)
		}
		return r
	}
	fail, failed := 0.0, result{}
	for _, share := range []float64{1, 0.75, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1, 0.05} {
		r := trial(share)
		if r.loss >= 0.01 {
			fail, failed = share, r
			continue
		}
		pass, best := share, r
		for fail > 0 && fail-pass > 0.02 {
			mid := (pass + fail) / 2
			if r := trial(mid); r.loss < 0.01 {
				pass, best = mid, r
			} else {
				fail, failed = mid, r
			}
		}
		if fail > 0 {
			fmt.Printf("out, <1%% loss: %.2fx offered passed; %.2fx lost %.2f%%, drops %v\n", pass, fail, 100*failed.loss, failed.drops)
		}
		return best
	}
	return failed
}

func median(n int, f func() result) result {
	var rs []result
	for range max(n, 1) {
		rs = append(rs, f())
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].mpps < rs[j].mpps })
	return rs[len(rs)/2]
}

// engineRun runs count packets through the chain on lcore 0, with the stage
// out of process when plugin names a binary.
var ringSize = flag.Int("ring", 4096, "the external stage's ring_size")

func engineRun(count int, plugin string, kpps float64) result {
	rate := ""
	if kpps > 0 {
		rate = fmt.Sprintf("%.0fkpps", kpps)
	}
	stage := "[[pipelines.stages]]\nkind = \"bench.pass\"\n"
	if plugin != "" {
		stage = fmt.Sprintf("[[pipelines.stages]]\nkind = \"external\"\nname = \"pass\"\nplugin = %q\nuser = \"root\"\ncpu = 1\nring_size = %d\n", plugin, *ringSize)
	}
	toml := fmt.Sprintf(`
version = 1
[engine]
pin = true
poll = "busy"
[control]
listen = ""
[[pools]]
name = "default"
buffers = 16384
[[pipelines]]
name = "bench"
lcores = [0]
[[pipelines.stages]]
kind = "generator"
ip_version = 4
src = "192.0.2.1"
dst = "198.51.100.1"
flows = 1
sizes = [64]
count = %d
rate = %q
%s
[[pipelines.stages]]
kind = "sink"
name = "sink"
`, count, rate, stage)
	cfg, err := config.Parse("bench.toml", []byte(toml))
	if err != nil {
		fail(err)
	}
	e, err := appliance.New(cfg, appliance.Options{Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		fail(err)
	}
	t0 := time.Now()
	cpu0 := processCPU(os.Getpid())
	if err := e.Start(); err != nil {
		fail(err)
	}
	var pcpu0, pcpu1 time.Duration
	pid := 0
	if plugin != "" {
		for _, st := range external.Statuses() {
			pid = st.PID
		}
		pcpu0 = processCPU(pid)
	}
	// The plugin's CPU just before the end: it goes when the engine stops.
	for done := false; !done; {
		select {
		case <-e.Done():
			done = true
		case <-time.After(5 * time.Millisecond):
			if pid != 0 {
				if c := processCPU(pid); c > 0 {
					pcpu1 = c
				}
			}
		}
	}
	el := time.Since(t0)
	cpu := processCPU(os.Getpid()) - cpu0 + max(pcpu1-pcpu0, 0)
	s := e.Snapshot()
	if err := e.Close(); err != nil {
		fail(err)
	}
	got := counter(s, "sink", "received")
	if os.Getenv("BENCH_DEBUG") != "" {
		fmt.Fprintf(os.Stderr, "elapsed %v received %d drops %v lent %d returned %d\n", el, got, s.Drops, counter(s, "pass", "lent"), counter(s, "pass", "returned"))
	}
	r := result{mpps: float64(got) / el.Seconds() / 1e6, loss: 1 - float64(got)/float64(count),
		cpuNs: float64(cpu) / float64(max(got, 1)), drops: s.Drops}
	for _, h := range s.Histogram {
		if h.Name == "plugin_latency" {
			r.p50, r.p99 = h.Hist.Quantile(0.5), h.Hist.Quantile(0.99)
		}
	}
	return r
}

// processCPU is a process's user and system CPU time, from /proc; 0 when it
// is gone.
func processCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseUint(f[11], 10, 64)
	k, _ := strconv.ParseUint(f[12], 10, 64)
	return time.Duration(u+k) * time.Second / 100 // USER_HZ
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

// The naive path: a gRPC method through go-plugin that takes a burst's bytes
// and returns a verdict per packet.

const naiveMethod = "/linerate.bench.Naive/Process"

type naivePlugin struct{ plugin.NetRPCUnsupportedPlugin }

func (naivePlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	s.RegisterService(&grpc.ServiceDesc{ServiceName: "linerate.bench.Naive", HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "Process", Handler: naiveHandler}}}, struct{}{})
	return nil
}

func (naivePlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return c, nil
}

// naiveHandler "processes" the burst: a verdict byte (continue) per 64-byte
// packet, as bench.pass gives.
func naiveHandler(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
	in := &wrapperspb.BytesValue{}
	if err := dec(in); err != nil {
		return nil, err
	}
	return &wrapperspb.BytesValue{Value: make([]byte, len(in.Value)/64)}, nil
}

func serveNaive() {
	plugin.Serve(&plugin.ServeConfig{HandshakeConfig: api.Handshake,
		Plugins:    map[string]plugin.Plugin{"naive": naivePlugin{}},
		GRPCServer: plugin.DefaultGRPCServer, Logger: hclog.NewNullLogger()})
	os.Exit(0)
}

// naiveRun sends count packets, a burst of 64 per call, and waits for each
// reply before the next burst, as a stage that called out per burst would.
func naiveRun(self string, count int) result {
	cmd := execCommand(self)
	cmd.Env = append(os.Environ(), "BENCH_NAIVE=1")
	c := plugin.NewClient(&plugin.ClientConfig{HandshakeConfig: api.Handshake, Cmd: cmd,
		Plugins: map[string]plugin.Plugin{"naive": naivePlugin{}}, AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		Logger: hclog.NewNullLogger()})
	defer c.Kill()
	proto, err := c.Client()
	if err != nil {
		fail(err)
	}
	raw, err := proto.Dispense("naive")
	if err != nil {
		fail(err)
	}
	conn := raw.(*grpc.ClientConn)
	burst := &wrapperspb.BytesValue{Value: make([]byte, 64*64)}
	out := &wrapperspb.BytesValue{}
	h := stats.NewHistogram()
	t0 := time.Now()
	for sent := 0; sent < count; sent += 64 {
		t := time.Now()
		if err := conn.Invoke(context.Background(), naiveMethod, burst, out); err != nil {
			fail(err)
		}
		h.Record(uint64(time.Since(t)))
	}
	el := time.Since(t0)
	h.Publish()
	s := stats.NewHistSnapshot()
	s.Merge(h)
	return result{mpps: float64(count) / el.Seconds() / 1e6, p50: s.Quantile(0.5), p99: s.Quantile(0.99)}
}
