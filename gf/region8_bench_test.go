package gf

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// reportGBs reports throughput in GB/s (10^9 bytes a second) of bytes per op.
func reportGBs(b *testing.B, bytes int, elapsed time.Duration) {
	b.ReportMetric(float64(bytes)*float64(b.N)/elapsed.Seconds()/1e9, "GB/s")
}

// benchLevels runs f as a sub-benchmark at the best level under the plain
// name, then at every supported level under level=<name>/, as the baseline.
func benchLevels(b *testing.B, name string, f func(b *testing.B)) {
	b.Run(name, f)
	for _, l := range Levels() {
		b.Run(fmt.Sprintf("level=%v/%s", l, name), func(b *testing.B) {
			restore, err := SetLevel(l)
			if err != nil {
				b.Fatal(err)
			}
			defer restore()
			f(b)
		})
	}
}

// BenchmarkMulAdd: dst ^= c·src, ISA-L's gf_vect_mad. 1408 bytes is an RLNC
// payload; 65536 streams through L2.
func BenchmarkMulAdd(b *testing.B) {
	for _, size := range []int{1408, 65536} {
		r := rand.New(rand.NewPCG(1, uint64(size)))
		src, dst := randBuf8(r, size), randBuf8(r, size)
		benchLevels(b, fmt.Sprintf("size=%d", size), func(b *testing.B) {
			b.SetBytes(int64(size))
			start := time.Now()
			for i := 0; b.Loop(); i++ {
				MulAdd(dst, src, byte(i)|2)
			}
			reportGBs(b, size, time.Since(start))
		})
	}
}

// BenchmarkMul: dst = c·src.
func BenchmarkMul(b *testing.B) {
	const size = 1408
	r := rand.New(rand.NewPCG(2, 3))
	src, dst := randBuf8(r, size), randBuf8(r, size)
	benchLevels(b, fmt.Sprintf("size=%d", size), func(b *testing.B) {
		b.SetBytes(size)
		start := time.Now()
		for i := 0; b.Loop(); i++ {
			Mul(dst, src, byte(i)|2)
		}
		reportGBs(b, size, time.Since(start))
	})
}

// BenchmarkEncode: the fused dot product of k sources into m destinations
// (MulMulti, ISA-L's ec_encode_data), counting source bytes: k·size per op.
// k=32/size=1408 is one RLNC generation of 32 packets coded into one.
func BenchmarkEncode(b *testing.B) {
	shapes := []struct{ k, m, size int }{
		{32, 1, 1408},
		{32, 4, 1408},
		{8, 1, 1408},
		{32, 1, 65536},
	}
	for _, s := range shapes {
		r := rand.New(rand.NewPCG(uint64(s.k), uint64(s.m)))
		src := make([][]byte, s.k)
		for i := range src {
			src[i] = randBuf8(r, s.size)
		}
		dst := make([][]byte, s.m)
		for j := range dst {
			dst[j] = make([]byte, s.size)
		}
		coef := randBuf8(r, s.k*s.m)
		name := fmt.Sprintf("k=%d/size=%d", s.k, s.size)
		if s.m != 1 {
			name = fmt.Sprintf("k=%d/m=%d/size=%d", s.k, s.m, s.size)
		}
		benchLevels(b, name, func(b *testing.B) {
			b.SetBytes(int64(s.k * s.size))
			start := time.Now()
			for b.Loop() {
				MulMulti(dst, src, coef)
			}
			reportGBs(b, s.k*s.size, time.Since(start))
		})
	}
}
