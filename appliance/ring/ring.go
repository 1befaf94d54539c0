// Package ring holds the lock-free single-producer/single-consumer rings that move
// packet handles between lcores, and records from lcores to control goroutines.
package ring

import (
	"fmt"
	"sync/atomic"

	"github.com/linerate/linerate/appliance/packet"
)

// pad keeps the producer's and consumer's indices on separate cache lines.
type pad [64]byte

// SPSC is a bounded single-producer/single-consumer ring of values. Enqueue and
// Dequeue move bulks with one atomic store each.
type SPSC[T any] struct {
	_    pad
	head atomic.Uint64 // next slot to read; written by the consumer
	_    pad
	tail atomic.Uint64 // next slot to write; written by the producer
	_    pad
	// cached copies of the other side's index, to avoid touching its line
	headCache uint64 // producer's view of head
	_         pad
	tailCache uint64 // consumer's view of tail
	_         pad
	mask      uint64
	slots     []T
}

// NewSPSC makes a ring of size slots, rounded up to a power of two.
func NewSPSC[T any](size int) *SPSC[T] {
	if size < 2 {
		size = 2
	}
	n := 1
	for n < size {
		n <<= 1
	}
	return &SPSC[T]{mask: uint64(n - 1), slots: make([]T, n)}
}

// Cap is the number of slots.
func (r *SPSC[T]) Cap() int { return len(r.slots) }

// Len is the number of values in the ring. Any goroutine; approximate.
func (r *SPSC[T]) Len() int { return int(r.tail.Load() - r.head.Load()) }

// Enqueue appends as many of vs as fit and returns how many. Producer only.
func (r *SPSC[T]) Enqueue(vs []T) int {
	tail := r.tail.Load()
	free := uint64(len(r.slots)) - (tail - r.headCache)
	if free < uint64(len(vs)) {
		r.headCache = r.head.Load()
		free = uint64(len(r.slots)) - (tail - r.headCache)
	}
	n := uint64(len(vs))
	if n > free {
		n = free
	}
	// Two copies at most: up to the end of the slots, then from the start.
	start := tail & r.mask
	k := copy(r.slots[start:], vs[:n])
	copy(r.slots, vs[k:n])
	r.tail.Store(tail + n)
	return int(n)
}

// Put appends one value, reporting false when full. Producer only.
func (r *SPSC[T]) Put(v T) bool {
	tail := r.tail.Load()
	if tail-r.headCache == uint64(len(r.slots)) {
		r.headCache = r.head.Load()
		if tail-r.headCache == uint64(len(r.slots)) {
			return false
		}
	}
	r.slots[tail&r.mask] = v
	r.tail.Store(tail + 1)
	return true
}

// Dequeue moves up to len(out) values into out and returns how many. Consumer only.
func (r *SPSC[T]) Dequeue(out []T) int {
	head := r.head.Load()
	avail := r.tailCache - head
	if avail < uint64(len(out)) {
		r.tailCache = r.tail.Load()
		avail = r.tailCache - head
	}
	n := uint64(len(out))
	if n > avail {
		n = avail
	}
	start := head & r.mask
	k := copy(out[:n], r.slots[start:])
	copy(out[k:n], r.slots)
	r.head.Store(head + n)
	return int(n)
}

// Get takes one value. Consumer only.
func (r *SPSC[T]) Get() (T, bool) {
	var zero T
	head := r.head.Load()
	if head == r.tailCache {
		r.tailCache = r.tail.Load()
		if head == r.tailCache {
			return zero, false
		}
	}
	v := r.slots[head&r.mask]
	r.slots[head&r.mask] = zero
	r.head.Store(head + 1)
	return v, true
}

// Handles is a ring of packet handles: the pipeline rings between lcores and the
// session handoff rings.
type Handles = SPSC[packet.Handle]

// NewHandles makes a handle ring.
func NewHandles(size int) *Handles { return NewSPSC[packet.Handle](size) }

// EnqueueBurst moves as many packets of b as fit into r, keeps the rest in b
// (shifted to the front) and returns how many it moved.
func EnqueueBurst(r *Handles, b *packet.Burst) int {
	n := r.Enqueue(b.H[:b.N])
	if n < b.N {
		copy(b.H[:], b.H[n:b.N])
	}
	b.N -= n
	return n
}

// DequeueBurst fills the room of b from r and returns how many it added.
func DequeueBurst(r *Handles, b *packet.Burst) int {
	n := r.Dequeue(b.H[b.N:])
	b.N += n
	return n
}

// Export is a bounded per-lcore ring of result records (STAMP records, IOAM
// traces) with 1-in-N sampling and a count of records it could not keep.
type Export[T any] struct {
	ring    *SPSC[T]
	sample  uint32
	n       uint32
	dropped atomic.Uint64
	sampled atomic.Uint64
}

// NewExport makes an export ring of size records keeping one record in sample
// (1 or 0 keeps all).
func NewExport[T any](size int, sample uint32) *Export[T] {
	if sample == 0 {
		sample = 1
	}
	return &Export[T]{ring: NewSPSC[T](size), sample: sample}
}

// Offer exports v, subject to sampling. When the ring is full it counts
// export_dropped and reports false. Lcore (producer) only.
func (e *Export[T]) Offer(v *T) bool {
	if e.sample > 1 {
		e.n++
		if e.n < e.sample {
			e.sampled.Add(1)
			return false
		}
		e.n = 0
	}
	if !e.ring.Put(*v) {
		e.dropped.Add(1)
		return false
	}
	return true
}

// Drain moves up to len(out) records into out. Control goroutine (consumer) only.
func (e *Export[T]) Drain(out []T) int { return e.ring.Dequeue(out) }

// Dropped is export_dropped: records lost to a full ring.
func (e *Export[T]) Dropped() uint64 { return e.dropped.Load() }

// SampledOut is how many records sampling skipped.
func (e *Export[T]) SampledOut() uint64 { return e.sampled.Load() }

// Len is the number of records waiting.
func (e *Export[T]) Len() int { return e.ring.Len() }

func (e *Export[T]) String() string {
	return fmt.Sprintf("export(len=%d dropped=%d)", e.Len(), e.Dropped())
}
