package stats

import "testing"

// TestHistogramMin: a snapshot's Min is the least value recorded, exactly,
// over merged histograms and added snapshots; an empty histogram does not
// pull it to zero, and no quantile is below it.
func TestHistogramMin(t *testing.T) {
	a, b, empty := NewHistogram(), NewHistogram(), NewHistogram()
	for _, v := range []uint64{1_812_345, 2_000_000, 2_199_999} {
		a.Record(v)
	}
	for _, v := range []uint64{4_512_377, 5_000_000} {
		b.Record(v)
	}
	a.Publish()
	b.Publish()
	empty.Publish()

	s := NewHistSnapshot()
	s.Merge(empty)
	s.Merge(b)
	s.Merge(a)
	s.Merge(empty)
	if s.Count != 5 || s.Min != 1_812_345 || s.Max != 5_000_000 {
		t.Errorf("merged: count %d min %d max %d", s.Count, s.Min, s.Max)
	}
	if q := s.Quantile(0); q < s.Min {
		t.Errorf("quantile 0 is %d, below the minimum %d", q, s.Min)
	}
	if m := s.Mean(); m != float64(1_812_345+2_000_000+2_199_999+4_512_377+5_000_000)/5 {
		t.Errorf("mean %f", m)
	}

	sb := b.Snapshot()
	if sb.Min != 4_512_377 {
		t.Errorf("b alone: min %d", sb.Min)
	}
	sum := NewHistSnapshot()
	sum.Add(NewHistSnapshot())
	sum.Add(sb)
	sum.Add(a.Snapshot())
	if sum.Min != 1_812_345 || sum.Count != 5 {
		t.Errorf("added: count %d min %d", sum.Count, sum.Min)
	}
	if e := empty.Snapshot(); e.Min != 0 || e.Count != 0 {
		t.Errorf("empty: %+v", e)
	}
	// A value recorded but not yet published is not seen.
	a.Record(7)
	if m := a.Snapshot().Min; m != 1_812_345 {
		t.Errorf("unpublished 7 seen: min %d", m)
	}
	a.Publish()
	if m := a.Snapshot().Min; m != 7 {
		t.Errorf("published 7: min %d", m)
	}
}
