//go:build linux

// Command xdp is `make bench-xdp`: what linerate's xdp port costs, side by
// side with a baseline in the same run, on veth pairs in namespaces of its
// own (root).
//
//  1. port: AF_XDP rx→tx with the Ethernet addresses swapped, on a veth pair.
//     linerate's xdp port (its dispatcher taking all, a Go loop of RxBurst,
//     the swap, TxBurst) against xskfwd, a C loop on raw system calls doing
//     the same behind a minimal XSKMAP redirect (bench/xdp/cref). The load is
//     a closed loop: a generator (an xdp port on the other end) keeps
//     -window frames in flight and sends back what returns, so the rate is
//     the round trip's, with the generator the same for both. Rounds
//     alternate C and Go; the ratio is Go over C per round, the median
//     printed. Goal ≥ 0.85.
//  2. dispatcher: the host's own traffic through a router namespace, kernel
//     forwarding, with an empty XDP_PASS program on the router's ingress
//     and with the dispatcher of an xdp port (the docs' STAMP and IOAM
//     rules; 0% STAMP in the traffic), and with the frames dropped there
//     (the sender's and the veth's share, subtracted). The generator's
//     thread sends UDP from a third namespace; a counting XDP_DROP program
//     on the far end counts what was forwarded. The three programs take
//     turns on the port's own link batch by batch; each round of three
//     batches gives paired figures, each trial their medians, and the run
//     the ratio's geometric mean with its 95% confidence interval, and the
//     dispatcher's cost in ns/pkt. Goal ≥ 0.95.
//
// Copy mode: veth has no zero-copy AF_XDP. A machine shared with other work
// swings: compare the ratios, not the absolute rates, across runs.
package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/internal/cputime"
	"github.com/linerate/linerate/ports/xdp"
)

func main() {
	ref := flag.String("ref", "bin/xskfwd", "the C reference loop (make bench-xdp builds it)")
	part := flag.String("part", "all", "port, dispatcher or all")
	rounds := flag.Int("rounds", 7, "port: rounds of C and Go each")
	batches := flag.Int("batches", 30, "port: batches a round")
	batch := flag.Int("batch", 1024, "port: frames a batch (at most 2048, the rx ring)")
	trials := flag.Int("trials", 20, "dispatcher: trials")
	perTrial := flag.Int("rounds-per-trial", 50, "dispatcher: rounds of a trial, each a batch of drop, empty and dispatcher")
	size := flag.Int("size", 64, "frame size in bytes (without FCS)")
	flag.Parse()
	if os.Geteuid() != 0 {
		fail(errors.New("bench-xdp makes namespaces and attaches XDP programs: run it as root"))
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() { <-sigs; cleanup(); os.Exit(1) }()
	defer cleanup()
	fmt.Printf("bench-xdp: veth pairs in namespaces of their own, AF_XDP copy mode, %d B frames, %d CPUs\n",
		*size, runtime.NumCPU())
	if *part == "all" || *part == "port" {
		if _, err := benchPort(*ref, *rounds, *batches, *batch, *size); err != nil {
			fail(err)
		}
	}
	if *part == "all" || *part == "dispatcher" {
		if _, err := benchDispatcher(*trials, *perTrial, 256, *size); err != nil {
			fail(err)
		}
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "bench-xdp:", err)
	cleanup()
	os.Exit(1)
}

// --- namespaces -------------------------------------------------------------

var (
	nsMu  sync.Mutex
	nsAll []string
)

type netns string

func newNS(name string) (netns, error) {
	n := fmt.Sprintf("lrbx-%s-%d", name, os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", n).CombinedOutput(); err != nil {
		return "", fmt.Errorf("ip netns add: %v: %s", err, out)
	}
	nsMu.Lock()
	nsAll = append(nsAll, n)
	nsMu.Unlock()
	return netns(n), netns(n).ip("link", "set", "lo", "up")
}

// cleanup deletes the namespaces, and with them their veths; the XDP
// programs go with their links or interfaces.
func cleanup() {
	nsMu.Lock()
	defer nsMu.Unlock()
	for _, n := range nsAll {
		_ = exec.Command("ip", "netns", "del", n).Run()
	}
	nsAll = nil
}

func (n netns) ip(args ...string) error {
	full := append([]string{"-n", string(n)}, args...)
	if out, err := exec.Command("ip", full...).CombinedOutput(); err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(full, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// do runs f on a thread inside the namespace; sockets and links it opens
// stay there.
func (n netns) do(f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- err
			return
		}
		defer unix.Close(orig)
		target, err := unix.Open("/run/netns/"+string(n), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- err
			return
		}
		defer unix.Close(target)
		if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
			errc <- err
			return
		}
		err = f()
		if unix.Setns(orig, unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}

func (n netns) ifc(name string) (ifc *net.Interface, err error) {
	err = n.do(func() error { ifc, err = net.InterfaceByName(name); return err })
	return ifc, err
}

// veth makes a veth pair a (in na) – b (in nb) and waits until both ends
// are up with a qdisc: before, what is sent is dropped.
func veth(na netns, a string, nb netns, b string) error {
	if err := na.ip("link", "add", a, "type", "veth", "peer", "name", b, "netns", string(nb)); err != nil {
		return err
	}
	for _, e := range []struct {
		n    netns
		name string
	}{{na, a}, {nb, b}} {
		if err := e.n.ip("link", "set", e.name, "up"); err != nil {
			return err
		}
	}
	for _, e := range []struct {
		n    netns
		name string
	}{{na, a}, {nb, b}} {
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
			out, _ := exec.Command("ip", "-n", string(e.n), "-o", "link", "show", "dev", e.name).Output()
			if bytes.Contains(out, []byte(" state UP ")) && !bytes.Contains(out, []byte(" qdisc noop ")) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s is not up after 30 s", e.name)
			}
		}
	}
	return nil
}

