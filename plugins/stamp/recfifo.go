package stamp

import "sync/atomic"

// recFIFO is a sender session's record FIFO: a bounded single-producer
// (the collector's lcore) single-consumer (the control plane, under
// txSession.fifoMu) ring, as ring.SPSC, laid out for a collector with
// thousands of sessions. What Put reads and writes is one cache line (tail,
// headCache, mask, slots), where SPSC spreads it over three; warm reads the
// slot Put will write, so that the burst's puts find their lines in cache
// (the tail's store is a locked instruction on amd64: it waits for the
// slot's store, miss and all, and the puts would not overlap); and the
// slots' pages are written when the session is made, so that their page
// faults are the control plane's, not a reply's.
type recFIFO struct {
	// The producer's line.
	tail      atomic.Uint64 // next slot to write
	headCache uint64        // the producer's view of head
	mask      uint64
	slots     []Record
	_         [64 - 3*8 - 24]byte
	// The consumer's line.
	head      atomic.Uint64 // next slot to read
	tailCache uint64        // the consumer's view of tail
	_         [64 - 2*8]byte
}

// newRecFIFO makes a FIFO of size records, rounded up to a power of two
// (at least 2).
func newRecFIFO(size int) *recFIFO {
	n := 2
	for n < size {
		n <<= 1
	}
	f := &recFIFO{mask: uint64(n - 1), slots: make([]Record, n)}
	// Fresh memory is mapped at its first write; the compiler drops a
	// zeroing store after make, so write a word a page (and the last).
	const perPage = 4096 / 96
	for i := 0; i < n; i += perPage {
		f.slots[i].Seq = 0
	}
	f.slots[n-1].Seq = 0
	return f
}

// Cap is the number of slots.
func (f *recFIFO) Cap() int { return len(f.slots) }

// Len is the number of records waiting. Any goroutine; approximate.
func (f *recFIFO) Len() int { return int(f.tail.Load() - f.head.Load()) }

// Put appends r, reporting false when full. Producer only.
func (f *recFIFO) Put(r *Record) bool {
	tail := f.tail.Load()
	if tail-f.headCache == uint64(len(f.slots)) {
		f.headCache = f.head.Load()
		if tail-f.headCache == uint64(len(f.slots)) {
			return false
		}
	}
	f.slots[tail&f.mask] = *r
	f.tail.Store(tail + 1)
	return true
}

// warm reads the producer's line and the slot the next Put writes (both
// its lines), when the FIFO is not full as the producer last saw it (a
// full FIFO's next slot is the consumer's). Producer only.
func (f *recFIFO) warm() uint64 {
	tail := f.tail.Load()
	if tail-f.headCache >= uint64(len(f.slots)) {
		return 0
	}
	s := &f.slots[tail&f.mask]
	return uint64(s.SSID) + uint64(s.CoS.DSCP1)
}

// Dequeue moves up to len(out) records into out and returns how many.
// Consumer only.
func (f *recFIFO) Dequeue(out []Record) int {
	head := f.head.Load()
	avail := f.tailCache - head
	if avail < uint64(len(out)) {
		f.tailCache = f.tail.Load()
		avail = f.tailCache - head
	}
	n := min(uint64(len(out)), avail)
	start := head & f.mask
	k := copy(out[:n], f.slots[start:])
	copy(out[k:n], f.slots)
	f.head.Store(head + n)
	return int(n)
}

// Get takes one record. Consumer only.
func (f *recFIFO) Get() (Record, bool) {
	head := f.head.Load()
	if head == f.tailCache {
		f.tailCache = f.tail.Load()
		if head == f.tailCache {
			return Record{}, false
		}
	}
	r := f.slots[head&f.mask]
	f.head.Store(head + 1)
	return r, true
}
