//go:build noasm || !amd64

package gf

// Without assembly only LevelGeneric exists.

func detectCPU(*[numLevels]bool) {}

func initArch8() {}

func mulRegion(_ Level, dst, src []byte, c byte)    { mulGeneric(dst, src, c) }
func mulAddRegion(_ Level, dst, src []byte, c byte) { mulAddGeneric(dst, src, c) }

func dotRegion(_ Level, dst, src [][]byte, coef []byte, n int, add bool) {
	dotGeneric(dst, src, coef, 0, n, add)
}
