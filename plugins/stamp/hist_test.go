package stamp

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// The session histograms' p50/p90/p99 are within 1% of the exact quantiles
// (the bucket layout bounds the error by 2^-7), for delay-like distributions
// from microseconds to seconds.
func TestHistQuantiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	dists := map[string]func() int64{
		"uniform 2ms±200µs": func() int64 { return 1_800_000 + rng.Int64N(400_001) },
		"normal 5ms σ500µs": func() int64 { return int64(5e6 + 5e5*rng.NormFloat64()) },
		"exponential 80µs":  func() int64 { return 1000 + int64(rng.ExpFloat64()*80_000) },
		"lognormal ~1s":     func() int64 { return int64(math.Exp(20.7 + 0.8*rng.NormFloat64())) },
		"bimodal":           func() int64 { return []int64{300_000, 40_000_000}[rng.IntN(2)] + rng.Int64N(10_000) },
		"small":             func() int64 { return rng.Int64N(500) },
	}
	worst := 0.0
	for name, draw := range dists {
		for _, n := range []int{1, 7, 100, 100_000} {
			var h hist
			vals := make([]int64, n)
			for i := range vals {
				vals[i] = max(draw(), 0)
				h.record(vals[i])
			}
			slices.Sort(vals)
			for _, q := range []float64{0.5, 0.9, 0.99, 1} {
				rank := int(math.Ceil(q * float64(n)))
				exact := vals[max(rank, 1)-1]
				got := h.quantile(q)
				d := math.Abs(float64(got - exact))
				if exact > 0 {
					worst = max(worst, d/float64(exact))
				}
				if d > 0.01*float64(exact) && d > 1 {
					t.Errorf("%s, n=%d: q%.2f = %d, exact %d (%.2f%%)", name, n, q, got, exact, 100*d/float64(exact))
				}
			}
			st := h.stats()
			if st.Min != vals[0] || st.Max != vals[n-1] || st.N != uint64(n) {
				t.Errorf("%s, n=%d: stats %+v", name, n, st)
			}
		}
	}
	t.Logf("worst relative error %.3f%%", 100*worst)
}
