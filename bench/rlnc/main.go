// Command rlnc reproduces CODED IP's claim in virtual time: random linear
// network coding at the IP layer reaches the multicast capacity (the min-cut)
// where the best routing, store-and-forward over an optimal fractional
// packing of Steiner trees, cannot.
//
// Every node is a linerate pipeline: the source runs generator →
// rlnc.encoder, the relays rlnc.recoder, the terminals rlnc.decoder → sink
// (and a fan-out to their hosts). Every directed link is a pair of mem ports
// and a pipeline with a `link` stage of the given capacity, delay and loss.
// The engine runs in Manual mode on a simulated clock, stepped by dt, so the
// machine's two CPUs are not the bottleneck: the links are.
//
// Routing runs on the same ports, links and sinks: the LP gives the packing
// (tree weights x_T), and bench.tree (tree.go) at every node sends each
// packet along its tree, with copies where the tree branches.
//
// It prints, per topology (the butterfly, and a 22-node network shaped like
// CODED IP's testbed), each sink's goodput in units of one link's capacity
// with coding and with simulated routing, beside its min-cut and the LP's
// routing optimum.
//
//	go run ./bench/rlnc            (make bench-rlnc-multicast)
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"math"
	"os"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/linerate/linerate/appliance"
	_ "github.com/linerate/linerate/appliance/all"
	"github.com/linerate/linerate/appliance/clock"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/appliance/stats"
	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/plugins"
)

type params struct {
	k, n     int
	rate     float64 // link capacity, bit/s
	dur      time.Duration
	warm     time.Duration
	dt       time.Duration
	loss     float64
	margin   int // coded packets per link per generation beyond K/min-cut
	pace     bool
	headroom float64 // the source runs this much below the links' rate
}

func main() {
	var p params
	var rate, topo string
	flag.IntVar(&p.k, "k", 32, "generation size K")
	flag.IntVar(&p.n, "n", 1400, "block length N")
	flag.StringVar(&rate, "rate", "10Mbit", "capacity of every link")
	flag.DurationVar(&p.dur, "dur", 6*time.Second, "virtual time simulated")
	flag.DurationVar(&p.warm, "warm", 1*time.Second, "virtual time before measuring")
	flag.DurationVar(&p.dt, "dt", 50*time.Microsecond, "virtual time per engine step")
	flag.Float64Var(&p.loss, "loss", 0, "loss probability of every link")
	flag.IntVar(&p.margin, "margin", 1, "coded packets per link per generation beyond ceil(K/min-cut)")
	flag.BoolVar(&p.pace, "pace", true, "relays code at each transmit opportunity (rate-paced links); false: on each innovative arrival,\n"+
		"which spends a relay's budget before it has heard every input: the butterfly's C then sends T1 and T2 mostly what they\n"+
		"already have, and they decode nothing unless -margin is raised to about K/2")
	flag.Float64Var(&p.headroom, "headroom", 0.01, "the source sends this fraction below what its links carry")
	flag.StringVar(&topo, "topo", "all", "butterfly, coded-ip or all")
	flag.Parse()
	var r config.Rate
	if err := r.UnmarshalText([]byte(rate)); err != nil {
		fmt.Fprintf(os.Stderr, "rlnc: -rate %q: %v\n", rate, err)
		os.Exit(2)
	}
	p.rate = float64(r)
	var tops []topology
	switch topo {
	case "butterfly":
		tops = []topology{butterfly()}
	case "coded-ip":
		tops = []topology{codedIP()}
	case "all":
		tops = []topology{butterfly(), codedIP()}
	default:
		fmt.Fprintf(os.Stderr, "rlnc: -topo %q: butterfly, coded-ip or all\n", topo)
		os.Exit(2)
	}
	fail := false
	for _, t := range tops {
		res, err := simulate(t, p)
		if err != nil {
			fmt.Fprintf(os.Stderr, "rlnc: %s: %v\n", t.name, err)
			os.Exit(1)
		}
		res.print(os.Stdout)
		if t.name == "butterfly" && res.minGoodput() < 1.8 {
			fail = true
		}
	}
	if fail {
		fmt.Println("goal NOT met: coding below 1.8 (0.9 × the min-cut of 2) in the butterfly")
		os.Exit(1)
	}
}

