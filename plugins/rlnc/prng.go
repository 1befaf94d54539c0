package rlnc

import (
	"encoding/binary"
	"math/bits"
)

// prng is wyrand: one add and one 64×64→128 multiply per 8 random bytes. Each
// stage instance has its own, so lcores share nothing; coefficients need to be
// unpredictable to the network only in the statistical sense (rank), not
// cryptographically.
type prng struct{ s uint64 }

func (r *prng) next() uint64 {
	r.s += 0xa0761d6478bd642f
	hi, lo := bits.Mul64(r.s, r.s^0xe7037ed1a0b428db)
	return hi ^ lo
}

// nonZero fills dst with uniformly random non-zero bytes (zero is redrawn).
// Eight at a time while a draw has no zero byte, which is nearly always.
func (r *prng) nonZero(dst []byte) {
	i := 0
	for ; i+8 <= len(dst); i += 8 {
		v := r.next()
		for (v-0x0101010101010101)&^v&0x8080808080808080 != 0 {
			v = r.next()
		}
		binary.LittleEndian.PutUint64(dst[i:], v)
	}
	for i < len(dst) {
		v := r.next()
		for j := 0; j < 8 && i < len(dst); j++ {
			if b := byte(v); b != 0 {
				dst[i] = b
				i++
			}
			v >>= 8
		}
	}
}
