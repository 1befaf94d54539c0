// Package clock is linerate's time: monotonic nanoseconds for the fast path, wall
// time (UTC, TAI, NTP, PTP) as monotonic time plus an offset refreshed about ten
// times a second, and the host's clock-sync state from adjtimex.
//
// The clock is an interface so that multi-node simulations can run in virtual time
// (Sim).
package clock

import (
	"sync/atomic"
	"time"
	_ "unsafe" // for go:linkname
)

// Clock is the time source of an engine.
type Clock interface {
	// Now is monotonic nanoseconds. It is read once per rx burst and once before tx.
	Now() int64
	// UnixOffset is added to a Now reading to get Unix (UTC) nanoseconds.
	UnixOffset() int64
	// Sync is the clock-sync state that feeds STAMP's Error Estimate and IOAM.
	Sync() SyncState
}

// SyncState is what the host knows of its clock's synchronisation.
type SyncState struct {
	Synchronized bool  // STA_UNSYNC is clear
	ErrorNs      int64 // estimated error (adjtimex esterror), in ns
	MaxErrorNs   int64 // maximum error (adjtimex maxerror), in ns
	TAIOffset    int   // TAI − UTC in seconds (adjtimex tai), 37 when unknown
}

// Unix turns a monotonic reading of c into Unix nanoseconds (UTC).
func Unix(c Clock, mono int64) int64 { return mono + c.UnixOffset() }

// TAI turns a monotonic reading of c into nanoseconds since 1970 on the TAI scale.
func TAI(c Clock, mono int64) int64 {
	return mono + c.UnixOffset() + int64(c.Sync().TAIOffset)*int64(time.Second)
}

//go:linkname nanotime runtime.nanotime
func nanotime() int64

// System is the host clock. Create it with NewSystem and Close it when done.
type System struct {
	offset atomic.Int64
	sync   atomic.Pointer[SyncState]
	stop   chan struct{}
}

// RefreshInterval is how often the wall offset and the sync state are refreshed.
const RefreshInterval = 100 * time.Millisecond

// NewSystem starts a host clock with its refresh goroutine.
func NewSystem() *System {
	c := &System{stop: make(chan struct{})}
	c.refresh()
	go func() {
		t := time.NewTicker(RefreshInterval)
		defer t.Stop()
		for {
			select {
			case <-c.stop:
				return
			case <-t.C:
				c.refresh()
			}
		}
	}()
	return c
}

// Close stops the refresh goroutine.
func (c *System) Close() { close(c.stop) }

func (c *System) refresh() {
	c.offset.Store(readOffset())
	s := readSync()
	c.sync.Store(&s)
}

// WallOffset is what to add to a Mono reading for Unix nanoseconds, read now
// as a System refresh reads it.
func WallOffset() int64 { return readOffset() }

// offsetReads is how many bracketed reads readOffset takes.
const offsetReads = 4

// readOffset is the wall clock minus the monotonic one. Each read brackets
// the wall read with two monotonic reads and takes their midpoint, so its
// error is at most half the bracket. A thread preempted inside a bracket (a
// loaded machine, a signal) widens it by the whole time it was off the CPU,
// which would move every wall time by half of that until the next refresh:
// of a few reads, the narrowest is kept.
func readOffset() int64 {
	var off, best int64
	for i := 0; i < offsetReads; i++ {
		m0 := nanotime()
		w := time.Now().UnixNano()
		m1 := nanotime()
		if i == 0 || m1-m0 < best {
			off, best = w-(m0+m1)/2, m1-m0
		}
	}
	return off
}

// Now is monotonic nanoseconds.
func (c *System) Now() int64 { return nanotime() }

// UnixOffset converts Now readings to Unix nanoseconds.
func (c *System) UnixOffset() int64 { return c.offset.Load() }

// Sync is the last adjtimex reading.
func (c *System) Sync() SyncState { return *c.sync.Load() }

// Mono is the process's monotonic clock without a System: for code that only needs
// intervals.
func Mono() int64 { return nanotime() }

// Sim is a virtual clock: time moves only when the simulation advances it.
type Sim struct {
	now  atomic.Int64
	base int64
	sync SyncState
}

// NewSim starts virtual time at zero, on a wall epoch of unixBase nanoseconds,
// perfectly synchronised.
func NewSim(unixBase int64) *Sim {
	return &Sim{base: unixBase, sync: SyncState{Synchronized: true, TAIOffset: 37}}
}

func (s *Sim) Now() int64              { return s.now.Load() }
func (s *Sim) UnixOffset() int64       { return s.base }
func (s *Sim) Sync() SyncState         { return s.sync }
func (s *Sim) Advance(d time.Duration) { s.now.Add(int64(d)) }

// Set moves virtual time to t; it never goes backwards.
func (s *Sim) Set(t int64) {
	for {
		cur := s.now.Load()
		if t <= cur || s.now.CompareAndSwap(cur, t) {
			return
		}
	}
}

// Ticking is a Sim whose every Now reading first moves time on, by the next
// of its steps in turn: as on a real lcore, where work and preemption take
// time between two readings, no two readings are equal. Tests use it to
// check that what is computed from several readings (a delay from two
// timestamps) does not depend on their being read at one moment.
type Ticking struct {
	Sim
	steps []int64
	i     atomic.Uint64
}

// NewTicking is a Ticking clock at zero on a wall epoch of unixBase
// nanoseconds; each reading advances it by steps[0], steps[1], … cyclically
// (1 ns without steps).
func NewTicking(unixBase int64, steps ...time.Duration) *Ticking {
	t := &Ticking{Sim: Sim{base: unixBase, sync: SyncState{Synchronized: true, TAIOffset: 37}}}
	for _, d := range steps {
		t.steps = append(t.steps, int64(d))
	}
	if len(t.steps) == 0 {
		t.steps = []int64{1}
	}
	return t
}

// Now advances the clock by its next step and reads it.
func (t *Ticking) Now() int64 {
	i := t.i.Add(1) - 1
	return t.now.Add(t.steps[i%uint64(len(t.steps))])
}
