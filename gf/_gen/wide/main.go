// Command wide generates gf/wide_amd64.s and gf/wide_amd64.go: the region
// kernels for GF(2) (XOR), GF(2^4) (packed two per byte) and GF(2^16)
// (big-endian 16-bit elements). Run it from gf/ with `make generate-gf-wide`.
//
// Each kernel processes len(src) rounded down to its step (64 bytes for YMM,
// 128 for ZMM); the Go side handles the tail and guarantees len(dst) >= len(src).
//
// GF(2^16) splits each coefficient's product into 8 PSHUFB tables: for each of
// the four nibbles of an element, the high and the low byte of the product.
// The kernel deinterleaves 2·width bytes into a vector of high bytes and a
// vector of low bytes (PSHUFB within lanes, then PUNPCK{L,H}QDQ), looks up
// and XORs the nibbles, and interleaves the result back (PUNPCK{L,H}BW). With
// GFNI the four nibble lookups per output byte become two 8×8 bit matrices
// (VGF2P8AFFINEQB), one per input byte.
//
// GF(2^4) multiplies both nibbles of a byte by one coefficient: one 16-entry
// table for the low nibble and the same table shifted left by 4 for the high
// one; with GFNI, a single block-diagonal bit matrix.
package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// consts holds, repeated over 64 bytes each, the PSHUFB control that puts the
// even bytes of every 128-bit lane in its low half and the odd bytes in its
// high half, then the nibble mask 0x0F.
var consts Mem

const (
	offDeinterleave = 0
	offMask         = 64
)

// isa is one instruction set level.
type isa struct {
	name  string // suffix of the function names
	width int    // vector bytes: 32 or 64
	gfni  bool
}

func (s isa) vec() VecVirtual {
	if s.width == 64 {
		return ZMM()
	}
	return YMM()
}

// broadcast16 loads a 16-byte block into every lane.
func (s isa) broadcast16(m Mem, v VecVirtual) {
	if s.width == 64 {
		VBROADCASTI32X4(m, v)
	} else {
		VBROADCASTI128(m, v)
	}
}

func (s isa) xor(a, b, dst Op) {
	if s.width == 64 {
		VPXORQ(a, b, dst)
	} else {
		VPXOR(a, b, dst)
	}
}

func (s isa) and(a, b, dst Op) {
	if s.width == 64 {
		VPANDQ(a, b, dst)
	} else {
		VPAND(a, b, dst)
	}
}

func (s isa) load(m Mem, v Op) {
	if s.width == 64 {
		VMOVDQU64(m, v)
	} else {
		VMOVDQU(m, v)
	}
}

func (s isa) store(v Op, m Mem) {
	if s.width == 64 {
		VMOVDQU64(v, m)
	} else {
		VMOVDQU(v, m)
	}
}

// xor3 sets dst = a ^ b ^ dst.
func (s isa) xor3(a, b, dst Op) {
	if s.width == 64 {
		VPTERNLOGD(U8(0x96), a, b, dst)
		return
	}
	VPXOR(a, dst, dst)
	VPXOR(b, dst, dst)
}

func main() {
	ConstraintExpr("!noasm")

	consts = GLOBL("wideConsts", RODATA|NOPTR)
	for lane := 0; lane < 4; lane++ {
		for i := 0; i < 16; i++ {
			// Even source bytes to the low half, odd to the high half.
			DATA(16*lane+i, U8(2*(i%8)+i/8))
		}
	}
	for i := 0; i < 64; i++ {
		DATA(offMask+i, U8(0x0F))
	}

	levels := []isa{
		{"AVX2", 32, false},
		{"AVX512", 64, false},
		{"GFNI256", 32, true},
		{"GFNI512", 64, true},
	}
	for _, s := range levels {
		genXor(s)
	}
	for _, s := range levels {
		for _, add := range []bool{false, true} {
			gen4(s, add)
			gen16(s, add)
		}
	}
	Generate()
}

func opName(add bool) string {
	if add {
		return "mulAdd"
	}
	return "mul"
}