// --- programs ---------------------------------------------------------------

// xskRedirect is the C loop's XDP program: every frame to the queue's
// socket in the XSKMAP, XDP_PASS where there is none.
func xskRedirect() (*ebpf.Program, *ebpf.Map, error) {
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.XSKMap, KeySize: 4, ValueSize: 4, MaxEntries: 64})
	if err != nil {
		return nil, nil, err
	}
	p, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.XDP, License: "GPL", Instructions: asm.Instructions{
		asm.LoadMem(asm.R2, asm.R1, 16, asm.Word), // xdp_md.rx_queue_index
		asm.LoadMapPtr(asm.R1, m.FD()),
		asm.Mov.Imm(asm.R3, 2), // XDP_PASS without a socket
		asm.FnRedirectMap.Call(),
		asm.Return(),
	}})
	if err != nil {
		m.Close()
		return nil, nil, err
	}
	return p, m, nil
}

// passProg is the empty program: XDP_PASS. Its attach type is the
// dispatcher's, so that a link can swap one for the other.
func passProg() (*ebpf.Program, error) {
	return ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.XDP, AttachType: ebpf.AttachXDP, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 2), asm.Return()}})
}

// sinkProg counts every frame in a per-CPU array and drops it.
func sinkProg() (*ebpf.Program, *ebpf.Map, error) {
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: 1})
	if err != nil {
		return nil, nil, err
	}
	p, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.XDP, AttachType: ebpf.AttachXDP, License: "GPL", Instructions: asm.Instructions{
		asm.StoreImm(asm.RFP, -4, 0, asm.Word),
		asm.LoadMapPtr(asm.R1, m.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -4),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "out"),
		asm.Mov.Imm(asm.R1, 1),
		asm.StoreXAdd(asm.R0, asm.R1, asm.DWord),
		asm.Mov.Imm(asm.R0, 1).WithSymbol("out"), // XDP_DROP
		asm.Return(),
	}})
	if err != nil {
		m.Close()
		return nil, nil, err
	}
	return p, m, nil
}