// fanout copies each packet to every port it names: an edge switch handing
// decoded packets to its hosts.
type fanout struct {
	ports []uint16
	pool  packet.Pool
}

func init() {
	plugins.Register(plugins.Kind{Name: "bench.fanout", Summary: "copy each packet to every port named (multicast to hosts)", New: newFanout})
}

func newFanout(s *plugins.Setup) (plugins.Stage, error) {
	var c struct {
		Ports []string `toml:"ports"`
	}
	if err := s.Config.Decode(&c); err != nil {
		return nil, err
	}
	f := &fanout{}
	for _, n := range c.Ports {
		pi, ok := s.Ports.Port(n)
		if !ok {
			return nil, fmt.Errorf("bench.fanout: no port %q", n)
		}
		f.ports = append(f.ports, pi.ID)
	}
	if len(f.ports) == 0 {
		return nil, fmt.Errorf("bench.fanout: no ports")
	}
	var err error
	f.pool, err = s.Pool("bench-fanout", 16384, 2048)
	return f, err
}

func (f *fanout) Process(ctx *plugins.Context, b *packet.Burst) {
	for i := 0; i < b.N; i++ {
		p := b.H[i].P()
		for _, port := range f.ports[1:] {
			emitCopy(ctx, f.pool, p, port)
		}
		p.Forward(f.ports[0])
	}
}

// emitCopy sends a copy of p from pool out of port; it reports false when
// the pool is empty or p does not fit its buffers. A full tx buffer drops
// and frees the copy.
func emitCopy(ctx *plugins.Context, pool packet.Pool, p *packet.Packet, port uint16) bool {
	q, ok := pool.AllocOne()
	if !ok {
		return false
	}
	if q.P().CopyFrom(p, pool.Headroom()) != nil {
		pool.FreeOne(q)
		return false
	}
	q.P().Continue()
	ctx.Emit(q, port)
	return true
}

// result is one topology's measurement.
type result struct {
	t        topology
	p        params
	cut      map[string]int
	packing  float64       // the LP optimum
	trees    int           // minimal Steiner trees
	used     [][][2]string // the trees of the packing with positive weight
	x        []float64     // their weights x_T
	perLink  int           // coded packets per link per generation
	linkPkts float64       // coded packets a link carries per second
	sinks    []sinkResult  // coding
	routed   []sinkResult  // routing, sink by sink as in sinks
	// routedWant is, by terminal, what the packing carries to it at the
	// source's rate: Σ x_T (1 − loss)^hops × (1 − headroom).
	routedWant  map[string]float64
	routedDrops []stats.DropCount // by reason, over the routed run
	// The coded run's generations, counted once the source has stopped at
	// the end of a generation and everything it sent has arrived or been
	// lost: what the encoder sent, and each terminal's account.
	srcCount uint64 // packets the coded run's source sends: whole generations
	gensSent uint64
	gens     map[string]genCount
	leaked   []string // buffers a pool still has out after a drained stop, by run and pool
}

// genCount is a terminal's account of the coded run's generations.
type genCount struct {
	decoded    uint64 // decoded by its decoder
	unfinished uint64 // generations its decoder held but never decoded
	blocks     uint64 // their blocks not delivered
	received   uint64 // packets its sink (or its first host's) received
}

type sinkResult struct {
	name, via string
	delivered uint64
	gaps      uint64
	goodput   float64
}

func (r *result) minGoodput() float64 {
	m := math.Inf(1)
	for _, s := range r.sinks {
		m = math.Min(m, s.goodput)
	}
	return m
}

