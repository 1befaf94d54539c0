package ioam

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/linerate/linerate/appliance/kernel"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/internal/testenv"
	"github.com/linerate/linerate/plugins/ioam/bpf"
)

// The XDP transit (plugins/ioam/bpf) against the Go stage: the same frames
// through both must come out with the same bytes, but for the node's
// timestamps (well formed in the program's) and the fields the program
// cannot know at XDP ingress (transit delay, queue depth, buffer
// occupancy), which it writes as unavailable, all ones. The counters move
// alike, and what the program leaves to the Go stage it does not touch.

// loIndex is the loopback interface's index: prog.Run's ingress interface,
// which the program maps to port 0's ids, as the harness's packets come in
// on port 0.
const loIndex = 1

type xdpTransitPair struct {
	h    *harness
	t    *transit
	prog *bpf.Transit
}

func newXDPTransitPair(t testing.TB, keys string) *xdpTransitPair {
	t.Helper()
	testenv.RequireRoot(t)
	requireTransit(t, 0)
	p, err := bpf.LoadTransit(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	x := &xdpTransitPair{prog: p}
	x.reset(t, keys)
	return x
}

// requireTransit skips, naming the feature, where the kernel lacks what
// LoadTransit(ifindex) loads needs.
func requireTransit(t testing.TB, ifindex int) {
	t.Helper()
	fs, err := bpf.TransitNeeds(ifindex)
	if err != nil {
		t.Fatal(err)
	}
	testenv.RequireKernel(t, fs...)
}

// reset builds a fresh Go stage and gives the program its config.
func (x *xdpTransitPair) reset(t testing.TB, keys string) {
	t.Helper()
	x.h = newHarness(t)
	x.t = x.h.MustBuildNamed("ioam.transit", "tr", keys).(*transit)
	c, nss := x.t.xdpConfig(x.h.Clock, map[int]uint16{loIndex: 0})
	if err := x.prog.Configure(c, nss); err != nil {
		t.Fatal(err)
	}
}

// xdpMD is struct xdp_md, prog.Run's context.
type xdpMD struct {
	Data, DataEnd, DataMeta, IngressIfindex, RxQueueIndex, EgressIfindex uint32
}

type transitOut struct {
	data    []byte
	counter string // the counter that moved, "" for none
}

func (x *xdpTransitPair) runXDP(t testing.TB, frame []byte) transitOut {
	t.Helper()
	before, err := x.prog.Counters()
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, len(frame)+256)
	opts := ebpf.RunOptions{Data: frame, DataOut: out,
		Context: xdpMD{DataEnd: uint32(len(frame)), IngressIfindex: loIndex}}
	act, err := x.prog.Program.Run(&opts)
	if err != nil {
		t.Fatalf("prog.Run: %v", err)
	}
	if act != 2 {
		t.Fatalf("XDP action %d, want XDP_PASS: the transit never drops nor sends", act)
	}
	after, err := x.prog.Counters()
	if err != nil {
		t.Fatal(err)
	}
	o := transitOut{data: opts.DataOut}
	for i := range after {
		if after[i] != before[i] {
			if o.counter != "" {
				t.Fatalf("two counters moved: %s and %s", o.counter, bpf.TransitCounters[i])
			}
			o.counter = bpf.TransitCounters[i]
		}
	}
	return o
}

var transitCounters = []string{"filled", "overflow", "unknown_namespace", "no_ioam"}

func (x *xdpTransitPair) goCounters() []uint64 {
	var v []uint64
	for _, n := range transitCounters {
		v = append(v, x.h.StageCounter("tr", n))
	}
	return v
}

