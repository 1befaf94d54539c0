package tester

import "github.com/linerate/linerate/appliance/stats"

// Histogram is a latency histogram exported whole: the engine's log-linear
// (HDR-style) buckets, each [lo, hi] ns with its count, relative width under
// 0.8 %, and the percentiles reports show.
type Histogram struct {
	Count   uint64   `json:"count"`
	Min     uint64   `json:"min_ns"`
	P50     uint64   `json:"p50_ns"`
	P90     uint64   `json:"p90_ns"`
	P99     uint64   `json:"p99_ns"`
	P999    uint64   `json:"p99_9_ns"`
	Max     uint64   `json:"max_ns"`
	Mean    float64  `json:"mean_ns"`
	Buckets []Bucket `json:"buckets,omitempty"`
}

// Bucket holds Count values from Lo to Hi ns, both included.
type Bucket struct {
	Lo    uint64 `json:"lo"`
	Hi    uint64 `json:"hi"`
	Count uint64 `json:"n"`
}

func newHistogram(s *stats.HistSnapshot) *Histogram {
	if s == nil || s.Count == 0 {
		return nil
	}
	h := &Histogram{Count: s.Count, Max: s.Max, Mean: s.Mean(),
		P50: s.Quantile(0.5), P90: s.Quantile(0.9), P99: s.Quantile(0.99), P999: s.Quantile(0.999)}
	first := true
	s.EachBucket(func(lo, hi, n uint64) {
		if first {
			h.Min, first = lo, false
		}
		h.Buckets = append(h.Buckets, Bucket{Lo: lo, Hi: hi, Count: n})
	})
	return h
}

// CDF calls f for each bucket's upper bound with the share of values at or
// below it.
func (h *Histogram) CDF(f func(ns uint64, share float64)) {
	var acc uint64
	for _, b := range h.Buckets {
		acc += b.Count
		f(b.Hi, float64(acc)/float64(h.Count))
	}
}
