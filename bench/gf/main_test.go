package main

import "testing"

// TestSameOutput checks, at every size the program times and a few odd ones,
// that linerate gf, ISA-L and klauspost compute the scalar reference's bytes.
func TestSameOutput(t *testing.T) {
	benches, err := setup([]int{64, 1408, 4096 + 64, 65536}, 1408)
	if err != nil {
		t.Fatal(err)
	}
	other, err := setup([]int{100}, 4096)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range append(benches, other...) {
		if err := b.check(); err != nil {
			t.Errorf("%s %d %s: %v", b.op, b.size, b.impl, err)
		}
	}
}