// compare runs frame through both and checks they agree; it returns the
// counter the program moved.
func (x *xdpTransitPair) compare(t testing.TB, frame []byte) string {
	t.Helper()
	wall := time.Now().UnixNano()
	xo := x.runXDP(t, frame)
	before := x.goCounters()
	gr := x.h.run(append([]byte(nil), frame...), 0, false, x.t)
	after := x.goCounters()
	if xo.counter == "to_go" {
		if !bytes.Equal(xo.data, frame) {
			t.Fatalf("the program changed a packet it left to Go:\n in %x\nout %x", frame, xo.data)
		}
		return xo.counter
	}
	if gr.dropped != "" {
		t.Fatalf("the Go stage dropped (%s) a packet the program let go (%q)", gr.dropped, xo.counter)
	}
	for i, n := range transitCounters {
		if moved := after[i] != before[i]; moved != (n == xo.counter) {
			t.Errorf("counter %s: the Go stage moved it %v, the program moved %q", n, moved, xo.counter)
		}
	}
	got, want := append([]byte(nil), xo.data...), append([]byte(nil), gr.data...)
	if len(got) != len(want) {
		t.Fatalf("%d bytes out of the program, %d out of Go", len(got), len(want))
	}
	if xo.counter == "filled" {
		x.maskNode(t, got, want, wall)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the program's output differs from the Go stage's (times and unknown fields masked):\nxdp %x\n go %x", got, want)
	}
	return xo.counter
}

// maskNode clears, in both outputs, the node's timestamps and the fields the
// program cannot know, after checking the program's: timestamps of this
// run, unknowns all ones.
func (x *xdpTransitPair) maskNode(t testing.TB, got, want []byte, wall int64) {
	t.Helper()
	const tr = 14 + packet.IPv6Len + 8 // the trace header, fastTrace's layout
	trace := Trace(got[tr:])
	ns := x.t.ns.lookup(trace.NamespaceID())
	var pl nodePlan
	if !pl.build(&ns.Namespace, trace.TraceType(), x.t.eg) {
		t.Fatal("no plan for a trace the program filled")
	}
	node := tr + TraceHeaderLen + trace.RemainingLen()*4
	for _, off := range []int16{pl.delay, pl.queue, pl.buffer} {
		if off < 0 {
			continue
		}
		f := node + int(off)
		if v := binary.BigEndian.Uint32(got[f:]); v != unavailable32 {
			t.Errorf("an unknown field at %d holds %#x, want all ones", off, v)
		}
		clear(got[f : f+4])
		clear(want[f : f+4])
	}
	if pl.sec >= 0 && pl.frac >= 0 {
		sec := binary.BigEndian.Uint32(got[node+int(pl.sec):])
		frac := binary.BigEndian.Uint32(got[node+int(pl.frac):])
		var ns int64
		switch pl.format {
		case TimestampPOSIX:
			ns = TimestampNs(pl.format, sec, frac) // UTC since 1970
			if frac >= 1e6 {
				t.Errorf("POSIX microseconds %d", frac)
			}
		case TimestampNTP:
			ns = TimestampNs(pl.format, sec, frac) - 2208988800*1e9
		case TimestampPTP:
			ns = TimestampNs(pl.format, sec, frac) - int64(x.h.Clock.Sync().TAIOffset)*1e9
			if frac >= 1e9 {
				t.Errorf("PTP nanoseconds %d", frac)
			}
		}
		if d := ns - wall; d < -int64(5*time.Second) || d > int64(5*time.Second) {
			t.Errorf("node timestamp %s, the run was at %s", time.Unix(0, ns).UTC(), time.Unix(0, wall).UTC())
		}
	}
	for _, off := range []int16{pl.sec, pl.frac} {
		if off >= 0 {
			f := node + int(off)
			clear(got[f : f+4])
			clear(want[f : f+4])
		}
	}
}

// xdpTransitConfigs: POSIX timestamps, ids of the ingress and egress ports;
// NTP and PTP; an opaque snapshot; a looped-back node.
func xdpTransitConfigs() []string {
	return []string{
		nodeKeys(2),
		"node_id = 5\ntimestamp = \"ntp\"\nnamespaces = [ { id = 7 }, { id = 123, timestamp = \"ptp\", schema_id = 0x1234, schema = \"0xdeadbeefcafef00d\" } ]\n",
		nodeKeys(3) + "loopback = true\n",
	}
}

