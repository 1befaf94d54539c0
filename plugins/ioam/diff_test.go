package ioam

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/appliance/stats"
	"github.com/linerate/linerate/plugins"
	"github.com/linerate/linerate/plugins/stagetest"
)

// The differential fuzzers hold each role's fast paths (encap.quick,
// transit.quickRun and fast, decap.quick and fast, the layouts they
// remember, the per-burst node images, the word moves) to its general path
// on any packet. Two harnesses build the same stages, the second's forced
// down the general path (node.general), and both get the same bursts: every
// packet must leave the same (bytes, verdict and drop reason, flags, data
// window, parse record and scratch, transit delay field), and the stages
// must count, record, emit and export the same.

// diffTarget is what a fuzz target tries: stages of one kind in several
// configs, and primers, valid packets of the stages' common case.
type diffTarget struct {
	kind    string
	configs []string
	primers [][]byte
}

// diffRig is a pair of harnesses built afresh for one input, so that each
// input is a case of its own: the stage in each, the second forced down the
// general path, and an ioam.transit that may run before it and leave its
// scratch.
type diffRig struct {
	h   [2]*harness
	pre [2]plugins.Stage
	st  [2]plugins.Stage
}

func newDiffRig(t testing.TB, kind, keys string) *diffRig {
	r := &diffRig{}
	for j := range r.h {
		h := newHarnessOf(t, 64)
		// Routed mode: transit's expired packets get a Time Exceeded.
		h.Ports[0].Addrs = []netip.Prefix{netip.MustParsePrefix("2001:db8:a::1/64")}
		r.h[j] = h
		r.pre[j] = h.MustBuildNamed("ioam.transit", "pre", nodeKeys(9))
		r.st[j] = h.MustBuildNamed(kind, "st", keys)
	}
	forceGeneral(r.st[1])
	return r
}

// diffInput is how a fuzz input's packet arrives, from its selector byte:
// the input port, the local flag, an engine parse record, a first stage
// (pre), and a primer before and after the two copies of the input in the
// burst, so that the input meets a remembered layout.
type diffInput struct {
	port               uint16
	local, parsed, pre bool
	primer             []byte
	frame              []byte
	desc               string
}

func (d *diffTarget) input(cfg int, sel uint8, frame []byte) diffInput {
	in := diffInput{port: uint16(sel&3) % 3, local: sel&4 != 0, parsed: sel&8 != 0, pre: sel&16 != 0, frame: frame}
	k := int(sel>>5) % (len(d.primers) + 1)
	if k > 0 {
		in.primer = d.primers[k-1]
	}
	in.desc = fmt.Sprintf("config %d, sel %#02x (port %d, local %v, parsed %v, pre %v, primer %d)\nframe % x",
		cfg, sel, in.port, in.local, in.parsed, in.pre, k, frame)
	return in
}

// pktOutcome is what became of one packet of a burst.
type pktOutcome struct {
	verdict packet.Verdict
	reason  packet.Reason
	data    []byte // of a packet that goes on, its transit delay field written
	flags   uint8
	off     int
	layers  packet.Layers
	scratch scratch
}

type sentOutcome struct {
	port uint16
	data []byte
}

// diffResult is what a stage did with a burst.
type diffResult struct {
	pkts    []pktOutcome
	emitted []sentOutcome
	records []Record
}

// txLater is when the captured packets leave, after their stage: transmit
// writes their transit delay then.
const txLater = 12345

func capture(b *packet.Burst, now int64) []pktOutcome {
	out := make([]pktOutcome, b.N)
	for i := range b.N {
		p := b.H[i].P()
		o := &out[i]
		o.verdict, o.reason, o.flags, o.off = p.Verdict(), p.Reason, p.Flags(), p.Offset()
		if p.LayersValid() {
			o.layers, o.scratch = *p.Layers(), *scratchOf(p)
		}
		if p.Verdict() == packet.Continue {
			p.StampTx(now + txLater)
			o.data = append([]byte(nil), p.Data()...)
		}
	}
	return out
}

