package search

import (
	"context"
	"math"
	"math/rand/v2"
	"time"
)

// Noisy is a simulated device whose loss is random, reproducibly: it
// delivers up to Capacity packets per second (Curve, when set, gives the
// share lost at each load instead) and stalls, as a housekeeping interrupt
// would, StallRate times a second on average (a Poisson process), losing
// what arrives during each Stall. A 10 ms stall 0.1 times a second loses
// 0.1 % on average, but 1 % of a 1 s trial with a stall in it. The same Seed
// gives the same trials.
//
// Loss, when set, loses each delivered packet on its own with that
// probability (binomial loss, as a lossy link or a DUT with random drops
// does): 0.1 % on average, but a short trial of a few hundred packets loses
// 0.5 % now and then.
type Noisy struct {
	Capacity  float64
	Curve     func(rate float64) float64
	StallRate float64
	Stall     time.Duration
	Loss      float64
	Seed      uint64
	rng       *rand.Rand
}

// Measure offers rate for d.
func (s *Noisy) Measure(_ context.Context, rate float64, d time.Duration) (Trial, error) {
	if s.rng == nil {
		s.rng = rand.New(rand.NewPCG(s.Seed, 0x6d6c72))
	}
	sec := d.Seconds()
	sent := math.Round(rate * sec)
	got := sent
	if s.Curve != nil {
		got = math.Round(sent * (1 - s.Curve(rate)))
	} else {
		got = min(got, math.Floor(s.Capacity*sec))
	}
	// Stalls: Poisson arrivals by exponential gaps within the trial.
	stalled := 0.0
	for at := s.rng.ExpFloat64() / s.StallRate; s.StallRate > 0 && at < sec; at += s.rng.ExpFloat64() / s.StallRate {
		stalled += s.Stall.Seconds()
	}
	got -= math.Round(min(stalled/sec, 1) * got)
	if s.Loss > 0 {
		got -= s.binomial(got, s.Loss)
	}
	return Trial{Rate: rate, Duration: d, Sent: uint64(sent), Received: uint64(max(got, 0))}, nil
}

// binomial draws the packets of n lost with probability p each: by counting
// Poisson arrivals while n·p is small (where the tail matters), else from
// the normal approximation.
func (s *Noisy) binomial(n, p float64) float64 {
	mean := n * p
	if mean < 30 {
		k, t := 0.0, s.rng.ExpFloat64()
		for t < mean && k < n {
			k++
			t += s.rng.ExpFloat64()
		}
		return k
	}
	return min(n, max(0, math.Round(mean+s.rng.NormFloat64()*math.Sqrt(mean*(1-p)))))
}
