//go:build noasm || !amd64

package gf

// Without assembly the GF(2), GF(2^4) and GF(2^16) regions run in Go.

func xorWide(dst, src []byte) int                          { return 0 }
func region4Wide(dst, src []byte, c byte, add bool) int    { return 0 }
func region16Wide(dst, src []byte, c uint16, add bool) int { return 0 }

func wideStep(Level) int { return 0 }
