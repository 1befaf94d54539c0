//go:build dpdk

package main

/*
#cgo pkg-config: libdpdk
#cgo CFLAGS: -DALLOW_EXPERIMENTAL_API -O3 -I${SRCDIR}/../../ports/dpdk
#include <rte_launch.h>
#include <rte_lcore.h>
#include <stdint.h>
int lr_bench_launch(unsigned lcore);
uint64_t lr_bench_c_loop(uint16_t in, uint16_t out, double seconds, uint64_t *cpu_ns);
uint64_t lr_bench_c_sync(uint16_t in, uint16_t out, const char *pool, double seconds, uint64_t *cpu_ns);
#include <stdlib.h>
*/
import "C"

import (
	"fmt"
	"runtime"
	"time"
	"unsafe"

	"github.com/linerate/linerate/ports/dpdk"
)

// The remote-launch side of -lcore-model: rte_eal_remote_launch runs a C
// trampoline (launch.c) on the EAL worker lcore, which calls benchRemoteLoop
// back in Go. The loop then runs inside a cgo callback on a thread DPDK made.

var remote struct {
	l   *loopPorts
	d   time.Duration
	out result
}

//export benchRemoteLoop
func benchRemoteLoop() C.int {
	r := &remote
	r.l.loop(200 * time.Millisecond)
	r.out = r.l.loop(r.d)
	return 0
}

// runRemote launches the loop on the EAL worker lcore pinned to cpu.
func (l *loopPorts) runRemote(cpu int, d time.Duration) (result, error) {
	var worker C.uint = C.RTE_MAX_LCORE
	for id := C.rte_get_next_lcore(^C.uint(0), 1, 0); id < C.RTE_MAX_LCORE; id = C.rte_get_next_lcore(id, 1, 0) {
		if int(C.rte_lcore_to_cpu_id(C.int(id))) == cpu {
			worker = id
		}
	}
	if worker == C.RTE_MAX_LCORE {
		return result{}, fmt.Errorf("no EAL worker lcore on CPU %d", cpu)
	}
	remote.l, remote.d = l, d
	if rc := C.lr_bench_launch(worker); rc != 0 {
		return result{}, fmt.Errorf("rte_eal_remote_launch: %d", int(rc))
	}
	return remote.out, nil
}

// runCInProcess runs cref's loop in C on the (a) loop's own ports, on a
// registered thread pinned to cpu: the same work without linerate. With sync it
// runs it through linerate's C layer instead: (a) without Go.
func (l *loopPorts) runCInProcess(cpu int, d time.Duration, sync bool) result {
	res := make(chan result)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		pin(cpu)
		if err := dpdk.RegisterThread(); err != nil {
			fail("%v", err)
		}
		defer dpdk.UnregisterThread()
		in, out := C.uint16_t(l.in.PortID()), C.uint16_t(l.out.PortID())
		pool := C.CString(l.in.DPDKPool().Name())
		defer C.free(unsafe.Pointer(pool))
		run := func(secs float64, cpuNs *C.uint64_t) C.uint64_t {
			if sync {
				return C.lr_bench_c_sync(in, out, pool, C.double(secs), cpuNs)
			}
			return C.lr_bench_c_loop(in, out, C.double(secs), cpuNs)
		}
		var cpuNs C.uint64_t
		run(0.2, &cpuNs)
		start := time.Now()
		n := run(d.Seconds(), &cpuNs)
		res <- result{packets: uint64(n), wall: time.Since(start).Seconds(), cpu: float64(cpuNs) / 1e9}
	}()
	return <-res
}
