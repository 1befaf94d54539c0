package gf

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
)

// Tests for GF(2), GF(2^4) and GF(2^16): field axioms against a shift-and-add
// reference, and every region kernel at every supported level against the
// scalar definition, with guard bytes around the destination.

// clmulMod multiplies a and b as polynomials over GF(2) and reduces the
// product by poly of degree w: the schoolbook definition, sharing nothing with
// the log/exp tables.
func clmulMod(a, b uint32, poly uint32, w int) uint32 {
	var p uint32
	for i := 0; i < w; i++ {
		if b>>i&1 != 0 {
			p ^= a << i
		}
	}
	for i := 2*w - 2; i >= w; i-- {
		if p>>i&1 != 0 {
			p ^= poly << (i - w)
		}
	}
	return p
}

func TestMul16MatchesDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 1))
	for i := 0; i < 200000; i++ {
		a, b := uint16(rng.Uint32()), uint16(rng.Uint32())
		if i < 65536 {
			a = uint16(i) // every a at least once
		}
		if got, want := Mul16(a, b), uint16(clmulMod(uint32(a), uint32(b), Poly16, 16)); got != want {
			t.Fatalf("Mul16(%#x, %#x) = %#x, want %#x", a, b, got, want)
		}
	}
}

func TestField16(t *testing.T) {
	// 2 generates the group: its powers visit every nonzero element once.
	seen := make([]bool, 1<<16)
	for i := 0; i < order16; i++ {
		x := Exp16(i)
		if x == 0 || seen[x] {
			t.Fatalf("Exp16(%d) = %#x repeats or is zero: 0x1100B is not primitive?", i, x)
		}
		seen[x] = true
		if n, ok := Log16(x); !ok || n != i {
			t.Fatalf("Log16(%#x) = %d, %v, want %d", x, n, ok, i)
		}
	}
	if _, ok := Log16(0); ok {
		t.Error("Log16(0) reports a logarithm")
	}
	if Exp16(-1) != Inv16(2) || Exp16(order16) != 1 {
		t.Error("Exp16 does not reduce its exponent modulo 65535")
	}
	for a := 1; a < 1<<16; a++ {
		x := uint16(a)
		if Mul16(x, Inv16(x)) != 1 {
			t.Fatalf("%#x·Inv16(%#x) != 1", x, x)
		}
	}
	if Inv16(0) != 0 || Div16(5, 0) != 0 || Div16(0, 5) != 0 {
		t.Error("zero cases of Inv16/Div16")
	}
	if Pow16(0, 0) != 1 || Pow16(0, 3) != 0 || Pow16(3, -1) != Inv16(3) || Pow16(2, 20) != Exp16(20) {
		t.Error("Pow16 edge cases")
	}
	rng := rand.New(rand.NewPCG(16, 2))
	for i := 0; i < 100000; i++ {
		a, b, c := uint16(rng.Uint32()), uint16(rng.Uint32()), uint16(rng.Uint32())
		checkAxioms(t, "GF(2^16)", uint32(a), uint32(b), uint32(c),
			func(x, y uint32) uint32 { return uint32(Mul16(uint16(x), uint16(y))) },
			func(x, y uint32) uint32 { return uint32(Div16(uint16(x), uint16(y))) })
	}
}

func TestField4(t *testing.T) {
	for a := uint32(0); a < 16; a++ {
		for b := uint32(0); b < 16; b++ {
			if got, want := Mul4(byte(a), byte(b)), byte(clmulMod(a, b, Poly4, 4)); got != want {
				t.Fatalf("Mul4(%d, %d) = %d, want %d", a, b, got, want)
			}
			for c := uint32(0); c < 16; c++ {
				checkAxioms(t, "GF(2^4)", a, b, c,
					func(x, y uint32) uint32 { return uint32(Mul4(byte(x), byte(y))) },
					func(x, y uint32) uint32 { return uint32(Div4(byte(x), byte(y))) })
			}
		}
	}
	seen := map[byte]bool{}
	for i := 0; i < order4; i++ {
		x := Exp4(i)
		if n, ok := Log4(x); !ok || n != i || seen[x] {
			t.Fatalf("Exp4/Log4 at %d: %d (%d, %v)", i, x, n, ok)
		}
		seen[x] = true
	}
	if _, ok := Log4(0); ok || Inv4(0) != 0 || Exp4(-1) != Inv4(2) || Pow4(0, 0) != 1 || Pow4(7, -2) != Mul4(Inv4(7), Inv4(7)) {
		t.Error("GF(2^4) edge cases")
	}
}

