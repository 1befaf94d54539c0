//go:build noasm || !amd64

package gf

// Without assembly only LevelGeneric exists: kern8 has it already.

func detectCPU(*[numLevels]bool) {}

func initArch8() {}