func attach(n netns, ifname string, p *ebpf.Program) (link.Link, error) {
	var l link.Link
	err := n.do(func() error {
		ifc, err := net.InterfaceByName(ifname)
		if err != nil {
			return err
		}
		l, err = link.AttachXDP(link.XDPOptions{Program: p, Interface: ifc.Index, Flags: link.XDPDriverMode})
		return err
	})
	return l, err
}

func sumPerCPU(m *ebpf.Map) uint64 {
	var vals []uint64
	if err := m.Lookup(uint32(0), &vals); err != nil {
		return 0
	}
	var s uint64
	for _, v := range vals {
		s += v
	}
	return s
}

// udpFrame is an IPv4 UDP frame of size bytes.
func udpFrame(dst, src net.HardwareAddr, sip, dip net.IP, dport uint16, size int) []byte {
	f := make([]byte, size)
	copy(f[0:], dst)
	copy(f[6:], src)
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ip := f[14:34]
	ip[0], ip[8], ip[9] = 0x45, 64, 17
	binary.BigEndian.PutUint16(ip[2:], uint16(size-14))
	copy(ip[12:], sip.To4())
	copy(ip[16:], dip.To4())
	var s uint32
	for i := 0; i < 20; i += 2 {
		s += uint32(binary.BigEndian.Uint16(ip[i:]))
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	binary.BigEndian.PutUint16(ip[10:], ^uint16(s))
	binary.BigEndian.PutUint16(f[34:], 40000)
	binary.BigEndian.PutUint16(f[36:], dport)
	binary.BigEndian.PutUint16(f[38:], uint16(size-34)) // UDP checksum 0: none
	return f
}

func swapMAC(d []byte) {
	var t [6]byte
	copy(t[:], d[0:6])
	copy(d[0:6], d[6:12])
	copy(d[6:12], t[:])
}

func openPort(n netns, o xdp.Options) (p *xdp.Port, err error) {
	err = n.do(func() error { p, err = xdp.New(o); return err })
	return p, err
}

// fill allocates up to want frames of p's pool holding tmpl into b.
func fill(p *xdp.Port, b *packet.Burst, tmpl []byte, want int) {
	k := p.Pool().Alloc(b, min(want, b.Room()))
	for i := b.N - k; i < b.N; i++ {
		pk := b.P(i)
		d, err := pk.Append(len(tmpl))
		if err != nil {
			fail(err)
		}
		copy(d, tmpl)
	}
}

// send transmits b on p's queue 0 and frees what the ring had no room for.
func send(p *xdp.Port, b *packet.Burst) int {
	k := p.TxBurst(0, b)
	if k < b.N {
		packet.FreeHandles(b.H[k:b.N])
	}
	b.N = 0
	return k
}

// --- 1. the port against the C loop -----------------------------------------

// A dut forwards, MACs swapped, the next k frames its socket receives, and
// says how many and its thread's CPU time from the first to the last.
type dut interface {
	batch(k int) (int, time.Duration, error)
	close() error
}

func benchPort(ref string, rounds, batches, k, size int) (ratio float64, err error) {
	if _, err := os.Stat(ref); err != nil {
		return 0, fmt.Errorf("the C reference loop: %w (make bench-xdp builds it)", err)
	}
	gen, err := newNS("gen")
	if err != nil {
		return 0, err
	}
	dutNS, err := newNS("dut")
	if err != nil {
		return 0, err
	}
	if err := veth(gen, "g0", dutNS, "d0"); err != nil {
		return 0, err
	}
	gi, err := gen.ifc("g0")
	if err != nil {
		return 0, err
	}
	di, err := dutNS.ifc("d0")
	if err != nil {
		return 0, err
	}
	g, err := openPort(gen, xdp.Options{Name: "gen", Interface: "g0", TakeAll: true, Bind: "copy"})
	if err != nil {
		return 0, err
	}
	defer g.Close()
	tmpl := udpFrame(di.HardwareAddr, gi.HardwareAddr, net.IPv4(10, 9, 0, 1), net.IPv4(10, 9, 0, 2), 9, size)

	fmt.Printf("\n1. AF_XDP rx→tx, MAC swap, on a veth pair: batches of %d frames, %d a round, C and Go alternating.\n"+
		"   loop: the forwarding thread's CPU ns/pkt (its rx ring, the swap, tx and the sendto that carries the\n"+
		"   frame to the peer); rx: the sender's CPU ns/pkt, which runs the receiver's XDP program and copies the\n"+
		"   frame into its rx ring (veth runs the peer's XDP in the sender's softirq). Medians per round.\n\n", k, batches)
	fmt.Printf("%-6s %9s %9s %9s %9s %11s\n", "round", "C loop", "C rx", "Go loop", "Go rx", "C/Go total")
	var ratios, cl, cr, gl, gr []float64
	for r := range rounds {
		var res [2][2]float64 // [C, Go][loop, rx]
		for _, which := range [2]int{r % 2, 1 - r%2} {
			var d dut
			if which == 0 {
				d, err = startC(ref, dutNS)
			} else {
				d, err = startGo(dutNS)
			}
			if err != nil {
				return 0, err
			}
			loop, rx, err := measure(g, d, tmpl, batches, k)
			if cerr := d.close(); err == nil {
				err = cerr
			}
			if err != nil {
				return 0, err
			}
			res[which] = [2]float64{loop, rx}
		}
		ratio := (res[0][0] + res[0][1]) / (res[1][0] + res[1][1])
		ratios, cl, cr, gl, gr = append(ratios, ratio), append(cl, res[0][0]), append(cr, res[0][1]),
			append(gl, res[1][0]), append(gr, res[1][1])
		fmt.Printf("%-6d %9.1f %9.1f %9.1f %9.1f %11.2f\n", r+1, res[0][0], res[0][1], res[1][0], res[1][1], ratio)
	}
	fmt.Printf("%-6s %9.1f %9.1f %9.1f %9.1f %11.2f   (goal C/Go ≥ 0.85: the port's rate ≥ 0.85 × C's)\n",
		"median", median(cl), median(cr), median(gl), median(gr), median(ratios))
	return median(ratios), nil
}

// measure sends batches of k frames from g to d, lets d forward them, and
// returns the medians of d's loop ns/pkt and of g's sending ns/pkt. A batch
// of which the veth dropped frames (a deferred softirq) is left out and
// another sent, up to ten times as many as asked.
func measure(g *xdp.Port, d dut, tmpl []byte, batches, k int) (loop, rx float64, err error) {
	c := make(chan error, 1)
	var loops, rxs []float64
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		var b packet.Burst
		for try := 0; len(loops) < batches && try < 10*batches; try++ {
			drain(g, &b)
			c0 := cputime.Thread()
			for sent := 0; sent < k; {
				fill(g, &b, tmpl, min(64, k-sent))
				sent += send(g, &b)
			}
			sendCPU := cputime.Thread() - c0
			time.Sleep(5 * time.Millisecond) // the veth's softirq, if deferred
			n, cpu, err := d.batch(k)
			if err != nil {
				c <- err
				return
			}
			if n == k && cpu > 0 {
				loops = append(loops, float64(cpu)/float64(k))
				rxs = append(rxs, float64(sendCPU)/float64(k))
			}
		}
		drain(g, &b)
		c <- nil
	}()
	if err := <-c; err != nil {
		return 0, 0, err
	}
	if len(loops) < batches {
		return 0, 0, fmt.Errorf("only %d of %d batches arrived whole in %d tries: the veth dropped frames", len(loops), batches, 10*batches)
	}
	return median(loops), median(rxs), nil
}

