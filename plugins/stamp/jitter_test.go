package stamp

import (
	"math"
	"testing"
)

// rec is a record of sequence seq whose one-way delays are fwd and bwd ns
// (the round trip is their sum).
func rec(seq uint32, fwd, bwd int64) *Record {
	const t1 = 1_700_000_000e9
	return &Record{Seq: seq, T1: t1, T2: t1 + fwd, T3: t1 + fwd, T4: t1 + fwd + bwd}
}

// IPDV is by sequence number (RFC 5481 §1.1, RFC 3393): the delay of s minus
// that of s−1, both received, whatever order they arrived in. Reordered
// packets make their pairs; a lost packet makes none.
func TestIPDVBySequence(t *testing.T) {
	// Forward delays by sequence number; 5 is lost; 2 and 3 swap, 7 comes
	// after 9.
	fwd := map[uint32]int64{0: 1000, 1: 1300, 2: 1200, 3: 1700, 4: 1600, 6: 1100, 7: 2000, 8: 1500, 9: 1400}
	arrival := []uint32{0, 1, 3, 2, 4, 6, 8, 9, 7}
	var c collectorState
	for _, s := range arrival {
		c.add(rec(s, fwd[s], 500), false)
	}
	// The pairs (s−1, s) with both received: 1, 2, 3, 4, 7, 8, 9.
	var want []int64
	for s := uint32(1); s <= 9; s++ {
		a, okA := fwd[s-1]
		b, okB := fwd[s]
		if okA && okB {
			want = append(want, b-a)
		}
	}
	j := c.jit[dirFwd].stats()
	var sum, mx int64
	for _, v := range want {
		sum += abs64(v)
		mx = max(mx, abs64(v))
	}
	if j.N != uint64(len(want)) || j.MeanAbs != sum/int64(len(want)) || j.MaxAbs != mx {
		t.Errorf("forward IPDV: n %d mean |ipdv| %d max %d; want %d pairs, mean %d, max %d", j.N, j.MeanAbs, j.MaxAbs,
			len(want), sum/int64(len(want)), mx)
	}
	// The last pair made was (7, 8), when 7 came: delay(8) − delay(7).
	if j.Last != fwd[8]-fwd[7] {
		t.Errorf("last IPDV %d, want %d", j.Last, fwd[8]-fwd[7])
	}
	// The backward delay never varied.
	if b := c.jit[dirBwd].stats(); b.N != uint64(len(want)) || b.MaxAbs != 0 {
		t.Errorf("backward IPDV %+v", b)
	}
	if r := c.jit[dirRTT].stats(); r.N != uint64(len(want)) || r.MaxAbs != mx {
		t.Errorf("round-trip IPDV %+v", r)
	}
}

// A packet that arrives more than ipdvSpan sequence numbers late makes no
// pair, and does not disturb the pairs of the packets it would overwrite.
func TestIPDVReorderedFar(t *testing.T) {
	var c collectorState
	for s := uint32(0); s < 600; s++ {
		if s == 10 {
			continue // comes last
		}
		c.add(rec(s, 1000+int64(s%2)*100, 0), false)
	}
	before := c.jit[dirFwd].stats()
	c.add(rec(10, 5000, 0), false)
	after := c.jit[dirFwd].stats()
	after.Smoothed = before.Smoothed // an arrival like any other for RFC 3550
	if before.N != 600-1-2 || after != before {
		t.Errorf("IPDV pairs %d before the late packet (want %d), %+v after", before.N, 600-3, after)
	}
	if before.MaxAbs != 100 {
		t.Errorf("max |IPDV| %d", before.MaxAbs)
	}
}

// The smoothed jitter is RFC 3550's: over consecutive arrivals, whatever
// their sequence numbers.
func TestSmoothedJitterArrivalOrder(t *testing.T) {
	var c collectorState
	// Delays alternate 1000 and 2000 ns in arrival order, while the packets
	// arrive in pairs swapped: |D| between arrivals is always 1000.
	for i := uint32(0); i < 400; i += 2 {
		c.add(rec(i+1, 1000, 0), false)
		c.add(rec(i, 2000, 0), false)
	}
	j := c.jit[dirFwd].stats()
	if math.Abs(j.Smoothed-1000) > 10 {
		t.Errorf("smoothed jitter %.1f ns, want 1000", j.Smoothed)
	}
	// By sequence number the delays are 2000, 1000, 2000, …: every IPDV is
	// ±1000 too, and every pair is made.
	if j.N != 399 || j.MeanAbs != 1000 {
		t.Errorf("IPDV: %d pairs, mean |ipdv| %d", j.N, j.MeanAbs)
	}
}
