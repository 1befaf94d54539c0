package ioam

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/internal/cputime"
	"github.com/linerate/linerate/plugins"
	"github.com/linerate/linerate/plugins/stagetest"
)

// Benchmarks run a stage over bursts of 64 packets, as the engine does. Each
// round puts the packets back as they were before the stage (a few bytes and
// the data window); that reset is timed on its own and taken out of ns/pkt,
// and reported as reset_ns/pkt.
//
// Sizes are Ethernet frames with their FCS, as RFC 2544 counts them. The
// smallest IPv6/UDP frame is 66 bytes (14 + 40 + 8 + 4): there is no 64-byte
// IPv6 frame, so the smallest size is 66.

var benchSizes = []int{66, 256, 512, 1200, 1500}

// benchTypes: one field, four fields, and every field a node fills (bits 0-11
// and the opaque snapshot).
var benchTypes = []uint32{0x800000, 0xF00000, 0xFFF002}

// quietEnv is an Env that allocates nothing: emitted packets go back to their
// pool at once.
type quietEnv struct{}

func (e *quietEnv) Emit(h packet.Handle, port uint16) bool { packet.FreeOne(h); return true }
func (e *quietEnv) TxDepth(port uint16) int                { return 3 }
func (e *quietEnv) Owner(key uint64) int                   { return 0 }
func (e *quietEnv) Handoff(h packet.Handle, owner int) bool {
	return false
}
func (e *quietEnv) NumInstances() int    { return 1 }
func (e *quietEnv) Free(h packet.Handle) { packet.FreeOne(h) }

// benchBurst holds a burst of copies of one frame and what each round must put
// back.
type benchBurst struct {
	b     packet.Burst
	off   int
	len   int
	saved []byte // the frame as it was
	fix   [][2]int
}

func newBenchBurst(h *harness, frame []byte) *benchBurst {
	bb := &benchBurst{saved: append([]byte(nil), frame...)}
	for range packet.MaxBurst {
		hd := h.Pkt(frame, 0)
		bb.b.Push(hd)
	}
	p := bb.b.H[0].P()
	bb.off, bb.len = p.Offset(), p.Len()
	return bb
}

// reset puts every packet back: the data window, and the byte ranges fix
// (offsets in the original window) from the saved frame.
func (bb *benchBurst) reset() {
	bb.b.N = packet.MaxBurst
	for i := range bb.b.N {
		p := bb.b.H[i].P()
		p.SetWindow(bb.off, bb.len)
		d := p.Data()
		for _, r := range bb.fix {
			copy(d[r[0]:r[1]], bb.saved[r[0]:r[1]])
		}
		p.Continue()
	}
}

func (bb *benchBurst) free() {
	bb.b.N = packet.MaxBurst
	packet.Free(&bb.b)
}

// runBench times rounds of reset and Process, less the resets alone, in
// thread CPU time (ns/pkt; wall_ns/pkt is the wall clock's figure), and checks
// that the stage did its work on every packet: counter counts per packet.
func runBench(b *testing.B, h *harness, bb *benchBurst, st plugins.Stage, counter string) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ctx := &h.Ctx
	ctx.Env = &quietEnv{}
	ctx.Now = h.Clock.Now()
	before := h.Counter(counter)
	bb.reset()
	st.Process(ctx, &bb.b)
	if got := h.Counter(counter) - before; got != packet.MaxBurst {
		b.Fatalf("%s counted %d of %d packets", counter, got, packet.MaxBurst)
	}
	// The resets alone, as many as the timed loop does.
	c0 := cputime.Thread()
	for range b.N {
		bb.reset()
	}
	resetNs := cputime.Thread() - c0
	b.ReportAllocs()
	b.ResetTimer()
	c0 = cputime.Thread()
	for range b.N {
		bb.reset()
		st.Process(ctx, &bb.b)
	}
	cpu := cputime.Thread() - c0
	b.StopTimer()
	pkts := float64(b.N) * packet.MaxBurst
	b.ReportMetric(float64(cpu-resetNs)/pkts, "ns/pkt")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/pkts, "wall_ns/pkt")
	b.ReportMetric(float64(resetNs)/pkts, "reset_ns/pkt")
	// The figures every stage benchmark reports (plugins/stagetest).
	stagetest.ReportAlone(b, float64(cpu-resetNs)/pkts, len(bb.saved), int(pkts))
	for i := range packet.MaxBurst {
		if p := bb.b.H[i].P(); p.Verdict() == packet.Drop {
			b.Fatalf("the stage dropped a packet: %s", p.Reason)
		}
	}
}

