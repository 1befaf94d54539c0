package rlnc

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/gf"
	"github.com/linerate/linerate/internal/cputime"
	"github.com/linerate/linerate/plugins"
	"github.com/linerate/linerate/plugins/stagetest"
)

// The benchmarks time the stages alone: input packets are made and outputs
// freed outside the measured time, so GB/s is what the stage costs. Time is
// the benchmark thread's CPU time, for stages and baselines alike: on a
// shared machine, time spent descheduled is not the stage's. ns/op is the
// whole iteration, in wall time.
//
//	encoder  GB/s = coded packets made × K·N / time
//	recoder  GB/s = Σ over recoded packets of (rows combined)·N / time
//	decoder  GB/s = bytes of the original packets delivered / time
//
// The kernel sub-benchmarks are gf's fused dot product alone on the same
// shapes: the baselines.

var benchKs = []int{3, 16, 32, 64}

const benchN = 1400

// benchFrames makes K originals whose upper-layer bytes fill the block.
func benchFrames(r *rand.Rand, k, n int) [][]byte {
	var out [][]byte
	for i := 0; i < k; i++ {
		pl := make([]byte, n-LenPrefix-8)
		for j := range pl {
			pl[j] = byte(r.Uint32())
		}
		binary.BigEndian.PutUint64(pl, uint64(i))
		out = append(out, udpFrame(testSrc, testDst, 10000, 20000, pl))
	}
	return out
}

// fill makes packets of frames in b (outside the timed part).
func (h *harness) fill(b *packet.Burst, frames [][]byte) {
	b.N = 0
	for _, f := range frames {
		hd, ok := h.pool.AllocOne()
		if !ok {
			h.T.Fatal("bench pool empty")
		}
		d, _ := hd.P().Append(len(f))
		copy(d, f)
		hd.P().InPort = 0
		b.Push(hd)
	}
}

// batch holds the input bursts of one timed run and what the stage made.
type batch struct {
	in   []packet.Burst
	out  []packet.Burst
	nout int

	frames [][]byte // loadFresh's list

	// cpu sums the stage's time over the runs: each run on the monotonic
	// clock, scaled by the thread's share of the CPU (the thread CPU clock
	// costs 1.4 µs a read on the VM the figures come from, too much around
	// every batch of a few µs).
	cpu   time.Duration
	share *cputime.Share
}

// load fills the batch's input with frames, in bursts of at most 64.
func (bt *batch) load(h *harness, frames [][]byte) {
	bt.in = bt.in[:0]
	for lo := 0; lo < len(frames); lo += packet.MaxBurst {
		bt.in = append(bt.in, packet.Burst{})
		h.fill(&bt.in[len(bt.in)-1], frames[lo:min(lo+packet.MaxBurst, len(frames))])
	}
}

// loadFresh loads the coded packets of gens under fresh generation IDs
// (*id on), so that a receiver takes none of them for a late packet of a
// generation it has decoded.
func (bt *batch) loadFresh(h *harness, gens []benchGen, id *int) {
	bt.frames = bt.frames[:0]
	for _, gg := range gens {
		for _, f := range gg.coded {
			Header(f[54:]).SetGenerationID(uint16(*id))
		}
		*id++
		bt.frames = append(bt.frames, gg.coded...)
	}
	bt.load(h, bt.frames)
}

// run times st over the batch as an engine calls it: Process on each burst,
// then Produce until nothing comes. Only the stage's calls are timed:
// freeing what it dropped or made is the engine's and the ports' work, done
// after.
func (bt *batch) run(h *harness, st plugins.Stage) {
	pr := st.(plugins.Producer)
	if bt.share == nil {
		bt.share = cputime.NewShare()
	}
	bt.nout = 0
	t0 := time.Now()
	for i := range bt.in {
		st.Process(&h.Ctx, &bt.in[i])
	}
	for {
		if bt.nout == len(bt.out) {
			bt.out = append(bt.out, packet.Burst{})
		}
		o := &bt.out[bt.nout]
		o.N = 0
		pr.Produce(&h.Ctx, o)
		if o.N == 0 {
			break
		}
		bt.nout++
	}
	bt.cpu += bt.share.Scale(time.Since(t0))
	for i := range bt.in {
		b := &bt.in[i]
		for j := 0; j < b.N; j++ {
			if v := b.H[j].P().Verdict(); v == packet.Drop || v == packet.Continue {
				packet.FreeOne(b.H[j])
			}
		}
	}
	h.Env.Flush()
}

