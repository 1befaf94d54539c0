//go:build dpdk

package dpdk

import (
	"fmt"
	"testing"

	"github.com/linerate/linerate/appliance/packet"
)

// atDepth calls f depth frames below the caller, so that f's calls run at
// a stack depth the caller picks.
//
//go:noinline
func atDepth(depth int, f func()) {
	if depth > 0 {
		atDepth(depth-1, f)
		return
	}
	f()
}

// stackSweep is how deep onFreshStacks goes, in atDepth frames (32 bytes
// each here): past a goroutine's first growths of its stack, from 2 KiB or
// whatever more the runtime starts goroutines with (it adapts to the stacks
// it has seen).
const stackSweep = 1500

// onFreshStacks runs f at every depth up to stackSweep, each time in a new
// goroutine, after prep (when not nil) in the caller's, and returns f's
// errors. Somewhere in the sweep the goroutine's stack grows, and moves, in
// the middle of each cgo call f makes: in the prologue of cgo's wrapper,
// after the arguments were computed. An address of the old stack that C got
// is then written after the stack has gone.
func onFreshStacks(prep func(), f func() error) []error {
	var errs []error
	done := make(chan error)
	for d := range stackSweep {
		if prep != nil {
			prep()
		}
		go atDepth(d, func() { done <- f() })
		if err := <-done; err != nil {
			errs = append(errs, fmt.Errorf("depth %d: %w", d, err))
		}
	}
	return errs
}

// TestStackGrowth: the fast path gives C addresses in its callers' stack
// frames (AllocOne's handle, a Burst local to the caller, TxHandles' foreign
// flag). Called from fresh goroutines whose stacks grow during the call, every
// handle still lands where Go reads it and belongs to the pool, every flag is
// seen, and every mbuf goes back. With the addresses passed as integers,
// about one call in 75 lost what C wrote (AllocOne, Alloc, RxBurst,
// TxHandles); where C only reads (TxBurst, Free, FreeOne) the freed old stack
// still held the same bytes, so those cases guard against crashes and leaks.
func TestStackGrowth(t *testing.T) {
	requireEAL(t)
	p, err := Open(Options{Name: "stack", Device: vdev("net_null"), PoolSize: 1023, PoolCache: 32})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	pool := p.DPDKPool()
	own := pool.handles()
	if len(own) != pool.Size() {
		t.Fatalf("%d handles in a pool of %d", len(own), pool.Size())
	}
	slab, err := packet.NewSlab(packet.SlabConfig{Name: "stack-foreign", Buffers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer slab.Close()
	other, ok := slab.AllocOne()
	if !ok {
		t.Fatal("slab empty")
	}
	defer slab.FreeOne(other)
	inUse := pool.Stats().InUse

	// check frees the handles of the pool among hs, for any not of the pool
	// is a stack slot C wrote too late (its mbuf is lost).
	check := func(hs []packet.Handle) error {
		var bad int
		for _, h := range hs {
			if own[h] {
				pool.FreeOne(h)
			} else {
				bad++
			}
		}
		if bad > 0 {
			return fmt.Errorf("%d of %d handles are not of the pool", bad, len(hs))
		}
		return nil
	}
	// The cases that send or free take their packets from in, which prep
	// fills on the test's goroutine, so that theirs is the only cgo call at
	// the bottom of the stack.
	var in packet.Burst
	prep := func(n int) func() {
		return func() {
			in.N = 0
			pool.Alloc(&in, n)
		}
	}
	took := func(n int) error {
		if in.N != n {
			return fmt.Errorf("allocated %d of %d", in.N, n)
		}
		return nil
	}
	for _, c := range []struct {
		name string
		prep func()
		f    func() error
	}{
		{"AllocOne", nil, func() error {
			h, ok := pool.AllocOne()
			if !ok {
				return fmt.Errorf("pool empty")
			}
			return check([]packet.Handle{h})
		}},
		{"Alloc", nil, func() error {
			var b packet.Burst
			if n := pool.Alloc(&b, 8); n != 8 {
				return fmt.Errorf("allocated %d of 8", n)
			}
			return check(b.Handles())
		}},
		{"RxBurst", nil, func() error {
			var b packet.Burst
			if n := p.RxBurst(0, &b); n != packet.MaxBurst {
				return fmt.Errorf("received %d", n)
			}
			return check(b.Handles())
		}},
		{"TxBurst", prep(8), func() error {
			if err := took(8); err != nil {
				return err
			}
			var b packet.Burst
			b.N = copy(b.H[:], in.Handles())
			if n := p.TxBurst(0, &b); n != 8 {
				return fmt.Errorf("sent %d of 8", n)
			}
			return nil
		}},
		{"TxHandles", prep(1), func() error {
			if err := took(1); err != nil {
				return err
			}
			hs := [2]packet.Handle{in.H[0], other}
			if n, foreign := p.TxHandles(0, hs[:], 0); n != 1 || !foreign {
				return fmt.Errorf("TxHandles(an mbuf, a slab packet) = %d, %v; want 1, true", n, foreign)
			}
			return nil
		}},
		{"Free", prep(8), func() error {
			if err := took(8); err != nil {
				return err
			}
			var b packet.Burst
			b.N = copy(b.H[:], in.Handles())
			pool.Free(&b)
			return nil
		}},
		{"FreeOne", prep(1), func() error {
			if err := took(1); err != nil {
				return err
			}
			pool.FreeOne(in.H[0])
			return nil
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if errs := onFreshStacks(c.prep, c.f); len(errs) > 0 {
				t.Errorf("%d of %d calls failed; the first: %v", len(errs), stackSweep, errs[0])
			}
		})
	}
	if got := pool.Stats().InUse; got != inUse {
		t.Errorf("%d mbufs in use, %d before", got, inUse)
	}
}

// TestFastPathAllocs: the fast path allocates nothing, a Burst or handle on
// the caller's stack included: the pointers C gets must not move those to the
// heap.
func TestFastPathAllocs(t *testing.T) {
	requireEAL(t)
	p, err := Open(Options{Name: "allocs", Device: vdev("net_null")})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	pool := p.DPDKPool()
	for _, c := range []struct {
		name string
		f    func()
	}{
		{"AllocOne+FreeOne", func() {
			if h, ok := pool.AllocOne(); ok {
				pool.FreeOne(h)
			}
		}},
		{"Alloc+Free", func() {
			var b packet.Burst
			pool.Alloc(&b, packet.MaxBurst)
			pool.Free(&b)
		}},
		{"RxBurst+TxBurst", func() {
			var b packet.Burst
			n := p.RxBurst(0, &b)
			if s := p.TxBurst(0, &b); s < n {
				pool.FreeHandles(b.H[s:n])
			}
		}},
		{"TxHandles", func() {
			var b packet.Burst
			n := pool.Alloc(&b, packet.MaxBurst)
			if s, _ := p.TxHandles(0, b.H[:n], 0); s < n {
				pool.FreeHandles(b.H[s:n])
			}
		}},
	} {
		if a := testing.AllocsPerRun(100, c.f); a != 0 {
			t.Errorf("%s: %v allocations a call", c.name, a)
		}
	}
}
