//go:build race

package tester

// raceEnabled: the race detector slows the tester and a linerate DUT five to
// ten times, so neither keeps the loads of the capacity tests. Those run in
// the plain and the checked (lrcheck) builds.
const raceEnabled = true
