package route

import "sync/atomic"

// Limiter is a token bucket that any goroutine may draw from, in one atomic:
// the generic cell rate algorithm (ITU-T I.371) keeps the theoretical arrival
// time of the next packet, and a packet conforms when that time is at most
// Burst intervals ahead of now.
type Limiter struct {
	interval atomic.Int64 // ns per token; 0 means no limit
	burst    atomic.Int64 // tolerance: (burst-1) intervals
	tat      atomic.Int64
}

// NewLimiter allows rate tokens per second with bursts of burst; rate 0 means
// no limit.
func NewLimiter(rate uint64, burst int) *Limiter {
	l := &Limiter{}
	l.Set(rate, burst)
	return l
}

// Set changes the rate and burst.
func (l *Limiter) Set(rate uint64, burst int) {
	var iv int64
	if rate > 0 {
		iv = max(int64(1e9/rate), 1)
	}
	l.interval.Store(iv)
	l.burst.Store(int64(max(burst, 1)))
}

// Allow takes a token at time now (monotonic ns), reporting false when the
// bucket is empty.
func (l *Limiter) Allow(now int64) bool {
	iv := l.interval.Load()
	if iv == 0 {
		return true
	}
	tol := (l.burst.Load() - 1) * iv
	for {
		tat := l.tat.Load()
		t := max(tat, now)
		if t-now > tol {
			return false
		}
		if l.tat.CompareAndSwap(tat, t+iv) {
			return true
		}
	}
}
