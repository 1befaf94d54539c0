// Command tester measures linerate test's generator, the engine with a
// generator and a forward stage sending 64-byte frames flat out on an afpacket
// port, against a C loop that sends the same frame through a TPACKET_V3 tx
// ring on the same interface (cloop.c), in the same process. Runs alternate
// in rounds, so a neighbour on a shared machine disturbs both alike; each
// figure is the median over rounds, per second of wall time and per second of
// the process's CPU time, and the ratio is the median of the rounds' ratios
// per CPU second (the C loop's thread, the engine's lcore thread). It makes a veth pair of its own (root), and deletes it.
//
//	go run ./bench/tester [-rounds 5] [-duration 2s] [-size 64]
package main

/*
#include <stdint.h>
#include <stdlib.h>
int64_t lr_cloop(const char *ifname, const uint8_t *frame, int len, double seconds, uint64_t *cpu_ns);
*/
import "C"

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/linerate/linerate/appliance"
	"github.com/linerate/linerate/config"

	_ "github.com/linerate/linerate/plugins/builtin"
	_ "github.com/linerate/linerate/ports/afpacket"
)

type result struct{ pps, ppsCPU float64 }

func main() {
	rounds := flag.Int("rounds", 5, "rounds, each a C run and a Go run")
	d := flag.Duration("duration", 2*time.Second, "duration of each run")
	size := flag.Int("size", 64, "frame size with FCS")
	flag.Parse()
	ifA, ifB := fmt.Sprintf("lrtb%d", os.Getpid()%10000), fmt.Sprintf("lrtc%d", os.Getpid()%10000)
	if out, err := exec.Command("ip", "link", "add", ifA, "type", "veth", "peer", "name", ifB).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "ip link add (root needed): %v: %s\n", err, out)
		os.Exit(1)
	}
	cleanup := func() { _ = exec.Command("ip", "link", "del", ifA).Run() }
	defer cleanup()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, unix.SIGTERM)
	go func() { <-sig; cleanup(); os.Exit(1) }()
	for _, i := range []string{ifA, ifB} {
		if out, err := exec.Command("ip", "link", "set", i, "up").CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "ip link set up: %v: %s\n", err, out)
			return
		}
	}
	time.Sleep(200 * time.Millisecond)
	frame := udp4Frame(*size - 4)
	var cs, gs []result
	var ratios []float64
	for r := 0; r < *rounds; r++ {
		c, err := runC(ifA, frame, *d)
		if err != nil {
			fmt.Fprintln(os.Stderr, "C loop:", err)
			return
		}
		g, err := runGo(ifA, *size, *d)
		if err != nil {
			fmt.Fprintln(os.Stderr, "engine:", err)
			return
		}
		cs, gs = append(cs, c), append(gs, g)
		ratios = append(ratios, g.ppsCPU/c.ppsCPU)
		fmt.Printf("round %d: C %.3f Mpps (%.3f per CPU s), generator %.3f Mpps (%.3f per CPU s): %.2f×\n",
			r+1, c.pps/1e6, c.ppsCPU/1e6, g.pps/1e6, g.ppsCPU/1e6, g.ppsCPU/c.ppsCPU)
	}
	mc, mg := median(cs), median(gs)
	fmt.Printf("\n%d-byte frames on afpacket (veth), %d rounds of %v, medians:\n", *size, *rounds, *d)
	fmt.Printf("  C loop (TPACKET_V3 tx ring)   %7.3f Mpps  %7.3f Mpps per CPU second\n", mc.pps/1e6, mc.ppsCPU/1e6)
	fmt.Printf("  linerate generator → forward  %7.3f Mpps  %7.3f Mpps per CPU second\n", mg.pps/1e6, mg.ppsCPU/1e6)
	slices.Sort(ratios)
	fmt.Printf("  generator / C (per CPU second, median of rounds): %.2f× (goal ≥ 0.9×)\n", ratios[len(ratios)/2])
}

