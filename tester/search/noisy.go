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
type Noisy struct {
	Capacity  float64
	Curve     func(rate float64) float64
	StallRate float64
	Stall     time.Duration
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
	return Trial{Rate: rate, Duration: d, Sent: uint64(sent), Received: uint64(max(got, 0))}, nil
}
