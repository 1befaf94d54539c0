// Package cpuset reads the CPUs this process may run on, for the engine's
// lcore placement and for DPDK's lcore list.
package cpuset

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// Allowed is the set of CPUs this process may run on (its affinity mask), in
// increasing order. When the mask cannot be read it is CPUs 0..NumCPU-1.
func Allowed() []int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		out := make([]int, runtime.NumCPU())
		for i := range out {
			out[i] = i
		}
		return out
	}
	var out []int
	for c := 0; c < 1024; c++ {
		if set.IsSet(c) {
			out = append(out, c)
		}
	}
	return out
}