func median(rs []result) result {
	a, b := make([]float64, len(rs)), make([]float64, len(rs))
	for i, r := range rs {
		a[i], b[i] = r.pps, r.ppsCPU
	}
	slices.Sort(a)
	slices.Sort(b)
	return result{a[len(a)/2], b[len(b)/2]}
}

// threadCPU is each thread's CPU time so far (/proc/self/task/*/stat,
// utime + stime, in clock ticks of 10 ms).
func threadCPU() map[string]time.Duration {
	out := map[string]time.Duration{}
	tasks, _ := os.ReadDir("/proc/self/task")
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + t.Name() + "/stat")
		if err != nil {
			continue
		}
		// The fields after the command's closing parenthesis: utime and
		// stime are the 12th and 13th.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) < 13 {
			continue
		}
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		out[t.Name()] = time.Duration(ut+st) * 10 * time.Millisecond
	}
	return out
}

// lcoreCPU is the CPU time the busiest thread had between two threadCPU
// readings: the engine's one lcore.
func lcoreCPU(a, b map[string]time.Duration) time.Duration {
	var m time.Duration
	for k, v := range b {
		m = max(m, v-a[k])
	}
	return m
}

func runC(ifname string, frame []byte, d time.Duration) (result, error) {
	done := make(chan result, 1)
	var err error
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		name := C.CString(ifname)
		defer C.free(unsafe.Pointer(name))
		var cpu C.uint64_t
		wall := time.Now()
		n := C.lr_cloop(name, (*C.uint8_t)(unsafe.Pointer(&frame[0])), C.int(len(frame)), C.double(d.Seconds()), &cpu)
		el := time.Since(wall)
		if n < 0 {
			err = unix.Errno(-n)
			done <- result{}
			return
		}
		done <- result{pps: float64(n) / el.Seconds(), ppsCPU: float64(n) / time.Duration(cpu).Seconds()}
	}()
	r := <-done
	return r, err
}

func runGo(ifname string, size int, d time.Duration) (result, error) {
	cfg, err := config.Parse("bench.toml", []byte(fmt.Sprintf(`
version = 1
[engine]
pin = false
poll = "busy"
[control]
listen = ""
[[ports]]
name = "tx"
driver = "afpacket"
interface = %q
[[pipelines]]
name = "gen"
[[pipelines.stages]]
kind = "generator"
ip_version = 4
src = "198.18.0.1"
dst = "198.18.1.1"
sizes = [%d]
[[pipelines.stages]]
kind = "forward"
port = "tx"
`, ifname, size)))
	if err != nil {
		return result{}, err
	}
	e, err := appliance.New(cfg, appliance.Options{Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		return result{}, err
	}
	defer e.Close()
	if err := e.Start(); err != nil {
		return result{}, err
	}
	time.Sleep(200 * time.Millisecond) // warm up
	tx := func() uint64 {
		for _, p := range e.Snapshot().Ports {
			if p.Name == "tx" {
				return p.TxPackets
			}
		}
		return 0
	}
	n0, cpu0, wall := tx(), threadCPU(), time.Now()
	time.Sleep(d)
	n, cpu, el := tx()-n0, lcoreCPU(cpu0, threadCPU()), time.Since(wall)
	e.Stop()
	return result{pps: float64(n) / el.Seconds(), ppsCPU: float64(n) / cpu.Seconds()}, nil
}

// udp4Frame is an Ethernet, IPv4 and UDP frame of n bytes (without FCS).
func udp4Frame(n int) []byte {
	f := make([]byte, n)
	copy(f[0:], []byte{2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00})
	ip := f[14:]
	ip[0], ip[8], ip[9] = 0x45, 64, 17
	ip[2], ip[3] = byte((n-14)>>8), byte(n-14)
	copy(ip[12:], []byte{198, 18, 0, 1, 198, 18, 1, 1})
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(ip[i])<<8 | uint32(ip[i+1])
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	ip[10], ip[11] = byte(^sum>>8), byte(^sum)
	u := ip[20:]
	u[0], u[1], u[2], u[3] = 0x27, 0x10, 0x4e, 0x20
	u[4], u[5] = byte((n-34)>>8), byte(n-34)
	return f
}