// records drains the stage's export ring.
func records(st plugins.Stage) []Record {
	var e *exportState
	switch s := st.(type) {
	case *encap:
		e = s.exp
	case *transit:
		e = s.exp
	case *decap:
		e = s.exp
	}
	if e == nil {
		return nil
	}
	buf := make([]Record, 64)
	return buf[:e.ring.Drain(buf)]
}

// run passes a burst of in through the stage of harness j.
func (r *diffRig) run(j int, in diffInput) diffResult {
	h := r.h[j]
	b := &packet.Burst{}
	if in.primer != nil {
		b.Push(h.Pkt(in.primer, 0))
	}
	for range 2 {
		hd := h.Pkt(in.frame, in.port)
		if in.local {
			hd.P().SetFlag(packet.FlagLocal)
		}
		if in.parsed {
			_, _ = hd.P().ParseLayers()
		}
		b.Push(hd)
	}
	if in.primer != nil {
		b.Push(h.Pkt(in.primer, 0))
	}
	stages := []plugins.Stage{r.st[j]}
	if in.pre {
		stages = []plugins.Stage{r.pre[j], r.st[j]}
	}
	var res diffResult
	h.Clock.Advance(1500)
	h.Ctx.Now = h.Clock.Now()
	o := h.Chain(b, len(stages), func(i int, b *packet.Burst) {
		h.Ctx.Stage = i
		stages[i].Process(&h.Ctx, b)
		if i == len(stages)-1 {
			res.pkts = capture(b, h.Ctx.Now)
		}
	})
	o.Free()
	for _, s := range h.Env.TakeEmitted() {
		res.emitted = append(res.emitted, sentOutcome{s.Port, stagetest.TakeData(s.H)})
	}
	res.records = records(r.st[j])
	return res
}

// check runs frame, as cfg and sel say, through a fresh pair of stages and
// fails t on the first difference. A burst of primers goes first, so that
// the input's buffers held IOAM packets before and the stages remember a
// layout.
func (d *diffTarget) check(t *testing.T, cfg, sel uint8, frame []byte) {
	if len(frame) > 1500 {
		return
	}
	k := int(cfg) % len(d.configs)
	r := newDiffRig(t, d.kind, d.configs[k])
	in := d.input(k, sel, frame)
	warm := in
	warm.port, warm.local, warm.frame, warm.primer = 0, false, d.primers[0], d.primers[0]
	for _, x := range []diffInput{warm, in} {
		if msg := diffResults(r.run(0, x), r.run(1, x)); msg != "" {
			t.Fatalf("fast and general paths differ: %s\n%s", msg, in.desc)
		}
		if msg := r.diffStats(); msg != "" {
			t.Fatalf("fast and general paths differ: %s\n%s", msg, in.desc)
		}
	}
}

func diffResults(a, b diffResult) string {
	if len(a.pkts) != len(b.pkts) {
		return fmt.Sprintf("%d packets left the stage, general %d", len(a.pkts), len(b.pkts))
	}
	for i := range a.pkts {
		x, y := &a.pkts[i], &b.pkts[i]
		switch {
		case x.verdict != y.verdict || x.reason != y.reason:
			return fmt.Sprintf("packet %d: verdict %v %s, general %v %s", i, x.verdict, x.reason, y.verdict, y.reason)
		case !bytes.Equal(x.data, y.data):
			return fmt.Sprintf("packet %d: bytes\nfast    % x\ngeneral % x", i, x.data, y.data)
		case x.flags != y.flags || x.off != y.off:
			return fmt.Sprintf("packet %d: flags %#x window at %d, general %#x at %d", i, x.flags, x.off, y.flags, y.off)
		case x.layers != y.layers || x.scratch != y.scratch:
			return fmt.Sprintf("packet %d: parse record or scratch\nfast    %+v %+v\ngeneral %+v %+v", i, x.layers, x.scratch, y.layers, y.scratch)
		}
	}
	if !reflect.DeepEqual(a.emitted, b.emitted) {
		return fmt.Sprintf("emitted\nfast    %x\ngeneral %x", a.emitted, b.emitted)
	}
	if !reflect.DeepEqual(a.records, b.records) {
		return fmt.Sprintf("export records\nfast    %+v\ngeneral %+v", a.records, b.records)
	}
	return ""
}