// made counts the packets of the last run.
func (bt *batch) made() int {
	n := 0
	for i := 0; i < bt.nout; i++ {
		n += bt.out[i].N
	}
	return n
}

// free returns what the stage made.
func (bt *batch) free() {
	for i := 0; i < bt.nout; i++ {
		packet.Free(&bt.out[i])
	}
}

// cpuLoop runs op b.N times and reports GB/s of bytes per op on the thread's
// CPU time.
func cpuLoop(b *testing.B, bytes float64, op func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	t0 := cputime.Thread()
	for b.Loop() {
		op()
	}
	reportGBs(b, bytes*float64(b.N), cputime.Thread()-t0)
}

func reportGBs(b *testing.B, bytes float64, d time.Duration) {
	b.ReportMetric(bytes/d.Seconds()/1e9, "GB/s")
}

// gensPerBatch is how many generations of K one timed run takes: enough to
// make the timer reads negligible, few enough to stay in cache as a
// stage's working set does.
func gensPerBatch(k int) int { return max(1, 64/k) }

func BenchmarkEncoder(b *testing.B) {
	for _, k := range benchKs {
		r := rand.New(rand.NewPCG(1, uint64(k)))
		g := gensPerBatch(k)
		frames := benchFrames(r, g*k, benchN)
		b.Run(fmt.Sprintf("k=%d/n=%d", k, benchN), func(b *testing.B) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			h := newHarness(b)
			enc := h.MustBuildNamed("rlnc.encoder", "enc", fmt.Sprintf("k = %d\nblock = %d\ncoded = %d\nmemory = \"8MiB\"\npool_buffers = 2048\n", k, benchN, k))
			var bt batch
			coded := 0
			for b.Loop() {
				bt.load(h, frames)
				h.Ctx.Now++
				bt.run(h, enc)
				coded += bt.made()
				bt.free()
			}
			if coded != g*k*b.N {
				b.Fatalf("%d coded packets for %d generations", coded, g*b.N)
			}
			d := bt.cpu
			reportGBs(b, float64(coded)*float64(k*benchN), d)
			b.ReportMetric(float64(coded)/d.Seconds()/1e6, "Mpps")
			// The figures every stage benchmark reports (plugins/stagetest),
			// per source packet in.
			in := len(frames) * b.N
			stagetest.ReportAlone(b, float64(d.Nanoseconds())/float64(in), len(frames[0]), in)
		})
		b.Run(fmt.Sprintf("k=%d/n=%d/engine", k, benchN), func(b *testing.B) {
			stagetest.InEngine(b, stagetest.EngineSpec{Kind: "rlnc.encoder", Frames: frames,
				Keys: fmt.Sprintf("k = %d\nblock = %d\ncoded = %d\nmemory = \"8MiB\"\npool_buffers = 2048\n", k, benchN, k)})
		})
		// Baselines: gf's fused kernel making one coded block per call, and
		// K per call as the encoder batches them.
		for _, m := range []int{1, k} {
			b.Run(fmt.Sprintf("k=%d/n=%d/kernel/m=%d", k, benchN, m), func(b *testing.B) {
				src := make([][]byte, k)
				for i := range src {
					src[i] = make([]byte, benchN)
					for j := range src[i] {
						src[i][j] = byte(r.Uint32())
					}
				}
				dst := make([][]byte, m)
				for i := range dst {
					dst[i] = make([]byte, benchN)
				}
				coef := make([]byte, m*k)
				var p prng
				cpuLoop(b, float64(m*k*benchN), func() {
					p.nonZero(coef)
					gf.MulMulti(dst, src, coef)
				})
			})
		}
		// The floor of an encoder that copies what it keeps: per generation,
		// copy K blocks out of received packets (the batch's frames, so the
		// same footprint), then the one fused pass. What a real encoder
		// adds to this is parsing, the session and making the packets.
		b.Run(fmt.Sprintf("k=%d/n=%d/copy+kernel/m=%d", k, benchN, k), func(b *testing.B) {
			in := make([][]byte, len(frames))
			for i, f := range frames {
				in[i] = make([]byte, 2048)
				copy(in[i], f)
			}
			slots := make([][]byte, k)
			dst := make([][]byte, k)
			for i := range slots {
				slots[i] = make([]byte, benchN)
				dst[i] = make([]byte, benchN)
			}
			coef := make([]byte, k*k)
			var p prng
			at := 0
			cpuLoop(b, float64(k*k*benchN), func() {
				for i := range slots {
					upper := in[at][54:len(frames[at])]
					at = (at + 1) % len(in)
					binary.BigEndian.PutUint16(slots[i], uint16(len(upper)))
					clear(slots[i][LenPrefix+copy(slots[i][LenPrefix:], upper):])
				}
				p.nonZero(coef)
				gf.MulMulti(dst, slots, coef)
			})
		})
	}
}

