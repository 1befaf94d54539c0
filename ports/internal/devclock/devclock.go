// Package devclock maps a device's clock (a NIC's PTP hardware clock, a
// PMD's timestamp counter) onto the engine's monotonic nanoseconds, for the
// ports whose hardware stamps received frames.
//
// A Map is made from readings taken a while apart: each pairs a read of the
// device clock with the midpoint of the two engine clock reads around it,
// the narrowest of a few tries. The rate is measured over up to Baseline of
// readings, so that a read's jitter weighs less the longer the device has
// been followed; the offset comes from the newest reading.
package devclock

import "time"

// Baseline is how far back the rate is measured from, at most.
const Baseline = 10 * time.Second

// tries is how many bracketed reads make a reading.
const tries = 5

// Point is one reading: the device clock and the engine clock at the same
// moment.
type Point struct{ Dev, Mono int64 }

// Read takes a reading: the device read whose bracket of engine reads is
// the narrowest of a few.
func Read(dev func() (int64, error), mono func() int64) (Point, error) {
	best, width := Point{}, int64(-1)
	for i := 0; i < tries; i++ {
		m0 := mono()
		d, err := dev()
		m1 := mono()
		if err != nil {
			return Point{}, err
		}
		if w := m1 - m0; width < 0 || w < width {
			best, width = Point{Dev: d, Mono: m0 + w/2}, w
		}
	}
	return best, nil
}

// Map maps device time onto engine time: Mono0 + (t − Dev0) × Rate, where
// Rate is engine nanoseconds per device tick.
type Map struct {
	Dev0, Mono0 int64
	Rate        float64
	hist        []Point
}

// Mono maps a device time t.
func (m *Map) Mono(t int64) int64 { return m.Mono0 + int64(float64(t-m.Dev0)*m.Rate) }

// Next is the map with the reading p added, the readings older than
// Baseline (on the engine clock) dropped. prev is nil for the first. A map
// of one reading has the rate guess, 1 for a clock that counts nanoseconds.
func Next(prev *Map, p Point, guess float64) *Map {
	m := &Map{Dev0: p.Dev, Mono0: p.Mono, Rate: guess}
	if prev != nil {
		for _, q := range prev.hist {
			if p.Mono-q.Mono <= int64(Baseline) {
				m.hist = append(m.hist, q)
			}
		}
	}
	m.hist = append(m.hist, p)
	if first := m.hist[0]; p.Dev > first.Dev && p.Mono > first.Mono {
		m.Rate = float64(p.Mono-first.Mono) / float64(p.Dev-first.Dev)
	} else if prev != nil {
		m.Rate = prev.Rate
	}
	return m
}

// Readings is how many readings the map keeps.
func (m *Map) Readings() int { return len(m.hist) }
