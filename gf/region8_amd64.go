//go:build !noasm

package gf

import "golang.org/x/sys/cpu"

//go:generate sh -c "cd _gen && go run ./gf8 -out ../gf8_amd64.s -stubs ../gf8_amd64.go -pkg gf"

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

func init() {
	kern8[LevelSSSE3] = kernels8{
		mul: mulSSSE3, mulAdd: mulAddSSSE3, rest: 15,
		dot:    []dotKernel{dotSSSE3x1, dotSSSE3x2, dotSSSE3x3, dotSSSE3x4},
		dotAdd: []dotKernel{dotAddSSSE3x1, dotAddSSSE3x2, dotAddSSSE3x3, dotAddSSSE3x4},
	}
	kern8[LevelAVX2] = kernels8{
		mul: mulAVX2, mulAdd: mulAddAVX2, rest: 31,
		dot:    []dotKernel{dotAVX2x1, dotAVX2x2, dotAVX2x3},
		dotAdd: []dotKernel{dotAddAVX2x1, dotAddAVX2x2, dotAddAVX2x3},
	}
	kern8[LevelAVX512] = kernels8{
		mul: mulAVX512, mulAdd: mulAddAVX512,
		dot:    []dotKernel{dotAVX512x1, dotAVX512x2, dotAVX512x3, dotAVX512x4, dotAVX512x5, dotAVX512x6, dotAVX512x7, dotAVX512x8},
		dotAdd: []dotKernel{dotAddAVX512x1, dotAddAVX512x2, dotAddAVX512x3, dotAddAVX512x4, dotAddAVX512x5, dotAddAVX512x6, dotAddAVX512x7, dotAddAVX512x8},
	}
	kern8[LevelGFNI] = kernels8{
		mul: mulGFNI, mulAdd: mulAddGFNI, rest: 31,
		dot:    []dotKernel{dotGFNIx1, dotGFNIx2, dotGFNIx3, dotGFNIx4},
		dotAdd: []dotKernel{dotAddGFNIx1, dotAddGFNIx2, dotAddGFNIx3, dotAddGFNIx4},
	}
	kern8[LevelGFNI512] = kernels8{
		mul: mulGFNI512, mulAdd: mulAddGFNI512,
		dot:    []dotKernel{dotGFNI512x1, dotGFNI512x2, dotGFNI512x3, dotGFNI512x4, dotGFNI512x5, dotGFNI512x6, dotGFNI512x7, dotGFNI512x8},
		dotAdd: []dotKernel{dotAddGFNI512x1, dotAddGFNI512x2, dotAddGFNI512x3, dotAddGFNI512x4, dotAddGFNI512x5, dotAddGFNI512x6, dotAddGFNI512x7, dotAddGFNI512x8},
	}
}