// genXor: dst ^= src, 4 vectors per iteration, then one at a time.
func genXor(s isa) {
	if s.gfni {
		return // nothing for GFNI to add to XOR
	}
	name := "xor" + s.name
	step := 4 * s.width
	TEXT(name, NOSPLIT, "func(dst, src []byte)")
	Pragma("noescape")
	Doc(fmt.Sprintf("%s sets dst ^= src over len(src) rounded down to %d bytes.", name, s.width))
	dst := Load(Param("dst").Base(), GP64())
	src := Load(Param("src").Base(), GP64())
	n := Load(Param("src").Len(), GP64())
	CMPQ(n, U32(step))
	JB(LabelRef(name + "_tail"))
	Label(name + "_loop")
	var v [4]VecVirtual
	for i := range v {
		v[i] = s.vec()
		s.load(Mem{Base: src, Disp: i * s.width}, v[i])
	}
	for i := range v {
		s.xor(Mem{Base: dst, Disp: i * s.width}, v[i], v[i])
		s.store(v[i], Mem{Base: dst, Disp: i * s.width})
	}
	ADDQ(U32(step), src)
	ADDQ(U32(step), dst)
	SUBQ(U32(step), n)
	CMPQ(n, U32(step))
	JAE(LabelRef(name + "_loop"))
	Label(name + "_tail")
	CMPQ(n, U32(s.width))
	JB(LabelRef(name + "_done"))
	x := s.vec()
	s.load(Mem{Base: src}, x)
	s.xor(Mem{Base: dst}, x, x)
	s.store(x, Mem{Base: dst})
	ADDQ(U32(s.width), src)
	ADDQ(U32(s.width), dst)
	SUBQ(U32(s.width), n)
	JMP(LabelRef(name + "_tail"))
	Label(name + "_done")
	VZEROUPPER()
	RET()
}

// gen4 generates the packed GF(2^4) kernel. Without GFNI, t points at the
// 32-byte split table (c·n, then (c·n)<<4); with GFNI, at the 8-byte matrix.
func gen4(s isa, add bool) {
	name := opName(add) + "4" + s.name
	step := 2 * s.width
	sig := "func(t *[32]byte, dst, src []byte)"
	if s.gfni {
		sig = "func(m *uint64, dst, src []byte)"
	}
	TEXT(name, NOSPLIT, sig)
	Pragma("noescape")
	Doc(fmt.Sprintf("%s sets dst %s c·src on packed GF(2^4) elements over len(src) rounded down to %d bytes.", name, assign(add), step))
	var t Register
	if s.gfni {
		t = Load(Param("m"), GP64())
	} else {
		t = Load(Param("t"), GP64())
	}
	dst := Load(Param("dst").Base(), GP64())
	src := Load(Param("src").Base(), GP64())
	n := Load(Param("src").Len(), GP64())
	SHRQ(U8(log2(step)), n)
	JZ(LabelRef(name + "_done"))

	var lo, hi, mask, mat VecVirtual
	if s.gfni {
		mat = s.vec()
		VPBROADCASTQ(Mem{Base: t}, mat)
	} else {
		lo, hi, mask = s.vec(), s.vec(), s.vec()
		s.broadcast16(Mem{Base: t}, lo)
		s.broadcast16(Mem{Base: t, Disp: 16}, hi)
		s.load(consts.Offset(offMask), mask)
	}

	Label(name + "_loop")
	for i := 0; i < 2; i++ {
		x := s.vec()
		s.load(Mem{Base: src, Disp: i * s.width}, x)
		if s.gfni {
			VGF2P8AFFINEQB(U8(0), mat, x, x)
		} else {
			h := s.vec()
			VPSRLQ(U8(4), x, h)
			s.and(mask, h, h)
			s.and(mask, x, x)
			VPSHUFB(x, lo, x)
			VPSHUFB(h, hi, h)
			s.xor(h, x, x)
		}
		if add {
			s.xor(Mem{Base: dst, Disp: i * s.width}, x, x)
		}
		s.store(x, Mem{Base: dst, Disp: i * s.width})
	}
	ADDQ(U32(step), src)
	ADDQ(U32(step), dst)
	DECQ(n)
	JNZ(LabelRef(name + "_loop"))
	Label(name + "_done")
	VZEROUPPER()
	RET()
}