// drain frees what came back to g, and its completions, until 20 ms pass
// without a frame.
func drain(g *xdp.Port, b *packet.Burst) {
	for last := time.Now(); time.Since(last) < 20*time.Millisecond; {
		b.N = 0
		if n := g.RxBurst(0, b); n > 0 {
			packet.FreeHandles(b.H[:n])
			last = time.Now()
		}
		b.N = 0
		send(g, b)
	}
}

// cDUT is xskfwd behind a minimal XSKMAP redirect.
type cDUT struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	out   *bufio.Scanner
	link  link.Link
	prog  *ebpf.Program
	xsks  *ebpf.Map
	files []*os.File
}

func startC(ref string, ns netns) (dut, error) {
	c := &cDUT{}
	var err error
	if c.prog, c.xsks, err = xskRedirect(); err != nil {
		return nil, err
	}
	if c.link, err = attach(ns, "d0", c.prog); err != nil {
		c.close()
		return nil, err
	}
	fd, err := unix.Dup(c.xsks.FD())
	if err != nil {
		c.close()
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "xskmap")
	c.files = append(c.files, f)
	c.cmd = exec.Command("ip", "netns", "exec", string(ns), ref, "d0", "0", "3")
	c.cmd.ExtraFiles = []*os.File{f}
	c.cmd.Stderr = os.Stderr
	if c.in, err = c.cmd.StdinPipe(); err != nil {
		c.close()
		return nil, err
	}
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		c.close()
		return nil, err
	}
	if err := c.cmd.Start(); err != nil {
		c.cmd = nil
		c.close()
		return nil, err
	}
	c.out = bufio.NewScanner(out)
	if !c.out.Scan() || c.out.Text() != "ready" {
		c.close()
		return nil, fmt.Errorf("xskfwd did not start: %q", c.out.Text())
	}
	return c, nil
}

