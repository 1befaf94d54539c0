package gf

// Generic Go kernels: one lookup in a 256-byte row of mul8 per byte, eight
// bytes per step. They are the reference the vector kernels are tested
// against, the tail handler of the vector levels without masked stores, and
// all there is under the noasm tag.

func mulGeneric(dst, src []byte, c byte) {
	t := &mul8[c]
	dst = dst[:len(src)]
	for len(src) >= 8 {
		d, s := dst[:8:8], src[:8:8]
		d[0], d[1], d[2], d[3] = t[s[0]], t[s[1]], t[s[2]], t[s[3]]
		d[4], d[5], d[6], d[7] = t[s[4]], t[s[5]], t[s[6]], t[s[7]]
		dst, src = dst[8:], src[8:]
	}
	for x, s := range src {
		dst[x] = t[s]
	}
}

func mulAddGeneric(dst, src []byte, c byte) {
	t := &mul8[c]
	dst = dst[:len(src)]
	for len(src) >= 8 {
		d, s := dst[:8:8], src[:8:8]
		d[0] ^= t[s[0]]
		d[1] ^= t[s[1]]
		d[2] ^= t[s[2]]
		d[3] ^= t[s[3]]
		d[4] ^= t[s[4]]
		d[5] ^= t[s[5]]
		d[6] ^= t[s[6]]
		d[7] ^= t[s[7]]
		dst, src = dst[8:], src[8:]
	}
	for x, s := range src {
		dst[x] ^= t[s]
	}
}

// dotGeneric is the dot product over the bytes [off, off+n) of every buffer.
// It walks the buffers in blocks so that each destination block stays in L1
// while all sources are added to it.
func dotGeneric(dst, src [][]byte, coef []byte, off, n int, add bool) {
	const block = 2048
	k := len(src)
	for lo := off; lo < off+n; lo += block {
		hi := min(lo+block, off+n)
		for j, d := range dst {
			d = d[lo:hi]
			row := coef[j*k : j*k+k]
			i := 0
			if !add {
				mulGeneric(d, src[0][lo:hi], row[0])
				i = 1
			}
			for ; i < k; i++ {
				if row[i] != 0 {
					mulAddGeneric(d, src[i][lo:hi], row[i])
				}
			}
		}
	}
}