// benchKeys are node k's keys with an egress port whose MTU takes every
// size encapsulated.
func benchKeys(k int) string {
	return strings.Replace(nodeKeys(k), `egress_port = "eth1"`, `egress_port = "big"`, 1)
}

func benchEncapKeys(tt uint32) string {
	return strings.Replace(encapKeys(1, "encap", fmt.Sprintf(`{ namespace = 123, type = "%#06x", hops = %d }`, tt, hopsFor(tt))),
		`egress_port = "eth1"`, `egress_port = "big"`, 1)
}

func benchFrame(b *testing.B, size int) []byte {
	return buildFrame(b, frameSpec{payload: size - 4 - 14 - 40 - 8})
}

func hopsFor(tt uint32) int { return min(4, MaxTraceData/((NodeLen(tt)+2)*4)) }

// BenchmarkEncap: IPv6-in-IPv6 with a pre-allocated trace, the encapsulating
// node's own data written.
func BenchmarkEncap(b *testing.B) {
	for _, size := range benchSizes {
		for _, tt := range benchTypes {
			b.Run(fmt.Sprintf("size=%d/trace=%#06x", size, tt), func(b *testing.B) {
				h := newHarness(b)
				enc := h.MustBuild("ioam.encap", benchEncapKeys(tt))
				bb := newBenchBurst(h, benchFrame(b, size))
				bb.fix = [][2]int{{0, 14}} // the Ethernet header, moved into the headroom
				defer bb.free()
				runBench(b, h, bb, enc, "encapsulated")
			})
		}
	}
	b.Run(fmt.Sprintf("size=%d/trace=%#06x/engine", engineSize, engineType), func(b *testing.B) {
		stagetest.InEngine(b, stagetest.EngineSpec{Kind: "ioam.encap", Keys: benchEncapKeys(engineType),
			Frames: [][]byte{benchFrame(b, engineSize)}, Rx: "eth0", Ports: []string{"eth1", "big"}})
	})
}

// engineSize and engineType are the one workload each role also runs inside an
// engine on mem ports (stagetest.InEngine): the engine+stage figure.
const (
	engineSize = 1200
	engineType = 0xF00000
)

// BenchmarkTransit: a node's data into the pre-allocated trace of an
// encapsulated packet (size: the frame before encapsulation) that arrived from
// a port (no parse record: the stage walks the headers itself).
func BenchmarkTransit(b *testing.B) {
	for _, size := range benchSizes {
		for _, tt := range benchTypes {
			b.Run(fmt.Sprintf("size=%d/trace=%#06x", size, tt), func(b *testing.B) {
				h := newHarness(b)
				enc := h.MustBuild("ioam.encap", benchEncapKeys(tt))
				frame := h.run(benchFrame(b, size), 0, false, enc).data
				tr := h.MustBuild("ioam.transit", benchKeys(2))
				bb := newBenchBurst(h, frame)
				bb.fix = [][2]int{{14 + 40 + 4 + 4 + 2, 14 + 40 + 4 + 4 + 4}} // the trace's NodeLen, flags and RemainingLen
				defer bb.free()
				runBench(b, h, bb, tr, "filled")
			})
		}
	}
	b.Run(fmt.Sprintf("size=%d/trace=%#06x/engine", engineSize, engineType), func(b *testing.B) {
		h := newHarness(b)
		enc := h.MustBuild("ioam.encap", benchEncapKeys(engineType))
		frame := h.run(benchFrame(b, engineSize), 0, false, enc).data
		stagetest.InEngine(b, stagetest.EngineSpec{Kind: "ioam.transit", Keys: benchKeys(2),
			Frames: [][]byte{frame}, Rx: "eth0", Ports: []string{"eth1", "big"}})
	})
}

// BenchmarkDecap: reads the trace and removes the outer header, giving back a
// frame of size; no export, no histograms. Without delays to record, the
// node's own data would be removed with the header, so only whether it had
// room is counted (BenchmarkDecapDelays writes it and records the delays).
func BenchmarkDecap(b *testing.B) {
	for _, size := range benchSizes {
		for _, tt := range benchTypes {
			b.Run(fmt.Sprintf("size=%d/trace=%#06x", size, tt), func(b *testing.B) {
				h := newHarness(b)
				enc := h.MustBuild("ioam.encap", benchEncapKeys(tt))
				frame := h.run(benchFrame(b, size), 0, false, enc).data
				dec := h.MustBuild("ioam.decap", benchKeys(3)+"histograms = false\n")
				bb := newBenchBurst(h, frame)
				n := len(frame) - len(benchFrame(b, size))
				// The Ethernet header moves forward over the outer headers; the
				// trace loses RemainingLen to the node's own data.
				bb.fix = [][2]int{{n, n + 14}, {14 + 40 + 4 + 4 + 2, 14 + 40 + 4 + 4 + 4}}
				defer bb.free()
				runBench(b, h, bb, dec, "decapsulated")
			})
		}
	}
	b.Run(fmt.Sprintf("size=%d/trace=%#06x/engine", engineSize, engineType), func(b *testing.B) {
		h := newHarness(b)
		enc := h.MustBuild("ioam.encap", benchEncapKeys(engineType))
		frame := h.run(benchFrame(b, engineSize), 0, false, enc).data
		stagetest.InEngine(b, stagetest.EngineSpec{Kind: "ioam.decap", Keys: benchKeys(3) + "histograms = false\n",
			Frames: [][]byte{frame}, Rx: "eth0", Ports: []string{"eth1", "big"}})
	})
}

