package stamp

import (
	"math/rand/v2"
	"testing"
	"unsafe"
)

// A reply touches the session's hot record only; its delays reach the
// histograms' counts and the IPDV window a batch at a time. The batch
// changes no figure: a state flushed after every reply (what the collector
// did before the batch) ends the same, through loss, reordering near and
// far, duplicates, negative delays and a restarted reflector.
func TestPendingBatchSameMetrics(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 28))
		var batched, each collectorState
		seq := uint32(0)
		rseq := uint32(0)
		var late []uint32
		for i := 0; i < 3000; i++ {
			var s uint32
			switch x := rng.IntN(100); {
			case x < 5 && len(late) > 0: // a reordered one, near or far
				j := rng.IntN(len(late))
				s, late = late[j], append(late[:j], late[j+1:]...)
			case x < 8: // a duplicate
				s = seq - uint32(rng.IntN(300)) - 1
			case x < 15: // held back, or lost
				if rng.IntN(2) == 0 {
					late = append(late, seq)
				}
				seq++
				continue
			default:
				s = seq
				seq++
			}
			if s > seq { // below zero
				continue
			}
			if rng.IntN(500) == 0 {
				rseq = 0 // the reflector restarts
			}
			rseq++
			r := rec(s, int64(rng.IntN(3_000_000))-200_000, 1000+int64(rng.IntN(50_000)))
			r.ReflectorSeq = rseq
			if rng.IntN(10) == 0 {
				r.Flags |= RecUnsynchronized
			}
			fb, fe := batched.add(r, true), each.add(r, true)
			each.flush()
			if fb != fe {
				t.Fatalf("seed %d, reply %d (seq %d): flags %#x batched, %#x flushed each time", seed, i, s, fb, fe)
			}
			if batched.jit != each.jit {
				t.Fatalf("seed %d, reply %d (seq %d): IPDV %+v batched, %+v", seed, i, s, batched.jit, each.jit)
			}
		}
		mb, me := batched.metrics(uint64(seq), true), each.metrics(uint64(seq), true)
		if mb != me {
			t.Errorf("seed %d: metrics\n%+v batched,\n%+v flushed each time", seed, mb, me)
		}
		if *batched.cold != *each.cold {
			t.Errorf("seed %d: the cold parts differ", seed)
		}
		if mb.JitterForward.N == 0 || mb.Reordered == 0 || mb.Duplicates == 0 || mb.Forward.Negative == 0 {
			t.Errorf("seed %d: the traffic missed a case: %+v", seed, mb)
		}
	}
}

// The hot record stays small: a few hundred bytes, dense across sessions,
// with the 28 KiB of counts and IPDV window out of line.
func TestHotRecordSize(t *testing.T) {
	if n := unsafe.Sizeof(collectorState{}); n > 1024 {
		t.Errorf("collectorState is %d bytes", n)
	}
	if n := unsafe.Offsetof(collectorState{}.window); n > 640 {
		t.Errorf("what every reply touches spans %d bytes", n)
	}
	t.Logf("hot record %d bytes, cold %d", unsafe.Sizeof(collectorState{}), unsafe.Sizeof(collectorCold{}))
}

// Values below zero count once in a quantile: apart (Negative), not again
// in the first bucket.
func TestHistNegativeOnce(t *testing.T) {
	var h hist
	for _, v := range []int64{-5, -3, 10_000, 20_000} {
		h.record(v)
	}
	if q := h.quantile(0.5); q != -5 {
		t.Errorf("p50 %d, want the minimum (-5)", q)
	}
	if q := h.quantile(0.75); q < 9_900 || q > 10_100 {
		t.Errorf("p75 %d, want ~10000", q)
	}
}