// checkAxioms checks the field axioms on one triple.
func checkAxioms(t *testing.T, field string, a, b, c uint32, mul, div func(x, y uint32) uint32) {
	t.Helper()
	switch {
	case mul(a, b) != mul(b, a):
		t.Fatalf("%s: ab != ba for %#x, %#x", field, a, b)
	case mul(mul(a, b), c) != mul(a, mul(b, c)):
		t.Fatalf("%s: (ab)c != a(bc) for %#x, %#x, %#x", field, a, b, c)
	case mul(a, b^c) != mul(a, b)^mul(a, c):
		t.Fatalf("%s: a(b+c) != ab+ac for %#x, %#x, %#x", field, a, b, c)
	case mul(a, 1) != a || mul(a, 0) != 0:
		t.Fatalf("%s: identities fail for %#x", field, a)
	case b != 0 && mul(div(a, b), b) != a:
		t.Fatalf("%s: (a/b)b != a for %#x, %#x", field, a, b)
	}
}

func TestField2(t *testing.T) {
	// GF(2): XOR is addition, and MulAddRegion2 with 1 adds, with 0 does not.
	rng := rand.New(rand.NewPCG(2, 1))
	for _, l := range Levels() {
		restore := forceLevel(t, l)
		for n := 0; n <= 700; n++ {
			for _, off := range []int{0, 3} {
				src := randWide(rng, n)
				orig := randWide(rng, n)
				want := make([]byte, n)
				for i := range want {
					want[i] = orig[i] ^ src[i]
				}
				buf, dst := guardedWide(off, orig)
				XorRegion(dst, src)
				checkGuardedWide(t, buf, off, dst, want, "%v XorRegion n=%d off=%d", l, n, off)
				MulAddRegion2(dst, src, 2) // low bit 0: nothing
				MulAddRegion2(dst, src, 1) // undo
				checkGuardedWide(t, buf, off, dst, orig, "%v MulAddRegion2 n=%d", l, n)
				MulRegion2(dst, src, 1)
				checkGuardedWide(t, buf, off, dst, src, "%v MulRegion2(1) n=%d", l, n)
				MulRegion2(dst, src, 0)
				checkGuardedWide(t, buf, off, dst, make([]byte, n), "%v MulRegion2(0) n=%d", l, n)
			}
		}
		// x + x = 0, in place.
		x := randWide(rng, 333)
		XorRegion(x, x)
		if !bytes.Equal(x, make([]byte, 333)) {
			t.Errorf("%v: x^x != 0", l)
		}
		restore()
	}
}

// lengths16 are the region lengths of issue 5 for GF(2^16): around every
// kernel step, plus a packet and a page.
var lengths16 = []int{0, 2, 30, 32, 34, 62, 64, 66, 126, 128, 130, 1408, 4096}

// coefs16 is the fixed sample of 4096 GF(2^16) coefficients: the special
// ones, then a deterministic pseudo-random draw.
func coefs16() []uint16 {
	cs := []uint16{0, 1, 2, 3, 0x8000, 0xFFFF, 0x100B, 0x00FF, 0xFF00}
	rng := rand.New(rand.NewPCG(0x1100B, 4096))
	for len(cs) < 4096 {
		cs = append(cs, uint16(rng.Uint32()))
	}
	return cs
}

func TestRegion16Levels(t *testing.T) { testRegion16(t, coefs16()) }

// TestRegion16Long is the full sweep: every coefficient, behind -long.
func TestRegion16Long(t *testing.T) {
	if !*longSweep {
		t.Skip("the sweep of all 65536 GF(2^16) coefficients runs with -long")
	}
	cs := make([]uint16, 1<<16)
	for i := range cs {
		cs[i] = uint16(i)
	}
	testRegion16(t, cs)
}

