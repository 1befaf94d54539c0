package gf

import "math/bits"

// GF(2^16) over the polynomial x^16+x^12+x^3+x+1 (0x1100B), the primitive
// polynomial that Plank's tutorial, Jerasure and GF-Complete use for w=16;
// 2 generates the multiplicative group.
//
// Region operations work on big-endian (network order) 16-bit elements: byte
// 2i holds the high eight bits of element i and byte 2i+1 the low eight. Only
// whole elements are processed: an odd trailing byte is left untouched.

const (
	// Poly16 is the reduction polynomial of GF(2^16).
	Poly16  = 0x1100B
	order16 = 1<<16 - 1 // size of the multiplicative group
)

var (
	log16 [1 << 16]uint16     // log16[0] is unused
	exp16 [2 * order16]uint16 // doubled so that exp16[log a + log b] needs no modulo

	// The tables and matrices of a coefficient are linear in it, so those of
	// c are the XOR of those of its four nibbles n<<4k, precomputed here
	// (10 KiB): a region call then sets up in a few ns instead of ~50.
	pshufb16Nibble [4][16][16]uint64
	gfni16Nibble   [4][16][4]uint64
)

func init() {
	x := uint32(1)
	for i := 0; i < order16; i++ {
		exp16[i] = uint16(x)
		exp16[i+order16] = uint16(x)
		log16[x] = uint16(i)
		x <<= 1
		if x&(1<<16) != 0 {
			x ^= Poly16
		}
	}
	for k := 0; k < 4; k++ {
		for n := 0; n < 16; n++ {
			c := uint16(n) << (4 * k)
			buildPshufbTables16(c, &pshufb16Nibble[k][n])
			buildGFNIMatrices16(c, &gfni16Nibble[k][n])
		}
	}
}

// Mul16 returns a·b in GF(2^16).
func Mul16(a, b uint16) uint16 {
	if a == 0 || b == 0 {
		return 0
	}
	return exp16[int(log16[a])+int(log16[b])]
}

// Div16 returns a/b in GF(2^16). Division by zero yields 0: there is no
// inverse to use, and a panic on data from the wire is not an option.
func Div16(a, b uint16) uint16 {
	if a == 0 || b == 0 {
		return 0
	}
	return exp16[int(log16[a])+order16-int(log16[b])]
}

// Inv16 returns the multiplicative inverse of a, and 0 for 0.
func Inv16(a uint16) uint16 {
	if a == 0 {
		return 0
	}
	return exp16[order16-int(log16[a])]
}

// Exp16 returns 2^n in GF(2^16); n may be any integer (the group has order
// 65535).
func Exp16(n int) uint16 { return expAt(exp16[:], order16, n) }

// Log16 returns the discrete logarithm of a to the base 2, in [0, 65535), so
// that Exp16(Log16(a)) == a. ok is false for 0, which has no logarithm.
func Log16(a uint16) (n int, ok bool) {
	if a == 0 {
		return 0, false
	}
	return int(log16[a]), true
}

// Pow16 returns a^n in GF(2^16); a^0 = 1, including 0^0. Negative n is allowed
// for a ≠ 0; Pow16(0, n) is 0 for n ≠ 0.
func Pow16(a uint16, n int) uint16 { return powLog(exp16[:], order16, int(log16[a]), a == 0, n) }

// basis16 returns c·2^j for j < 16: the images of the bit basis under
// multiplication by c, from which every table and matrix below is built by
// XOR alone.
func basis16(c uint16) (p [16]uint16) {
	for j := range p {
		p[j] = c
		c = c<<1 ^ -(c>>15)&(Poly16&0xFFFF)
	}
	return p
}

// mulTable16 splits multiplication by one coefficient c by nibble: for
// x = n3<<12 | n2<<8 | n1<<4 | n0, c·x = t[3][n3] ^ t[2][n2] ^ t[1][n1] ^ t[0][n0].
type mulTable16 [4][16]uint16

func (t *mulTable16) init(c uint16) {
	p := basis16(c)
	for k := range t {
		t[k][0] = 0
		for j := 0; j < 4; j++ {
			bit := 1 << j
			for n := 0; n < bit; n++ {
				t[k][bit|n] = t[k][n] ^ p[4*k+j]
			}
		}
	}
}

// pshufbTables16 returns the 8 PSHUFB tables of c: for nibble n3, n2, n1, n0
// of the element in turn, 16 bytes of the products' high bytes, then 16 of
// their low bytes.
func pshufbTables16(c uint16, out *[16]uint64) {
	a, b := &pshufb16Nibble[0][c&15], &pshufb16Nibble[1][c>>4&15]
	d, e := &pshufb16Nibble[2][c>>8&15], &pshufb16Nibble[3][c>>12]
	for i := range out {
		out[i] = a[i] ^ b[i] ^ d[i] ^ e[i]
	}
}

