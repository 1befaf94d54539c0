package gf

// Poly8 is the reduction polynomial of GF(2^8): x^8+x^4+x^3+x^2+1, as in
// ISA-L, klauspost/reedsolomon and Jerasure. It is primitive, so α = 2
// generates the multiplicative group of 255 elements.
const Poly8 = 0x11D

// log8Zero is the log8 entry for 0. Any sum with it lands in the zero tail of
// exp8, so Mul8 needs no branch: nonzero logs sum to at most 508.
const log8Zero = 512

var (
	// exp8[i] = α^i for i < 510 (two periods, so sums of two logs index it
	// directly); exp8[i] = 0 from 510 on, reached only through log8Zero.
	exp8 [2*log8Zero + 1]byte
	// log8[a] = i with α^i = a for a ≠ 0; log8[0] = log8Zero.
	log8 [256]uint16
	// inv8[a]·a = 1 for a ≠ 0; inv8[0] = 0.
	inv8 [256]byte
	// mul8[c][x] = c·x: the generic region kernels read one row per call.
	mul8 [256][256]byte
)

func init() {
	x := 1
	for i := 0; i < 255; i++ {
		exp8[i] = byte(x)
		exp8[i+255] = byte(x)
		log8[x] = uint16(i)
		x <<= 1
		if x&0x100 != 0 {
			x ^= Poly8
		}
	}
	log8[0] = log8Zero
	for a := 1; a < 256; a++ {
		inv8[a] = exp8[255-int(log8[a])]
	}
	for c := 0; c < 256; c++ {
		for x := 0; x < 256; x++ {
			mul8[c][x] = Mul8(byte(c), byte(x))
		}
	}
	initArch8() // vector tables, built from the scalar ones above
}

// Mul8 returns a·b in GF(2^8).
func Mul8(a, b byte) byte {
	return exp8[log8[a]+log8[b]]
}

// Div8 returns a/b in GF(2^8). Division by zero has no value; Div8(a, 0)
// returns 0 rather than panicking, like Inv8(0).
func Div8(a, b byte) byte {
	if a == 0 || b == 0 {
		return 0
	}
	return exp8[int(log8[a])+255-int(log8[b])]
}

// Inv8 returns the multiplicative inverse of a in GF(2^8). Zero has none;
// Inv8(0) returns 0, as ISA-L's gf_inv does.
func Inv8(a byte) byte {
	return inv8[a]
}

// Exp8 returns α^n in GF(2^8), α = 2, for any n (negative n too: α^-1 =
// Inv8(2)).
func Exp8(n int) byte { return expAt(exp8[:], 255, n) }

// Log8 returns the discrete logarithm of a to base α = 2, in [0, 254], so that
// Exp8(Log8(a)) == a. ok is false for a = 0, which has no logarithm.
func Log8(a byte) (n int, ok bool) {
	if a == 0 {
		return 0, false
	}
	return int(log8[a]), true
}

// Pow8 returns a^n in GF(2^8) for n ≥ 0; a^0 = 1, including 0^0. For a ≠ 0
// negative n is allowed: a^-1 = Inv8(a). Pow8(0, n) for n < 0 returns 0.
func Pow8(a byte, n int) byte { return powLog(exp8[:], 255, int(log8[a]), a == 0, n) }
