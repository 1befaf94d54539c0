//go:build !noasm

package gf

import "golang.org/x/sys/cpu"

//go:generate sh -c "cd _gen && go run ./gf8 -out ../gf8_amd64.s -stubs ../gf8_amd64.go -dispatch ../gf8_dispatch_amd64.go -pkg gf"

// Per-coefficient tables, built once for all 256 coefficients (as ISA-L's
// ec_init_tables output is, before any encoding). The assembly reads them by
// name, indexed by the coefficient byte.
var (
	// gfniMat8[c] is multiplication by c as the 8×8 bit matrix that
	// VGF2P8AFFINEQB takes: byte 7-i of the qword is row i, whose bit j is
	// bit i of c·2^j. (VGF2P8MULB cannot be used: it reduces by 0x11B.)
	gfniMat8 [256]uint64
	// nibble8[c] holds c·x for x = 0…15 and then c·(x<<4): the two PSHUFB
	// tables, low nibble then high nibble.
	nibble8 [256][32]byte
)

func initArch8() {
	for c := 0; c < 256; c++ {
		for x := 0; x < 16; x++ {
			nibble8[c][x] = Mul8(byte(c), byte(x))
			nibble8[c][16+x] = Mul8(byte(c), byte(x<<4))
		}
		var m uint64
		for i := 0; i < 8; i++ {
			var row uint64
			for j := 0; j < 8; j++ {
				row |= uint64(Mul8(byte(c), 1<<j)>>i&1) << j
			}
			m |= row << (8 * (7 - i))
		}
		gfniMat8[c] = m
	}
}

func detectCPU(s *[numLevels]bool) {
	x := &cpu.X86
	// x/sys/cpu reports GFNI only together with AVX-512; read the bit
	// (CPUID.7.0:ECX[8]) directly for the AVX2 form.
	_, _, ecx7, _ := cpuid(7, 0)
	gfni := ecx7&(1<<8) != 0
	avx512 := x.HasAVX512F && x.HasAVX512BW && x.HasBMI2
	s[LevelSSSE3] = x.HasSSSE3
	s[LevelAVX2] = x.HasAVX2
	s[LevelAVX512] = avx512
	s[LevelGFNI] = gfni && x.HasAVX2
	s[LevelGFNI512] = gfni && avx512
}

// The kernels of a level are called directly from a switch: unlike calls
// through func values this keeps the buffers from escaping (the assembly is
// noescape) and costs less.

func mulRegion(l Level, dst, src []byte, c byte) {
	n := len(src)
	switch l {
	case LevelGFNI512:
		mulGFNI512(dst, src, c)
		return
	case LevelAVX512:
		mulAVX512(dst, src, c)
		return
	case LevelGFNI:
		mulGFNI(dst, src, c)
	case LevelAVX2:
		mulAVX2(dst, src, c)
	case LevelSSSE3:
		mulSSSE3(dst, src, c)
	default:
		mulGeneric(dst, src, c)
		return
	}
	if r := n & rest8[l]; r != 0 {
		mulGeneric(dst[n-r:n], src[n-r:n], c)
	}
}

func mulAddRegion(l Level, dst, src []byte, c byte) {
	n := len(src)
	switch l {
	case LevelGFNI512:
		mulAddGFNI512(dst, src, c)
		return
	case LevelAVX512:
		mulAddAVX512(dst, src, c)
		return
	case LevelGFNI:
		mulAddGFNI(dst, src, c)
	case LevelAVX2:
		mulAddAVX2(dst, src, c)
	case LevelSSSE3:
		mulAddSSSE3(dst, src, c)
	default:
		mulAddGeneric(dst, src, c)
		return
	}
	if r := n & rest8[l]; r != 0 {
		mulAddGeneric(dst[n-r:n], src[n-r:n], c)
	}
}

func dotRegion(l Level, dst, src [][]byte, coef []byte, n int, add bool) {
	done := 0
	if g := dotGroup8[l]; g > 0 {
		done = n &^ rest8[l]
		// Destinations in groups of as many as one kernel holds; each
		// group is one pass over the sources.
		k := len(src)
		for j := 0; done > 0 && j < len(dst); j += g {
			h := min(g, len(dst)-j)
			dot8Kernel(l, add, &coef[j*k], k, src, dst[j:j+h], done)
		}
	}
	if done < n {
		dotGeneric(dst, src, coef, done, n-done, add)
	}
}
