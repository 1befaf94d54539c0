package stamp

import "encoding/binary"

// srcLimiter is a reflector lcore's per-source token buckets, in a fixed
// open-addressed table: a flood of sources evicts old entries but never grows
// memory. A source met for the first time starts with a full bucket.
type srcLimiter struct {
	perNs float64 // tokens per ns
	burst float64
	slots []limSlot
	mask  uint64
}

type limSlot struct {
	addr   [16]byte
	tokens float64
	last   int64
	used   bool
}

// limProbe is how many slots a lookup tries before it evicts the stalest.
const limProbe = 4

func newSrcLimiter(perSec, burst float64, size int) *srcLimiter {
	n := 1
	for n < size {
		n <<= 1
	}
	return &srcLimiter{perNs: perSec / 1e9, burst: burst, slots: make([]limSlot, n), mask: uint64(n - 1)}
}

func limHash(a [16]byte) uint64 {
	x := binary.LittleEndian.Uint64(a[:8])*0x9E3779B97F4A7C15 ^ binary.LittleEndian.Uint64(a[8:])
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	return x
}

// allow takes a token for source a at time now.
func (l *srcLimiter) allow(a [16]byte, now int64) bool {
	h := limHash(a)
	var victim *limSlot
	for i := uint64(0); i < limProbe; i++ {
		s := &l.slots[(h+i)&l.mask]
		if s.used && s.addr == a {
			if now > s.last { // arrival times from two queues may cross
				s.tokens = min(l.burst, s.tokens+float64(now-s.last)*l.perNs)
				s.last = now
			}
			if s.tokens < 1 {
				return false
			}
			s.tokens--
			return true
		}
		if !s.used {
			if victim == nil || victim.used {
				victim = s
			}
		} else if victim == nil || (victim.used && s.last < victim.last) {
			victim = s
		}
	}
	*victim = limSlot{addr: a, tokens: l.burst - 1, last: now, used: true}
	return true
}