// BenchmarkDecapDelays: BenchmarkDecap at the smallest size with the delay
// histograms on: the node's own data written, per-hop and end-to-end delays
// recorded from the trace timestamps (none for trace types without them).
func BenchmarkDecapDelays(b *testing.B) {
	for _, tt := range benchTypes {
		b.Run(fmt.Sprintf("size=66/trace=%#06x", tt), func(b *testing.B) {
			h := newHarness(b)
			enc := h.MustBuild("ioam.encap", benchEncapKeys(tt))
			frame := h.run(benchFrame(b, 66), 0, false, enc).data
			dec := h.MustBuild("ioam.decap", benchKeys(3))
			bb := newBenchBurst(h, frame)
			n := len(frame) - len(benchFrame(b, 66))
			bb.fix = [][2]int{{n, n + 14}, {14 + 40 + 4 + 4 + 2, 14 + 40 + 4 + 4 + 4}}
			defer bb.free()
			runBench(b, h, bb, dec, "decapsulated")
		})
	}
}

// The fast path allocates nothing: every stage, every mode, the export ring
// and the histograms included.
func TestNoAllocs(t *testing.T) {
	h := newHarness(t)
	h.Ctx.Env = &quietEnv{}
	frame := buildFrame(t, frameSpec{payload: 400})
	for _, c := range []struct {
		name   string
		stages []plugins.Stage
	}{
		{"encap+transit+decap", []plugins.Stage{
			h.MustBuild("ioam.encap", encapKeys(1, "encap", `{ namespace = 123, type = "0xFFF002", hops = 3 }`)),
			h.MustBuild("ioam.transit", nodeKeys(2)+"decrement_hop_limit = true\n"),
			h.MustBuild("ioam.decap", nodeKeys(3)+"export = true\nexport_ring = 16\n"),
		}},
		{"inline incremental", []plugins.Stage{
			h.MustBuild("ioam.encap", encapKeys(1, "inline", `{ namespace = 123, type = "0xF00000", hops = 3, option = "incremental", loopback = true }`)),
			h.MustBuild("ioam.transit", nodeKeys(2)+"loopback = true\n"),
			h.MustBuild("ioam.decap", nodeKeys(3)+"export = true\nexport_ring = 16\n"),
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b packet.Burst
			allocs := testing.AllocsPerRun(200, func() {
				for range 8 {
					hd := h.Pkt(frame, 0)
					hd.P().SetFlag(packet.FlagLocal)
					b.Push(hd)
				}
				h.Ctx.Now += 1000
				for _, st := range c.stages {
					st.Process(&h.Ctx, &b)
				}
				for i := range b.N {
					if b.H[i].P().Verdict() != packet.Continue {
						t.Fatalf("verdict %v %s", b.H[i].P().Verdict(), b.H[i].P().Reason)
					}
				}
				packet.Free(&b)
			})
			if allocs != 0 {
				t.Errorf("%v allocations per burst", allocs)
			}
		})
	}
}

// BenchmarkParseCalibration is the engine's header walk (packet.Parse) of an
// encapsulated frame, timed the same way: a yardstick for the figures above
// on a machine others share (about 15 ns/pkt on a quiet core).
func BenchmarkParseCalibration(b *testing.B) {
	h := newHarness(b)
	enc := h.MustBuild("ioam.encap", benchEncapKeys(0xF00000))
	frame := h.run(benchFrame(b, 66), 0, false, enc).data
	var l packet.Layers
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	c0 := cputime.Thread()
	b.ResetTimer()
	for range b.N {
		if packet.Parse(frame, &l) != nil {
			b.Fatal("parse")
		}
	}
	b.ReportMetric(float64(cputime.Thread()-c0)/float64(b.N), "ns/pkt")
}