func buildPshufbTables16(c uint16, out *[16]uint64) {
	p := basis16(c)
	for k := 0; k < 4; k++ {
		b := p[4*(3-k) : 4*(3-k)+4]
		out[4*k], out[4*k+1] = nibbleTable(byte(b[0]>>8), byte(b[1]>>8), byte(b[2]>>8), byte(b[3]>>8))
		out[4*k+2], out[4*k+3] = nibbleTable(byte(b[0]), byte(b[1]), byte(b[2]), byte(b[3]))
	}
}

// nibbleTable returns the 16 bytes n -> XOR of the b_j whose bit j is set in
// n, as two little-endian words, built eight entries at a time.
func nibbleTable(b0, b1, b2, b3 byte) (lo, hi uint64) {
	const ones = 0x0101010101010101
	q := uint64(b0) << 8
	q |= (q ^ uint64(b1)*ones) & 0xFFFF << 16
	q |= (q ^ uint64(b2)*ones) & 0xFFFFFFFF << 32
	return q, q ^ uint64(b3)*ones
}

// MulRegion16 sets dst to c·src, element by element; both hold big-endian
// 16-bit elements. Like copy it works on the first min(len(dst), len(src))
// bytes, rounded down to whole elements; an odd last byte is left as it is.
// dst and src may be the same slice.
func MulRegion16(dst, src []byte, c uint16) {
	n := min(len(dst), len(src)) &^ 1
	dst, src = dst[:n], src[:n]
	switch c {
	case 0:
		clear(dst)
		return
	case 1:
		copy(dst, src)
		return
	}
	if region16Wide(dst, src, c, false) == n {
		return
	}
	var t mulTable16
	t.init(c)
	mulRegion16Generic(dst, src, &t)
}

// MulAddRegion16 sets dst ^= c·src, element by element, on big-endian 16-bit
// elements, over the same bytes as MulRegion16.
func MulAddRegion16(dst, src []byte, c uint16) {
	n := min(len(dst), len(src)) &^ 1
	dst, src = dst[:n], src[:n]
	switch c {
	case 0:
		return
	case 1:
		XorRegion(dst, src)
		return
	}
	if region16Wide(dst, src, c, true) == n {
		return
	}
	var t mulTable16
	t.init(c)
	mulAddRegion16Generic(dst, src, &t)
}

// gfniMatrices16 returns the four 8×8 bit matrices of multiplication by c for
// VGF2P8AFFINEQB: high input byte to high output byte, low to high, high to
// low, low to low.
func gfniMatrices16(c uint16, m *[4]uint64) {
	a, b := &gfni16Nibble[0][c&15], &gfni16Nibble[1][c>>4&15]
	d, e := &gfni16Nibble[2][c>>8&15], &gfni16Nibble[3][c>>12]
	for i := range m {
		m[i] = a[i] ^ b[i] ^ d[i] ^ e[i]
	}
}

func buildGFNIMatrices16(c uint16, m *[4]uint64) {
	p := basis16(c)
	var hh, lh, hl, ll uint64 // byte j: the image of input bit j
	for j := 0; j < 8; j++ {
		hh |= uint64(p[8+j]>>8) << (8 * j)
		lh |= uint64(p[j]>>8) << (8 * j)
		hl |= uint64(p[8+j]&0xFF) << (8 * j)
		ll |= uint64(p[j]&0xFF) << (8 * j)
	}
	m[0], m[1], m[2], m[3] = affineMatrix(hh), affineMatrix(lh), affineMatrix(hl), affineMatrix(ll)
}

// affineMatrix turns the images of the 8 input bits (byte j: the image of bit
// j) into the VGF2P8AFFINEQB operand, whose byte 7-i selects the input bits
// that make output bit i: a bit transpose (Hacker's Delight 7-3), then a byte
// reversal.
func affineMatrix(cols uint64) uint64 {
	x := cols
	t := (x ^ x>>7) & 0x00AA00AA00AA00AA
	x ^= t ^ t<<7
	t = (x ^ x>>14) & 0x0000CCCC0000CCCC
	x ^= t ^ t<<14
	t = (x ^ x>>28) & 0x00000000F0F0F0F0
	x ^= t ^ t<<28
	return bits.ReverseBytes64(x)
}

func mulRegion16Generic(dst, src []byte, t *mulTable16) {
	src = src[:len(dst)]
	for i := 0; i+1 < len(dst); i += 2 {
		h, l := src[i], src[i+1]
		p := t[3][h>>4] ^ t[2][h&15] ^ t[1][l>>4] ^ t[0][l&15]
		dst[i] = byte(p >> 8)
		dst[i+1] = byte(p)
	}
}

func mulAddRegion16Generic(dst, src []byte, t *mulTable16) {
	src = src[:len(dst)]
	for i := 0; i+1 < len(dst); i += 2 {
		h, l := src[i], src[i+1]
		p := t[3][h>>4] ^ t[2][h&15] ^ t[1][l>>4] ^ t[0][l&15]
		dst[i] ^= byte(p >> 8)
		dst[i+1] ^= byte(p)
	}
}
