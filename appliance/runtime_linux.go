package appliance

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
)

// rt applies ARCHITECTURE.md's rules for the Go runtime: lcore threads pinned to
// their CPUs, every other thread confined to the control CPUs, GOMAXPROCS sized to
// lcores plus control threads, and GC tuned so the allocation-free fast path rarely
// meets a cycle.
type rtConfig struct {
	pin         bool
	controlCPUs []int
	lcoreCPUs   []int
	gogc        int
	memLimit    int64
	tune        bool // change process-wide settings (the CLI does; tests do not)
}

// apply confines the process's threads and sets the runtime knobs. It runs before
// any lcore starts, so lcore threads are the only ones later moved off the control
// CPUs.
func (r *rtConfig) apply() error {
	if !r.tune {
		return nil
	}
	if r.gogc != 0 {
		debug.SetGCPercent(r.gogc)
	}
	limit := r.memLimit
	if limit <= 0 {
		// Packet memory is off the heap; the heap holds tables, records and the
		// control plane. A quarter of RAM bounds it without ever crowding a
		// healthy process, which GOGC=400 already keeps from collecting often.
		var si unix.Sysinfo_t
		if unix.Sysinfo(&si) == nil {
			limit = int64(si.Totalram) * int64(si.Unit) / 4
		}
	}
	if limit > 0 {
		debug.SetMemoryLimit(limit)
	}
	procs := len(r.lcoreCPUs) + max(len(r.controlCPUs), 1)
	runtime.GOMAXPROCS(procs)
	if !r.pin || len(r.controlCPUs) == 0 {
		return nil
	}
	var set unix.CPUSet
	for _, c := range r.controlCPUs {
		set.Set(c)
	}
	// New threads inherit the affinity of the thread that makes them; the runtime
	// makes threads for locked goroutines from its template thread, which
	// LockOSThread starts from a confined thread. So confining every thread that
	// exists now confines all but the lcores.
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return fmt.Errorf("confine threads: %w", err)
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, &set); err != nil && err != unix.ESRCH {
			return fmt.Errorf("confine thread %d to CPUs %v: %w", tid, r.controlCPUs, err)
		}
	}
	return nil
}

// pinLcore pins the calling (locked) thread to cpu and shortens its timer slack
// so adaptive polling wakes on time.
func (r *rtConfig) pinLcore(cpu int) error {
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1000, 0, 0, 0)
	if !r.pin || cpu < 0 {
		return nil
	}
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("pin lcore to CPU %d: %w", cpu, err)
	}
	return nil
}

// sleepNs sleeps on the locked lcore thread without giving up its P: a raw
// nanosleep, so the scheduler does not hand the lcore's P to another thread.
func sleepNs(ns int64) {
	ts := unix.NsecToTimespec(ns)
	_, _, _ = unix.RawSyscall(unix.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&ts)), 0, 0)
}
