package gf

// Region kernels over GF(2^8). Each works on whole buffers at the current
// Level (see SetLevel); every level gives the same bytes.
//
// Lengths: like copy, a kernel works on the first n bytes, n being the length
// of the shortest buffer it is given; any n ≥ 0 and any alignment is fine.
// Buffers must not overlap, except that Mul and MulAdd accept dst and src
// being exactly the same slice (in place).

// Mul sets dst[x] = c·src[x] for x < min(len(dst), len(src)).
func Mul(dst, src []byte, c byte) {
	n := min(len(dst), len(src))
	if n == 0 {
		return
	}
	mulRegion(CurrentLevel(), dst[:n], src[:n], c)
}

// MulAdd sets dst[x] ^= c·src[x] for x < min(len(dst), len(src)): ISA-L's
// gf_vect_mad, the step of an encoder that adds one source at a time.
func MulAdd(dst, src []byte, c byte) {
	n := min(len(dst), len(src))
	if n == 0 || c == 0 {
		return
	}
	mulAddRegion(CurrentLevel(), dst[:n], src[:n], c)
}

// MulAddMulti is the fused dot product, ISA-L's ec_encode_data: with k =
// len(src) sources and m = len(dst) destinations it sets
//
//	dst[j][x] ^= Σ_{i<k} coef[j*k+i] · src[i][x]    for j < m, x < n
//
// in one pass over the sources, n being the length of the shortest buffer
// among src and dst. coef is the m×k coefficient matrix in row-major order:
// row j holds destination j's coefficients, one per source. It panics if
// len(coef) < m*k, a programming error. Destinations must not overlap
// sources or each other.
func MulAddMulti(dst, src [][]byte, coef []byte) {
	dotRegionChecked(dst, src, coef, true)
}

// MulMulti is MulAddMulti that overwrites: dst[j][x] = Σ_i coef[j*k+i] ·
// src[i][x]. An encoder producing fresh coded packets needs no zeroing first.
// With no sources it zeroes the destinations.
func MulMulti(dst, src [][]byte, coef []byte) {
	dotRegionChecked(dst, src, coef, false)
}

func dotRegionChecked(dst, src [][]byte, coef []byte, add bool) {
	m, k := len(dst), len(src)
	if m == 0 {
		return
	}
	if len(coef) < m*k {
		panic("gf: MulMulti/MulAddMulti: coef shorter than len(dst)*len(src)")
	}
	n := -1
	for _, d := range dst {
		if n < 0 || len(d) < n {
			n = len(d)
		}
	}
	for _, s := range src {
		if len(s) < n {
			n = len(s)
		}
	}
	if n == 0 {
		return
	}
	if k == 0 {
		if !add {
			for _, d := range dst {
				clear(d[:n])
			}
		}
		return
	}
	dotRegion(CurrentLevel(), dst, src, coef[:m*k], n, add)
}
