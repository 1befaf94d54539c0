package rlnc

// Generation IDs are 16-bit serial numbers (RFC 1982): an open-ended session
// wraps around 65535 → 0 for ever, and "newer" is decided by the signed
// distance. A receiver accepts generations up to Window behind the newest it
// has seen and any ahead of it; older ones are stale.

// MaxWindow bounds the generation window: the done-bitmap of a session has a
// bit per generation in it.
const MaxWindow = 1024

// serialDiff is the RFC 1982 distance from a to b: positive when b is newer.
// It is undefined (here: negative) for a distance of exactly 2^15.
func serialDiff(a, b uint16) int { return int(int16(b - a)) }

// doneBits records which generations of a session's window are finished (the
// decoder decoded them, the recoder filled and spent them), so that late
// packets are recognised after their state is gone.
type doneBits [MaxWindow / 64]uint64

func (d *doneBits) set(g uint16)      { d[g/64%uint16(len(d))] |= 1 << (g % 64) }
func (d *doneBits) clear(g uint16)    { d[g/64%uint16(len(d))] &^= 1 << (g % 64) }
func (d *doneBits) has(g uint16) bool { return d[g/64%uint16(len(d))]&(1<<(g%64)) != 0 }

// advance clears the bits of generations (from, to], which now stand for new
// generations, as the newest moves from `from` to `to`.
func (d *doneBits) advance(from, to uint16) {
	n := serialDiff(from, to)
	if n >= MaxWindow {
		*d = doneBits{}
		return
	}
	for i := 1; i <= n; i++ {
		d.clear(from + uint16(i))
	}
}
