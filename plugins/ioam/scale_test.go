package ioam

import (
	"math/rand/v2"
	"testing"
)

// TestIDIndex holds the index to a linear scan at sizes on both sides of
// linearMax and across its growth: every id found at its first position,
// repeats ignored, absent ids not found, and lookups allocate nothing.
func TestIDIndex(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 28))
	for _, n := range []int{1, linearMax, linearMax + 1, 100, 5000} {
		var ids []uint16
		var x idIndex
		for len(ids) < n {
			ids = append(ids, uint16(r.IntN(1<<16)))
			x.add(ids)
			if len(ids)%7 == 0 { // a repeat of an earlier id
				ids = append(ids, ids[r.IntN(len(ids))])
				x.add(ids)
			}
		}
		linear := func(id uint16) int {
			for i, v := range ids {
				if v == id {
					return i
				}
			}
			return -1
		}
		for id := 0; id < 1<<16; id++ {
			if got, want := x.find(ids, uint16(id)), linear(uint16(id)); got != want {
				t.Fatalf("n=%d: id %d at %d, want %d", n, id, got, want)
			}
		}
		if a := testing.AllocsPerRun(100, func() { x.find(ids, ids[len(ids)/2]) }); a != 0 {
			t.Fatalf("n=%d: %v allocations a lookup", n, a)
		}
	}
}

// TestNamespaceTableMany: a node with 3000 namespaces, each with a POT key,
// finds each namespace's own state and key, and no other.
func TestNamespaceTableMany(t *testing.T) {
	var ns nsTable
	var pot potKeys
	keys := make([]POTKey, 3000)
	for i := range 3000 {
		id := uint16(7 + 13*i)
		ns.add(Namespace{ID: id, Data: uint32(i)})
		pot.add(id, &keys[i])
	}
	for i := range 3000 {
		id := uint16(7 + 13*i)
		if s := ns.lookup(id); s == nil || s.ID != id || s.Data != uint32(i) {
			t.Fatalf("namespace %d: %+v", id, s)
		}
		if k := pot.lookup(id); k != &keys[i] {
			t.Fatalf("namespace %d: wrong POT key", id)
		}
		if ns.lookup(id+1) != nil || pot.lookup(id+1) != nil {
			t.Fatalf("namespace %d found", id+1)
		}
	}
}