// routedTol is how far the simulated routing may stray from what the
// packing carries before print warns.
const routedTol = 0.03

// routedOff lists the sinks whose simulated routing is not within routedTol
// of what the packing carries to them.
func (r *result) routedOff() (off []string) {
	for _, s := range r.routed {
		want := r.routedWant[r.terminal(s)]
		if math.Abs(s.goodput-want) > routedTol*want {
			off = append(off, fmt.Sprintf("%s at %.3f, not within %.0f%% of the %.3f the packing carries", s.name, s.goodput, routedTol*100, want))
		}
	}
	return off
}

// terminal is the decoder (the edge switch) that serves sink s.
func (r *result) terminal(s sinkResult) string {
	if s.via != "" {
		return s.via
	}
	return s.name
}

func (r *result) print(w *os.File) {
	p := r.p
	fmt.Fprintf(w, "\n%s\n", r.t.String())
	fmt.Fprintf(w, "K = %d, N = %d; links %.0f Mbit/s = %.0f coded packets/s, loss %.0f%%; %d coded packets per link per generation; %v measured after %v\n",
		p.k, p.n, p.rate/1e6, r.linkPkts, p.loss*100, r.perLink, p.dur-p.warm, p.warm)
	fmt.Fprintf(w, "routing: store-and-forward multicast of coded-size packets at %.0f packets/s over an optimal fractional Steiner-tree packing, LP %.3f; %d of %d trees:\n",
		r.packing*r.linkPkts*(1-p.headroom), r.packing, len(r.used), r.trees)
	for i, tr := range r.used {
		var es []string
		for _, e := range r.t.edges {
			if slices.Contains(tr, e) {
				es = append(es, e[0]+"→"+e[1])
			}
		}
		fmt.Fprintf(w, "  x = %.3f  %s\n", r.x[i], strings.Join(es, " "))
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "sink\tvia\tcoded pkts\trouted pkts\tseq. gaps\tcoding\trouting (simulated)\trouting LP\tmin-cut\tcoding / routing\tcoding / min-cut\t")
	for i, s := range r.sinks {
		rt := r.routed[i]
		cut := r.cut[r.terminal(s)]
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d/%d\t%.3f\t%.3f\t%.3f\t%d\t%.2f\t%.2f\t\n", s.name, s.via, s.delivered, rt.delivered, s.gaps, rt.gaps,
			s.goodput, rt.goodput, r.packing, cut, s.goodput/rt.goodput, s.goodput/float64(cut))
	}
	tw.Flush()
	fmt.Fprintln(w, "(goodputs in link capacities; seq. gaps: coded/routed, sequence numbers not seen, routed ones counting packets still on a longer tree path)")
	for _, term := range r.t.terminals {
		fmt.Fprintln(w, r.genNote(term))
	}
	for _, d := range r.routedDrops {
		fmt.Fprintf(w, "routing dropped %d packets: %s\n", d.Count, d.Reason)
	}
	for _, l := range r.leaked {
		fmt.Fprintf(w, "WARNING: buffers leaked, %s\n", l)
	}
	if off := r.routedOff(); len(off) > 0 {
		for _, o := range off {
			fmt.Fprintf(w, "WARNING: routing (simulated) %s\n", o)
		}
	} else {
		carries := fmt.Sprintf("LP × (1 − headroom %g)", p.headroom)
		if p.loss > 0 {
			carries += " × (1 − loss)^hops" // routing does not repair loss
		}
		fmt.Fprintf(w, "routing check: every sink within %.0f%% of what the packing carries (%s): ok\n", routedTol*100, carries)
	}
	if r.t.name == "butterfly" {
		verdict := "met"
		if r.minGoodput() < 1.8 {
			verdict = "NOT met"
		}
		fmt.Fprintf(w, "goal (coding ≥ 1.8 = 0.9 × min-cut in the butterfly): %s, min %.3f\n", verdict, r.minGoodput())
	}
}