// diffStats compares the counters and histograms of the stages in both
// harnesses.
func (r *diffRig) diffStats() string {
	for _, name := range []string{"pre", "st"} {
		for _, c := range r.h[0].CounterNames(name) {
			if x, y := r.h[0].StageCounter(name, c), r.h[1].StageCounter(name, c); x != y {
				return fmt.Sprintf("%s counter %s: %d, general %d", name, c, x, y)
			}
		}
	}
	a, ok := r.st[0].(*decap)
	if !ok {
		return ""
	}
	b := r.st[1].(*decap)
	for i := range a.hops {
		if x, y := snapshot(a.hops[i]), snapshot(b.hops[i]); !reflect.DeepEqual(x, y) {
			return fmt.Sprintf("hop%d_delay %+v, general %+v", i+1, x, y)
		}
	}
	if a.e2e != nil && !reflect.DeepEqual(snapshot(a.e2e), snapshot(b.e2e)) {
		return "e2e_delay histograms"
	}
	return ""
}

func snapshot(h *stats.Histogram) *stats.HistSnapshot {
	h.Publish()
	return h.Snapshot()
}

// diffSels are the selectors each seed is tried with: plain, with a primer,
// parsed after a first stage on port 1, local on port 2, all of them.
var diffSels = []uint8{0x00, 0x20, 0x19, 0x46, 0x8E}

// diffTraceTypes: every field a node fills on its own, and mixes.
var diffTraceTypes = []uint32{0x800000, 0x400000, 0x200000, 0x100000, 0x080000, 0x040000, 0x020000,
	0x010000, 0x008000, 0x004000, 0x002000, 0x001000, 0x000002, 0xF00000, 0xFFF002, 0xCC8000}

