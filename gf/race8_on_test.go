//go:build race

package gf

// race8 is set in race-detector builds. The detector instruments every byte
// the generic kernel touches and none the assembly touches, so the long
// sweeps skip the generic level there: it costs minutes and finds nothing a
// plain run does not.
const race8 = true