func (c *cDUT) batch(k int) (int, time.Duration, error) {
	if _, err := fmt.Fprintf(c.in, "go %d\n", k); err != nil {
		return 0, 0, err
	}
	if !c.out.Scan() {
		return 0, 0, fmt.Errorf("xskfwd: %v", c.out.Err())
	}
	var n, ns uint64
	if _, err := fmt.Sscanf(c.out.Text(), "done %d cpu_ns %d", &n, &ns); err != nil {
		return 0, 0, fmt.Errorf("xskfwd said %q", c.out.Text())
	}
	return int(n), time.Duration(ns), nil
}

func (c *cDUT) close() error {
	var err error
	if c.cmd != nil {
		c.in.Close()
		err = c.cmd.Wait()
	}
	for _, f := range c.files {
		f.Close()
	}
	if c.link != nil {
		c.link.Close()
	}
	if c.prog != nil {
		c.prog.Close()
	}
	if c.xsks != nil {
		c.xsks.Close()
	}
	return err
}

// goDUT is linerate's xdp port, taking all, and a Go loop over its API.
type goDUT struct {
	p    *xdp.Port
	req  chan int
	resp chan [2]int64
}

func startGo(ns netns) (dut, error) {
	p, err := openPort(ns, xdp.Options{Name: "dut", Interface: "d0", TakeAll: true, Bind: "copy"})
	if err != nil {
		return nil, err
	}
	d := &goDUT{p: p, req: make(chan int), resp: make(chan [2]int64)}
	go d.loop()
	return d, nil
}

// loop is the forwarding thread: the xskfwd loop, over the port's API.
func (d *goDUT) loop() {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var b packet.Burst
	for k := range d.req {
		n := 0
		var c0 time.Duration
		var idle time.Time
		for n < k {
			b.N = 0
			got := d.p.RxBurst(0, &b)
			if got == 0 {
				send(d.p, &b) // completions
				if idle.IsZero() {
					idle = time.Now()
				} else if time.Since(idle) > 200*time.Millisecond {
					break
				}
				continue
			}
			idle = time.Time{}
			if c0 == 0 {
				c0 = cputime.Thread()
			}
			for i := range got {
				swapMAC(b.P(i).Data())
			}
			n += send(d.p, &b)
		}
		var cpu time.Duration
		if c0 != 0 {
			cpu = cputime.Thread() - c0
		}
		d.resp <- [2]int64{int64(n), int64(cpu)}
	}
}

func (d *goDUT) batch(k int) (int, time.Duration, error) {
	d.req <- k
	r := <-d.resp
	return int(r[0]), time.Duration(r[1]), nil
}

func (d *goDUT) close() error {
	close(d.req)
	return d.p.Close()
}

// --- 2. the dispatcher's cost to the host's traffic -------------------------

