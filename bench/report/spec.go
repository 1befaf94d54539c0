package main

// The spec: what `make bench` runs and which of its results are figures.
//
// To add a figure, add a row to figures naming the benchmark (its full name,
// sub-benchmarks and all, without the -GOMAXPROCS suffix), the metric, the
// baseline and the goal. If its package is not in runs yet, `make bench`
// runs it anyway (every package with a benchmark is discovered) at the
// default benchtime; add a run to choose the benchtime or the quick mode's
// subset. A figure whose benchmark does not exist (yet) is reported as
// "missing", never an error. Sub-benchmarks with a size element
// (routes=N, sessions=N, generations=N, neighbours=N, namespaces=N,
// flows=N) need no row at all: each becomes a scaling curve, a plot and a
// figure, the cost at the largest size against the smallest (scaleGoal).

// run is one `go test -bench` of a package's test binary, or one program.
type run struct {
	Pkg       string // relative to the module root, "./plugins/ioam"
	Bench     string // -test.bench
	Benchtime string // -test.benchtime in the full mode; "" is defaultBenchtime
	Count     int    // -test.count in the full mode; 0 is the -count flag
	// Short are the quick mode's -test.bench patterns (the figures'
	// sub-benchmarks, smallest sizes), one invocation each: none runs
	// Bench. The quick mode runs them at -test.benchtime=ShortTime (default
	// shortBenchtime), once, with -test.short: a benchmark may cut its
	// largest sizes under it. A pattern's elements match name elements one
	// by one, and a leaf that matches only some of them does not report.
	Short     []string
	ShortTime string
	// Program, when set, runs a command under bench/ instead of a test
	// binary; Pkg is its package.
	Program *program
	// Skip says why this package's benchmarks are not run (they have a make
	// target of their own): it is listed, not run.
	Skip string
}

const (
	defaultBenchtime = "200ms"
	shortBenchtime   = "100x"
)

// program is a benchmark program: its arguments in each mode and a parser
// that turns what it prints into benchmark-format lines.
type program struct {
	Args, ShortArgs []string
	Parse           func(out []byte) ([]line, error)
}

// ref names one result: a benchmark of a package and one of its metrics.
// The value is the median over -count runs, times Scale (0 means 1), so
// that a floor such as "MulAdd's GB/s over K" can be a baseline.
type ref struct {
	Pkg    string
	Name   string
	Metric string
	Scale  float64
	Note   string // how the scale is meant, for the docs: "÷ 16"
}

// goal is a ratio to the baseline with its direction: "<=" for costs
// (ns/pkt: at most Ratio times the baseline's), ">=" for rates (GB/s,
// Mpps: at least). Op "" means the figure has no goal yet: it is shown, and
// its status is "info".
type goal struct {
	Op    string  `json:"op,omitempty"`
	Ratio float64 `json:"ratio,omitempty"`
}

// figure is one row of the table: a result against its baseline of the same
// run.
type figure struct {
	ID    string // stable key in the JSON: "engine.forward"
	Title string // the table's first column, at most titleWidth
	Of    ref
	Base  ref // Name "" means no baseline: the value alone
	// InRun, when set, says Of's metric is itself the ratio to a baseline
	// the benchmark measures in the same iterations (x-floor: the decoder
	// against its arithmetic floor), and names that baseline for the docs:
	// the value is the figure's ratio, and Base stays empty.
	InRun string
	Goal  goal
	Where string // the issue, README or doc the figure belongs to
	// Note is printed under the table beside the figure's id (and is the
	// note in the JSON): what the figure needs to mean anything.
	Note string
}

// scaleGoal is the goal of every scaling curve (issue 28): the cost at the
// largest size at most 1.5× the cost at the smallest.
var scaleGoal = goal{"<=", 1.5}

// scaleMetrics are the cost metrics a scaling curve plots, the first a
// benchmark reports.
var scaleMetrics = []string{"ns/lookup", "ns/pkt", "cpu-ns/pkt", "ns/op"}

