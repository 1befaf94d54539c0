// Command tester measures linerate test's generator, the engine with a
// generator and a forward stage sending 64-byte frames flat out on an afpacket
// port, against a C loop that sends the same frames through a TPACKET_V3 tx
// ring on the same interface (cloop.c), in the same process: the generator's
// frame, with the flow and sequence number, the tx timestamp and the UDP
// checksum written into each as the generator does (TestSameFrames checks
// that the two send the same frames). A second C line copies one fixed frame
// without those fields. Runs alternate
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
int64_t lr_cloop(const char *ifname, const uint8_t *frame, int len, int fields, int csum, uint16_t sum,
		 int64_t count, double seconds, uint64_t *cpu_ns);
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
	"github.com/linerate/linerate/bench/internal/genframe"
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
	if *size < 62 || *size > 1518 {
		fmt.Fprintln(os.Stderr, "-size: 62 to 1518 bytes (the generator's fields need 62)")
		os.Exit(2)
	}
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
	f := genframe.IPv4(*size - 4)
	var cs, cx, gs []result
	var ratios, ratiosFixed []float64
	for r := 0; r < *rounds; r++ {
		c, err := runC(ifA, f, true, 0, *d)
		if err != nil {
			fmt.Fprintln(os.Stderr, "C loop:", err)
			return
		}
		g, err := runGo(ifA, *size, 0, *d)
		if err != nil {
			fmt.Fprintln(os.Stderr, "engine:", err)
			return
		}
		x, err := runC(ifA, f, false, 0, *d)
		if err != nil {
			fmt.Fprintln(os.Stderr, "C loop:", err)
			return
		}
		cs, cx, gs = append(cs, c), append(cx, x), append(gs, g)
		ratios, ratiosFixed = append(ratios, g.ppsCPU/c.ppsCPU), append(ratiosFixed, g.ppsCPU/x.ppsCPU)
		fmt.Printf("round %d: C %.3f Mpps (%.3f per CPU s), fixed frame %.3f (%.3f), generator %.3f Mpps (%.3f per CPU s): %.2f×\n",
			r+1, c.pps/1e6, c.ppsCPU/1e6, x.pps/1e6, x.ppsCPU/1e6, g.pps/1e6, g.ppsCPU/1e6, g.ppsCPU/c.ppsCPU)
	}
	mc, mx, mg := median(cs), median(cx), median(gs)
	fmt.Printf("\n%d-byte frames on afpacket (veth), %d rounds of %v, medians:\n", *size, *rounds, *d)
	fmt.Printf("  C loop, the same frames        %7.3f Mpps  %7.3f Mpps per CPU second\n", mc.pps/1e6, mc.ppsCPU/1e6)
	fmt.Printf("  C loop, one fixed frame        %7.3f Mpps  %7.3f Mpps per CPU second\n", mx.pps/1e6, mx.ppsCPU/1e6)
	fmt.Printf("  linerate generator → forward   %7.3f Mpps  %7.3f Mpps per CPU second\n", mg.pps/1e6, mg.ppsCPU/1e6)
	slices.Sort(ratios)
	slices.Sort(ratiosFixed)
	fmt.Printf("  generator / C, the same frames (per CPU second, median of rounds): %.2f× (goal ≥ 0.9×)\n", ratios[len(ratios)/2])
	fmt.Printf("  generator / C, one fixed frame: %.2f×\n", ratiosFixed[len(ratiosFixed)/2])
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

// runC runs the C loop on a locked thread of its own: with fields, writing
// the generator's fields into f's frame; count frames (0: for d).
func runC(ifname string, f genframe.Frame, fields bool, count int64, d time.Duration) (result, error) {
	done := make(chan result, 1)
	var err error
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		done <- cloop(ifname, f, fields, count, d, &err)
	}()
	r := <-done
	return r, err
}

// cloop runs lr_cloop on the calling (locked) thread.
func cloop(ifname string, f genframe.Frame, fields bool, count int64, d time.Duration, err *error) result {
	name := C.CString(ifname)
	defer C.free(unsafe.Pointer(name))
	data := C.CBytes(f.Data)
	defer C.free(data)
	at := 0
	if fields {
		at = f.Fields
	}
	var cpu C.uint64_t
	wall := time.Now()
	n := C.lr_cloop(name, (*C.uint8_t)(data), C.int(len(f.Data)), C.int(at), C.int(f.Csum), C.uint16_t(f.Sum),
		C.int64_t(count), C.double(d.Seconds()), &cpu)
	el := time.Since(wall)
	if n < 0 {
		*err = unix.Errno(-n)
		return result{}
	}
	return result{pps: float64(n) / el.Seconds(), ppsCPU: float64(n) / time.Duration(cpu).Seconds()}
}

// genConfig is the engine config of the Go side: the generator, with count
// packets (0: no limit), and a forward stage to an afpacket port on ifname.
func genConfig(ifname string, size, count int) string {
	return fmt.Sprintf(`
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
%s[[pipelines.stages]]
kind = "forward"
port = "tx"
`, ifname, genframe.Stage(size, count, ""))
}

func runGo(ifname string, size, count int, d time.Duration) (result, error) {
	cfg, err := config.Parse("bench.toml", []byte(genConfig(ifname, size, count)))
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