func benchDispatcher(trials, rounds, k, size int) (ratio float64, err error) {
	src, err := newNS("src")
	if err != nil {
		return 0, err
	}
	rtr, err := newNS("rtr")
	if err != nil {
		return 0, err
	}
	dst, err := newNS("dst")
	if err != nil {
		return 0, err
	}
	if err := veth(src, "s0", rtr, "r0"); err != nil {
		return 0, err
	}
	if err := veth(rtr, "r1", dst, "t0"); err != nil {
		return 0, err
	}
	for _, c := range []struct {
		n    netns
		args []string
	}{
		{rtr, []string{"addr", "add", "10.11.0.1/24", "dev", "r0"}},
		{rtr, []string{"addr", "add", "10.12.0.1/24", "dev", "r1"}},
		{dst, []string{"addr", "add", "10.12.0.2/24", "dev", "t0"}},
	} {
		if err := c.n.ip(c.args...); err != nil {
			return 0, err
		}
	}
	if err := rtr.do(func() error { return os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0) }); err != nil {
		return 0, err
	}
	ti, err := dst.ifc("t0")
	if err != nil {
		return 0, err
	}
	if err := rtr.ip("neigh", "replace", "10.12.0.2", "lladdr", ti.HardwareAddr.String(), "dev", "r1", "nud", "permanent"); err != nil {
		return 0, err
	}
	si, err := src.ifc("s0")
	if err != nil {
		return 0, err
	}
	ri, err := rtr.ifc("r0")
	if err != nil {
		return 0, err
	}
	sink, count, err := sinkProg()
	if err != nil {
		return 0, err
	}
	defer sink.Close()
	defer count.Close()
	sl, err := attach(dst, "t0", sink)
	if err != nil {
		return 0, err
	}
	defer sl.Close()
	g, err := openPort(src, xdp.Options{Name: "gen", Interface: "s0", TakeAll: true, Bind: "copy"})
	if err != nil {
		return 0, err
	}
	defer g.Close()
	// UDP to port 9, which the dispatcher's rules (STAMP, 862) do not take.
	tmpl := udpFrame(ri.HardwareAddr, si.HardwareAddr, net.IPv4(10, 11, 0, 2), net.IPv4(10, 12, 0, 2), 9, size)
	pass, err := passProg()
	if err != nil {
		return 0, err
	}
	defer pass.Close()
	drop, dropCount, err := sinkProg()
	if err != nil {
		return 0, err
	}
	defer drop.Close()
	defer dropCount.Close()
	// The docs' rules: STAMP, and IOAM to a prefix.
	port, nh, ioam := 862, 17, true
	disp, err := openPort(rtr, xdp.Options{Name: "edge0", Interface: "r0", Rules: []xdp.Rule{
		{NextHeader: &nh, UDPDstPort: &port},
		{DstPrefix: netip.MustParsePrefix("2001:db8:1::/48"), IOAM: &ioam}}})
	if err != nil {
		return 0, err
	}
	defer disp.Close()
	lnk, dprog, err := attachedLink(rtr, "r0")
	if err != nil {
		return 0, err
	}
	defer lnk.Close()
	defer dprog.Close()
	// The port's own link, its program swapped between batches: drop, the
	// empty program and the dispatcher run on the same interface, link and
	// veth, milliseconds apart.
	progs := [3]*ebpf.Program{drop, pass, dprog}
	sinks := [3]*ebpf.Map{dropCount, count, count}

	fmt.Printf("\n2. the host's traffic through a router namespace (kernel forwarding), 0%% STAMP (UDP to port 9;\n"+
		"   the dispatcher has the docs' STAMP and IOAM rules): the sender's CPU ns/pkt for the whole path (veth\n"+
		"   runs the router and the far end in the sender's softirq) with, on the router's ingress, the frames\n"+
		"   dropped (XDP_DROP: the sender's and the veth's share), the empty XDP_PASS program, and the\n"+
		"   dispatcher. The three take turns batch by batch (%d frames each, the port's link swapping its\n"+
		"   program), so a swing of the machine's load weighs on each alike. %d trials of %d rounds;\n"+
		"   router = path − drop; ratio = empty router ns / dispatcher router ns (the forwarding rate's ratio);\n"+
		"   Δ = dispatcher − empty, ns/pkt. Δ and ratio pair the three batches of a round; a trial's figures\n"+
		"   are the medians of its rounds'.\n\n",
		k, trials, rounds)
	fmt.Printf("load average at the start: %s\n\n", loadAvg())
	fmt.Printf("%-6s %8s %8s %10s %12s %15s %7s %7s\n", "trial", "drop", "empty", "dispatcher", "empty router",
		"disp. router", "Δ ns", "ratio")
	fmt.Printf("%-6s %8s %8s %10s %12s %15s %7s %7s\n", "", "median", "median", "median", "", "", "paired", "paired")
	var ratios, pathRatios, deltas []float64
	for i := range trials {
		rs, err := pathCosts(g, tmpl, lnk, progs, sinks, rounds, k)
		if err != nil {
			return 0, err
		}
		// Each round's three batches are neighbours in time: its ratios and
		// its difference are paired figures, and the trial's are their
		// medians.
		var ns [3]float64
		var rr, pr, dd []float64
		for _, r := range rs {
			rr, pr, dd = append(rr, (r[1]-r[0])/(r[2]-r[0])), append(pr, r[1]/r[2]), append(dd, r[2]-r[1])
		}
		for j := range ns {
			ns[j] = median(column(rs, j))
		}
		ratios, pathRatios, deltas = append(ratios, median(rr)), append(pathRatios, median(pr)), append(deltas, median(dd))
		fmt.Printf("%-6d %8.1f %8.1f %10.1f %12.1f %15.1f %7.1f %7.3f\n", i+1, ns[0], ns[1], ns[2], ns[1]-ns[0], ns[2]-ns[0],
			median(dd), median(rr))
	}
	// Back to the dispatcher before the port closes its link.
	if err := lnk.Update(dprog); err != nil {
		return 0, err
	}
	m, lo, hi := geoMeanCI(ratios)
	pm, plo, phi := geoMeanCI(pathRatios)
	dm, dlo, dhi := meanCI(deltas)
	fmt.Printf("\nrouter rate, dispatcher/empty: %.3f, 95%% CI [%.3f, %.3f] over %d trials (goal ≥ 0.95); median %.3f\n",
		m, lo, hi, len(ratios), median(ratios))
	fmt.Printf("whole path (sender included), dispatcher/empty: %.3f, 95%% CI [%.3f, %.3f]; median %.3f\n",
		pm, plo, phi, median(pathRatios))
	fmt.Printf("the dispatcher's cost, dispatcher − empty: %.1f ns/pkt, 95%% CI [%.1f, %.1f]; median %.1f\n",
		dm, dlo, dhi, median(deltas))
	fmt.Println("(ratios: geometric means, Student's t on their logarithms; Δ: mean, Student's t)")
	fmt.Printf("load average at the end: %s\n", loadAvg())
	return m, nil
}