var runs = []run{
	{Pkg: "./appliance", Bench: ".", Benchtime: "1s",
		Short: []string{"^Benchmark(ForwardMem|Ring)$"}, ShortTime: "2000x"},
	{Pkg: "./appliance/packet", Bench: ".", Benchtime: "300ms"},
	{Pkg: "./gf", Bench: ".", Benchtime: "100ms",
		Short: []string{"^BenchmarkMulAdd$/^(size=1408|level=generic)$"}},
	{Pkg: "./plugins/ioam", Bench: ".", Benchtime: "200ms",
		Short: []string{"^Benchmark(Encap|Transit|Decap)$/^size=(66|1200)$/^trace=0xf00000$",
			"^BenchmarkParseCalibration$"}},
	{Pkg: "./plugins/rlnc", Bench: ".", Benchtime: "200ms",
		Short: []string{"^Benchmark(Encoder|Decoder|DecoderFloor)$/^k=(16|32)$"}, ShortTime: "20x"},
	{Pkg: "./plugins/stamp", Bench: ".", Benchtime: "200ms",
		Short: []string{"^Benchmark(Reflector|Collector|Sender)$/^auth=false$"}},
	{Pkg: "./plugins/route", Bench: ".", Benchtime: "300ms"},
	{Pkg: "./appliance/lpm", Bench: ".", Benchtime: "300ms"},
	{Pkg: "./plugins/builtin", Bench: ".", Benchtime: "300ms"},
	{Pkg: "./plugins/external", Bench: ".", Benchtime: "200000x"},
	{Pkg: "./plugins/sdk", Bench: ".", Benchtime: "200000x"},
	{Pkg: "./ports/xdp", Bench: ".", Benchtime: "1x", ShortTime: "1x"},
	{Pkg: "./ports/pcap", Bench: ".", Benchtime: "200ms"},
	{Pkg: "./ports/afpacket", Bench: ".", Benchtime: "1s", Short: []string{"^$"}},
	{Pkg: "./tester/search", Bench: ".", Benchtime: "1x", ShortTime: "1x"},
	{Pkg: "./ports/dpdk", Skip: "needs -tags dpdk and DPDK: make bench-dpdk"},
	{Pkg: "./bench/gf", Program: gfProgram},
	{Pkg: "./bench/external", Program: externalProgram},
}

// The issue every figure without a README of its own belongs to.
const issue28 = "issue 28"

// freeCPU is the note of the figures whose plugin thread is pinned to a
// second CPU (bench/external): on a loaded machine they measure the load.
const freeCPU = "needs a free CPU: the plugin thread is pinned to CPU 1 (load here starves it)"

