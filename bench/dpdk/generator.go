//go:build dpdk

package main

/*
#include <stdint.h>
#include <stdlib.h>
uint64_t lr_bench_c_gen(uint16_t out, const char *pool, const uint8_t *frame, uint16_t len, int mode,
			uint16_t fields, uint16_t csum, uint16_t sum, uint16_t flow, uint64_t count, double seconds,
			uint64_t *cpu_ns);
*/
import "C"

import (
	"fmt"
	"runtime"
	"time"
	"unsafe"

	"github.com/linerate/linerate/bench/internal/genframe"
	"github.com/linerate/linerate/ports/dpdk"
)

// The -generator comparison: linerate test's generator, flat out on a
// net_null port, against C loops on a net_null port of this process that send
// the same frames from the same mbuf pool. The reference writes what the
// generator writes into every packet (flow id and sequence number, tx
// timestamp, UDP checksum) as MoonGen or TRex would: rte_pktmbuf_alloc_bulk,
// then a fill loop. Two more C lines bracket it: the same in one pass over
// the mbufs (the fastest C loop found), and one fixed frame copied without
// fields. TestSameFrames holds the frames of C and the generator to each
// other on net_pcap.

// genSize is the frame size of the comparison, with the FCS.
const genSize = 64

// The modes of lr_bench_c_gen (launch.c).
const (
	genFields  = 1 // write the generator fields and the UDP checksum
	genOnePass = 2 // reset each mbuf in the fill loop, not in rte_pktmbuf_alloc_bulk
)

// runCGen runs lr_bench_c_gen in mode on a registered thread pinned to cpu,
// for count packets (0: as many as d allows, after a warm-up of 0.2 s).
func runCGen(out *dpdk.Port, f genframe.Frame, mode int, count uint64, cpu int, d time.Duration) result {
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
		fr := C.CBytes(f.Data)
		defer C.free(fr)
		var cpuNs C.uint64_t
		run := func(count uint64, secs float64) C.uint64_t {
			return C.lr_bench_c_gen(C.uint16_t(out.PortID()), pool, (*C.uint8_t)(fr), C.uint16_t(len(f.Data)), C.int(mode),
				C.uint16_t(f.Fields), C.uint16_t(f.Csum), C.uint16_t(f.Sum), 0, C.uint64_t(count), C.double(secs), &cpuNs)
		}
		if count == 0 {
			run(0, 0.2)
		}
		start := time.Now()
		n := run(count, d.Seconds())
		res <- result{packets: uint64(n), wall: time.Since(start).Seconds(), cpu: float64(cpuNs) / 1e9}
	}()
	return <-res
}

// genConfig is the engine config of the generator comparison: a generator and
// a forward stage to the dpdk port n0 on device, on one busy lcore pinned to
// cpu. pool is the generator's pool: "" for its own (the port copies each
// packet into an mbuf at tx), or "port:n0", the port's mbuf pool. count 0
// sends flat out.
func genConfig(device, pool string, cpu int, count uint64) string {
	poolKey := ""
	if pool != "" {
		poolKey = fmt.Sprintf("pool = %q\n", pool)
	}
	return fmt.Sprintf(`version = 1
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
device = %q
[[pipelines]]
name = "gen"
lcores = [%d]
%s[[pipelines.stages]]
kind = "forward"
port = "n0"
`, poolSize, device, cpu, genframe.Stage(genSize, int(count), poolKey))
}

// runEngineGen runs the generator flat out on a net_null port and measures its
// transmit rate.
func runEngineGen(cpu int, pool string, d time.Duration) (result, error) {
	seq := engineSeq.Add(1)
	return measureEngine("bench-gen.toml", genConfig(fmt.Sprintf("net_null%d", 2*seq+300), pool, cpu, 0), "n0", d)
}

// genRound is one round of the comparison.
type genRound struct{ cFields, cOnePass, cFixed, mbuf, own result }

// runGenRound runs the five in an order that turns with the round, so that
// none is always first after another's warm caches or a neighbour's burst.
func runGenRound(out *dpdk.Port, f genframe.Frame, cpu, round int, d time.Duration) (genRound, error) {
	var r genRound
	steps := []func() error{
		func() error { r.cFields = runCGen(out, f, genFields, 0, cpu, d); return nil },
		func() (err error) { r.mbuf, err = runEngineGen(cpu, "port:n0", d); return err },
		func() error { r.cOnePass = runCGen(out, f, genFields|genOnePass, 0, cpu, d); return nil },
		func() error { r.cFixed = runCGen(out, f, 0, 0, cpu, d); return nil },
		func() (err error) { r.own, err = runEngineGen(cpu, "", d); return err },
	}
	for i := range steps {
		if err := steps[(i+round)%len(steps)](); err != nil {
			return r, err
		}
	}
	return r, nil
}

// benchGenerator runs the comparison in rounds and prints it.
func benchGenerator(out *dpdk.Port, cpu, rounds int, d time.Duration) {
	f := genframe.IPv4(genSize - 4)
	cf := &series{name: "C: alloc_bulk, fill, tx"}
	c1 := &series{name: "C: the same in one pass"}
	cx := &series{name: "C: one fixed frame"}
	mb := &series{name: "generator, port's mbuf pool"}
	own := &series{name: "generator, engine's pool"}
	var rMb, rOwn, rOne, rFixed []float64
	for r := 0; r < rounds; r++ {
		g, err := runGenRound(out, f, cpu, r, d)
		if err != nil {
			fail("generator: %v", err)
		}
		cf.add(g.cFields)
		c1.add(g.cOnePass)
		cx.add(g.cFixed)
		mb.add(g.mbuf)
		own.add(g.own)
		rMb = append(rMb, g.mbuf.perCore()/g.cFields.perCore())
		rOwn = append(rOwn, g.own.perCore()/g.cFields.perCore())
		rOne = append(rOne, g.mbuf.perCore()/g.cOnePass.perCore())
		rFixed = append(rFixed, g.mbuf.perCore()/g.cFixed.perCore())
		fmt.Printf("round %d, Mpps/core: C %.2f, one pass %.2f, fixed %.2f; generator %.2f (%.2fx), engine's pool %.2f\n",
			r+1, g.cFields.perCore(), g.cOnePass.perCore(), g.cFixed.perCore(), g.mbuf.perCore(), rMb[r], g.own.perCore())
	}
	fmt.Printf("\nlinerate test's generator on net_null, %d-byte frames, one core (CPU %d), %d rounds of %s\n\n",
		genSize, cpu, rounds, d)
	fmt.Printf("  %-30s %14s %14s %9s\n", "", "Mpps per core", "Mpps (wall)", "core use")
	for _, s := range []*series{cf, c1, cx, mb, own} {
		s.print()
	}
	fmt.Printf("\n  generator / C, the median of the rounds' ratios per core:\n")
	fmt.Printf("    port's mbuf pool / C alloc_bulk, fill, tx = %.2f   (goal >= 0.9)\n", median(rMb))
	fmt.Printf("    engine's pool    / C alloc_bulk, fill, tx = %.2f\n", median(rOwn))
	fmt.Printf("    port's mbuf pool / C in one pass          = %.2f\n", median(rOne))
	fmt.Printf("    port's mbuf pool / C one fixed frame      = %.2f\n", median(rFixed))
}
