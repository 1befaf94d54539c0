// Package cputime reads how much CPU the calling thread has had, for
// benchmarks on shared machines: time a thread spent preempted is not the
// code's. Callers lock their goroutine to its thread.
package cputime

import (
	"time"

	"golang.org/x/sys/unix"
)

// Thread is the calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID). The
// vDSO does not serve this clock: each read is a system call, over a
// microsecond in some virtual machines, so read it around loops, not in them.
func Thread() time.Duration {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return time.Duration(ts.Nano())
}

// Share turns wall times measured inside a loop into CPU times: it scales
// them by the share of wall time the thread had a CPU over the last stretch
// of 1024 calls, which costs one pair of Thread reads per stretch instead of
// one per loop.
type Share struct {
	share float64
	n     int
	cpu0  time.Duration
	wall0 time.Time
}

// NewShare starts the first stretch; until it ends the share is 1.
func NewShare() *Share { return &Share{share: 1, cpu0: Thread(), wall0: time.Now()} }

// Scale returns the CPU time of wall time d, measured on the monotonic
// clock. Call it once per loop.
func (s *Share) Scale(d time.Duration) time.Duration {
	if s.n++; s.n%1024 == 0 {
		cpu, wall := Thread(), time.Now()
		if w := wall.Sub(s.wall0); w > 0 {
			s.share = min(1, max(0.05, float64(cpu-s.cpu0)/float64(w)))
		}
		s.cpu0, s.wall0 = cpu, wall
	}
	return time.Duration(float64(d) * s.share)
}
