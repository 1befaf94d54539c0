package stamp

import "testing"

// since is the histogram of what was recorded between two states: its
// counts, sum and quantiles are those of the later values alone.
func TestHistSince(t *testing.T) {
	var h, prev, d hist
	for v := int64(1000); v < 2000; v++ {
		h.record(v)
	}
	prev = h
	for v := int64(5_000_000); v < 5_001_000; v++ {
		h.record(v)
	}
	h.since(&prev, &d)
	if d.n != 1000 || d.sum/int64(d.n) != 5_000_499 {
		t.Errorf("n %d mean %d", d.n, d.sum/int64(d.n))
	}
	for _, q := range []float64{0.5, 0.9, 0.99} {
		if v := d.quantile(q); v < 4_960_000 || v > 5_040_000 {
			t.Errorf("p%v = %d, not within 0.8%% of the later values", q*100, v)
		}
	}
	if d.min < 4_960_000 || d.max > 5_001_000 || d.min > d.max {
		t.Errorf("min %d max %d", d.min, d.max)
	}
	var empty hist
	h.since(&h, &empty)
	if empty.n != 0 {
		t.Errorf("nothing since itself: n %d", empty.n)
	}
}
