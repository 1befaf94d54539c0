//go:build !race

package lpm

const raceOn = false
