package gf

import (
	"bytes"
	"flag"
	"fmt"
	"math/rand/v2"
	"testing"
)

var longSweep = flag.Bool("long", false, "run the exhaustive GF(2^8) region sweep (all coefficients × all lengths × all offsets)")

// refMul is the reference the kernels are held to: one table lookup per byte,
// no unrolling, no vectors.
func refMul(dst, src []byte, c byte, add bool) {
	for x, s := range src {
		p := mul8[c][s]
		if add {
			dst[x] ^= p
		} else {
			dst[x] = p
		}
	}
}

// forLevels runs f at every supported level, the generic one included.
func forLevels(t testing.TB, f func(l Level)) {
	for _, l := range Levels() {
		restore, err := SetLevel(l)
		if err != nil {
			t.Fatal(err)
		}
		f(l)
		restore()
	}
}

// guard8 is the number of canary bytes around every destination: a kernel
// that writes outside its n bytes (a bad mask, a tail past the end) fails.
const guard8 = 64

type guarded8 struct {
	buf  []byte
	off  int
	n    int
	fill byte
}

func newGuarded8(off, n int, fill byte) *guarded8 {
	g := &guarded8{buf: make([]byte, guard8+off+n+guard8), off: off, n: n, fill: fill}
	for i := range g.buf {
		g.buf[i] = fill
	}
	return g
}

func (g *guarded8) data() []byte { return g.buf[guard8+g.off : guard8+g.off+g.n : guard8+g.off+g.n] }

func (g *guarded8) check(t testing.TB, what string) {
	t.Helper()
	for i, b := range g.buf[:guard8+g.off] {
		if b != g.fill {
			t.Fatalf("%s: wrote %d bytes before dst", what, guard8+g.off-i)
		}
	}
	for i, b := range g.buf[guard8+g.off+g.n:] {
		if b != g.fill {
			t.Fatalf("%s: wrote byte %d past the end of dst", what, i)
		}
	}
}

func randBuf8(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

var testLengths = []int{0, 1, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 1408, 4096}

// checkRegion runs Mul and MulAdd on src (at the given offset in a guarded8
// destination) and compares with the reference.
func checkRegion(t *testing.T, l Level, src, dst0 []byte, c byte, off int) {
	t.Helper()
	n := len(src)
	want := make([]byte, n)
	for _, add := range []bool{false, true} {
		copy(want, dst0)
		refMul(want, src, c, add)
		g := newGuarded8(off, n, 0xA5)
		d := g.data()
		copy(d, dst0)
		name := "Mul"
		if add {
			name = "MulAdd"
			MulAdd(d, src, c)
		} else {
			Mul(d, src, c)
		}
		what := fmt.Sprintf("%s level=%v c=%#x n=%d off=%d", name, l, c, n, off)
		if !bytes.Equal(d, want) {
			t.Fatalf("%s: wrong result", what)
		}
		g.check(t, what)
	}
}

// TestRegionCoefficients: every coefficient, the lengths around every vector
// size, destination and source offsets 0–7, at every level.
func TestRegionCoefficients(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	srcBuf := randBuf8(r, 4096+8)
	dst0 := randBuf8(r, 4096)
	forLevels(t, func(l Level) {
		for c := 0; c < 256; c++ {
			for _, n := range testLengths {
				for off := 0; off < 8; off++ {
					checkRegion(t, l, srcBuf[off:off+n], dst0[:n], byte(c), (off*3)%8)
				}
			}
		}
	})
}

// TestRegionLengths: every length 0…4096 for 8 coefficients at every level.
// The reference for a length is a prefix of the one for 4096.
func TestRegionLengths(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	src := randBuf8(r, 4096)
	dst0 := randBuf8(r, 4096)
	coefs := []byte{0, 1, 2, 0x1D, 0x80, 0x8E, 0xFE, 0xFF}
	sweepLengths(t, src, dst0, coefs, []int{0, 5})
}

// TestRegionLong is the full sweep: every coefficient × every length 0…4096 ×
// every destination offset 0–7. Run with -long.
func TestRegionLong(t *testing.T) {
	if !*longSweep {
		t.Skip("exhaustive sweep: run with -long")
	}
	r := rand.New(rand.NewPCG(5, 6))
	src := randBuf8(r, 4096)
	dst0 := randBuf8(r, 4096)
	coefs := make([]byte, 256)
	for c := range coefs {
		coefs[c] = byte(c)
	}
	sweepLengths(t, src, dst0, coefs, []int{0, 1, 2, 3, 4, 5, 6, 7})
}

func sweepLengths(t *testing.T, src, dst0, coefs []byte, offs []int) {
	const max, canary = 4096, 0x5A
	mulWant := make([]byte, max)
	addWant := make([]byte, max)
	bufs := make([]*guarded8, 0, len(offs))
	for _, off := range offs {
		bufs = append(bufs, newGuarded8(off, max, canary))
	}
	// past reports whether anything in the 64 bytes after n was written.
	past := func(full []byte, n int) bool {
		for _, b := range full[n:min(n+64, max)] {
			if b != canary {
				return true
			}
		}
		return false
	}
	for _, c := range coefs {
		refMul(mulWant, src, c, false)
		copy(addWant, dst0)
		refMul(addWant, src, c, true)
		forLevels(t, func(l Level) {
			for _, g := range bufs {
				full := g.data()
				for n := 0; n <= max; n++ {
					d := full[:n]
					Mul(d, src[:n], c)
					if !bytes.Equal(d, mulWant[:n]) || past(full, n) {
						t.Fatalf("Mul level=%v c=%#x n=%d off=%d: wrong result or wrote past n", l, c, n, g.off)
					}
					copy(d, dst0)
					MulAdd(d, src[:n], c)
					if !bytes.Equal(d, addWant[:n]) || past(full, n) {
						t.Fatalf("MulAdd level=%v c=%#x n=%d off=%d: wrong result or wrote past n", l, c, n, g.off)
					}
					// Back to the canary, so the next n sees writes past its end.
					for i := range d {
						d[i] = canary
					}
				}
				g.check(t, fmt.Sprintf("level=%v c=%#x off=%d", l, c, g.off))
			}
		})
	}
}
