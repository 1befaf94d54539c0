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
	k := &kern8[current.Load()]
	k.mul(dst[:n], src[:n], c)
	if r := n & k.rest; r != 0 {
		mulGeneric(dst[n-r:n], src[n-r:n], c)
	}
}

// MulAdd sets dst[x] ^= c·src[x] for x < min(len(dst), len(src)): ISA-L's
// gf_vect_mad, the step of an encoder that adds one source at a time.
func MulAdd(dst, src []byte, c byte) {
	n := min(len(dst), len(src))
	if n == 0 || c == 0 {
		return
	}
	k := &kern8[current.Load()]
	k.mulAdd(dst[:n], src[:n], c)
	if r := n & k.rest; r != 0 {
		mulAddGeneric(dst[n-r:n], src[n-r:n], c)
	}
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
	dotRegion(&kern8[current.Load()], dst, src, coef[:m*k], n, add)
}

// kernels8 is one level's set of GF(2^8) region kernels.
type kernels8 struct {
	// mul and mulAdd work on len(src) &^ rest bytes.
	mul, mulAdd func(dst, src []byte, c byte)
	// dot[m-1] and dotAdd[m-1] take m destinations in one pass over the
	// sources and work on n &^ rest bytes. Empty for the generic level.
	dot, dotAdd []dotKernel
	// rest is 0 when the kernels finish every byte, else the vector width
	// minus one: the last n & rest bytes are left to the generic code.
	rest int
}

// dotKernel sets (or adds to) dst[j][x] the sum of coef[j*k+i]·src[i][x]
// for j < len(dst), i < k, x < n; k ≥ 1.
type dotKernel func(coef *byte, k int, src, dst [][]byte, n int)

// kern8 holds the kernels of every level; the architecture's init fills the
// levels it has.
var kern8 = [numLevels]kernels8{
	LevelGeneric: {mul: mulGeneric, mulAdd: mulAddGeneric},
}

func dotRegion(kn *kernels8, dst, src [][]byte, coef []byte, n int, add bool) {
	fns := kn.dot
	if add {
		fns = kn.dotAdd
	}
	done := 0
	if len(fns) > 0 {
		done = n &^ kn.rest
	}
	if done > 0 {
		// Destinations in groups of as many as one kernel holds; each group
		// is one pass over the sources.
		k := len(src)
		for j := 0; j < len(dst); {
			g := min(len(fns), len(dst)-j)
			fns[g-1](&coef[j*k], k, src, dst[j:j+g], done)
			j += g
		}
	}
	if done < n {
		dotGeneric(dst, src, coef, done, n-done, add)
	}
}
