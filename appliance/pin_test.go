package appliance_test

import "golang.org/x/sys/unix"

func pinTo(cpu int) {
	var s unix.CPUSet
	s.Set(cpu)
	_ = unix.SchedSetaffinity(0, &s)
}
