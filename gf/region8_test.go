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
	forLevelsOf(t, Levels(), f)
}

// forSweepLevels is forLevels for the long sweeps: without the generic level
// under the race detector (see race8).
func forSweepLevels(t testing.TB, f func(l Level)) {
	ls := Levels()
	if race8 && len(ls) > 1 {
		ls = ls[1:]
	}
	forLevelsOf(t, ls, f)
}

func forLevelsOf(t testing.TB, ls []Level, f func(l Level)) {
	for _, l := range ls {
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

// check fails if anything around the destination changed. It compares
// whole ranges (bytes.Equal), so the race detector does not slow it byte by
// byte.
func (g *guarded8) check(t testing.TB, what string) {
	t.Helper()
	before, after := g.buf[:guard8+g.off], g.buf[guard8+g.off+g.n:]
	fill := bytes.Repeat([]byte{g.fill}, max(len(before), len(after)))
	if !bytes.Equal(before, fill[:len(before)]) {
		t.Fatalf("%s: wrote before dst", what)
	}
	if !bytes.Equal(after, fill[:len(after)]) {
		t.Fatalf("%s: wrote past the end of dst", what)
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
// size, source offsets 0–7 (and destination offsets with them), at every
// level. The expected bytes are computed once per coefficient and offset and
// shared by all lengths and levels.
func TestRegionCoefficients(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	srcBuf := randBuf8(r, 4096+8)
	dst0 := randBuf8(r, 4096)
	prod := make([]byte, len(srcBuf))
	addWant := make([]byte, 4096)
	fill := bytes.Repeat([]byte{0xA5}, 4096)
	bufs := make([]*guarded8, 8)
	for off := range bufs {
		bufs[off] = newGuarded8((off*3)%8, 4096, 0xA5)
	}
	for c := 0; c < 256; c++ {
		refMul(prod, srcBuf, byte(c), false)
		for off := 0; off < 8; off++ {
			copy(addWant, dst0)
			refMul(addWant, srcBuf[off:off+4096], byte(c), true)
			g := bufs[off]
			for _, n := range testLengths {
				src := srcBuf[off : off+n]
				forLevels(t, func(l Level) {
					d := g.data()[:n]
					Mul(d, src, byte(c))
					if !bytes.Equal(d, prod[off:off+n]) {
						t.Fatalf("Mul level=%v c=%#x n=%d off=%d: wrong result", l, c, n, off)
					}
					copy(d, dst0)
					MulAdd(d, src, byte(c))
					if !bytes.Equal(d, addWant[:n]) {
						t.Fatalf("MulAdd level=%v c=%#x n=%d off=%d: wrong result", l, c, n, off)
					}
					copy(d, fill[:n]) // back to the fill, so later checks see strays
					g.check(t, fmt.Sprintf("level=%v c=%#x n=%d off=%d", l, c, n, off))
				})
			}
		}
	}
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
	canaries := bytes.Repeat([]byte{canary}, max)
	bufs := make([]*guarded8, 0, len(offs))
	for _, off := range offs {
		bufs = append(bufs, newGuarded8(off, max, canary))
	}
	// past reports whether anything in the 64 bytes after n was written.
	// Going up in n, bytes from n on were never a destination before.
	past := func(full []byte, n int) bool {
		end := min(n+64, max)
		return !bytes.Equal(full[n:end], canaries[:end-n])
	}
	for _, c := range coefs {
		refMul(mulWant, src, c, false)
		copy(addWant, dst0)
		refMul(addWant, src, c, true)
		forSweepLevels(t, func(l Level) {
			for _, g := range bufs {
				full := g.data()
				copy(full, canaries)
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
				}
				g.check(t, fmt.Sprintf("level=%v c=%#x off=%d", l, c, g.off))
			}
		})
	}
}

// refDot is the dot product by the reference MulAdd, one source at a time.
func refDot(dst, src [][]byte, coef []byte, n int, add bool) {
	k := len(src)
	for j, d := range dst {
		if !add {
			clear(d[:n])
		}
		for i, s := range src {
			refMul(d[:n], s[:n], coef[j*k+i], true)
		}
	}
}

// TestDotShapes: MulMulti and MulAddMulti for 1…64 sources and 1…17
// destinations (so more than one kernel pass), odd lengths, buffers of
// unequal lengths (n is the shortest), at every level.
func TestDotShapes(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	ks := []int{1, 2, 3, 5, 8, 13, 32, 33, 64}
	ms := []int{1, 2, 3, 4, 5, 7, 8, 9, 17}
	ns := []int{0, 1, 17, 64, 65, 129, 513, 1408, 1409}
	for _, k := range ks {
		for _, m := range ms {
			for _, n := range ns {
				checkDot(t, r, k, m, n)
			}
		}
	}
}

func checkDot(t *testing.T, r *rand.Rand, k, m, n int) {
	t.Helper()
	src := make([][]byte, k)
	for i := range src {
		src[i] = randBuf8(r, n+i%3) // only src[0] and every third are exactly n
	}
	coef := randBuf8(r, m*k)
	for i := range coef {
		if r.IntN(8) == 0 {
			coef[i] = byte(r.IntN(2)) // zeros and ones, which kernels may special-case
		}
	}
	dst0 := make([][]byte, m)
	for j := range dst0 {
		dst0[j] = randBuf8(r, n+j%2)
	}
	for _, add := range []bool{false, true} {
		want := make([][]byte, m)
		for j := range want {
			want[j] = bytes.Clone(dst0[j])
		}
		refDot(want, src, coef, n, add)
		forSweepLevels(t, func(l Level) {
			gs := make([]*guarded8, m)
			dst := make([][]byte, m)
			for j := range dst {
				gs[j] = newGuarded8(j%8, len(dst0[j]), 0x3C)
				dst[j] = gs[j].data()
				copy(dst[j], dst0[j])
			}
			what := fmt.Sprintf("level=%v k=%d m=%d n=%d add=%v", l, k, m, n, add)
			if add {
				MulAddMulti(dst, src, coef)
			} else {
				MulMulti(dst, src, coef)
			}
			for j := range dst {
				if !bytes.Equal(dst[j], want[j]) {
					for x := range dst[j] {
						if dst[j][x] != want[j][x] {
							t.Fatalf("%s: dst[%d][%d] = %#x, want %#x", what, j, x, dst[j][x], want[j][x])
						}
					}
				}
				gs[j].check(t, what)
			}
		})
	}
}

func TestDotEdges(t *testing.T) {
	a, b := []byte{1, 2, 3}, []byte{4, 5, 6}
	// No sources: MulMulti zeroes, MulAddMulti leaves alone.
	MulAddMulti([][]byte{a}, nil, nil)
	if !bytes.Equal(a, []byte{1, 2, 3}) {
		t.Fatal("MulAddMulti with no sources changed dst")
	}
	MulMulti([][]byte{a}, nil, nil)
	if !bytes.Equal(a, []byte{0, 0, 0}) {
		t.Fatal("MulMulti with no sources did not zero dst")
	}
	// No destinations: nothing to do, not even reading coef.
	MulMulti(nil, [][]byte{b}, nil)
	defer func() {
		if recover() == nil {
			t.Fatal("short coef did not panic")
		}
	}()
	MulMulti([][]byte{a, a}, [][]byte{b}, []byte{1})
}

// TestInPlace: Mul and MulAdd with dst and src the same slice.
func TestInPlace(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	src := randBuf8(r, 1409)
	forLevels(t, func(l Level) {
		for _, c := range []byte{0, 1, 2, 0xFF} {
			buf := bytes.Clone(src)
			want := make([]byte, len(src))
			refMul(want, src, c, false)
			Mul(buf, buf, c)
			if !bytes.Equal(buf, want) {
				t.Fatalf("in-place Mul level=%v c=%#x", l, c)
			}
			buf = bytes.Clone(src)
			MulAdd(buf, buf, c)
			refMul(want, src, c^1, false) // x ^ c·x = (c+1)·x
			if !bytes.Equal(buf, want) {
				t.Fatalf("in-place MulAdd level=%v c=%#x", l, c)
			}
		}
	})
}

func TestRegionAllocs(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	src := make([][]byte, 32)
	for i := range src {
		src[i] = randBuf8(r, 1408)
	}
	dst := [][]byte{make([]byte, 1408), make([]byte, 1408)}
	coef := randBuf8(r, 64)
	forLevels(t, func(l Level) {
		allocs := testing.AllocsPerRun(20, func() {
			Mul(dst[0], src[0], 7)
			MulAdd(dst[0], src[1], 9)
			MulMulti(dst, src, coef)
			MulAddMulti(dst, src, coef)
			// Slices of slices built in the call stay on the stack: the
			// buffers do not escape through the dispatch.
			MulAddMulti([][]byte{dst[0]}, [][]byte{src[0], src[1]}, coef)
			var small [100]byte
			MulAdd(small[:], src[2], 3)
		})
		if allocs != 0 {
			t.Errorf("level %v: %v allocations per run", l, allocs)
		}
	})
}

// FuzzRegion8: random data, coefficient, level and offset; Mul and MulAdd
// must equal the reference and stay inside dst.
func FuzzRegion8(f *testing.F) {
	f.Add([]byte("linerate"), byte(2), byte(0), byte(0))
	f.Add(bytes.Repeat([]byte{0x80, 0x01, 0xFF}, 100), byte(0x1D), byte(5), byte(3))
	f.Add(make([]byte, 1408), byte(0xFF), byte(4), byte(7))
	levels := Levels()
	f.Fuzz(func(t *testing.T, data []byte, c, lv, off byte) {
		restore, err := SetLevel(levels[int(lv)%len(levels)])
		if err != nil {
			t.Fatal(err)
		}
		defer restore()
		o := int(off % 8)
		if o > len(data) {
			o = len(data)
		}
		src := data[o:]
		dst0 := bytes.Clone(data[:len(src)])
		checkRegion(t, CurrentLevel(), src, dst0, c, int(off/8)%8)
	})
}

// FuzzDot8: random shape, coefficients and sources; MulMulti and
// MulAddMulti at a random level must equal the reference.
func FuzzDot8(f *testing.F) {
	f.Add(bytes.Repeat([]byte("0123456789abcdef"), 64), byte(3), byte(2), byte(0))
	f.Add(bytes.Repeat([]byte{0xFF, 0x00, 0x1D}, 400), byte(32), byte(1), byte(4))
	f.Add(make([]byte, 300), byte(9), byte(9), byte(2))
	levels := Levels()
	f.Fuzz(func(t *testing.T, data []byte, kb, mb, lv byte) {
		k, m := int(kb%65), int(mb%10)+1
		if len(data) < m*k {
			return
		}
		coef, rest := data[:m*k], data[m*k:]
		n := 0
		if k > 0 {
			n = len(rest) / k
		}
		src := make([][]byte, k)
		for i := range src {
			src[i] = rest[i*n : (i+1)*n]
		}
		dst0 := make([][]byte, m)
		for j := range dst0 {
			dst0[j] = bytes.Clone(rest[:n])
		}
		if k == 0 {
			n = len(rest)
			for j := range dst0 {
				dst0[j] = bytes.Clone(rest)
			}
		}
		restore, err := SetLevel(levels[int(lv)%len(levels)])
		if err != nil {
			t.Fatal(err)
		}
		defer restore()
		for _, add := range []bool{false, true} {
			want := make([][]byte, m)
			got := make([][]byte, m)
			for j := range want {
				want[j] = bytes.Clone(dst0[j])
				got[j] = bytes.Clone(dst0[j])
			}
			refDot(want, src, coef, n, add)
			if add {
				MulAddMulti(got, src, coef)
			} else {
				MulMulti(got, src, coef)
			}
			for j := range got {
				if !bytes.Equal(got[j], want[j]) {
					t.Fatalf("level=%v k=%d m=%d n=%d add=%v: dst[%d] differs", CurrentLevel(), k, m, n, add, j)
				}
			}
		}
	})
}