// simulate builds the topology as an engine twice, coded and routed, and runs
// each in virtual time.
func simulate(t topology, p params) (*result, error) {
	res := &result{t: t, p: p, cut: map[string]int{}, routedWant: map[string]float64{}, gens: map[string]genCount{}}
	h := math.MaxInt
	for _, term := range t.terminals {
		res.cut[term] = t.minCut(term)
		h = min(h, res.cut[term])
	}
	var all [][][2]string
	var x []float64
	res.packing, all, x = t.steinerPacking()
	res.trees = len(all)
	for i, v := range x {
		if v > 1e-9 {
			res.used = append(res.used, all[i])
			res.x = append(res.x, v)
		}
	}
	res.perLink = (p.k+h-1)/h + p.margin
	codedFrame := 14 + 40 + FixedLen + p.k + p.n
	res.linkPkts = p.rate / float64((codedFrame+24)*8)
	// The source makes K originals per generation; each link carries perLink
	// coded packets of it.
	genRate := res.linkPkts / float64(res.perLink) * (1 - p.headroom)
	// The source stops at the end of a generation, a generation or two
	// after the measurement, so that every generation can be accounted for.
	res.srcCount = (uint64(math.Ceil(genRate*p.dur.Seconds())) + 1) * uint64(p.k)
	before, after, err := res.run("coded", buildConfig(t, p, res.perLink, genRate*float64(p.k), res.srcCount))
	if err != nil {
		return nil, err
	}
	res.sinks = res.measure(before, after)
	// Routing: tree T carries x_T link packets per packet time, below the
	// links' rate by the same headroom as coding.
	before, after, err = res.run("routed", buildRoutedConfig(t, p, res.used, res.x, codedFrame, res.packing*res.linkPkts*(1-p.headroom)))
	if err != nil {
		return nil, err
	}
	res.routed = res.measure(before, after)
	res.routedDrops = after.Drops
	for _, term := range t.terminals {
		want := 0.0
		for i, tr := range res.used {
			if d := t.hops(tr, term); d >= 0 {
				want += res.x[i] * math.Pow(1-p.loss, float64(d))
			}
		}
		res.routedWant[term] = want * (1 - p.headroom)
	}
	return res, nil
}

// genNote is terminal term's account of the coded run's generations.
func (r *result) genNote(term string) string {
	g := r.gens[term]
	note := fmt.Sprintf("%s decoded %d of %d generations sent", term, g.decoded, r.gensSent)
	if g.decoded >= r.gensSent {
		return note
	}
	missing := r.gensSent - g.decoded
	note += fmt.Sprintf("; %d not: its decoder gave up %d (%d blocks undelivered)", missing, g.unfinished, g.blocks)
	if unseen := missing - min(missing, g.unfinished); unseen > 0 {
		note += fmt.Sprintf(", never saw %d", unseen)
	}
	return note
}

