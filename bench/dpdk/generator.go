//go:build dpdk

package main

/*
#include <stdint.h>
#include <stdlib.h>
uint64_t lr_bench_c_gen(uint16_t out, const char *pool, const uint8_t *frame, uint16_t len, double seconds, uint64_t *cpu_ns);
*/
import "C"

import (
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"time"
	"unsafe"

	"github.com/linerate/linerate/appliance"
	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/ports/dpdk"
)

// The -generator comparison: linerate test's generator, flat out on a
// net_null port, against a C loop that sends the same 64-byte frame from the
// same mbuf pool on a net_null port of this process.

// runCGen runs lr_bench_c_gen on a registered thread pinned to cpu.
func runCGen(out *dpdk.Port, frame []byte, cpu int, d time.Duration) result {
	res := make(chan result)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		pin(cpu)
		if err := dpdk.RegisterThread(); err != nil {
			fail("%v", err)
		}
		defer dpdk.UnregisterThread()
		pool := C.CString(out.DPDKPool().Name())
		defer C.free(unsafe.Pointer(pool))
		f := C.CBytes(frame)
		defer C.free(f)
		var cpuNs C.uint64_t
		C.lr_bench_c_gen(C.uint16_t(out.PortID()), pool, (*C.uint8_t)(f), C.uint16_t(len(frame)), 0.2, &cpuNs)
		start := time.Now()
		n := C.lr_bench_c_gen(C.uint16_t(out.PortID()), pool, (*C.uint8_t)(f), C.uint16_t(len(frame)), C.double(d.Seconds()), &cpuNs)
		res <- result{packets: uint64(n), wall: time.Since(start).Seconds(), cpu: float64(cpuNs) / 1e9}
	}()
	return <-res
}

// runEngineGen runs the engine with a generator and a forward stage to a
// net_null port on one busy pinned lcore. pool is the generator's pool: ""
// for its own (the port copies each packet into an mbuf at tx), or
// "port:n0", the port's mbuf pool.
func runEngineGen(cpu int, pool string, d time.Duration) (result, error) {
	seq := engineSeq.Add(1)
	poolKey := ""
	if pool != "" {
		poolKey = fmt.Sprintf("pool = %q\n", pool)
	}
	toml := fmt.Sprintf(`version = 1
[engine]
poll = "busy"
[control]
listen = ""
[dpdk]
pool_size = %d
pool_cache = 256
[[ports]]
name = "n0"
driver = "dpdk"
device = "net_null%d"
[[pipelines]]
name = "gen"
lcores = [%d]
[[pipelines.stages]]
kind = "generator"
ip_version = 4
src = "198.18.0.1"
dst = "198.18.1.1"
sizes = [64]
%s[[pipelines.stages]]
kind = "forward"
port = "n0"
`, poolSize, 2*seq+300, cpu, poolKey)
	cfg, err := config.Parse("bench-gen.toml", []byte(toml))
	if err != nil {
		return result{}, err
	}
	e, err := appliance.New(cfg, appliance.Options{Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return result{}, err
	}
	defer e.Close()
	if err := e.Start(); err != nil {
		return result{}, err
	}
	tx := func() (uint64, time.Time) {
		s := e.Snapshot()
		for _, p := range s.Ports {
			if p.Name == "n0" {
				return p.TxPackets, s.Time
			}
		}
		return 0, s.Time
	}
	time.Sleep(200 * time.Millisecond)
	p0, t0 := tx()
	c0 := threadTimes()
	time.Sleep(d)
	p1, t1 := tx()
	c1 := threadTimes()
	e.Stop()
	busiest := 0.0
	for tid, v := range c1 {
		busiest = max(busiest, v-c0[tid])
	}
	return result{packets: p1 - p0, wall: t1.Sub(t0).Seconds(), cpu: busiest}, nil
}

// benchGenerator runs the comparison in rounds and prints it.
func benchGenerator(out *dpdk.Port, cpu, rounds int, d time.Duration) {
	frame := make([]byte, 60)
	copy(frame, []byte{2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00, 0x45})
	c, own, mb := &series{name: "C: alloc, copy, tx_burst"}, &series{name: "generator, its own pool"}, &series{name: "generator, the mbuf pool"}
	var rOwn, rMb []float64
	for r := 0; r < rounds; r++ {
		cm := runCGen(out, frame, cpu, d)
		om, err := runEngineGen(cpu, "", d)
		if err != nil {
			fail("engine: %v", err)
		}
		mm, err := runEngineGen(cpu, "port:n0", d)
		if err != nil {
			fail("engine, mbuf pool: %v", err)
		}
		c.add(cm)
		own.add(om)
		mb.add(mm)
		rOwn, rMb = append(rOwn, om.perCore()/cm.perCore()), append(rMb, mm.perCore()/cm.perCore())
		fmt.Printf("round %d: C %v  generator %v  generator, mbuf pool %v\n", r+1, cm, om, mm)
	}
	fmt.Printf("\nlinerate test's generator on net_null, 64-byte frames, one core (CPU %d), %d rounds of %s\n\n", cpu, rounds, d)
	fmt.Printf("  %-30s %14s %14s %9s\n", "", "Mpps per core", "Mpps (wall)", "core use")
	for _, s := range []*series{c, own, mb} {
		s.print()
	}
	fmt.Printf("\n  generator/C = %.2f with its own pool, %.2f with the mbuf pool   (goal ≥ 0.9)\n", median(rOwn), median(rMb))
}