// benchCoded makes generations of coded packets for the recoder and decoder
// benchmarks: count dense random combinations of each generation's blocks,
// with a 10% loss drawn once (the same packets are lost every time round).
type benchGen struct {
	frames [][]byte // originals
	coded  [][]byte // what survives the loss
}

func benchGenerations(r *rand.Rand, gens, k, n, count int, loss float64) []benchGen {
	var out []benchGen
	for g := 0; g < gens; g++ {
		frames := benchFrames(r, k, n)
		blocks := make([][]byte, k)
		for i, f := range frames {
			blocks[i] = make([]byte, n)
			binary.BigEndian.PutUint16(blocks[i], uint16(len(f)-54))
			copy(blocks[i][LenPrefix:], f[54:])
		}
		bg := benchGen{frames: frames}
		for j := 0; j < count; j++ {
			vec := make([]byte, k)
			for i := range vec {
				vec[i] = byte(r.Uint32()) | 1
			}
			blk := make([]byte, n)
			gf.MulMulti([][]byte{blk}, blocks, vec)
			f := Fields{NextHeader: 17, SessionID: 1, GenerationID: 0, K: uint8(k), Version: 1, BlockLen: uint16(n), Vector: vec}
			if r.Float64() >= loss {
				bg.coded = append(bg.coded, codedFrame(testSrc, testDst, f, blk))
			}
		}
		out = append(out, bg)
	}
	return out
}

func BenchmarkRecoder(b *testing.B) {
	for _, k := range benchKs {
		r := rand.New(rand.NewPCG(2, uint64(k)))
		g := gensPerBatch(k)
		gens := benchGenerations(r, g, k, benchN, k+4, 0)
		b.Run(fmt.Sprintf("k=%d/n=%d", k, benchN), func(b *testing.B) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			h := newHarness(b)
			// Each of the K innovative arrivals owes one packet; at full rank
			// the link is owed K more: half the packets combine all K rows.
			rec := h.MustBuildNamed("rlnc.recoder", "rec", fmt.Sprintf("coded = %d\nmemory = \"16MiB\"\npool_buffers = 2048\nwindow = 1024\n", 2*k))
			var bt batch
			sent, id := 0, 0
			for b.Loop() {
				bt.loadFresh(h, gens, &id)
				bt.run(h, rec)
				sent += bt.made()
				bt.free()
			}
			if sent != 2*k*g*b.N {
				b.Fatalf("%d recoded for %d generations", sent, g*b.N)
			}
			// Packets 1..K combine 1..K rows, packets K+1..2K all K; the extra
			// arrivals are not innovative.
			rows := g * b.N * (k*(k+1)/2 + k*k)
			d := bt.cpu
			reportGBs(b, float64(rows)*benchN, d)
			b.ReportMetric(float64(sent)/d.Seconds()/1e6, "Mpps")
		})
		b.Run(fmt.Sprintf("k=%d/n=%d/kernel/m=1", k, benchN), func(b *testing.B) {
			// The recoder's kernel: one destination over K rows of K+N bytes.
			src := make([][]byte, k)
			for i := range src {
				src[i] = make([]byte, k+benchN)
			}
			dst := [][]byte{make([]byte, k+benchN)}
			coef := make([]byte, k)
			var p prng
			cpuLoop(b, float64(k*benchN), func() {
				p.nonZero(coef)
				gf.MulMulti(dst, src, coef)
			})
		})
	}
}

