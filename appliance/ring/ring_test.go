package ring

import (
	"sync"
	"testing"

	"github.com/linerate/linerate/appliance/packet"
)

func TestSPSCOrderAcrossGoroutines(t *testing.T) {
	const n = 200_000
	r := NewSPSC[uint64](256)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var buf [17]uint64
		next := uint64(0)
		for next < n {
			for i := range buf {
				buf[i] = next + uint64(i)
			}
			k := len(buf)
			if rem := n - next; rem < uint64(k) {
				k = int(rem)
			}
			next += uint64(r.Enqueue(buf[:k]))
		}
	}()
	var out [23]uint64
	want := uint64(0)
	for want < n {
		k := r.Dequeue(out[:])
		for _, v := range out[:k] {
			if v != want {
				t.Fatalf("got %d, want %d: order broken", v, want)
			}
			want++
		}
	}
	wg.Wait()
	if r.Len() != 0 {
		t.Fatalf("ring holds %d after draining", r.Len())
	}
}

func TestSPSCBounds(t *testing.T) {
	r := NewSPSC[int](5) // rounds up to 8
	if r.Cap() != 8 {
		t.Fatalf("cap %d, want 8", r.Cap())
	}
	if n := r.Enqueue(make([]int, 20)); n != 8 {
		t.Fatalf("enqueued %d into 8 slots", n)
	}
	if r.Put(1) {
		t.Fatal("Put into a full ring succeeded")
	}
	if _, ok := r.Get(); !ok {
		t.Fatal("Get from a full ring failed")
	}
	if !r.Put(1) {
		t.Fatal("Put after a Get failed")
	}
	out := make([]int, 20)
	if n := r.Dequeue(out); n != 8 {
		t.Fatalf("dequeued %d, want 8", n)
	}
	if _, ok := r.Get(); ok {
		t.Fatal("Get from an empty ring succeeded")
	}
}

func TestBurstHelpers(t *testing.T) {
	r := NewHandles(64)
	var b packet.Burst
	for i := 0; i < packet.MaxBurst; i++ {
		b.Push(packet.Handle(i + 1))
	}
	r.Enqueue(make([]packet.Handle, 60)) // leave room for 4
	if n := EnqueueBurst(r, &b); n != 4 || b.N != 60 || b.H[0] != 5 {
		t.Fatalf("EnqueueBurst moved %d, left %d starting at %d", n, b.N, b.H[0])
	}
	b.N = 62
	if n := DequeueBurst(r, &b); n != 2 || b.N != 64 {
		t.Fatalf("DequeueBurst added %d to reach %d", n, b.N)
	}
}

func TestExportSamplingAndDrops(t *testing.T) {
	e := NewExport[int](4, 3)
	kept := 0
	for i := 0; i < 30; i++ {
		v := i
		if e.Offer(&v) {
			kept++
		}
	}
	// 1 in 3 of 30 is 10 offers; the ring holds 4, so 6 are dropped.
	if kept != 4 || e.Dropped() != 6 || e.SampledOut() != 20 {
		t.Fatalf("kept %d dropped %d sampled out %d", kept, e.Dropped(), e.SampledOut())
	}
	out := make([]int, 10)
	if n := e.Drain(out); n != 4 || out[0] != 2 || out[1] != 5 {
		t.Fatalf("drained %d: %v", n, out[:n])
	}
	v := 99
	took := false
	for i := 0; i < 3; i++ { // one of three passes the sampler
		took = e.Offer(&v) || took
	}
	if !took {
		t.Fatal("a drained ring takes records again")
	}
}

func TestExportAllocatesNothing(t *testing.T) {
	type rec struct{ a, b, c uint64 }
	e := NewExport[rec](1024, 1)
	out := make([]rec, 64)
	r := rec{1, 2, 3}
	if a := testing.AllocsPerRun(1000, func() {
		e.Offer(&r)
		e.Drain(out)
	}); a != 0 {
		t.Fatalf("%v allocations per offer", a)
	}
}
