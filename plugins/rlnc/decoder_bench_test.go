package rlnc

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/linerate/linerate/gf"
)

// BenchmarkDecoderFloor sets the decoder against its arithmetic floor in the
// same run: decoding a generation of K blocks of N bytes is K² MulAdds of N
// bytes (gf.MulAdd, ISA-L's gf_vect_mad: one source into one destination)
// when done one product at a time, so the floor delivers MulAdd's throughput
// divided by K. Each iteration runs the decoder on a batch of generations
// (as BenchmarkDecoder: dense coded packets, 10% lost, output checked), then
// the floor's K² MulAdds for as many generations, both timed the same way,
// so a machine that slows for a moment slows both.
//
//	x-floor = floor time / decoder time (goal ≥ 0.8)
//
// x-floor is the median over the iterations of each one's ratio: a shared
// machine that takes the CPU away in the middle of one run spoils that
// iteration's ratio, not the figure.
//
// The floor runs as gf's BenchmarkMulAdd does, one source and one
// destination of N bytes in L1, the coefficient changing each call: the
// kernel's best throughput, so the strictest floor.
func BenchmarkDecoderFloor(b *testing.B) {
	for _, k := range benchKs {
		r := rand.New(rand.NewPCG(3, uint64(k)))
		count := k + k/4 + 4
		g := gensPerBatch(k)
		gens := benchGenerations(r, g, k, benchN, count, 0.10)
		b.Run(fmt.Sprintf("k=%d/n=%d/loss=10%%", k, benchN), func(b *testing.B) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			h := newHarness(b)
			dec := h.MustBuildNamed("rlnc.decoder", "dec", "memory = \"16MiB\"\npool_buffers = 2048\nwindow = 1024\n")
			src, dst := make([]byte, benchN), make([]byte, benchN)
			for j := range src {
				src[j] = byte(r.Uint32())
			}
			var bt batch
			var floor time.Duration
			var ratios [4096]float64 // the last iterations' floor/decoder
			delivered, id, it := 0, 0, 0
			for b.Loop() {
				bt.loadFresh(h, gens, &id)
				c0 := bt.cpu
				bt.run(h, dec)
				dd := bt.cpu - c0
				got := 0
				for i := 0; i < bt.nout; i++ {
					o := &bt.out[i]
					for j := 0; j < o.N; j++ {
						want := gens[got/k].frames[got%k]
						if !bytes.Equal(o.H[j].P().Data()[14:], want[14:]) {
							b.Fatalf("packet %d of the batch decoded wrong", got)
						}
						got++
					}
				}
				if got != g*k {
					b.Fatalf("%d of %d delivered", got, g*k)
				}
				delivered += got
				bt.free()
				t0 := time.Now()
				for i := range g * k * k {
					gf.MulAdd(dst, src, byte(i)|2)
				}
				df := bt.share.Scale(time.Since(t0))
				floor += df
				ratios[it%len(ratios)] = float64(df) / float64(dd)
				it++
			}
			d := bt.cpu
			blocks := float64(delivered) * benchN
			reportGBs(b, blocks, d)
			b.ReportMetric(blocks/floor.Seconds()/1e9, "floor-GB/s")
			b.ReportMetric(median(ratios[:min(it, len(ratios))]), "x-floor")
			b.ReportMetric(float64(delivered)/d.Seconds()/1e6, "Mpps")
		})
	}
}

// median sorts v and returns its median.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	return v[len(v)/2]
}
