//go:build dpdk

package main

/*
#cgo pkg-config: libdpdk
#cgo CFLAGS: -DALLOW_EXPERIMENTAL_API
#include <rte_launch.h>
#include <rte_lcore.h>
int lr_bench_launch(unsigned lcore);
*/
import "C"

import (
	"fmt"
	"time"
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
