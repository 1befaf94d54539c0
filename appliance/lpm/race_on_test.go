//go:build race

package lpm

// raceOn: the race detector makes each atomic access some 50 times dearer, so
// the randomised tests take fewer steps.
const raceOn = true