// The seeds on both paths a transit with an offload takes: "xdp", the
// program in the kernel against the Go stage, byte for byte but for what
// it cannot know; "fallback", offload = "auto" where the kernel lacks what
// the program needs (forced on every kernel): the stage, declined, is the
// Go stage, byte for byte and counter for counter. Each config fills
// traces on both.
func TestXDPTransitGolden(t *testing.T) {
	pot := diffPOTKeys(t)
	seeds := append(ioamSeeds(t, pot[0]), ioamPrimers(t)...)
	t.Run("xdp", func(t *testing.T) {
		for ci, keys := range xdpTransitConfigs() {
			x := newXDPTransitPair(t, keys)
			seen := map[string]int{}
			for i, f := range seeds {
				x.reset(t, keys)
				t.Run(fmt.Sprintf("config%d/seed%d", ci, i), func(t *testing.T) {
					seen[x.compare(t, f)]++
				})
			}
			t.Logf("config %d: %v", ci, seen)
			// Each config fills traces in the kernel and leaves some to Go.
			if seen["filled"] == 0 || seen["to_go"] == 0 {
				t.Errorf("config %d: outcomes %v", ci, seen)
			}
		}
	})
	t.Run("fallback", func(t *testing.T) {
		t.Setenv(kernel.DisableEnv, "bpf_ktime_get_tai_ns")
		for ci, keys := range xdpTransitConfigs() {
			seen := map[string]int{}
			for i, f := range seeds {
				h := newHarness(t)
				auto := h.MustBuildNamed("ioam.transit", "auto", "offload = \"auto\"\n"+keys).(*transit)
				if i == 0 {
					req := auto.xdp.req
					if err := req.RequireKernel(); err != nil || req.InKernel() ||
						!strings.Contains(req.Reason(), "the kernel lacks bpf_ktime_get_tai_ns") {
						t.Fatalf("auto: %v, in the kernel %v, reason %q", err, req.InKernel(), req.Reason())
					}
				}
				ref := h.MustBuildNamed("ioam.transit", "tr", keys)
				ga := h.run(append([]byte(nil), f...), 0, false, auto)
				gr := h.run(append([]byte(nil), f...), 0, false, ref)
				moved := ""
				for _, n := range transitCounters {
					a, r := h.StageCounter("auto", n), h.StageCounter("tr", n)
					if a != r {
						t.Errorf("config %d seed %d: counter %s %d, the Go stage's %d", ci, i, n, a, r)
					}
					if a != 0 {
						moved = n
					}
				}
				if ga.dropped != gr.dropped || !bytes.Equal(ga.data, gr.data) {
					t.Errorf("config %d seed %d: dropped %q, the Go stage %q\nauto %x\n  go %x", ci, i, ga.dropped, gr.dropped, ga.data, gr.data)
				}
				seen[moved]++
			}
			t.Logf("config %d: %v", ci, seen)
			if seen["filled"] == 0 {
				t.Errorf("config %d: outcomes %v", ci, seen)
			}
		}
	})
}

// FuzzXDPTransit is the differential fuzzer: any frame, in any of the
// configs, through the Go stage and the program.
func FuzzXDPTransit(f *testing.F) {
	pot := diffPOTKeys(f)
	for _, s := range append(ioamSeeds(f, pot[0]), ioamPrimers(f)...) {
		f.Add(uint8(0), s)
	}
	cfgs := xdpTransitConfigs()
	x := newXDPTransitPair(f, cfgs[0])
	f.Fuzz(func(t *testing.T, cfg uint8, frame []byte) {
		if len(frame) < 14 || len(frame) > 1500 {
			return
		}
		x.reset(t, cfgs[int(cfg)%len(cfgs)])
		x.compare(t, frame)
	})
}

// decrement_hop_limit makes the transit a router: refused with offload =
// "xdp", in Go with "auto".
func TestXDPOffloadConfig(t *testing.T) {
	h := newHarness(t)
	_, err := h.Build("ioam.transit", nodeKeys(2)+"decrement_hop_limit = true\noffload = \"xdp\"\n")
	if err == nil || !strings.Contains(err.Error(), "decrement_hop_limit") {
		t.Errorf("decrement_hop_limit with offload = \"xdp\": %v", err)
	}
	st, err := h.Build("ioam.transit", nodeKeys(2)+"decrement_hop_limit = true\noffload = \"auto\"\n")
	if err != nil || st.(*transit).xdp != nil {
		t.Errorf("auto: %v", err)
	}
	st, err = h.Build("ioam.transit", nodeKeys(2)+"offload = \"auto\"\n")
	if err != nil || st.(*transit).xdp == nil {
		t.Errorf("auto: %v", err)
	}
}