func BenchmarkDecoder(b *testing.B) {
	for _, k := range benchKs {
		r := rand.New(rand.NewPCG(3, uint64(k)))
		// Dense coded packets, 10% lost: enough survive to decode (checked).
		count := k + k/4 + 4
		g := gensPerBatch(k)
		gens := benchGenerations(r, g, k, benchN, count, 0.10)
		for _, gg := range gens {
			e, _ := gf.NewEchelon(k, 0)
			for _, f := range gg.coded {
				e.Insert(Header(f[54:]).Vector(), nil)
			}
			if !e.Full() {
				b.Fatalf("k=%d: a generation is not decodable after the loss", k)
			}
		}
		b.Run(fmt.Sprintf("k=%d/n=%d/loss=10%%", k, benchN), func(b *testing.B) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			h := newHarness(b)
			dec := h.MustBuildNamed("rlnc.decoder", "dec", "memory = \"16MiB\"\npool_buffers = 2048\nwindow = 1024\n")
			var bt batch
			delivered, bytesOut, id := 0, 0, 0
			for b.Loop() {
				bt.loadFresh(h, gens, &id)
				bt.run(h, dec)
				// Verify: every generation's originals, in order.
				got := 0
				for i := 0; i < bt.nout; i++ {
					o := &bt.out[i]
					for j := 0; j < o.N; j++ {
						data := o.H[j].P().Data()
						want := gens[got/k].frames[got%k]
						if !bytes.Equal(data[14:], want[14:]) {
							b.Fatalf("packet %d of the batch decoded wrong", got)
						}
						bytesOut += len(data)
						got++
					}
				}
				if got != g*k {
					b.Fatalf("%d of %d delivered", got, g*k)
				}
				delivered += got
				bt.free()
			}
			d := bt.cpu
			reportGBs(b, float64(bytesOut), d)
			b.ReportMetric(float64(delivered)/d.Seconds()/1e6, "Mpps")
			// Beside them, the figures every stage benchmark reports
			// (plugins/stagetest), per coded packet in.
			in := 0
			for _, gg := range gens {
				in += len(gg.coded)
			}
			in *= b.N
			stagetest.ReportAlone(b, float64(d.Nanoseconds())/float64(in), len(gens[0].coded[0]), in)
		})
		// Baselines on the same packets: progressive elimination with the
		// payloads in the Echelon (gf.Echelon(K, N)), and the decoder's own
		// split: the augmented rows alone, then the one K×K pass alone.
		b.Run(fmt.Sprintf("k=%d/n=%d/loss=10%%/echelon-payload", k, benchN), func(b *testing.B) {
			e, _ := gf.NewEchelon(k, benchN)
			i := 0
			cpuLoop(b, float64(k*benchN), func() {
				g := gens[i%len(gens)]
				i++
				e.Reset()
				for _, f := range g.coded {
					hd := Header(f[54:])
					if e.Full() {
						break
					}
					e.Insert(hd.Vector(), hd.Block())
				}
			})
		})
		b.Run(fmt.Sprintf("k=%d/n=%d/loss=10%%/echelon-augmented", k, benchN), func(b *testing.B) {
			e, _ := gf.NewEchelon(augmentedWidth(k), 0)
			v := make([]byte, augmentedWidth(k))
			i := 0
			cpuLoop(b, float64(k*benchN), func() {
				g := gens[i%len(gens)]
				i++
				e.Reset()
				for c, f := range g.coded {
					if e.Rank() == k {
						break
					}
					copy(v, Header(f[54:]).Vector())
					clear(v[k:])
					v[len(v)-1-c] = 1
					e.Insert(v, nil)
				}
			})
		})
		b.Run(fmt.Sprintf("k=%d/n=%d/kernel/m=%d", k, benchN, k), func(b *testing.B) {
			src := make([][]byte, k)
			dst := make([][]byte, k)
			for i := range src {
				src[i] = make([]byte, benchN)
				dst[i] = make([]byte, benchN)
			}
			coef := make([]byte, k*k)
			var p prng
			p.nonZero(coef)
			cpuLoop(b, float64(k*benchN), func() { gf.MulMulti(dst, src, coef) })
		})
	}
}
