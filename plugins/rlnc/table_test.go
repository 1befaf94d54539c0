package rlnc

import (
	"math/rand/v2"
	"testing"
)

// TestTable runs random puts and deletes against a map, on a small table
// whose keys share a handful of home slots, so that clusters wrap around the
// end and deletion shifts entries back across the wrap.
func TestTable(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	const n = 32
	tab := newTable(n) // 64 entries
	model := map[uint64]int32{}
	var keys []uint64
	for op := 0; op < 20000; op++ {
		if len(model) < n && (len(keys) == 0 || r.IntN(2) == 0) {
			// Homes among 0, 1, 62 and 63: start is k>>7 & mask.
			k := uint64([]int{0, 1, 62, 63}[r.IntN(4)])<<7 | uint64(r.Uint32())<<13
			if _, dup := model[k]; dup {
				continue
			}
			v := int32(r.IntN(1 << 20))
			tab.put(k, v)
			model[k] = v
			keys = append(keys, k)
		} else {
			i := r.IntN(len(keys))
			k := keys[i]
			tab.del(k, model[k])
			delete(model, k)
			keys[i] = keys[len(keys)-1]
			keys = keys[:len(keys)-1]
			if got := tab.get(k); got != -1 {
				t.Fatalf("op %d: key %#x deleted, get gives %d", op, k, got)
			}
		}
		for k, v := range model {
			if got := tab.get(k); got != v {
				t.Fatalf("op %d: key %#x: get gives %d, want %d", op, k, got, v)
			}
		}
	}
	// A pair that is not there (right key, wrong value) is left alone.
	if len(keys) > 0 {
		k := keys[0]
		tab.del(k, model[k]+1)
		if tab.get(k) != model[k] {
			t.Fatal("del of (key, other value) removed the entry")
		}
	}
}
