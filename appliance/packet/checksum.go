package packet

import (
	"encoding/binary"
	"math/bits"
)

// The Internet checksum (RFC 1071) is the ones'-complement of the ones'-complement
// sum of the data taken as big-endian 16-bit words. Functions here return the sum
// folded to 16 bits and not complemented, as gVisor's checksum package does, so
// sums of several pieces combine with ChecksumCombine; a header's checksum field
// holds ^sum.

// Checksum returns the ones'-complement sum of b added to initial, folded to 16
// bits and not complemented. An odd final byte is padded with a zero byte.
//
// The sum is byte-order independent (RFC 1071 §2(B)), so it adds b as native
// little-endian 64-bit words with end-around carry and swaps the result once.
func Checksum(b []byte, initial uint16) uint16 {
	s := fold64(sum64(b))
	return ChecksumCombine(bits.ReverseBytes16(s), initial)
}

// sum64 is the ones'-complement sum of b in little-endian 16-bit lanes, not
// folded: a 64-bit value whose fold is the lane sum.
func sum64(b []byte) uint64 {
	var acc, c uint64
	// The carry lives in the flags only within an iteration: the loop test
	// clobbers them, so each iteration saves it once. 64 bytes amortise that.
	for len(b) >= 64 {
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(b[0:8]), c)
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(b[8:16]), c)
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(b[16:24]), c)
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(b[24:32]), c)
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(b[32:40]), c)
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(b[40:48]), c)
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(b[48:56]), c)
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(b[56:64]), c)
		b = b[64:]
	}
	if len(b) >= 32 {
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(b[0:8]), c)
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(b[8:16]), c)
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(b[16:24]), c)
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(b[24:32]), c)
		b = b[32:]
	}
	for len(b) >= 8 {
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(b), c)
		b = b[8:]
	}
	if len(b) >= 4 {
		acc, c = bits.Add64(acc, uint64(binary.LittleEndian.Uint32(b)), c)
		b = b[4:]
	}
	if len(b) >= 2 {
		acc, c = bits.Add64(acc, uint64(binary.LittleEndian.Uint16(b)), c)
		b = b[2:]
	}
	if len(b) == 1 {
		// Big-endian padding puts the odd byte high; in a little-endian lane
		// that is the low byte.
		acc, c = bits.Add64(acc, uint64(b[0]), c)
	}
	// End-around carry: acc+c cannot carry again, since a carry out of the
	// last add leaves acc ≤ 2^64-2.
	acc, c = bits.Add64(acc, 0, c)
	return acc + c
}

// fold64 folds a 64-bit ones'-complement sum to 16 bits.
func fold64(s uint64) uint16 {
	s = (s >> 32) + (s & 0xffffffff) // ≤ 33 bits
	s = (s >> 16) + (s & 0xffff)     // ≤ 18 bits
	s = (s >> 16) + (s & 0xffff)     // ≤ 17 bits
	s = (s >> 16) + (s & 0xffff)
	return uint16(s)
}

// ChecksumCombine adds two ones'-complement sums.
func ChecksumCombine(a, b uint16) uint16 {
	s := uint32(a) + uint32(b)
	return uint16(s + s>>16)
}

// PseudoHeaderChecksum is the sum of the pseudo-header that UDP, TCP and ICMPv6
// checksums cover: source and destination address (4 bytes each for IPv4,
// RFC 768; 16 for IPv6, RFC 8200 §8.1), the upper-layer length and the protocol.
func PseudoHeaderChecksum(protocol uint8, src, dst []byte, length uint32) uint16 {
	x := uint32(bits.ReverseBytes16(fold64(sum64(src)))) + uint32(bits.ReverseBytes16(fold64(sum64(dst)))) +
		length>>16 + length&0xffff + uint32(protocol)
	x = (x >> 16) + (x & 0xffff)
	return uint16(x + x>>16)
}

// ChecksumUpdate16 returns checksum field hc after a 16-bit word covered by it
// changed from old to new, by RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m').
func ChecksumUpdate16(hc, old, new uint16) uint16 {
	s := uint32(^hc) + uint32(^old) + uint32(new)
	s = (s >> 16) + (s & 0xffff)
	return ^uint16(s + s>>16)
}

// ChecksumUpdate32 is ChecksumUpdate16 for a 32-bit field at an even offset, such
// as an IPv4 address.
func ChecksumUpdate32(hc uint16, old, new uint32) uint16 {
	s := uint32(^hc) + uint32(^uint16(old>>16)) + uint32(^uint16(old)) +
		uint32(uint16(new>>16)) + uint32(uint16(new))
	s = (s >> 16) + (s & 0xffff)
	return ^uint16(s + s>>16)
}

// ChecksumUpdate returns checksum field hc after the bytes at offset off of the
// data it covers changed from old to new (RFC 1624 eqn. 3 over every word of the
// range). Only the parity of off matters: a range at an odd offset sits in the
// other byte of each 16-bit word. old and new have the same length.
func ChecksumUpdate(hc uint16, off int, old, new []byte) uint16 {
	o := fold64(sum64(old))
	n := fold64(sum64(new))
	if off&1 == 0 {
		o, n = bits.ReverseBytes16(o), bits.ReverseBytes16(n)
	}
	s := uint32(^hc) + uint32(^o) + uint32(n)
	s = (s >> 16) + (s & 0xffff)
	return ^uint16(s + s>>16)
}