// run builds an engine from cfgText and runs it in virtual time, warm then
// measured: it returns the snapshots around the measurement. Buffers a pool
// still has out after the drained stop are noted in r.leaked. For the coded
// run it then lets the source finish and the network drain, and counts the
// generations (r.gensSent, r.gens) once the stages have stopped.
func (r *result) run(name, cfgText string) (before, after *stats.Snapshot, err error) {
	p := r.p
	cfg, err := config.Parse(r.t.name+"-"+name+".toml", []byte(cfgText))
	if err != nil {
		return nil, nil, fmt.Errorf("%s config: %w\n%s", name, err, cfgText)
	}
	sim := clock.NewSim(1_700_000_000_000_000_000)
	e, err := appliance.New(cfg, appliance.Options{Manual: true, Clock: sim, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	defer e.Close()
	if err := e.Start(); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	step := func(d time.Duration) {
		for v := time.Duration(0); v < d; v += p.dt {
			sim.Advance(p.dt)
			e.Step()
		}
	}
	step(p.warm)
	before = e.Snapshot()
	step(p.dur - p.warm)
	after = e.Snapshot()
	if name == "coded" {
		r.drain(e, step)
	}
	e.Stop()
	if name == "coded" {
		r.countGens(e.Snapshot())
	}
	for pool, n := range e.InUse() {
		if n != 0 {
			r.leaked = append(r.leaked, fmt.Sprintf("%s run, pool %s: %d", name, pool, n))
		}
	}
	sort.Strings(r.leaked)
	return before, after, nil
}

// drain steps the coded run until its source has sent all it will and no
// node has received a coded packet for 100 ms of virtual time: whatever is
// then undecoded will stay so.
func (r *result) drain(e *appliance.Engine, step func(time.Duration)) {
	const tick = 10 * time.Millisecond
	last, quiet := uint64(0), time.Duration(0)
	for waited := time.Duration(0); waited < time.Minute && quiet < 100*time.Millisecond; waited += tick {
		step(tick)
		s := e.Snapshot()
		in := uint64(0)
		for _, st := range s.Stages {
			for _, c := range st.Counters {
				if c.Name == "coded_received" {
					in += c.Value
				}
			}
		}
		if in == last && counter(s, "gen", "sent") == r.srcCount {
			quiet += tick
		} else {
			quiet = 0
		}
		last = in
	}
}

// countGens reads the coded run's generations from the snapshot after the
// drained stop, when every decoder has given up what it still held.
func (r *result) countGens(s *stats.Snapshot) {
	r.gensSent = counter(s, "enc", "generations_sent")
	for _, term := range r.t.terminals {
		sink := term
		if hs := r.t.hosts[term]; len(hs) > 0 {
			sink = hs[0]
		}
		r.gens[term] = genCount{decoded: counter(s, "dec-"+term, "generations_decoded"),
			unfinished: counter(s, "dec-"+term, "generations_unfinished"),
			blocks:     counter(s, "dec-"+term, "blocks_undelivered"),
			received:   counter(s, "sink-"+sink, "received")}
	}
}

// measure reads every sink's deliveries between two snapshots, terminal by
// terminal, host by host.
func (r *result) measure(before, after *stats.Snapshot) []sinkResult {
	secs := (r.p.dur - r.p.warm).Seconds()
	var out []sinkResult
	for _, term := range r.t.terminals {
		sinks := []string{term}
		via := ""
		if hs := r.t.hosts[term]; len(hs) > 0 {
			sinks, via = hs, term
		}
		for _, s := range sinks {
			d := counter(after, "sink-"+s, "received") - counter(before, "sink-"+s, "received")
			out = append(out, sinkResult{name: s, via: via, delivered: d, gaps: counter(after, "sink-"+s, "lost"),
				goodput: float64(d) / secs / r.linkPkts})
		}
	}
	return out
}

// FixedLen is the fixed CODED IP header (docs/rlnc-wire.md).
const FixedLen = 12

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

// buildConfig writes the engine config of the coded run: ports, one
// pipeline per link and one per node.
func buildConfig(t topology, p params, perLink int, srcPPS float64, count uint64) string {
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	writeNet(&b, t)
	store := "memory = \"16MiB\"\nmax_block = %d\npool_buffers = 4096\nwindow = 1024\n"
	links := func(n string, paced bool) string {
		var l []string
		for _, v := range t.out(n) {
			s := fmt.Sprintf("{ port = %q, coded = %d", n+"-"+v, perLink)
			if paced {
				s += fmt.Sprintf(", rate = \"%.0fbit\"", p.rate)
			}
			l = append(l, s+" }")
		}
		return "links = [ " + strings.Join(l, ", ") + " ]\n"
	}
	// The source.
	w("[[pipelines]]\nname = \"node-%s\"\nlcores = [0]\n", t.source)
	w("[[pipelines.stages]]\nkind = \"generator\"\nname = \"gen\"\nflows = 1\nsrc = \"2001:db8:1::1\"\ndst = \"2001:db8:2::1\"\n"+
		"udp_src_port = 5000\nudp_dst_port = 6000\nsizes = [%d]\nrate = \"%.0fpps\"\ncount = %d\n", p.n+56, srcPPS, count)
	w("[[pipelines.stages]]\nkind = \"rlnc.encoder\"\nname = \"enc\"\nk = %d\nblock = %d\nflush = \"1s\"\n"+store+links(t.source, false), p.k, p.n, p.n)
	writeLinks(&b, t, p)
	// Relays and terminals.
	for _, n := range t.nodes() {
		if n == t.source {
			continue
		}
		w("[[pipelines]]\nname = \"node-%s\"\nlcores = [0]\nrx = [%q]\n", n, n+".in.rx")
		if !t.isTerminal(n) {
			w("[[pipelines.stages]]\nkind = \"rlnc.recoder\"\nname = \"rec-%s\"\nk = %d\nblock = %d\n"+store+links(n, p.pace), n, p.k, p.n, p.n)
			continue
		}
		w("[[pipelines.stages]]\nkind = \"rlnc.decoder\"\nname = \"dec-%s\"\n"+store, n, p.n)
		writeDelivery(&b, t, n)
	}
	return b.String()
}

// writeNet writes what the coded and the routed runs share ahead of the
// pipelines: the engine, the pool, and the ports: a mem pair per link, per
// node's input and per host.
func writeNet(b *strings.Builder, t topology) {
	w := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	w("version = 1\n[engine]\npoll = \"adaptive\"\npin = false\ntx_buffer = 1024\n")
	w("[control]\nlisten = \"\"\n")
	w("[[pools]]\nname = \"default\"\nbuffers = 131072\n")
	pair := func(a, z string) {
		w("[[ports]]\nname = %q\ndriver = \"mem\"\npeer = %q\n", a, z)
		w("[[ports]]\nname = %q\ndriver = \"mem\"\npeer = %q\n", z, a)
	}
	for _, e := range t.edges {
		pair(e[0]+"-"+e[1], e[0]+"-"+e[1]+".rx")
	}
	for _, n := range t.nodes() {
		if n != t.source {
			pair(n+".in", n+".in.rx")
		}
	}
	for _, term := range t.terminals {
		for _, hst := range t.hosts[term] {
			pair(hst, hst+".rx")
		}
	}
}

// writeLinks writes one pipeline per link: its capacity, delay and loss
// (seeded by the link's index, the same in both runs), then the far node's
// input.
func writeLinks(b *strings.Builder, t topology, p params) {
	w := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	for i, e := range t.edges {
		w("[[pipelines]]\nname = \"link-%s-%s\"\nlcores = [0]\nrx = [%q]\n", e[0], e[1], e[0]+"-"+e[1]+".rx")
		w("[[pipelines.stages]]\nkind = \"link\"\nrate = \"%.0fbit\"\ndelay = \"1ms\"\nloss = %g\nseed = %d\nqueue = 1000000\n", p.rate, p.loss, i+1)
		w("[[pipelines.stages]]\nkind = \"forward\"\nport = %q\n", e[1]+".in")
	}
}

// writeDelivery ends terminal n's pipeline: its sink, or a fan-out to its
// hosts and theirs.
func writeDelivery(b *strings.Builder, t topology, n string) {
	w := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	hs := t.hosts[n]
	if len(hs) == 0 {
		w("[[pipelines.stages]]\nkind = \"sink\"\nname = \"sink-%s\"\n", n)
		return
	}
	w("[[pipelines.stages]]\nkind = \"bench.fanout\"\nports = [\"%s\"]\n", strings.Join(hs, "\", \""))
	for _, hst := range hs {
		w("[[pipelines]]\nname = \"host-%s\"\nlcores = [0]\nrx = [%q]\n", hst, hst+".rx")
		w("[[pipelines.stages]]\nkind = \"sink\"\nname = \"sink-%s\"\n", hst)
	}
}