// attachedLink is the bpf_link that holds the XDP program on ifname in n,
// found by the program's id (ip link), and the program: the port's, for
// the benchmark to swap with its baselines.
func attachedLink(n netns, ifname string) (link.Link, *ebpf.Program, error) {
	out, err := exec.Command("ip", "-n", string(n), "-j", "-d", "link", "show", "dev", ifname).Output()
	if err != nil {
		return nil, nil, fmt.Errorf("ip link show %s: %w", ifname, err)
	}
	var ls []struct {
		XDP struct {
			Prog struct {
				ID uint32 `json:"id"`
			} `json:"prog"`
		} `json:"xdp"`
	}
	if err := json.Unmarshal(out, &ls); err != nil || len(ls) != 1 || ls[0].XDP.Prog.ID == 0 {
		return nil, nil, fmt.Errorf("no XDP program on %s: %v: %s", ifname, err, out)
	}
	id := ebpf.ProgramID(ls[0].XDP.Prog.ID)
	var it link.Iterator
	defer it.Close()
	for it.Next() {
		if info, err := it.Link.Info(); err == nil && info.Type == link.XDPType && info.Program == id {
			p, err := ebpf.NewProgramFromID(id)
			if err != nil {
				return nil, nil, err
			}
			return it.Take(), p, nil
		}
	}
	return nil, nil, fmt.Errorf("no bpf_link holds program %d on %s: %v", id, ifname, it.Err())
}

