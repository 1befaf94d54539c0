package search

import (
	"context"
	"math"
	"time"
)

// Sim is a simulated device under test: it delivers up to Capacity packets
// per second and loses a share Loss of what it delivers, exactly, trial after
// trial. It is the measurer the search is tested against, and a way to try a
// profile's search parameters without a device.
type Sim struct {
	Capacity float64 // packets per second
	Loss     float64 // share lost at any load, e.g. 0.001
	// Overhead is added to each trial's cost (Elapsed): setting up a trial
	// and draining it.
	Overhead time.Duration
	// Elapsed is the time the trials would have taken: their durations plus
	// Overhead each.
	Elapsed time.Duration
}

// Measure offers rate for d and returns what the device delivers.
func (s *Sim) Measure(_ context.Context, rate float64, d time.Duration) (Trial, error) {
	sec := d.Seconds()
	sent := uint64(math.Round(rate * sec))
	got := min(float64(sent), math.Floor(s.Capacity*sec))
	got -= math.Ceil(got * s.Loss)
	s.Elapsed += d + s.Overhead
	return Trial{Rate: rate, Duration: d, Sent: sent, Received: uint64(max(got, 0))}, nil
}