// gen16 generates the GF(2^16) kernel. Without GFNI, t points at 8 tables of
// 16 bytes: for nibbles n3, n2, n1, n0 of the element, the high then the low
// bytes of the products. With GFNI, at 4 matrices: high byte to high byte,
// low to high, high to low, low to low.
func gen16(s isa, add bool) {
	name := opName(add) + "16" + s.name
	step := 2 * s.width
	sig := "func(t *[16]uint64, dst, src []byte)"
	if s.gfni {
		sig = "func(m *[4]uint64, dst, src []byte)"
	}
	TEXT(name, NOSPLIT, sig)
	Pragma("noescape")
	Doc(fmt.Sprintf("%s sets dst %s c·src on big-endian GF(2^16) elements over len(src) rounded down to %d bytes.", name, assign(add), step))
	var t Register
	if s.gfni {
		t = Load(Param("m"), GP64())
	} else {
		t = Load(Param("t"), GP64())
	}
	dst := Load(Param("dst").Base(), GP64())
	src := Load(Param("src").Base(), GP64())
	n := Load(Param("src").Len(), GP64())
	SHRQ(U8(log2(step)), n)
	JZ(LabelRef(name + "_done"))

	var tab [8]VecVirtual
	var mat [4]VecVirtual
	var mask VecVirtual
	if s.gfni {
		for i := range mat {
			mat[i] = s.vec()
			VPBROADCASTQ(Mem{Base: t, Disp: 8 * i}, mat[i])
		}
	} else {
		for i := range tab {
			tab[i] = s.vec()
			s.broadcast16(Mem{Base: t, Disp: 16 * i}, tab[i])
		}
		mask = s.vec()
		s.load(consts.Offset(offMask), mask)
	}

	Label(name + "_loop")
	a, b := s.vec(), s.vec()
	s.load(Mem{Base: src}, a)
	s.load(Mem{Base: src, Disp: s.width}, b)
	// Deinterleave: hi gets the even (high) bytes, lo the odd (low) bytes,
	// lane by lane; the lane order is undone by the interleave below.
	VPSHUFB(consts.Offset(offDeinterleave), a, a)
	VPSHUFB(consts.Offset(offDeinterleave), b, b)
	hi, lo := a, s.vec()
	VPUNPCKHQDQ(b, a, lo)
	VPUNPCKLQDQ(b, a, hi)

	var outHi, outLo VecVirtual
	if s.gfni {
		outHi, outLo = s.vec(), s.vec()
		t1 := s.vec()
		VGF2P8AFFINEQB(U8(0), mat[0], hi, outHi)
		VGF2P8AFFINEQB(U8(0), mat[1], lo, t1)
		s.xor(t1, outHi, outHi)
		VGF2P8AFFINEQB(U8(0), mat[2], hi, outLo)
		VGF2P8AFFINEQB(U8(0), mat[3], lo, lo)
		s.xor(lo, outLo, outLo)
	} else {
		n3, n1 := b, s.vec()
		VPSRLQ(U8(4), hi, n3)
		s.and(mask, n3, n3)
		n2 := hi
		s.and(mask, hi, n2)
		VPSRLQ(U8(4), lo, n1)
		s.and(mask, n1, n1)
		n0 := lo
		s.and(mask, lo, n0)
		nib := [4]VecVirtual{n3, n2, n1, n0}
		outHi, outLo = s.vec(), s.vec()
		if s.width == 64 {
			// Three-way XORs: look up all four, fold with VPTERNLOGD.
			var ph, pl [4]VecVirtual
			for k := 0; k < 4; k++ {
				ph[k], pl[k] = s.vec(), s.vec()
				VPSHUFB(nib[k], tab[2*k], ph[k])
				VPSHUFB(nib[k], tab[2*k+1], pl[k])
			}
			s.xor3(ph[0], ph[1], ph[2])
			s.xor(ph[3], ph[2], outHi)
			s.xor3(pl[0], pl[1], pl[2])
			s.xor(pl[3], pl[2], outLo)
		} else {
			VPSHUFB(n3, tab[0], outHi)
			VPSHUFB(n3, tab[1], outLo)
			tmp := s.vec()
			for k := 1; k < 4; k++ {
				VPSHUFB(nib[k], tab[2*k], tmp)
				s.xor(tmp, outHi, outHi)
				VPSHUFB(nib[k], tab[2*k+1], nib[k])
				s.xor(nib[k], outLo, outLo)
			}
		}
	}
	ra, rb := s.vec(), s.vec()
	VPUNPCKLBW(outLo, outHi, ra)
	VPUNPCKHBW(outLo, outHi, rb)
	if add {
		s.xor(Mem{Base: dst}, ra, ra)
		s.xor(Mem{Base: dst, Disp: s.width}, rb, rb)
	}
	s.store(ra, Mem{Base: dst})
	s.store(rb, Mem{Base: dst, Disp: s.width})
	ADDQ(U32(step), src)
	ADDQ(U32(step), dst)
	DECQ(n)
	JNZ(LabelRef(name + "_loop"))
	Label(name + "_done")
	VZEROUPPER()
	RET()
}

func assign(add bool) string {
	if add {
		return "^="
	}
	return "="
}

func log2(n int) int {
	k := 0
	for 1<<k < n {
		k++
	}
	return k
}