var figures = []figure{
	// The engine.
	{ID: "engine.forward", Title: "engine, mem ports, 64 B",
		Of:    ref{Pkg: "./appliance", Name: "BenchmarkForwardMem/engine", Metric: "cpu-ns/pkt"},
		Base:  ref{Pkg: "./appliance", Name: "BenchmarkForwardMem/baseline=alloc-write-swap-free", Metric: "cpu-ns/pkt"},
		Goal:  goal{"<=", 3.0},
		Where: issue28},
	{ID: "engine.ring", Title: "SPSC ring, burst of 32",
		Of:    ref{Pkg: "./appliance", Name: "BenchmarkRing/spsc", Metric: "ns/burst"},
		Base:  ref{Pkg: "./appliance", Name: "BenchmarkRing/baseline=chan", Metric: "ns/burst"},
		Where: "docs/architecture.md"},
	{ID: "packet.walk", Title: "header walk vs gopacket",
		Of:    ref{Pkg: "./appliance/packet", Name: "BenchmarkHeaderWalk/impl=linerate", Metric: "ns/pkt"},
		Base:  ref{Pkg: "./appliance/packet", Name: "BenchmarkHeaderWalk/impl=gopacket-DecodingLayerParser", Metric: "ns/pkt"},
		Where: "docs/architecture.md"},

	// gf: the kernels against the generic level (go test) and ISA-L and
	// klauspost (bench/gf, one process, same buffers; goals of issue 5).
	{ID: "gf.muladd.generic", Title: "gf MulAdd 1408 B vs generic",
		Of:    ref{Pkg: "./gf", Name: "BenchmarkMulAdd/size=1408", Metric: "GB/s"},
		Base:  ref{Pkg: "./gf", Name: "BenchmarkMulAdd/level=generic/size=1408", Metric: "GB/s"},
		Where: "gf"},
	{ID: "gf.muladd.isal", Title: "gf MulAdd 1408 B vs ISA-L",
		Of:    ref{Pkg: "./bench/gf", Name: gfName("MulAdd", 1408, "linerate gf"), Metric: "GB/s"},
		Base:  ref{Pkg: "./bench/gf", Name: gfName("MulAdd", 1408, "ISA-L"), Metric: "GB/s"},
		Goal:  goal{">=", 1.0},
		Where: "issue 5"},
	{ID: "gf.encode.isal", Title: "gf encode k=32 1408 B vs ISA-L",
		Of:    ref{Pkg: "./bench/gf", Name: gfName("Encode k=32", 1408, "linerate gf"), Metric: "GB/s"},
		Base:  ref{Pkg: "./bench/gf", Name: gfName("Encode k=32", 1408, "ISA-L"), Metric: "GB/s"},
		Goal:  goal{">=", 1.3},
		Where: "issue 5"},
	{ID: "gf.muladd.klauspost", Title: "gf MulAdd 1408 B vs klauspost",
		Of:    ref{Pkg: "./bench/gf", Name: gfName("MulAdd", 1408, "linerate gf"), Metric: "GB/s"},
		Base:  ref{Pkg: "./bench/gf", Name: gfName("MulAdd", 1408, "klauspost"), Metric: "GB/s"},
		Goal:  goal{">=", 2.0},
		Where: "issue 5"},
	{ID: "gf.encode.klauspost", Title: "gf encode k=32 vs klauspost",
		Of:    ref{Pkg: "./bench/gf", Name: gfName("Encode k=32", 1408, "linerate gf"), Metric: "GB/s"},
		Base:  ref{Pkg: "./bench/gf", Name: gfName("Encode k=32", 1408, "klauspost"), Metric: "GB/s"},
		Goal:  goal{">=", 2.0},
		Where: "issue 5"},

	// RLNC: the decoder against its arithmetic floor, K² MulAdds a
	// generation timed in the same iterations as the decoder
	// (BenchmarkDecoderFloor's x-floor: the median of the iterations'
	// floor ÷ decoder time), and the encoder against one kernel call per
	// coded packet. The encoder's ≥ 0.8× is issue 8's goal, not issue 28's:
	// info here (the README says where it stands).
	{ID: "rlnc.decoder.floor", Title: "RLNC decoder K=16 vs floor",
		Of: ref{Pkg: "./plugins/rlnc", Name: "BenchmarkDecoderFloor/k=16/n=1400/loss=10%",
			Metric: "x-floor"},
		InRun: "K² gf.MulAdd a generation, timed in the same iterations",
		Goal:  goal{">=", 0.8},
		Where: "plugins/rlnc/README.md"},
	{ID: "rlnc.decoder.kernel", Title: "RLNC decoder K=16 vs K×K pass",
		Of:    ref{Pkg: "./plugins/rlnc", Name: "BenchmarkDecoder/k=16/n=1400/loss=10%", Metric: "GB/s"},
		Base:  ref{Pkg: "./plugins/rlnc", Name: "BenchmarkDecoder/k=16/n=1400/kernel/m=16", Metric: "GB/s"},
		Where: "plugins/rlnc/README.md"},
	{ID: "rlnc.encoder.16", Title: "RLNC encoder K=16 vs kernel",
		Of:    ref{Pkg: "./plugins/rlnc", Name: "BenchmarkEncoder/k=16/n=1400", Metric: "GB/s"},
		Base:  ref{Pkg: "./plugins/rlnc", Name: "BenchmarkEncoder/k=16/n=1400/kernel/m=1", Metric: "GB/s"},
		Where: "plugins/rlnc/README.md"},
	{ID: "rlnc.encoder.32", Title: "RLNC encoder K=32 vs kernel",
		Of:    ref{Pkg: "./plugins/rlnc", Name: "BenchmarkEncoder/k=32/n=1400", Metric: "GB/s"},
		Base:  ref{Pkg: "./plugins/rlnc", Name: "BenchmarkEncoder/k=32/n=1400/kernel/m=1", Metric: "GB/s"},
		Where: "plugins/rlnc/README.md"},

	// Out-of-process plugins (bench/external: the engine with the stage in
	// process and out of process, same run; goal of issue 17 and 28).
	{ID: "external.saturated", Title: "external plugin, saturated",
		Of:    ref{Pkg: "./bench/external", Name: externalName("out, saturated"), Metric: "Mpps"},
		Base:  ref{Pkg: "./bench/external", Name: externalName("in process"), Metric: "Mpps"},
		Goal:  goal{">=", 0.5},
		Note:  freeCPU,
		Where: "plugins/external/README.md"},
	{ID: "external.lossless", Title: "external plugin, < 1% loss",
		Of:    ref{Pkg: "./bench/external", Name: externalName("out, <1% loss"), Metric: "Mpps"},
		Base:  ref{Pkg: "./bench/external", Name: externalName("in process"), Metric: "Mpps"},
		Goal:  goal{">=", 0.5},
		Note:  freeCPU,
		Where: "plugins/external/README.md"},
	{ID: "external.lend", Title: "external lend+take back",
		Of:    ref{Pkg: "./plugins/external", Name: "BenchmarkLend/lent", Metric: "packets/s"},
		Base:  ref{Pkg: "./plugins/external", Name: "BenchmarkLend/in-process", Metric: "packets/s"},
		Where: "plugins/external/README.md"},
	{ID: "sdk.burst", Title: "plugin side of a burst",
		Of:    ref{Pkg: "./plugins/sdk", Name: "BenchmarkBurst/lent", Metric: "packets/s"},
		Base:  ref{Pkg: "./plugins/sdk", Name: "BenchmarkBurst/in-process", Metric: "packets/s"},
		Where: "plugins/sdk/README.md"},

	// IOAM at 1200 B, 4 trace fields: the stage in an engine on mem ports
	// (engine+stage-ns/pkt of the /engine sub-benchmark) against the bare
	// alloc–write–swap–free loop of the same sub-benchmark (bare-ns/pkt;
	// plugins/stagetest), as issue 28's goals mean "the bare loop".
	{ID: "ioam.encap", Title: "IOAM encap 1200 B in engine",
		Of:    stageRef("./plugins/ioam", "BenchmarkEncap/size=1200/trace=0xf00000/engine"),
		Base:  bareRef("./plugins/ioam", "BenchmarkEncap/size=1200/trace=0xf00000/engine"),
		Goal:  goal{"<=", 3.0},
		Where: "plugins/ioam/README.md"},
	{ID: "ioam.transit", Title: "IOAM transit 1200 B in engine",
		Of:    stageRef("./plugins/ioam", "BenchmarkTransit/size=1200/trace=0xf00000/engine"),
		Base:  bareRef("./plugins/ioam", "BenchmarkTransit/size=1200/trace=0xf00000/engine"),
		Goal:  goal{"<=", 1.5},
		Where: "plugins/ioam/README.md"},
	{ID: "ioam.decap", Title: "IOAM decap 1200 B in engine",
		Of:    stageRef("./plugins/ioam", "BenchmarkDecap/size=1200/trace=0xf00000/engine"),
		Base:  bareRef("./plugins/ioam", "BenchmarkDecap/size=1200/trace=0xf00000/engine"),
		Goal:  goal{"<=", 3.0},
		Where: "plugins/ioam/README.md"},

	// STAMP: the reflector in an engine against the bare loop of the same
	// sub-benchmark, as the IOAM stages; the collector and the sender alone
	// (their benchmarks have no bare loop yet); the XDP programs against a
	// MAC swap in prog.Run (goal ≤ 2×).
	{ID: "stamp.reflector", Title: "STAMP reflector in engine",
		Of:    stageRef("./plugins/stamp", "BenchmarkReflector/auth=false/srh=3/engine"),
		Base:  bareRef("./plugins/stamp", "BenchmarkReflector/auth=false/srh=3/engine"),
		Where: "plugins/stamp/README.md"},
	{ID: "stamp.collector", Title: "STAMP collector, no auth",
		Of:    ref{Pkg: "./plugins/stamp", Name: "BenchmarkCollector/auth=false/srh=3", Metric: "cpu-ns/pkt"},
		Where: "plugins/stamp/README.md"},
	{ID: "stamp.sender", Title: "STAMP sender, no auth",
		Of:    ref{Pkg: "./plugins/stamp", Name: "BenchmarkSender/auth=false/srh=3", Metric: "cpu-ns/pkt"},
		Where: "plugins/stamp/README.md"},
	{ID: "stamp.xdp.reflector", Title: "XDP reflector vs MAC swap",
		Of:    ref{Pkg: "./plugins/stamp", Name: "BenchmarkXDPPrograms", Metric: "reflector_ns/pkt"},
		Base:  ref{Pkg: "./plugins/stamp", Name: "BenchmarkXDPPrograms", Metric: "macswap_ns/pkt"},
		Goal:  goal{"<=", 2.0},
		Where: "plugins/stamp/README.md"},
	{ID: "stamp.xdp.collector", Title: "XDP collector vs MAC swap",
		Of:    ref{Pkg: "./plugins/stamp", Name: "BenchmarkXDPPrograms", Metric: "collector_ns/pkt"},
		Base:  ref{Pkg: "./plugins/stamp", Name: "BenchmarkXDPPrograms", Metric: "macswap_ns/pkt"},
		Goal:  goal{"<=", 2.0},
		Where: "plugins/stamp/README.md"},

	// Routing: the stage in an engine against the bare loop of the same
	// sub-benchmark, and the FIB (issue 28: hot lookups at most 2× the bare
	// tbl24-read loop; the README has their analysis).
	{ID: "route.stage", Title: "route stage IPv6 128 B in engine",
		Of:    stageRef("./plugins/route", "BenchmarkRoute/ip=6/size=128/engine"),
		Base:  bareRef("./plugins/route", "BenchmarkRoute/ip=6/size=128/engine"),
		Where: "plugins/route/README.md"},
	// routes=max is the largest table the run has (1M IPv4, 230k IPv6
	// routes; fewer under -short).
	{ID: "route.lookup4.hot", Title: "IPv4 lookup, hot, most routes",
		Of:    ref{Pkg: "./plugins/route", Name: "BenchmarkLookup4/traffic=hot/routes=max", Metric: "ns/lookup"},
		Base:  ref{Pkg: "./plugins/route", Name: "BenchmarkLookup4/traffic=hot/bare", Metric: "ns/lookup"},
		Goal:  goal{"<=", 2.0},
		Where: "plugins/route/README.md"},
	{ID: "route.lookup6.hot", Title: "IPv6 lookup, hot, most routes",
		Of:    ref{Pkg: "./plugins/route", Name: "BenchmarkLookup6/traffic=hot/routes=max", Metric: "ns/lookup"},
		Base:  ref{Pkg: "./plugins/route", Name: "BenchmarkLookup6/traffic=hot/bare", Metric: "ns/lookup"},
		Goal:  goal{"<=", 2.0},
		Where: "plugins/route/README.md"},
	{ID: "route.update4", Title: "IPv4 FIB updates, most routes",
		Of:    ref{Pkg: "./plugins/route", Name: "BenchmarkUpdate4/routes=max", Metric: "updates/s"},
		Base:  ref{Pkg: "./plugins/route", Name: "BenchmarkUpdate4/bare", Metric: "updates/s"},
		Where: "plugins/route/README.md"},
	{ID: "route.update6", Title: "IPv6 FIB updates, most routes",
		Of:    ref{Pkg: "./plugins/route", Name: "BenchmarkUpdate6/routes=max", Metric: "updates/s"},
		Base:  ref{Pkg: "./plugins/route", Name: "BenchmarkUpdate6/bare", Metric: "updates/s"},
		Where: "plugins/route/README.md"},
	{ID: "lpm.table4", Title: "lpm table IPv4 vs bare read",
		Of:    ref{Pkg: "./appliance/lpm", Name: "BenchmarkTable4/lookup", Metric: "ns/lookup"},
		Base:  ref{Pkg: "./appliance/lpm", Name: "BenchmarkTable4/bare", Metric: "ns/lookup"},
		Where: issue28},
	{ID: "xdp.dispatcher", Title: "XDP dispatcher vs empty prog",
		Of:    ref{Pkg: "./ports/xdp", Name: "BenchmarkDispatcherPass/udp", Metric: "pass_ns/pkt"},
		Base:  ref{Pkg: "./ports/xdp", Name: "BenchmarkDispatcherPass/udp", Metric: "empty_ns/pkt"},
		Where: "ports/xdp/README.md"},
	{ID: "tester.search", Title: "MLRsearch vs binary search",
		Of:    ref{Pkg: "./tester/search", Name: "BenchmarkSearchTime", Metric: "mlr-s"},
		Base:  ref{Pkg: "./tester/search", Name: "BenchmarkSearchTime", Metric: "binary-s"},
		Where: "docs/test.md"},
}

// stageRef is a stage benchmark's engine+stage-ns/pkt (plugins/stagetest):
// the stage inside an engine on mem ports, the thread's CPU time a packet.
func stageRef(pkg, name string) ref {
	return ref{Pkg: pkg, Name: name, Metric: "engine+stage-ns/pkt"}
}

// bareRef is the bare alloc–write–swap–free loop a stage benchmark times in
// the same run (bare-ns/pkt): BenchmarkForwardMem's baseline.
func bareRef(pkg, name string) ref {
	return ref{Pkg: pkg, Name: name, Metric: "bare-ns/pkt"}
}
