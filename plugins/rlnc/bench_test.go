package rlnc

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/gf"
	"github.com/linerate/linerate/plugins"
)

// The benchmarks time the stages alone: input packets are made and outputs
// freed outside the measured time (a monotonic read around each Process and
// Produce), so GB/s is what the stage costs. ns/op is the whole iteration.
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
			h.t.Fatal("bench pool empty")
		}
		d, _ := hd.P().Append(len(f))
		copy(d, f)
		hd.P().InPort = 0
		b.Push(hd)
	}
}

// timed runs fn and returns how long it took.
func timed(fn func()) time.Duration {
	t0 := time.Now()
	fn()
	return time.Since(t0)
}

func reportGBs(b *testing.B, bytes float64, d time.Duration) {
	b.ReportMetric(bytes/d.Seconds()/1e9, "GB/s")
}

func BenchmarkEncoder(b *testing.B) {
	for _, k := range benchKs {
		r := rand.New(rand.NewPCG(1, uint64(k)))
		frames := benchFrames(r, k, benchN)
		b.Run(fmt.Sprintf("k=%d/n=%d", k, benchN), func(b *testing.B) {
			h := newHarness(b)
			enc := h.mustBuild("rlnc.encoder", "enc", fmt.Sprintf("k = %d\nblock = %d\ncoded = %d\nmemory = \"8MiB\"\npool_buffers = 1024\n", k, benchN, k))
			var in, out packet.Burst
			var d time.Duration
			coded := 0
			for b.Loop() {
				h.fill(&in, frames)
				h.ctx.Now++
				d += timed(func() {
					enc.Process(&h.ctx, &in)
				})
				for {
					out.N = 0
					d += timed(func() { enc.(plugins.Producer).Produce(&h.ctx, &out) })
					if out.N == 0 {
						break
					}
					coded += out.N
					packet.Free(&out)
				}
				h.flush()
			}
			if coded != k*b.N {
				b.Fatalf("%d coded packets for %d generations", coded, b.N)
			}
			reportGBs(b, float64(coded)*float64(k*benchN), d)
			b.ReportMetric(float64(coded)/d.Seconds()/1e6, "Mpps")
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
				for b.Loop() {
					p.nonZero(coef)
					gf.MulMulti(dst, src, coef)
				}
				reportGBs(b, float64(b.N)*float64(m*k*benchN), b.Elapsed())
			})
		}
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

// setGen writes generation id g into coded frames.
func setGen(frames [][]byte, g uint16) {
	for _, f := range frames {
		Header(f[54:]).SetGenerationID(g)
	}
}

func BenchmarkRecoder(b *testing.B) {
	for _, k := range benchKs {
		r := rand.New(rand.NewPCG(2, uint64(k)))
		gens := benchGenerations(r, 8, k, benchN, k+4, 0)
		b.Run(fmt.Sprintf("k=%d/n=%d", k, benchN), func(b *testing.B) {
			h := newHarness(b)
			// Each of the K innovative arrivals owes one packet; at full rank
			// the link is owed K more: half the packets combine all K rows.
			rec := h.mustBuild("rlnc.recoder", "rec", fmt.Sprintf("coded = %d\nmemory = \"16MiB\"\npool_buffers = 2048\nwindow = 1024\n", 2*k))
			var in, out packet.Burst
			var d time.Duration
			sent, rows := 0, 0
			for i := 0; b.Loop(); i++ {
				g := gens[i%len(gens)]
				setGen(g.coded, uint16(i))
				for lo := 0; lo < len(g.coded); lo += packet.MaxBurst {
					h.fill(&in, g.coded[lo:min(lo+packet.MaxBurst, len(g.coded))])
					d += timed(func() { rec.Process(&h.ctx, &in) })
					for j := 0; j < in.N; j++ {
						if in.H[j].P().Verdict() == packet.Drop {
							packet.FreeOne(in.H[j])
						}
					}
					h.flush()
				}
				for {
					out.N = 0
					d += timed(func() { rec.(plugins.Producer).Produce(&h.ctx, &out) })
					if out.N == 0 {
						break
					}
					sent += out.N
					packet.Free(&out)
				}
			}
			// Packets 1..K combine 1..K rows, packets K+1..2K all K; the extra
			// arrivals are not innovative.
			rows = b.N * (k*(k+1)/2 + k*k)
			if sent != 2*k*b.N {
				b.Fatalf("%d recoded for %d generations", sent, b.N)
			}
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
			for b.Loop() {
				p.nonZero(coef)
				gf.MulMulti(dst, src, coef)
			}
			reportGBs(b, float64(b.N)*float64(k*benchN), b.Elapsed())
		})
	}
}

func BenchmarkDecoder(b *testing.B) {
	for _, k := range benchKs {
		r := rand.New(rand.NewPCG(3, uint64(k)))
		// Dense coded packets, 10% lost: enough survive to decode (checked).
		count := k + k/4 + 4
		gens := benchGenerations(r, 8, k, benchN, count, 0.10)
		for _, g := range gens {
			e, _ := gf.NewEchelon(k, 0)
			for _, f := range g.coded {
				e.Insert(Header(f[54:]).Vector(), nil)
			}
			if !e.Full() {
				b.Fatalf("k=%d: a generation is not decodable after the loss", k)
			}
		}
		b.Run(fmt.Sprintf("k=%d/n=%d/loss=10%%", k, benchN), func(b *testing.B) {
			h := newHarness(b)
			dec := h.mustBuild("rlnc.decoder", "dec", "memory = \"16MiB\"\npool_buffers = 2048\nwindow = 1024\n")
			var in, out packet.Burst
			var d time.Duration
			delivered, bytesOut := 0, 0
			for i := 0; b.Loop(); i++ {
				g := gens[i%len(gens)]
				setGen(g.coded, uint16(i))
				got := 0
				for lo := 0; lo < len(g.coded); lo += packet.MaxBurst {
					h.fill(&in, g.coded[lo:min(lo+packet.MaxBurst, len(g.coded))])
					d += timed(func() { dec.Process(&h.ctx, &in) })
					for j := 0; j < in.N; j++ {
						if in.H[j].P().Verdict() == packet.Drop {
							packet.FreeOne(in.H[j])
						}
					}
					h.flush()
				}
				for {
					out.N = 0
					d += timed(func() { dec.(plugins.Producer).Produce(&h.ctx, &out) })
					if out.N == 0 {
						break
					}
					for j := 0; j < out.N; j++ {
						data := out.H[j].P().Data()
						if !bytes.Equal(data[14:], g.frames[got][14:]) {
							b.Fatalf("generation %d packet %d decoded wrong", i, got)
						}
						bytesOut += len(data)
						got++
					}
					packet.Free(&out)
				}
				if got != k {
					b.Fatalf("generation %d: %d of %d delivered", i, got, k)
				}
				delivered += got
			}
			reportGBs(b, float64(bytesOut), d)
			b.ReportMetric(float64(delivered)/d.Seconds()/1e6, "Mpps")
		})
		// Baselines on the same packets: progressive elimination with the
		// payloads in the Echelon (gf.Echelon(K, N)), and the decoder's own
		// split: coefficients with a K-octet transform, then one K×K pass.
		b.Run(fmt.Sprintf("k=%d/n=%d/loss=10%%/echelon-payload", k, benchN), func(b *testing.B) {
			e, _ := gf.NewEchelon(k, benchN)
			for i := 0; b.Loop(); i++ {
				g := gens[i%len(gens)]
				e.Reset()
				for _, f := range g.coded {
					hd := Header(f[54:])
					if e.Full() {
						break
					}
					e.Insert(hd.Vector(), hd.Block())
				}
			}
			reportGBs(b, float64(b.N)*float64(k*benchN), b.Elapsed())
		})
		b.Run(fmt.Sprintf("k=%d/n=%d/loss=10%%/echelon-transform", k, benchN), func(b *testing.B) {
			e, _ := gf.NewEchelon(k, k)
			for i := 0; b.Loop(); i++ {
				g := gens[i%len(gens)]
				e.Reset()
				for _, f := range g.coded {
					if e.Full() {
						break
					}
					e.Insert(Header(f[54:]).Vector(), unitVector(e.Rank(), k))
				}
			}
			reportGBs(b, float64(b.N)*float64(k*benchN), b.Elapsed())
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
			for b.Loop() {
				gf.MulMulti(dst, src, coef)
			}
			reportGBs(b, float64(b.N)*float64(k*benchN), b.Elapsed())
		})
	}
}
