package gf

// GF(2^4) over the polynomial x^4+x+1 (0x13), which is primitive: 2
// generates the multiplicative group of order 15.
//
// Region operations work on elements packed two to a byte: element 2i in the
// high nibble of byte i and element 2i+1 in the low nibble. Both nibbles of a
// byte are multiplied by the same coefficient, so a region of n bytes holds 2n
// elements and no element straddles a byte.

const (
	// Poly4 is the reduction polynomial of GF(2^4).
	Poly4  = 0x13
	order4 = 15
)

var (
	log4       [16]byte
	exp4       [2 * order4]byte
	mul4       [16][16]byte  // mul4[a][b] = a·b
	mul4Byte   [16][256]byte // mul4Byte[c][b] = c times both nibbles of b
	mul4Split  [16][32]byte  // PSHUFB tables: c·n, then (c·n)<<4
	mul4Matrix [16]uint64    // VGF2P8AFFINEQB matrices of mul4Byte
)

func init() {
	x := byte(1)
	for i := 0; i < order4; i++ {
		exp4[i] = x
		exp4[i+order4] = x
		log4[x] = byte(i)
		x <<= 1
		if x&0x10 != 0 {
			x ^= Poly4
		}
	}
	for a := 1; a < 16; a++ {
		for b := 1; b < 16; b++ {
			mul4[a][b] = exp4[int(log4[a])+int(log4[b])]
		}
	}
	for c := 0; c < 16; c++ {
		for b := 0; b < 256; b++ {
			mul4Byte[c][b] = mul4[c][b>>4]<<4 | mul4[c][b&15]
		}
		for n := 0; n < 16; n++ {
			mul4Split[c][n] = mul4[c][n]
			mul4Split[c][16+n] = mul4[c][n] << 4
		}
		var cols uint64
		for j := 0; j < 8; j++ {
			cols |= uint64(mul4Byte[c][1<<j]) << (8 * j)
		}
		mul4Matrix[c] = affineMatrix(cols)
	}
}

// Mul4 returns a·b in GF(2^4). Only the low nibbles of a and b are used.
func Mul4(a, b byte) byte { return mul4[a&15][b&15] }

// Div4 returns a/b in GF(2^4), and 0 when b is 0 (see Div16). Only the low
// nibbles are used.
func Div4(a, b byte) byte {
	a, b = a&15, b&15
	if a == 0 || b == 0 {
		return 0
	}
	return exp4[int(log4[a])+order4-int(log4[b])]
}

// Inv4 returns the inverse of a in GF(2^4), and 0 for 0.
func Inv4(a byte) byte {
	a &= 15
	if a == 0 {
		return 0
	}
	return exp4[order4-int(log4[a])]
}

// Exp4 returns 2^n in GF(2^4); n may be any integer.
func Exp4(n int) byte { return expAt(exp4[:], order4, n) }

// Log4 returns the discrete logarithm of a (low nibble) to the base 2, in
// [0, 15); ok is false for 0.
func Log4(a byte) (n int, ok bool) {
	a &= 15
	if a == 0 {
		return 0, false
	}
	return int(log4[a]), true
}

// Pow4 returns a^n in GF(2^4) (low nibble of a); a^0 = 1, including 0^0.
// Negative n is allowed for a ≠ 0; Pow4(0, n) is 0 for n ≠ 0.
func Pow4(a byte, n int) byte {
	a &= 15
	return powLog(exp4[:], order4, int(log4[a]), a == 0, n)
}

// MulRegion4 sets dst to c·src on packed GF(2^4) elements (two per byte).
// Like copy it works on the first min(len(dst), len(src)) bytes; dst and src
// may be the same slice. Only the low nibble of c is used.
func MulRegion4(dst, src []byte, c byte) {
	n := min(len(dst), len(src))
	dst, src = dst[:n], src[:n]
	c &= 15
	switch c {
	case 0:
		clear(dst)
		return
	case 1:
		copy(dst, src)
		return
	}
	done := region4Wide(dst, src, c, false)
	t := &mul4Byte[c]
	dst, src = dst[done:], src[done:len(dst)]
	for i := range dst {
		dst[i] = t[src[i]]
	}
}

// MulAddRegion4 sets dst ^= c·src on packed GF(2^4) elements, over
// min(len(dst), len(src)) bytes. Only the low nibble of c is used.
func MulAddRegion4(dst, src []byte, c byte) {
	n := min(len(dst), len(src))
	dst, src = dst[:n], src[:n]
	c &= 15
	switch c {
	case 0:
		return
	case 1:
		XorRegion(dst, src)
		return
	}
	done := region4Wide(dst, src, c, true)
	t := &mul4Byte[c]
	dst, src = dst[done:], src[done:len(dst)]
	for i := range dst {
		dst[i] ^= t[src[i]]
	}
}
