package main

import "testing"

// TestTreeDRR checks the source's deficit round-robin: over whole rounds each
// tree gets packets in proportion to its weight.
func TestTreeDRR(t *testing.T) {
	f := &treeStage{quantum: []float64{4, 2, 1}, deficit: []float64{4, 0, 0}} // weights 1, 0.5, 0.25
	got := make([]int, 3)
	for range 7000 {
		got[f.next()]++
	}
	if got[0] != 4000 || got[1] != 2000 || got[2] != 1000 {
		t.Errorf("trees got %v packets, want [4000 2000 1000]", got)
	}
}