// diffPOTKeys writes the key files of a POT profile of three nodes.
func diffPOTKeys(t testing.TB) []string {
	keys, err := DealPOT(3, 0xFFFFFFFFFFFFFFC5, rand.New(rand.NewPCG(5, 6)))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var files []string
	for i := range keys {
		f := filepath.Join(dir, fmt.Sprintf("node%d.toml", i))
		if err := WritePOTKey(f, &keys[i]); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return files
}

// Extension headers for test frames.
var (
	routerAlert = []byte{0, 0, 0x05, 0x02, 0x00, 0x00, 0x01, 0x00}
	padOnly     = []byte{0, 0, 0x01, 0x04, 0, 0, 0, 0}
)

// srh is a Segment Routing Header (Routing type 4) with one segment left.
func srh() []byte {
	h := make([]byte, 24)
	h[1], h[2], h[3] = 2, 4, 1
	a := netip.MustParseAddr("2001:db8:2::1").As16()
	copy(h[8:], a[:])
	return h
}

// otherFrames are frames IOAM stages pass as they are: IPv4, ARP, a
// truncated IPv6 header.
func otherFrames(t testing.TB) [][]byte {
	v4 := []byte{2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00,
		0x45, 0, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0, 192, 0, 2, 1, 198, 51, 100, 1,
		0x27, 0x10, 0x4e, 0x20, 0, 8, 0, 0}
	arp := append([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 1, 0x08, 0x06}, make([]byte, 28)...)
	short := buildFrame(t, frameSpec{payload: 4})[:40]
	return [][]byte{v4, arp, short}
}

// plainSeeds are frames before encapsulation: sizes, a VLAN tag, another
// prefix, a hop limit of 1, then extFrames and otherFrames.
func plainSeeds(t testing.TB) [][]byte {
	out := [][]byte{
		buildFrame(t, frameSpec{payload: 4}),
		buildFrame(t, frameSpec{payload: 200}),
		buildFrame(t, frameSpec{payload: 1434}),
		buildFrame(t, frameSpec{payload: 100, vlan: 5}),
		buildFrame(t, frameSpec{payload: 20, dst: "2001:db8:2:7::9", src: "2001:db8:9::1"}),
		buildFrame(t, frameSpec{payload: 20, hopLimit: 1}),
	}
	return append(append(out, extFrames(t)...), otherFrames(t)...)
}

// extFrames are IPv6 frames without IOAM: with extension headers (Hop-by-Hop,
// Destination Options, a Segment Routing Header), TCP, Ethernet padding.
func extFrames(t testing.TB) [][]byte {
	out := [][]byte{
		buildFrame(t, frameSpec{payload: 20, ext: [][]byte{routerAlert}, extTypes: []uint8{packet.ProtocolHopByHop}}),
		buildFrame(t, frameSpec{payload: 20, ext: [][]byte{srh()}, extTypes: []uint8{packet.ProtocolRouting}}),
		buildFrame(t, frameSpec{payload: 20, ext: [][]byte{routerAlert, srh()}, extTypes: []uint8{packet.ProtocolHopByHop, packet.ProtocolRouting}}),
		buildFrame(t, frameSpec{payload: 20, ext: [][]byte{padOnly, srh()}, extTypes: []uint8{packet.ProtocolDestOpts, packet.ProtocolRouting}}),
		buildFrame(t, frameSpec{payload: 20, ext: [][]byte{routerAlert, padOnly}, extTypes: []uint8{packet.ProtocolHopByHop, packet.ProtocolDestOpts}}),
	}
	tcp := buildFrame(t, frameSpec{payload: 20})
	tcp[14+6] = packet.ProtocolTCP
	trailer := append(buildFrame(t, frameSpec{payload: 2}), 0, 0, 0, 0)
	return append(out, tcp, trailer)
}

// encapSeeds makes frames with IOAM: one encapsulating node per profile.
type encapSeeds struct {
	t   testing.TB
	h   *harness
	n   int
	out [][]byte
}

// add runs frame through an ioam.encap of keys, as a local packet or not,
// and keeps what it made.
func (e *encapSeeds) add(keys string, frame []byte, local bool) []byte {
	e.n++
	st := e.h.MustBuildNamed("ioam.encap", fmt.Sprintf("seed%d", e.n), keys)
	r := e.h.run(frame, 0, local, st)
	if r.data == nil || bytes.Equal(r.data, frame) {
		e.t.Fatalf("seed %d: encap left the frame (%s)", e.n, r.dropped)
	}
	e.out = append(e.out, r.data)
	return r.data
}

// ioamSeeds are frames with IOAM: each trace type, pre-allocated and
// incremental, POT, E2E and DEX, encapsulated and inline (into packets with
// their own Hop-by-Hop, Destination Options and Segment Routing headers),
// flags set, another namespace, two traces, and frames without IOAM.
func ioamSeeds(t testing.TB, pot string) [][]byte {
	e := &encapSeeds{t: t, h: newHarness(t)}
	frame := buildFrame(t, frameSpec{payload: 24})
	trace := func(tt uint32, more string) string {
		return fmt.Sprintf(`{ namespace = 123, type = "%#06x", hops = 3%s }`, tt, more)
	}
	for _, tt := range diffTraceTypes {
		e.add(encapKeys(1, "encap", trace(tt, "")), frame, false)
	}
	for _, tt := range []uint32{0x800000, 0xF00000, 0xFFF002} {
		e.add(encapKeys(1, "encap", trace(tt, `, option = "incremental"`)), frame, false)
		e.add(encapKeys(1, "inline", trace(tt, "")), frame, true)
		e.add(encapKeys(1, "inline", trace(tt, `, option = "incremental"`)), frame, true)
		e.add(encapKeys(1, "encap", trace(tt, ", loopback = true")), frame, false)
		e.add(encapKeys(1, "encap", trace(tt, ", fill = false, active = true")), frame, false)
	}
	options := fmt.Sprintf("pot = { namespace = 123, key_file = %q }\n", pot) +
		"e2e = { namespace = 123, type = \"0xF000\" }\n" +
		"dex = { namespace = 123, type = \"0xC00000\", flow_id = 7, sequence = true }\n"
	all := trace(0xF00000, "") + "\n" + options
	e.add(encapKeys(1, "encap", all), frame, false)
	e.add(encapKeys(1, "inline", all), frame, true)
	e.add(encapKeys(1, "encap", trace(0xC00000, `, option = "incremental"`)+"\n"+options), frame, false)
	e.add(encapKeys(1, "encap", trace(0x800000, "")+"\nmode = \"encap\"\n"), buildFrame(t, frameSpec{payload: 24, vlan: 9}), false)
	for _, ext := range []frameSpec{
		{payload: 24, ext: [][]byte{routerAlert}, extTypes: []uint8{packet.ProtocolHopByHop}},
		{payload: 24, ext: [][]byte{srh()}, extTypes: []uint8{packet.ProtocolRouting}},
		{payload: 24, ext: [][]byte{routerAlert, srh()}, extTypes: []uint8{packet.ProtocolHopByHop, packet.ProtocolRouting}},
		{payload: 24, ext: [][]byte{padOnly, srh()}, extTypes: []uint8{packet.ProtocolDestOpts, packet.ProtocolRouting}},
	} {
		e.add(encapKeys(1, "inline", all), buildFrame(t, ext), true)
		e.add(encapKeys(1, "inline", trace(0xF00000, "")), buildFrame(t, ext), true)
		e.add(encapKeys(1, "encap", trace(0xF00000, "")), buildFrame(t, ext), false)
	}
	// Another namespace, then an option of each namespace in one header.
	other := strings.Replace(encapKeys(1, "encap", `{ namespace = 7, type = "0xF00000", hops = 3 }`),
		"namespaces = [", "namespaces = [ { id = 7 }, ", 1)
	e.add(other, frame, false)
	two := e.add(strings.Replace(other, "encap", "inline", 1), frame, true)
	e.add(encapKeys(1, "inline", trace(0xF00000, "")), two, true)
	// A full trace, and one with the O flag set.
	const trh = 14 + packet.IPv6Len + 4 + OptionHeaderLen
	full := append([]byte(nil), e.out[0]...)
	full[trh+3] &^= 0x7F
	overflow := append([]byte(nil), e.out[0]...)
	overflow[trh+2] |= 0x04
	trailer := append(append([]byte(nil), e.out[0]...), 0, 0, 0, 0)
	out := append(e.out, full, overflow, trailer, frame)
	return append(append(out, extFrames(t)...), otherFrames(t)...)
}

// ioamPrimers are the common case of a transit or decapsulating node:
// encapsulated 66-byte frames of three trace types, and an inline one.
func ioamPrimers(t testing.TB) [][]byte {
	e := &encapSeeds{t: t, h: newHarness(t)}
	frame := buildFrame(t, frameSpec{payload: 4})
	for _, tt := range []uint32{0xF00000, 0x800000, 0xFFF002} {
		e.add(encapKeys(1, "encap", fmt.Sprintf(`{ namespace = 123, type = "%#06x", hops = 3 }`, tt)), frame, false)
	}
	e.add(encapKeys(1, "inline", `{ namespace = 123, type = "0xF00000", hops = 3 }`), frame, true)
	return e.out
}

// addSeeds adds every seed frame in every config, each with two of
// diffSels.
func addSeeds(f *testing.F, d *diffTarget, seeds [][]byte) {
	for i, s := range seeds {
		for k := range d.configs {
			for n := range 2 {
				f.Add(uint8(k), diffSels[(i+k+n)%len(diffSels)], s)
			}
		}
	}
}

// FuzzTransitPaths: ioam.transit's quickRun and fast against its general
// path, with POT, DEX export and loopback, with the hop limit rule in routed
// mode, and as a node of another namespace.
func FuzzTransitPaths(f *testing.F) {
	pot := diffPOTKeys(f)
	d := &diffTarget{kind: "ioam.transit", primers: ioamPrimers(f), configs: []string{
		nodeKeys(2) + "loopback = true\nexport = true\nexport_ring = 64\n" +
			fmt.Sprintf("pot = [ { namespace = 123, key_file = %q } ]\n", pot[1]),
		nodeKeys(2) + "decrement_hop_limit = true\n",
		"node_id = 5\ntimestamp = \"ntp\"\nnamespaces = [ { id = 7 } ]\n",
	}}
	addSeeds(f, d, append(ioamSeeds(f, pot[0]), d.primers...))
	f.Fuzz(d.check)
}

// FuzzDecapPaths: ioam.decap's quick and fast against its general path, in
// every mode, with and without histograms, fill and removal, and with POT,
// export and loopback.
func FuzzDecapPaths(f *testing.F) {
	pot := diffPOTKeys(f)
	d := &diffTarget{kind: "ioam.decap", primers: ioamPrimers(f)}
	for _, keys := range []string{"max_hops = 3\n", "histograms = false\n", "histograms = false\nmode = \"encap\"\n",
		"histograms = false\nmode = \"inline\"\n", "remove = false\nmax_hops = 3\n", "fill = false\nhistograms = false\n",
		"mode = \"encap\"\nremove = false\nhistograms = false\n",
		fmt.Sprintf("export = true\nexport_ring = 64\nloopback = true\nhistograms = false\npot = [ { namespace = 123, key_file = %q } ]\n", pot[2])} {
		d.configs = append(d.configs, nodeKeys(3)+keys)
	}
	addSeeds(f, d, append(ioamSeeds(f, pot[0]), d.primers...))
	f.Fuzz(d.check)
}

// FuzzEncapPaths: ioam.encap's quick against its general path, for the
// profiles quick takes (encap and auto, short and per-packet node data, an
// outer hop limit), and the general path alone with inline profiles and
// profiles that match, sample, and add POT, E2E and DEX.
func FuzzEncapPaths(f *testing.F) {
	pot := diffPOTKeys(f)
	d := &diffTarget{kind: "ioam.encap", configs: []string{
		encapKeys(1, "encap", `{ namespace = 123, type = "0xF00000", hops = 3 }`),
		"hop_limit = 9\n" + encapKeys(1, "auto", `{ namespace = 123, type = "0x800000", hops = 4 }`),
		encapKeys(1, "encap", `{ namespace = 123, type = "0xFFF002", hops = 2 }`),
		"inline_transit = true\n" + encapKeys(1, "inline", `{ namespace = 123, type = "0xF00000", hops = 3, option = "incremental" }`),
		nodeKeys(1) + fmt.Sprintf(`
mode = "auto"
src = "2001:db8:e::1"
dst = "2001:db8:d::1"
seed = 7
export = true
export_ring = 64
[[profiles]]
name = "edge"
match_dst = ["2001:db8:2::/48"]
rate = "2/3"
trace = { namespace = 123, type = "0xFC0000", hops = 3, loopback = true }
pot = { namespace = 123, key_file = %q }
e2e = { namespace = 123, type = "0xF000" }
dex = { namespace = 123, type = "0xC00000", flow_id = 9, sequence = true }
[[profiles]]
name = "udp"
match_src = ["2001:db8:1::/48"]
proto = 17
dst_port = 20000
mode = "inline"
trace = { namespace = 123, type = "0xF00000", option = "incremental", hops = 2 }
[[profiles]]
name = "rest"
e2e = { namespace = 123, type = "0x9000" }
`, pot[0]),
	}, primers: [][]byte{buildFrame(f, frameSpec{payload: 4}), buildFrame(f, frameSpec{payload: 4, vlan: 3})}}
	seeds := plainSeeds(f)
	// Frames with IOAM already, and a looped-back copy coming home.
	seeds = append(seeds, ioamPrimers(f)...)
	h := newHarness(f)
	enc := h.MustBuildNamed("ioam.encap", "enc", encapKeys(1, "encap", `{ namespace = 123, type = "0xFC0000", hops = 3, loopback = true }`))
	tr := h.MustBuildNamed("ioam.transit", "tr", nodeKeys(2)+"loopback = true\nloopback_src = \"2001:db8:d::1\"\n")
	h.run(buildFrame(f, frameSpec{payload: 4}), 0, false, enc, tr)
	for _, s := range h.Env.TakeEmitted() {
		seeds = append(seeds, stagetest.TakeData(s.H))
	}
	addSeeds(f, d, seeds)
	f.Fuzz(d.check)
}
