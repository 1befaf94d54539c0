package gf

import "encoding/binary"

// GF(2) is addition and multiplication modulo 2: a region of GF(2) elements
// is a bit vector, its sum is XOR, and a coefficient (0 or 1) selects whether
// a source is added at all. The same XOR adds regions of every field here.

// XorRegion sets dst ^= src. Like copy it works on the first
// min(len(dst), len(src)) bytes; dst and src may be the same slice.
func XorRegion(dst, src []byte) {
	n := min(len(dst), len(src))
	dst, src = dst[:n], src[:n]
	done := xorWide(dst, src)
	xorGeneric(dst[done:], src[done:])
}

// MulRegion2 sets dst to c·src over GF(2): a copy of src if c is 1, zeros if
// it is 0. Only the low bit of c is used.
func MulRegion2(dst, src []byte, c byte) {
	n := min(len(dst), len(src))
	if c&1 == 0 {
		clear(dst[:n])
		return
	}
	copy(dst[:n], src[:n])
}

// MulAddRegion2 sets dst ^= c·src over GF(2): XorRegion if c is 1, nothing
// if it is 0. Only the low bit of c is used.
func MulAddRegion2(dst, src []byte, c byte) {
	if c&1 != 0 {
		XorRegion(dst, src)
	}
}

// xorGeneric is XorRegion in Go, eight bytes a step.
func xorGeneric(dst, src []byte) {
	src = src[:len(dst)]
	for len(dst) >= 8 {
		v := binary.LittleEndian.Uint64(dst) ^ binary.LittleEndian.Uint64(src)
		binary.LittleEndian.PutUint64(dst, v)
		dst, src = dst[8:], src[8:]
	}
	for i := range dst {
		dst[i] ^= src[i]
	}
}
