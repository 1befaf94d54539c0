//go:build !noasm

package gf

import "golang.org/x/sys/cpu"

//go:generate sh -c "cd _gen && go run ./gf8 -out ../gf8_amd64.s -stubs ../gf8_amd64.go -pkg gf"

// Per-coefficient tables, built once for all 256 coefficients (as ISA-L's
// ec_init_tables output is, before any encoding):
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

func mulRegion(l Level, dst, src []byte, c byte) {
	done := len(src)
	switch l {
	case LevelGFNI512:
		mulGFNI512(&gfniMat8[c], dst, src)
	case LevelAVX512:
		mulAVX512(&nibble8[c], dst, src)
	case LevelGFNI:
		mulGFNI(&gfniMat8[c], dst, src)
		done &^= 31
	case LevelAVX2:
		mulAVX2(&nibble8[c], dst, src)
		done &^= 31
	case LevelSSSE3:
		mulSSSE3(&nibble8[c], dst, src)
		done &^= 15
	default:
		done = 0
	}
	if done < len(src) {
		mulGeneric(dst[done:], src[done:], c)
	}
}

func mulAddRegion(l Level, dst, src []byte, c byte) {
	done := len(src)
	switch l {
	case LevelGFNI512:
		mulAddGFNI512(&gfniMat8[c], dst, src)
	case LevelAVX512:
		mulAddAVX512(&nibble8[c], dst, src)
	case LevelGFNI:
		mulAddGFNI(&gfniMat8[c], dst, src)
		done &^= 31
	case LevelAVX2:
		mulAddAVX2(&nibble8[c], dst, src)
		done &^= 31
	case LevelSSSE3:
		mulAddSSSE3(&nibble8[c], dst, src)
		done &^= 15
	default:
		done = 0
	}
	if done < len(src) {
		mulAddGeneric(dst[done:], src[done:], c)
	}
}

type (
	dotGFNIFn   func(tab *[256]uint64, coef *byte, k int, src, dst [][]byte, n int)
	dotPSHUFBFn func(tab *[256][32]byte, coef *byte, k int, src, dst [][]byte, n int)
)

// Dot-product kernels by level, [add][m-1]; each handles up to 8 (AVX-512)
// or 4 destinations in one pass over the sources.
var (
	dotGFNI512Fns = [2][]dotGFNIFn{
		{dotGFNI512x1, dotGFNI512x2, dotGFNI512x3, dotGFNI512x4, dotGFNI512x5, dotGFNI512x6, dotGFNI512x7, dotGFNI512x8},
		{dotAddGFNI512x1, dotAddGFNI512x2, dotAddGFNI512x3, dotAddGFNI512x4, dotAddGFNI512x5, dotAddGFNI512x6, dotAddGFNI512x7, dotAddGFNI512x8},
	}
	dotGFNIFns = [2][]dotGFNIFn{
		{dotGFNIx1, dotGFNIx2, dotGFNIx3, dotGFNIx4},
		{dotAddGFNIx1, dotAddGFNIx2, dotAddGFNIx3, dotAddGFNIx4},
	}
	dotAVX512Fns = [2][]dotPSHUFBFn{
		{dotAVX512x1, dotAVX512x2, dotAVX512x3, dotAVX512x4, dotAVX512x5, dotAVX512x6, dotAVX512x7, dotAVX512x8},
		{dotAddAVX512x1, dotAddAVX512x2, dotAddAVX512x3, dotAddAVX512x4, dotAddAVX512x5, dotAddAVX512x6, dotAddAVX512x7, dotAddAVX512x8},
	}
	dotAVX2Fns = [2][]dotPSHUFBFn{
		{dotAVX2x1, dotAVX2x2, dotAVX2x3, dotAVX2x4},
		{dotAddAVX2x1, dotAddAVX2x2, dotAddAVX2x3, dotAddAVX2x4},
	}
	dotSSSE3Fns = [2][]dotPSHUFBFn{
		{dotSSSE3x1, dotSSSE3x2, dotSSSE3x3, dotSSSE3x4},
		{dotAddSSSE3x1, dotAddSSSE3x2, dotAddSSSE3x3, dotAddSSSE3x4},
	}
)

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func dotRegion(l Level, dst, src [][]byte, coef []byte, n int, add bool) {
	k := len(src)
	var gfniFns []dotGFNIFn
	var shufFns []dotPSHUFBFn
	done := n
	switch l {
	case LevelGFNI512:
		gfniFns = dotGFNI512Fns[b2i(add)]
	case LevelAVX512:
		shufFns = dotAVX512Fns[b2i(add)]
	case LevelGFNI:
		gfniFns = dotGFNIFns[b2i(add)]
		done &^= 31
	case LevelAVX2:
		shufFns = dotAVX2Fns[b2i(add)]
		done &^= 31
	case LevelSSSE3:
		shufFns = dotSSSE3Fns[b2i(add)]
		done &^= 15
	default:
		done = 0
	}
	if done > 0 {
		// Destinations in groups of as many as one kernel holds; each group
		// is one pass over the sources.
		for j := 0; j < len(dst); {
			if gfniFns != nil {
				g := min(len(gfniFns), len(dst)-j)
				gfniFns[g-1](&gfniMat8, &coef[j*k], k, src, dst[j:j+g], done)
				j += g
			} else {
				g := min(len(shufFns), len(dst)-j)
				shufFns[g-1](&nibble8, &coef[j*k], k, src, dst[j:j+g], done)
				j += g
			}
		}
	}
	if done < n {
		dotGeneric(dst, src, coef, done, n-done, add)
	}
}
