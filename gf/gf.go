// Package gf is arithmetic over the binary fields GF(2), GF(2^4), GF(2^8) and
// GF(2^16): scalar operations, region kernels that apply them to whole
// buffers, and matrices. It is a pure library; random linear network coding
// (plugins/rlnc) is built on it.
//
// # Fields
//
//   - GF(2^8), the workhorse, is built on x^8+x^4+x^3+x^2+1 (Poly8 = 0x11D)
//     with generator α = 2. It is the field of Intel ISA-L,
//     klauspost/reedsolomon and Jerasure, so products match theirs byte for
//     byte (2·0x80 = 0x1D). Scalar: Mul8, Div8, Inv8, Exp8, Log8, Pow8.
//     Regions: Mul, MulAdd (dst ^= c·src) and the fused dot products
//     MulMulti and MulAddMulti (many sources into many destinations in one
//     pass, like ISA-L's ec_encode_data).
//   - GF(2) is XOR (XorRegion).
//   - GF(2^4) uses x^4+x+1 (Poly4 = 0x13), two elements packed per byte.
//   - GF(2^16) uses x^16+x^12+x^3+x+1 (Poly16 = 0x1100B), as Jerasure and
//     GF-Complete do, elements big-endian in the buffers.
//
// Matrix and Echelon are matrices over GF(2^8): Gauss–Jordan elimination,
// inversion, rank, and incremental row-echelon insertion for progressive
// decoding.
//
// # Levels
//
// Each region kernel exists at several instruction-set levels. The best level
// the CPU supports is chosen once at init; SetLevel forces another, so tests
// compare every kernel with the generic one on the same inputs and benchmarks
// measure each level side by side. Levels are ordered: every level from
// LevelAVX2 up implies AVX2, LevelAVX512 and LevelGFNI512 imply AVX-512 F and
// BW, and LevelGFNI and LevelGFNI512 imply GFNI. Builds with the noasm tag, or
// for other architectures, have LevelGeneric only.
package gf

import (
	"fmt"
	"sync/atomic"
)

// Level is an instruction-set level for the region kernels.
type Level int

// The levels, from slowest to fastest on CPUs that have them all.
const (
	LevelGeneric Level = iota // Go with lookup tables; every CPU
	LevelSSSE3                // PSHUFB on 16 bytes, split low/high nibble tables
	LevelAVX2                 // VPSHUFB on 32 bytes
	LevelAVX512               // VPSHUFB on 64 bytes (AVX-512 F+BW), masked tails
	LevelGFNI                 // VGF2P8AFFINEQB on 32 bytes (GFNI with AVX2)
	LevelGFNI512              // VGF2P8AFFINEQB on 64 bytes (GFNI with AVX-512 F+BW)
	numLevels
)

var levelNames = [numLevels]string{"generic", "ssse3", "avx2", "avx512", "gfni", "gfni512"}

// String returns the level's name as used in benchmark names: "generic",
// "ssse3", "avx2", "avx512", "gfni", "gfni512".
func (l Level) String() string {
	if l < 0 || l >= numLevels {
		return fmt.Sprintf("Level(%d)", int(l))
	}
	return levelNames[l]
}

// Supported reports whether this CPU and build can run kernels of level l.
func (l Level) Supported() bool {
	return l >= 0 && l < numLevels && supported[l]
}

// supported is filled once by detectCPU, before any kernel runs.
var supported [numLevels]bool

// best is the fastest supported level, chosen at init.
var best Level

// current is the level the region kernels dispatch on. It is atomic so that a
// test forcing a level does not race with kernels running elsewhere; the load
// is a plain MOV on amd64.
var current atomic.Int32

func init() {
	supported[LevelGeneric] = true
	detectCPU(&supported)
	for l := numLevels - 1; l >= 0; l-- {
		if supported[l] {
			best = l
			break
		}
	}
	current.Store(int32(best))
}

// Best returns the fastest level this CPU and build support.
func Best() Level { return best }

// CurrentLevel returns the level the region kernels use now.
func CurrentLevel() Level { return Level(current.Load()) }

// Levels returns every supported level, slowest first.
func Levels() []Level {
	var ls []Level
	for l := LevelGeneric; l < numLevels; l++ {
		if supported[l] {
			ls = append(ls, l)
		}
	}
	return ls
}

// SetLevel makes the region kernels use level l until restore is called.
// It is meant for tests and benchmarks: it affects every goroutine, so
// callers that force levels must not run in parallel with each other. It
// fails if the CPU or the build lacks l.
func SetLevel(l Level) (restore func(), err error) {
	if !l.Supported() {
		return func() {}, fmt.Errorf("gf: level %v not supported by this CPU or build", l)
	}
	prev := current.Swap(int32(l))
	return func() { current.Store(prev) }, nil
}