// loadAvg is /proc/loadavg's first three figures.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}

// pathCosts runs rounds of three batches of k frames from g, one with each
// of progs on the link (the order rotating round by round), and returns the
// sending thread's CPU ns/pkt of each batch, by round and program. A batch is kept only
// if its sink counted all of it by the time the last sendto returned: then
// every frame went the whole way in the sender's softirqs, none deferred to
// ksoftirqd (whose time the thread's clock does not see); otherwise it is
// sent again, up to ten times.
func pathCosts(g *xdp.Port, tmpl []byte, lnk link.Link, progs [3]*ebpf.Program, sinks [3]*ebpf.Map,
	rounds, k int) ([][3]float64, error) {
	type result struct {
		costs [][3]float64
		err   error
	}
	c := make(chan result)
	go func() {
		// One CPU for the whole path: veth schedules the router's NAPI on
		// the CPU that sent, so no other CPU takes a share of the work.
		runtime.LockOSThread() // pinned: the thread ends with the goroutine
		var one unix.CPUSet
		one.Set(0)
		_ = unix.SchedSetaffinity(0, &one)
		var b packet.Burst
		var r result
		for round := range rounds {
			r.costs = append(r.costs, [3]float64{})
			for j := range 3 {
				which := (round + j) % 3
				if err := lnk.Update(progs[which]); err != nil {
					r.err = fmt.Errorf("swap the router's program: %w", err)
					c <- r
					return
				}
				for try := 0; ; try++ {
					if try == 10 {
						r.err = fmt.Errorf("a batch did not go the whole way inline in %d tries", try)
						c <- r
						return
					}
					n0 := sumPerCPU(sinks[which])
					c0 := cputime.Thread()
					for sent := 0; sent < k; {
						fill(g, &b, tmpl, min(32, k-sent))
						sent += send(g, &b)
					}
					cpu := cputime.Thread() - c0
					if sumPerCPU(sinks[which])-n0 == uint64(k) {
						r.costs[round][which] = float64(cpu) / float64(k)
						break
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
		}
		c <- r
	}()
	r := <-c
	return r.costs, r.err
}

func column(rows [][3]float64, j int) []float64 {
	out := make([]float64, len(rows))
	for i, r := range rows {
		out[i] = r[j]
	}
	return out
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s) == 0 {
		return math.NaN()
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// geoMeanCI is the geometric mean of ratios and its 95% confidence
// interval: meanCI on their logarithms, which a skewed ratio of two noisy
// times needs.
func geoMeanCI(v []float64) (m, lo, hi float64) {
	logs := make([]float64, 0, len(v))
	for _, x := range v {
		if x > 0 {
			logs = append(logs, math.Log(x))
		}
	}
	m, lo, hi = meanCI(logs)
	return math.Exp(m), math.Exp(lo), math.Exp(hi)
}

// meanCI is the mean and its 95% confidence interval (Student's t).
func meanCI(v []float64) (m, lo, hi float64) {
	n := float64(len(v))
	for _, x := range v {
		m += x
	}
	m /= n
	if len(v) < 2 {
		return m, math.NaN(), math.NaN()
	}
	var ss float64
	for _, x := range v {
		ss += (x - m) * (x - m)
	}
	se := math.Sqrt(ss/(n-1)) / math.Sqrt(n)
	h := tQuantile975(len(v)-1) * se
	return m, m - h, m + h
}

// tQuantile975 is Student's t 0.975 quantile for df degrees of freedom.
func tQuantile975(df int) float64 {
	table := []float64{12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
		2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
		2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042}
	if df >= 1 && df <= len(table) {
		return table[df-1]
	}
	return 1.96
}
