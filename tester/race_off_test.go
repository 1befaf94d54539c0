//go:build !race

package tester

const raceEnabled = false
