// Package stats holds the lcore-side measurement primitives: counters and
// histograms written with plain stores by their one owning lcore and published
// with atomic stores once per burst, so readers on other goroutines sum them with
// atomic loads and -race stays clean.
package stats

import "sync/atomic"

// Counter is a monotonically increasing count owned by one lcore.
type Counter struct {
	v    uint64 // owner's running value
	last uint64 // value at the last Publish
	pub  atomic.Uint64
}

// Inc adds one. Owner only.
func (c *Counter) Inc() { c.v++ }

// Add adds n. Owner only.
func (c *Counter) Add(n uint64) { c.v += n }

// Local is the owner's unpublished value. Owner only.
func (c *Counter) Local() uint64 { return c.v }

// Publish makes the owner's value visible to readers. Owner only.
func (c *Counter) Publish() {
	if c.v != c.last {
		c.last = c.v
		c.pub.Store(c.v)
	}
}

// Load is the published value. Any goroutine.
func (c *Counter) Load() uint64 { return c.pub.Load() }

// Gauge is a value owned by one lcore, published at once.
type Gauge struct{ v atomic.Int64 }

// Set publishes v. Owner only.
func (g *Gauge) Set(v int64) {
	if g.v.Load() != v {
		g.v.Store(v)
	}
}

// Load is the published value.
func (g *Gauge) Load() int64 { return g.v.Load() }

// NamedCounter is a counter with a name for export.
type NamedCounter struct {
	Name string
	Help string
	*Counter
}

// Set is a stage's or a port's group of named counters.
type Set struct {
	list []NamedCounter
}

// New adds a counter named name (lower_snake_case, Prometheus style).
func (s *Set) New(name, help string) *Counter {
	c := &Counter{}
	s.list = append(s.list, NamedCounter{Name: name, Help: help, Counter: c})
	return c
}

// Publish publishes every counter of the set. Owner only.
func (s *Set) Publish() {
	for i := range s.list {
		s.list[i].Publish()
	}
}

// Each calls f with every counter's name and published value.
func (s *Set) Each(f func(name, help string, v uint64)) {
	for _, c := range s.list {
		f(c.Name, c.Help, c.Load())
	}
}

// Len is the number of counters in the set.
func (s *Set) Len() int { return len(s.list) }
