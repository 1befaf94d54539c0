package plotcolor

import (
	"image/color"
	"testing"
)

// TestPaletteDistinct: n curves get n distinct colours (plotutil's seven
// repeat after seven: 9 latency curves once had 2 pairs).
func TestPaletteDistinct(t *testing.T) {
	for _, n := range []int{0, 1, 5, 6, 7, 8, 9, 12, 30} {
		p := Palette(n)
		if len(p) != n {
			t.Errorf("Palette(%d) has %d colours", n, len(p))
		}
		seen := map[color.RGBA]int{}
		for i, c := range p {
			r, g, b, a := c.RGBA()
			k := color.RGBA{uint8(r >> 8), uint8(g >> 8), uint8(b >> 8), uint8(a >> 8)}
			if j, ok := seen[k]; ok {
				t.Errorf("Palette(%d): curves %d and %d share colour %v", n, j, i, k)
			}
			seen[k] = i
		}
	}
}
