// Package plotcolor gives the plots of linerate (the tester's, make bench's)
// one palette, so that n curves always get n colours told apart.
package plotcolor

import (
	"image/color"
	"math"

	"gonum.org/v1/plot/plotutil"
)

// Palette is n distinct colours: plotutil's first five for up to five
// curves (its sixth, a brick red, is hard to tell from its first, and its
// colours repeat after seven), else n hues evenly around the colour wheel,
// alternately lighter and darker so that neighbouring hues stand apart.
func Palette(n int) []color.Color {
	if n <= 5 {
		return plotutil.DefaultColors[:n:n]
	}
	out := make([]color.Color, n)
	for i := range out {
		v := 0.85
		if i%2 == 1 {
			v = 0.6
		}
		out[i] = hsv(float64(i)/float64(n), 0.9, v)
	}
	return out
}

// hsv is the colour of hue h (0..1), saturation s and value v.
func hsv(h, s, v float64) color.Color {
	i := math.Floor(h * 6)
	f := h*6 - i
	p, q, t := v*(1-s), v*(1-f*s), v*(1-(1-f)*s)
	var r, g, b float64
	switch int(i) % 6 {
	case 0:
		r, g, b = v, t, p
	case 1:
		r, g, b = q, v, p
	case 2:
		r, g, b = p, v, t
	case 3:
		r, g, b = p, q, v
	case 4:
		r, g, b = t, p, v
	default:
		r, g, b = v, p, q
	}
	return color.RGBA{uint8(255 * r), uint8(255 * g), uint8(255 * b), 255}
}
