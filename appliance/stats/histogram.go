package stats

import (
	"math"
	"math/bits"
	"sync/atomic"
)

// subBits gives 2^subBits linear sub-buckets per power of two: relative error of a
// bucket's midpoint is under 2^-(subBits+1) = 0.4%, inside the 1% the STAMP and
// sink percentiles promise.
const (
	subBits    = 7
	subBuckets = 1 << subBits
	maxExp     = 64 - subBits
	// NumBuckets covers every uint64.
	NumBuckets = (maxExp + 1) * subBuckets
)

// bucketOf maps v to its bucket: values below subBuckets map one to one; above, a
// bucket spans 2^(exp) values.
func bucketOf(v uint64) int {
	if v < subBuckets {
		return int(v)
	}
	exp := bits.Len64(v) - subBits // ≥ 1
	return exp*subBuckets + int(v>>uint(exp-1)&(subBuckets-1))
}

// bucketBounds is the half-open value range [lo, hi) of bucket i.
func bucketBounds(i int) (lo, hi uint64) {
	exp := i / subBuckets
	sub := uint64(i % subBuckets)
	if exp == 0 {
		return sub, sub + 1
	}
	lo = (subBuckets | sub) << uint(exp-1)
	width := uint64(1) << uint(exp-1)
	if lo > math.MaxUint64-width {
		return lo, math.MaxUint64
	}
	return lo, lo + width
}

// Histogram is a log-linear histogram owned by one lcore. Record is a plain
// increment; Publish stores only the buckets touched since the last Publish.
type Histogram struct {
	local   []uint64
	pub     []atomic.Uint64
	dirty   []uint16
	isDirty []bool
	count   uint64
	sum     uint64
	min     uint64
	max     uint64
	pubN    atomic.Uint64
	pubSum  atomic.Uint64
	pubMin  atomic.Uint64
	pubMax  atomic.Uint64
}

// NewHistogram makes an empty histogram.
func NewHistogram() *Histogram {
	return &Histogram{
		local:   make([]uint64, NumBuckets),
		pub:     make([]atomic.Uint64, NumBuckets),
		dirty:   make([]uint16, 0, 256),
		isDirty: make([]bool, NumBuckets),
	}
}

// Record counts one value. Owner only.
func (h *Histogram) Record(v uint64) {
	i := bucketOf(v)
	h.local[i]++
	if !h.isDirty[i] {
		h.isDirty[i] = true
		if len(h.dirty) < cap(h.dirty) {
			h.dirty = append(h.dirty, uint16(i))
		} else {
			h.flush()
			h.isDirty[i] = true
			h.dirty = append(h.dirty, uint16(i))
		}
	}
	if h.count == 0 || v < h.min {
		h.min = v
	}
	h.count++
	h.sum += v
	if v > h.max {
		h.max = v
	}
}

func (h *Histogram) flush() {
	for _, i := range h.dirty {
		h.pub[i].Store(h.local[i])
		h.isDirty[i] = false
	}
	h.dirty = h.dirty[:0]
}

// Publish makes recorded values visible to readers. Owner only.
func (h *Histogram) Publish() {
	if len(h.dirty) == 0 {
		return
	}
	h.flush()
	// The minimum before the count: a reader that sees a count sees a
	// minimum at least as recent (Merge loads them the other way round).
	h.pubMin.Store(h.min)
	h.pubN.Store(h.count)
	h.pubSum.Store(h.sum)
	h.pubMax.Store(h.max)
}

// Snapshot copies the published state. Any goroutine.
func (h *Histogram) Snapshot() *HistSnapshot {
	s := &HistSnapshot{Buckets: make([]uint64, NumBuckets)}
	s.Merge(h)
	return s
}

// HistSnapshot is a reader's copy of one or more merged histograms. Min and
// Max are the exact extremes of the values recorded (0 when Count is 0), not
// bucket bounds.
type HistSnapshot struct {
	Buckets []uint64
	Count   uint64
	Sum     uint64
	Min     uint64
	Max     uint64
}

// NewHistSnapshot is an empty snapshot to merge into.
func NewHistSnapshot() *HistSnapshot { return &HistSnapshot{Buckets: make([]uint64, NumBuckets)} }

// Merge adds h's published state.
func (s *HistSnapshot) Merge(h *Histogram) {
	for i := range h.pub {
		s.Buckets[i] += h.pub[i].Load()
	}
	n := h.pubN.Load()
	if n > 0 {
		s.takeMin(h.pubMin.Load())
	}
	s.Count += n
	s.Sum += h.pubSum.Load()
	if m := h.pubMax.Load(); m > s.Max {
		s.Max = m
	}
}

// takeMin lowers Min to m; call it before adding the count m came with.
func (s *HistSnapshot) takeMin(m uint64) {
	if s.Count == 0 || m < s.Min {
		s.Min = m
	}
}

// Add adds another snapshot.
func (s *HistSnapshot) Add(o *HistSnapshot) {
	for i, v := range o.Buckets {
		s.Buckets[i] += v
	}
	if o.Count > 0 {
		s.takeMin(o.Min)
	}
	s.Count += o.Count
	s.Sum += o.Sum
	if o.Max > s.Max {
		s.Max = o.Max
	}
}

// Quantile returns the value below which fraction q of the recorded values lie,
// as the midpoint of its bucket (relative error < 0.4%). Zero when empty.
func (s *HistSnapshot) Quantile(q float64) uint64 {
	var total uint64
	for _, v := range s.Buckets {
		total += v
	}
	if total == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(total)))
	if rank == 0 {
		rank = 1
	}
	var seen uint64
	for i, v := range s.Buckets {
		seen += v
		if seen >= rank {
			lo, hi := bucketBounds(i)
			mid := lo + (hi-lo-1)/2
			if mid > s.Max && s.Max >= lo {
				return s.Max
			}
			if mid < s.Min && s.Min < hi {
				return s.Min // never below the minimum printed beside it
			}
			return mid
		}
	}
	return s.Max
}

// Mean is the average recorded value.
func (s *HistSnapshot) Mean() float64 {
	if s.Count == 0 {
		return 0
	}
	return float64(s.Sum) / float64(s.Count)
}

// Cumulative calls f for each upper bound in bounds with the number of values at
// or below it: the shape of a Prometheus histogram.
func (s *HistSnapshot) Cumulative(bounds []float64, f func(le float64, n uint64)) {
	j := 0
	var acc uint64
	for _, le := range bounds {
		for j < len(s.Buckets) {
			_, hi := bucketBounds(j)
			if float64(hi-1) > le {
				break
			}
			acc += s.Buckets[j]
			j++
		}
		f(le, acc)
	}
}

// EachBucket calls f for every non-empty bucket, in increasing order, with the
// inclusive range [lo, hi] of values it holds and their count.
func (s *HistSnapshot) EachBucket(f func(lo, hi, n uint64)) {
	for i, n := range s.Buckets {
		if n != 0 {
			lo, hi := bucketBounds(i)
			f(lo, hi-1, n)
		}
	}
}