func testRegion16(t *testing.T, coefs []uint16) {
	rng := rand.New(rand.NewPCG(16, 3))
	maxN := lengths16[len(lengths16)-1]
	src := randWide(rng, maxN)
	orig := randWide(rng, maxN)
	want := make([]byte, maxN)
	wantAdd := make([]byte, maxN)
	levels := wideLevels()
	for _, c := range coefs {
		// Every length is a prefix of the longest: one reference serves all.
		for i := 0; i < maxN; i += 2 {
			p := Mul16(c, uint16(src[i])<<8|uint16(src[i+1]))
			want[i], want[i+1] = byte(p>>8), byte(p)
			wantAdd[i], wantAdd[i+1] = orig[i]^byte(p>>8), orig[i+1]^byte(p)
		}
		for _, n := range lengths16 {
			for _, l := range levels {
				restore := forceLevel(t, l)
				off := int(c) & 7
				buf, dst := guardedWide(off, orig[:n])
				MulRegion16(dst, src[:n], c)
				checkGuardedWide(t, buf, off, dst, want[:n], "%v MulRegion16 c=%#x n=%d", l, c, n)
				copy(dst, orig)
				MulAddRegion16(dst, src[:n], c)
				checkGuardedWide(t, buf, off, dst, wantAdd[:n], "%v MulAddRegion16 c=%#x n=%d", l, c, n)
				restore()
			}
		}
	}
}

func TestRegion16OddAndInPlace(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 4))
	for _, l := range Levels() {
		restore := forceLevel(t, l)
		for _, n := range []int{1, 3, 33, 65, 129, 1409} {
			src := randWide(rng, n)
			dst := randWide(rng, n)
			last := dst[n-1]
			want := append([]byte(nil), dst...)
			mulAddRegion16Ref(want[:n-1], src[:n-1], 0x1234)
			MulAddRegion16(dst, src, 0x1234)
			if !bytes.Equal(dst, want) || dst[n-1] != last {
				t.Errorf("%v: odd length %d: whole elements not as the reference or last byte touched", l, n)
			}
		}
		// Shorter src: only its whole elements count.
		dst := randWide(rng, 200)
		want := append([]byte(nil), dst...)
		src := randWide(rng, 99)
		mulAddRegion16Ref(want[:98], src[:98], 7)
		MulAddRegion16(dst, src, 7)
		if !bytes.Equal(dst, want) {
			t.Errorf("%v: len(src) < len(dst) not handled as copy does", l)
		}
		// In place.
		for _, n := range []int{64, 130, 1408} {
			x := randWide(rng, n)
			want := make([]byte, n)
			mulAddRegion16Ref(want, x, 0xBEEF)
			MulRegion16(x, x, 0xBEEF)
			if !bytes.Equal(x, want) {
				t.Errorf("%v: in-place MulRegion16 n=%d wrong", l, n)
			}
		}
		restore()
	}
}

func mulAddRegion16Ref(dst, src []byte, c uint16) {
	for i := 0; i+1 < len(dst); i += 2 {
		p := Mul16(c, uint16(src[i])<<8|uint16(src[i+1]))
		dst[i] ^= byte(p >> 8)
		dst[i+1] ^= byte(p)
	}
}

func mulAddRegion4Ref(dst, src []byte, c byte) {
	for i := range dst {
		dst[i] ^= Mul4(c, src[i]>>4)<<4 | Mul4(c, src[i]&15)
	}
}

func TestRegion4Levels(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 1))
	var lengths []int
	for n := 0; n <= 300; n++ {
		lengths = append(lengths, n)
	}
	lengths = append(lengths, 1408, 4096)
	src := randWide(rng, 4096+7)
	orig := randWide(rng, 4096)
	var want, wantAdd [16][]byte
	for c := range want {
		want[c] = make([]byte, len(src))
		mulAddRegion4Ref(want[c], src, byte(c))
		wantAdd[c] = append([]byte(nil), orig...)
		mulAddRegion4Ref(wantAdd[c], src, byte(c))
	}
	for _, l := range wideLevels() {
		restore := forceLevel(t, l)
		for c := byte(0); c < 16; c++ {
			for _, n := range lengths {
				for off := 0; off < 8; off++ {
					if n > 140 && off > 0 && off != 7 {
						continue
					}
					// Source offset varies too, through the shared buffer.
					s := src[off : off+n]
					var wm []byte
					if off == 0 {
						wm = want[c][:n]
					} else {
						wm = make([]byte, n)
						mulAddRegion4Ref(wm, s, c)
					}
					buf, dst := guardedWide(off, orig[:n])
					MulRegion4(dst, s, c|0xF0) // high nibble of c ignored
					checkGuardedWide(t, buf, off, dst, wm, "%v MulRegion4 c=%d n=%d off=%d", l, c, n, off)
					if off == 0 {
						copy(dst, orig)
						MulAddRegion4(dst, s, c)
						checkGuardedWide(t, buf, off, dst, wantAdd[c][:n], "%v MulAddRegion4 c=%d n=%d", l, c, n)
					}
				}
			}
			x := randWide(rng, 257)
			wx := make([]byte, len(x))
			mulAddRegion4Ref(wx, x, c)
			MulRegion4(x, x, c)
			if !bytes.Equal(x, wx) {
				t.Errorf("%v: in-place MulRegion4 c=%d wrong", l, c)
			}
		}
		restore()
	}
}

