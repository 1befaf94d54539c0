package gf

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestEchelonTouch: Touch reads and changes nothing: two Echelons fed the
// same vectors, one touched before every Insert, hold the same rows, and a
// touch allocates nothing. Widths on both sides of a cache line.
func TestEchelonTouch(t *testing.T) {
	for _, k := range []int{1, 16, 40, 64, 72, 200} {
		r := rand.New(rand.NewPCG(uint64(k), 3))
		a, _ := NewEchelon(k, 0)
		b, _ := NewEchelon(k, 0)
		_ = a.Touch() // empty
		v := make([]byte, k)
		for i := 0; i < k+4; i++ {
			for j := range v {
				v[j] = byte(r.Uint32())
			}
			_ = a.Touch()
			ia, _ := a.Insert(v, nil)
			ib, _ := b.Insert(v, nil)
			if ia != ib {
				t.Fatalf("k=%d: insert %d innovative %v after a touch, %v without", k, i, ia, ib)
			}
		}
		if a.Rank() != b.Rank() {
			t.Fatalf("k=%d: rank %d after touches, %d without", k, a.Rank(), b.Rank())
		}
		for s := 0; s < a.Rank(); s++ {
			ra, _ := a.Row(s)
			rb, _ := b.Row(s)
			if !bytes.Equal(ra, rb) || a.Pivot(s) != b.Pivot(s) {
				t.Fatalf("k=%d: row %d differs after touches", k, s)
			}
		}
		if n := testing.AllocsPerRun(10, func() { _ = a.Touch() }); n != 0 {
			t.Errorf("k=%d: Touch allocates %.1f", k, n)
		}
	}
}