func TestWideAllocs(t *testing.T) {
	a, b := make([]byte, 1408), make([]byte, 1409)
	for _, l := range Levels() {
		restore := forceLevel(t, l)
		n := testing.AllocsPerRun(20, func() {
			MulAddRegion16(a, b, 0x1234)
			MulRegion16(a, b[:99], 0x4321)
			MulAddRegion4(a, b, 7)
			MulRegion4(a, b[:77], 9)
			XorRegion(a, b)
		})
		restore()
		if n != 0 {
			t.Errorf("%v: %v allocations per run, want 0", l, n)
		}
	}
}

// FuzzRegion16 checks every level against the scalar definition on arbitrary
// data, coefficients and alignments.
func FuzzRegion16(f *testing.F) {
	f.Add([]byte("coded ip payload, an even number of bytes, sixty-four in all!!!"), uint16(0x1234), uint8(0), false)
	f.Add(bytes.Repeat([]byte{0xFF}, 130), uint16(0xFFFF), uint8(3), true)
	f.Add([]byte{1}, uint16(2), uint8(1), true)
	f.Fuzz(func(t *testing.T, src []byte, c uint16, off uint8, add bool) {
		o := int(off & 7)
		orig := make([]byte, len(src))
		for i := range orig {
			orig[i] = byte(i*7 + 3)
		}
		want := append([]byte(nil), orig...)
		if !add {
			clear(want[:len(want)&^1])
		}
		mulAddRegion16Ref(want[:len(want)&^1], src, c)
		for _, l := range Levels() {
			restore := forceLevel(t, l)
			buf, dst := guardedWide(o, orig)
			if add {
				MulAddRegion16(dst, src, c)
			} else {
				MulRegion16(dst, src, c)
			}
			restore()
			checkGuardedWide(t, buf, o, dst, want, "%v add=%v c=%#x n=%d", l, add, c, len(src))
		}
	})
}

// FuzzRegion4 is FuzzRegion16 for packed GF(2^4), with XOR besides.
func FuzzRegion4(f *testing.F) {
	f.Add([]byte("two nibbles a byte, both by the same coefficient, sixty-four b"), uint8(7), uint8(0))
	f.Add(bytes.Repeat([]byte{0xA5}, 129), uint8(15), uint8(5))
	f.Fuzz(func(t *testing.T, src []byte, c uint8, off uint8) {
		o := int(off & 7)
		orig := make([]byte, len(src))
		for i := range orig {
			orig[i] = byte(i*13 + 1)
		}
		want := append([]byte(nil), orig...)
		mulAddRegion4Ref(want, src, c&15)
		wantXor := append([]byte(nil), orig...)
		for i := range wantXor {
			wantXor[i] ^= src[i]
		}
		for _, l := range Levels() {
			restore := forceLevel(t, l)
			buf, dst := guardedWide(o, orig)
			MulAddRegion4(dst, src, c)
			checkGuardedWide(t, buf, o, dst, want, "%v MulAddRegion4 c=%d n=%d", l, c, len(src))
			buf, dst = guardedWide(o, orig)
			XorRegion(dst, src)
			checkGuardedWide(t, buf, o, dst, wantXor, "%v XorRegion n=%d", l, len(src))
			restore()
		}
	})
}

// wideLevels returns the levels with distinct GF(2)/GF(2^4)/GF(2^16)
// kernels: those without wide kernels (SSSE3) run the generic code, which
// LevelGeneric already covers.
func wideLevels() []Level {
	var ls []Level
	for _, l := range Levels() {
		if l == LevelGeneric || wideStep(l) != 0 {
			ls = append(ls, l)
		}
	}
	return ls
}

func forceLevel(t testing.TB, l Level) func() {
	t.Helper()
	restore, err := SetLevel(l)
	if err != nil {
		t.Fatal(err)
	}
	return restore
}

func randWide(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

const guardWide = 64

// guardedWide returns a buffer with guard bytes on both sides of a copy of init
// placed off bytes in, and the copy.
func guardedWide(off int, init []byte) (buf, dst []byte) {
	buf = make([]byte, guardWide+off+len(init)+guardWide)
	copy(buf, guardFill) // whole-slice copies: cheap under -race too
	copy(buf[len(buf)-guardWide:], guardFill)
	dst = buf[guardWide+off : guardWide+off+len(init)]
	copy(dst, init)
	return buf, dst
}

// checkGuardedWide compares dst with want and checks the guards around it;
// the failure message is formatted only on failure.
func checkGuardedWide(t testing.TB, buf []byte, off int, dst, want []byte, format string, args ...any) {
	t.Helper()
	if !bytes.Equal(dst, want) {
		for i := range dst {
			if dst[i] != want[i] {
				t.Fatalf("%s: byte %d = %#x, want %#x", fmt.Sprintf(format, args...), i, dst[i], want[i])
			}
		}
	}
	end := guardWide + off + len(dst)
	if !bytes.Equal(buf[:guardWide+off], guardFill[:guardWide+off]) || !bytes.Equal(buf[end:], guardFill[:len(buf)-end]) {
		t.Fatalf("%s: wrote outside dst", fmt.Sprintf(format, args...))
	}
}

var guardFill = bytes.Repeat([]byte{0xC5}, 2*guardWide+8)

// BenchmarkWide times the GF(2), GF(2^4) and GF(2^16) MulAdd kernels at every
// supported level.
func BenchmarkWide(b *testing.B) {
	ops := []struct {
		name string
		fn   func(dst, src []byte)
	}{
		{"field=gf2", XorRegion},
		{"field=gf4", func(dst, src []byte) { MulAddRegion4(dst, src, 7) }},
		{"field=gf16", func(dst, src []byte) { MulAddRegion16(dst, src, 0x1234) }},
	}
	for _, op := range ops {
		for _, l := range Levels() {
			for _, size := range []int{1408, 65536} {
				b.Run(fmt.Sprintf("%s/level=%v/size=%d", op.name, l, size), func(b *testing.B) {
					restore := forceLevel(b, l)
					defer restore()
					rng := rand.New(rand.NewPCG(1, 2))
					dst, src := randWide(rng, size), randWide(rng, size)
					b.SetBytes(int64(size))
					for b.Loop() {
						op.fn(dst, src)
					}
					b.ReportMetric(float64(size)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
				})
			}
		}
	}
}

// bitMatrix is affineMatrix by the definition: output bit i is the parity of
// the input ANDed with byte 7-i of the matrix.
func bitMatrix(cols uint64) uint64 {
	var m uint64
	for i := 0; i < 8; i++ {
		var row byte
		for j := 0; j < 8; j++ {
			row |= byte(cols>>(8*j)>>i&1) << j
		}
		m |= uint64(row) << (8 * (7 - i))
	}
	return m
}

func TestTables16(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 5))
	for i := 0; i < 2000; i++ {
		cols := rng.Uint64()
		if got, want := affineMatrix(cols), bitMatrix(cols); got != want {
			t.Fatalf("affineMatrix(%#x) = %#x, want %#x", cols, got, want)
		}
		c := uint16(rng.Uint32())
		var tab [16]uint64
		pshufbTables16(c, &tab)
		for k := 0; k < 4; k++ { // nibble 3-k
			for n := 0; n < 16; n++ {
				p := Mul16(c, uint16(n)<<(4*(3-k)))
				hi := byte(tab[4*k+n/8] >> (8 * (n % 8)))
				lo := byte(tab[4*k+2+n/8] >> (8 * (n % 8)))
				if hi != byte(p>>8) || lo != byte(p) {
					t.Fatalf("c=%#x: table of nibble %d, entry %d: %#x%02x, want %#x", c, 3-k, n, hi, lo, p)
				}
			}
		}
	}
}

func TestSetup16Linear(t *testing.T) {
	// The nibble-composed tables and matrices equal the ones built from c.
	rng := rand.New(rand.NewPCG(16, 6))
	for i := 0; i < 5000; i++ {
		c := uint16(rng.Uint32())
		var t1, t2 [16]uint64
		pshufbTables16(c, &t1)
		buildPshufbTables16(c, &t2)
		var m1, m2 [4]uint64
		gfniMatrices16(c, &m1)
		buildGFNIMatrices16(c, &m2)
		if t1 != t2 || m1 != m2 {
			t.Fatalf("c=%#x: composed setup differs from the direct one", c)
		}
	}
}
