//go:build linux

package main

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/linerate/linerate/appliance/kernel"
	"github.com/linerate/linerate/internal/netns"
	"github.com/linerate/linerate/internal/testenv"
	"github.com/linerate/linerate/plugins/stamp/bpf"
)

// The router test's addresses: h1 — r0 [router] r1 — h2.
const (
	rtrH1   = "10.1.0.2"
	rtrR0   = "10.1.0.1"
	rtrR1   = "10.2.0.1"
	rtrH2   = "10.2.0.2"
	rtrSSID = 4242
	// rtrWait bounds every wait: a loaded machine can defer veth's softirqs
	// and the engine's start for long.
	rtrWait = 20 * time.Second
)

// rtrConfig is the router's linerate config: an xdp port on r0 whose
// dispatcher takes what the match rules name (rules, TOML) and leaves the
// router the rest, a classify stage with as many rules as classifyRules
// says, and a STAMP reflector with that offload key that answers out of
// r0.
func rtrConfig(sock, rules string, classifyRules int, offload, reflectorExtra string) string {
	return fmt.Sprintf(`version = 1
[engine]
pin = false
[control]
listen = "unix:%s"

[[ports]]
name = "edge0"
driver = "xdp"
interface = "r0"
%s
[[pipelines]]
name = "stamp"
cpus = [1]
rx = ["edge0"]
[[pipelines.stages]]
kind = "classify"
%s
[[pipelines.stages]]
kind = "stamp.reflector"
name = "refl"
forward = "in"
synchronized = true
clock_error = "1us"
offload = %q
%s
[[pipelines.stages.sessions]]
ssid = %d
mode = "stateful"
`, sock, rules, strings.Repeat("[[pipelines.stages.rules]]\nnext_header = 17\nport = \"continue\"\n", classifyRules),
		offload, reflectorExtra, rtrSSID)
}

// The port takes STAMP throughout, and one other UDP port, 7001 (rulesA)
// or 7000 (rulesB), which a reload moves.
const rulesSTAMP = `[[ports.match]]
next_header = 17
udp_dst_port = 862
`

const (
	rulesA = rulesSTAMP + "[[ports.match]]\nnext_header = 17\nudp_dst_port = 7001\n"
	rulesB = rulesSTAMP + "[[ports.match]]\nnext_header = 17\nudp_dst_port = 7000\n"
)

// checkStampReflectedWhere: n test packets were reflected, by the stage's
// program in the kernel (XDP_TX, the port's xdp_offload_tx) when inKernel,
// else by the Go stage through the AF_XDP socket (the port's rx and tx).
// An offloaded stage's program runs ahead of the match rules
// (appliance/offload), so the reload below moves a rule other than STAMP's.
func checkStampReflectedWhere(t *testing.T, st *rtrStats, n uint64, inKernel bool) {
	t.Helper()
	p := st.port("edge0")
	if got := st.counter("refl", "reflected"); got < n {
		t.Errorf("refl reflected %d, want at least %d", got, n)
	}
	if inKernel {
		if p.Extra["xdp_offload_tx"] < n {
			t.Errorf("the kernel reflected %d (xdp_offload_tx), want %d", p.Extra["xdp_offload_tx"], n)
		}
		return
	}
	if p.RxPackets < n || p.TxPackets < n || p.Extra["xdp_offload_tx"] != 0 {
		t.Errorf("port edge0: rx %d, tx %d, xdp_offload_tx %d: want %d in and out through AF_XDP",
			p.RxPackets, p.TxPackets, p.Extra["xdp_offload_tx"], n)
	}
}

// TestXDPRouter: a Linux router namespace runs `linerate run` with an xdp
// port on its interface r0. The router's own traffic and what it forwards —
// ARP, ICMP echo, TCP, UDP to other ports — passes the dispatcher to the
// kernel untouched; STAMP to port 862 goes to linerate and is reflected.
// `linerate reload` (and SIGHUP) moves the match rules and the traffic
// follows them; a reload refused changes nothing. Once linerate exits, normally or by
// kill -9, no XDP program or link is left on r0.
//
// The reflector has an offload: "xdp" runs it in the kernel where the
// kernel has what its program needs; "fallback" runs offload = "auto"
// where the kernel lacks bpf_ktime_get_tai_ns (forced with
// LINERATE_KERNEL_DISABLE, which linerate inherits, so on every kernel):
// the reflector in Go behind the AF_XDP socket, said once in the log.
// Everything else holds alike.
func TestXDPRouter(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequireCmd(t, "bpftool")
	testenv.RequireKernel(t, kernel.XSKMap, kernel.Loop) // every xdp port's
	t.Run("xdp", func(t *testing.T) {
		fs, err := bpf.ReflectorNeeds(0)
		if err != nil {
			t.Fatal(err)
		}
		testenv.RequireKernel(t, fs...)
		testXDPRouter(t, "xdp", true)
	})
	t.Run("fallback", func(t *testing.T) {
		t.Setenv(kernel.DisableEnv, "bpf_ktime_get_tai_ns")
		testXDPRouter(t, "auto", false)
	})
}

func testXDPRouter(t *testing.T, offload string, inKernel bool) {
	h1, r, h2 := netns.New(t), netns.New(t), netns.New(t)
	netns.Veth(t, h1, "h1", r, "r0")
	netns.Veth(t, r, "r1", h2, "h2")
	h1.IP(t, "addr", "add", rtrH1+"/24", "dev", "h1")
	r.IP(t, "addr", "add", rtrR0+"/24", "dev", "r0")
	r.IP(t, "addr", "add", rtrR1+"/24", "dev", "r1")
	h2.IP(t, "addr", "add", rtrH2+"/24", "dev", "h2")
	h1.IP(t, "route", "add", "default", "via", rtrR0)
	h2.IP(t, "route", "add", "default", "via", rtrR1)
	r.Sysctl(t, [][2]string{{"ipv4/ip_forward", "1"}})
	// For the replies a reflector in the kernel sends back by XDP_TX.
	h1.PassXDP(t, "h1")

	dir := t.TempDir()
	sock := filepath.Join(dir, "control.sock")
	cfgPath := filepath.Join(dir, "router.toml")
	writeFile(t, cfgPath, rtrConfig(sock, rulesA, 1, offload, ""))

	// The router's own services, and one behind it on h2.
	tcpR := echoTCP(t, r, rtrR0)
	tcpH2 := echoTCP(t, h2, rtrH2)
	udpR862 := listenUDP(t, r, rtrR0, 862)
	udpR7000 := listenUDP(t, r, rtrR0, 7000)
	udpR7001 := listenUDP(t, r, rtrR0, 7001)
	stamp := listenUDP(t, h1, rtrH1, 0)
	probe := listenUDP(t, h1, rtrH1, 0)

	lr := startLinerate(t, r, cfgPath, sock)
	prog := checkAttached(t, r, "r0")
	want := 1 // auto in Go: one line says why
	if inKernel {
		want = 0
	}
	// The fallback is logged before "running": once that is in, so is it.
	for deadline := time.Now().Add(rtrWait); !strings.Contains(lr.out.String(), "msg=running"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no msg=running in linerate's log:\n%s", lr.out.String())
		}
	}
	if log := lr.out.String(); strings.Count(log, "stage runs in Go") != want ||
		want == 1 && !strings.Contains(log, "bpf_ktime_get_tai_ns") {
		t.Errorf("want %d lines saying the stage runs in Go:\n%s", want, log)
	}

	// The host's own traffic passes untouched, routed or for the router.
	hostTraffic := func() {
		t.Helper()
		icmpEcho(t, h1, rtrR0)
		icmpEcho(t, h1, rtrH2)
		tcpEcho(t, h1, tcpR)
		tcpEcho(t, h1, tcpH2)
	}
	hostTraffic()
	st := lr.stats(t)
	if p := st.port("edge0"); p.RxPackets != 0 || p.Extra["xdp_passed"] == 0 {
		t.Errorf("host traffic: port edge0 took %d packets, passed %d: want none taken, all passed",
			p.RxPackets, p.Extra["xdp_passed"])
	}
	// None of it is what a rule names (UDP to 862): it all passes on the
	// rules' summary, without the rule walk.
	if p := st.port("edge0"); p.Extra["xdp_passed_early"] != p.Extra["xdp_passed"] {
		t.Errorf("host traffic: %d of %d passed on the rules' summary, want all", p.Extra["xdp_passed_early"],
			p.Extra["xdp_passed"])
	}

	// STAMP to the router goes to linerate, which answers; the router's own
	// socket on 862 never sees it.
	const n = 8
	for seq := range uint32(n) {
		stampExchange(t, lr, stamp, seq)
	}
	st = lr.waitStats(t, func(s *rtrStats) bool { return s.counter("refl", "reflected") >= n })
	checkStampReflectedWhere(t, st, n, inKernel)
	// UDP to 7000 is the router's; to 7001, linerate's.
	udpPasses(t, probe, udpR7000, 7000)
	udpTaken(t, lr, probe, 7001)

	// Reload: the port now takes UDP to 7000 and leaves 7001 to the kernel.
	writeFile(t, cfgPath, rtrConfig(sock, rulesB, 1, offload, ""))
	out := lr.cli(t, 0, "reload", "--check")
	if !strings.Contains(out, "port edge0") {
		t.Errorf("reload --check does not name port edge0:\n%s", out)
	}
	out = lr.cli(t, 0, "reload")
	if !strings.Contains(out, "reloaded 1 port(s)") || !strings.Contains(out, "port edge0") {
		t.Errorf("reload:\n%s", out)
	}
	udpPasses(t, probe, udpR7001, 7001)
	udpTaken(t, lr, probe, 7000)
	stampExchange(t, lr, stamp, n)
	hostTraffic()

	// Refused reloads change nothing: a key that needs a restart beside new
	// rules; new rules beside a stage change that needs a restart; rules
	// that do not check. The last one passes every check and fails as
	// classify takes it (its number of rules is fixed): the port, which took
	// its new rules first, goes back to its old ones.
	for _, bad := range []struct {
		rules    string
		classify int
		refl     string
		want     string
	}{
		{"ring_size = 4096\n" + rulesA, 1, "", "only match and take_all change with a reload"},
		{rulesA, 1, "hop_limit = 200\n", "takes a new table only with a restart"},
		{"take_all = true\n" + rulesA, 1, "", "take_all = true takes every packet"},
		{rulesA, 2, "", "the number of rules changes only with a restart"},
	} {
		writeFile(t, cfgPath, rtrConfig(sock, bad.rules, bad.classify, offload, bad.refl))
		if out := lr.cli(t, 1, "reload"); !strings.Contains(out, bad.want) {
			t.Errorf("reload of %q, %d classify rules, %q: want %q in:\n%s", bad.rules, bad.classify, bad.refl, bad.want, out)
		}
		udpPasses(t, probe, udpR7001, 7001)
		udpTaken(t, lr, probe, 7000)
	}

	// Back to the first rules, by SIGHUP this time (udpPasses waits for
	// it), then a normal exit: nothing stays on r0, and STAMP is the
	// router's.
	writeFile(t, cfgPath, rtrConfig(sock, rulesA, 1, offload, ""))
	if err := lr.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	udpPasses(t, probe, udpR7000, 7000)
	stampExchange(t, lr, stamp, n+1)
	lr.stop(t, syscall.SIGTERM)
	if log := lr.out.String(); !strings.Contains(log, `msg=reloaded`) || !strings.Contains(log, `ports=edge0`) {
		t.Errorf("no reload of port edge0 in the log:\n%s", log)
	}
	checkDetached(t, r, "r0", prog)
	hostTraffic()
	udpPasses(t, stamp, udpR862, 862)

	// kill -9: the kernel detaches the unpinned link as the process dies.
	lr = startLinerate(t, r, cfgPath, sock)
	prog = checkAttached(t, r, "r0")
	stampExchange(t, lr, stamp, n+2)
	lr.stop(t, syscall.SIGKILL)
	checkDetached(t, r, "r0", prog)
	hostTraffic()
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// linerateProc is `linerate run` in a namespace.
type linerateProc struct {
	cmd    *exec.Cmd
	sock   string
	out    testenv.Output // written by exec's copying goroutine
	exited chan error
}

func startLinerate(t *testing.T, ns *netns.NS, cfgPath, sock string) *linerateProc {
	t.Helper()
	lr := &linerateProc{sock: sock, exited: make(chan error, 1)}
	// ip netns exec execs linerate after joining the namespace: the process
	// is linerate's own, and a signal to it is one to linerate.
	lr.cmd = exec.Command("ip", "netns", "exec", ns.Name(), linerateBin, "run", "-c", cfgPath, "--live=false")
	lr.cmd.Stdout, lr.cmd.Stderr = &lr.out, &lr.out
	if err := lr.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { lr.exited <- lr.cmd.Wait() }()
	t.Cleanup(func() {
		if lr.cmd.ProcessState == nil {
			_ = lr.cmd.Process.Kill()
			<-lr.exited
		}
	})
	// Running once the control API answers with the port up.
	deadline := time.Now().Add(rtrWait)
	for {
		select {
		case err := <-lr.exited:
			t.Fatalf("linerate run exited: %v\n%s", err, lr.out.String())
		default:
		}
		out, err := exec.Command(linerateBin, "status", "--json", "--control", "unix:"+sock).Output()
		if err == nil && bytes.Contains(out, []byte(`"STATE_RUNNING"`)) {
			return lr
		}
		if time.Now().After(deadline) {
			t.Fatalf("linerate not running after %v: %v %s\n%s", rtrWait, err, out, lr.out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop signals linerate and waits for it; SIGTERM must end it cleanly.
func (lr *linerateProc) stop(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := lr.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-lr.exited:
		if sig != syscall.SIGKILL && err != nil {
			t.Errorf("linerate after %v: %v\n%s", sig, err, lr.out.String())
		}
	case <-time.After(rtrWait):
		t.Fatalf("linerate still running %v after %v", rtrWait, sig)
	}
}

// cli runs a linerate command against the running one and wants its exit
// status; it returns stdout and stderr.
func (lr *linerateProc) cli(t *testing.T, status int, args ...string) string {
	t.Helper()
	cmd := exec.Command(linerateBin, append(args, "--control", "unix:"+lr.sock)...)
	out, err := cmd.CombinedOutput()
	got := 0
	if ee, ok := err.(*exec.ExitError); ok {
		got = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("linerate %v: %v", args, err)
	}
	if got != status {
		t.Fatalf("linerate %v: exit status %d, want %d:\n%s", args, got, status, out)
	}
	return string(out)
}

// rtrStats is what `linerate status --stats --json` says of ports and stages.
type rtrStats struct {
	Stats struct {
		Ports []struct {
			Name      string            `json:"name"`
			RxPackets uint64            `json:"rx_packets,string"`
			TxPackets uint64            `json:"tx_packets,string"`
			Extra     map[string]string `json:"extra"`
		} `json:"ports"`
		Stages []struct {
			Name     string `json:"name"`
			Counters []struct {
				Name  string `json:"name"`
				Value uint64 `json:"value,string"`
			} `json:"counters"`
		} `json:"stages"`
	} `json:"stats"`
}

type rtrPort struct {
	RxPackets, TxPackets uint64
	Extra                map[string]uint64
}

func (s *rtrStats) port(name string) rtrPort {
	for _, p := range s.Stats.Ports {
		if p.Name == name {
			r := rtrPort{RxPackets: p.RxPackets, TxPackets: p.TxPackets, Extra: map[string]uint64{}}
			for k, v := range p.Extra {
				r.Extra[k], _ = strconv.ParseUint(v, 10, 64)
			}
			return r
		}
	}
	return rtrPort{Extra: map[string]uint64{}}
}

// counter sums a stage's counter over its instances.
func (s *rtrStats) counter(stage, name string) uint64 {
	var sum uint64
	for _, st := range s.Stats.Stages {
		if st.Name != stage {
			continue
		}
		for _, c := range st.Counters {
			if c.Name == name {
				sum += c.Value
			}
		}
	}
	return sum
}

func (lr *linerateProc) stats(t *testing.T) *rtrStats {
	t.Helper()
	out := lr.cli(t, 0, "status", "--stats", "--json")
	var s rtrStats
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	return &s
}

// waitStats polls the stats until ok says yes, or fails t after rtrWait.
func (lr *linerateProc) waitStats(t *testing.T, ok func(*rtrStats) bool) *rtrStats {
	t.Helper()
	deadline := time.Now().Add(rtrWait)
	for {
		s := lr.stats(t)
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("stats not as wanted after %v: %+v", rtrWait, s.Stats)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// xdpOn is the id of the XDP program on ifname in ns (iproute2 says), and
// whether a bpf_link holds it (bpftool says; links are the whole host's, the
// program id tells ours from other namespaces').
func xdpOn(t *testing.T, ns *netns.NS, ifname string) (prog int, linked bool) {
	t.Helper()
	link, err := exec.Command("ip", "-n", ns.Name(), "-d", "-j", "link", "show", "dev", ifname).Output()
	if err != nil {
		t.Fatalf("ip link show %s: %v", ifname, err)
	}
	var ifs []struct {
		XDP struct {
			Prog struct {
				ID int `json:"id"`
			} `json:"prog"`
		} `json:"xdp"`
	}
	if err := json.Unmarshal(link, &ifs); err != nil || len(ifs) != 1 {
		t.Fatalf("ip -j link show %s: %v: %s", ifname, err, link)
	}
	prog = ifs[0].XDP.Prog.ID
	return prog, prog != 0 && xdpLinked(t, prog)
}

// xdpLinked: an XDP bpf_link holds program prog.
func xdpLinked(t *testing.T, prog int) bool {
	t.Helper()
	links, err := exec.Command("bpftool", "-j", "link", "show").Output()
	if err != nil {
		t.Fatalf("bpftool link show: %v", err)
	}
	var ls []struct {
		Type   string `json:"type"`
		ProgID int    `json:"prog_id"`
	}
	if err := json.Unmarshal(links, &ls); err != nil {
		t.Fatalf("bpftool -j link show: %v: %s", err, links)
	}
	for _, l := range ls {
		if l.Type == "xdp" && l.ProgID == prog {
			return true
		}
	}
	return false
}

// checkAttached waits until ifname in ns has an XDP program held by a
// bpf_link, and returns the program's id.
func checkAttached(t *testing.T, ns *netns.NS, ifname string) int {
	t.Helper()
	deadline := time.Now().Add(rtrWait)
	for {
		prog, linked := xdpOn(t, ns, ifname)
		if prog != 0 && linked {
			return prog
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: XDP program %d, by a bpf_link %v: want one, by linerate's link", ifname, prog, linked)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkDetached waits until ifname in ns has no XDP program and the link
// that held prog is gone. Detaching after an exit is the kernel's work on
// the dead process's files.
func checkDetached(t *testing.T, ns *netns.NS, ifname string, prog int) {
	t.Helper()
	deadline := time.Now().Add(rtrWait)
	for {
		now, _ := xdpOn(t, ns, ifname)
		stale := xdpLinked(t, prog)
		if now == 0 && !stale {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s after linerate exited: XDP program %d, link to program %d left %v", ifname, now, prog, stale)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// echoTCP is a TCP echo server on addr in ns.
func echoTCP(t *testing.T, ns *netns.NS, addr string) string {
	t.Helper()
	var ln net.Listener
	if err := ns.Do(func() (err error) {
		ln, err = net.Listen("tcp4", addr+":0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

// tcpEcho sends 64 KiB of random bytes from ns to an echo server and wants
// them back unchanged.
func tcpEcho(t *testing.T, ns *netns.NS, addr string) {
	t.Helper()
	var c net.Conn
	if err := ns.Do(func() (err error) {
		c, err = net.DialTimeout("tcp4", addr, rtrWait)
		return err
	}); err != nil {
		t.Fatalf("tcp to %s: %v", addr, err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(rtrWait))
	want := make([]byte, 64<<10)
	_, _ = rand.Read(want)
	errc := make(chan error, 1)
	go func() { _, err := c.Write(want); errc <- err }()
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("tcp echo from %s: %v", addr, err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("tcp to %s: %v", addr, err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("tcp echo from %s: the bytes differ", addr)
	}
}

// icmpEcho sends an ICMP echo request from ns to dst on a raw socket (no
// ping here) and wants the reply with the same id, sequence and payload.
func icmpEcho(t *testing.T, ns *netns.NS, dst string) {
	t.Helper()
	fd := -1
	if err := ns.Do(func() (err error) {
		fd, err = unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_ICMP)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	tv := unix.NsecToTimeval(int64(100 * time.Millisecond))
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		t.Fatal(err)
	}
	id := uint16(os.Getpid())
	payload := make([]byte, 56)
	_, _ = rand.Read(payload)
	to := &unix.SockaddrInet4{Addr: [4]byte(net.ParseIP(dst).To4())}
	buf := make([]byte, 1500)
	deadline := time.Now().Add(rtrWait)
	for seq := uint16(1); time.Now().Before(deadline); seq++ {
		req := make([]byte, 8+len(payload))
		req[0] = 8 // echo request
		binary.BigEndian.PutUint16(req[4:], id)
		binary.BigEndian.PutUint16(req[6:], seq)
		copy(req[8:], payload)
		binary.BigEndian.PutUint16(req[2:], inetChecksum(req))
		if err := unix.Sendto(fd, req, 0, to); err != nil {
			t.Fatalf("icmp to %s: %v", dst, err)
		}
		// Replies to this request, or timeouts; a lost one (ARP still
		// resolving) asks again.
		for {
			n, _, err := unix.Recvfrom(fd, buf, 0)
			if err != nil {
				break
			}
			ihl := int(buf[0]&0xf) * 4
			m := buf[ihl:n]
			if len(m) < 8 || m[0] != 0 || binary.BigEndian.Uint16(m[4:]) != id || binary.BigEndian.Uint16(m[6:]) != seq {
				continue
			}
			if !bytes.Equal(m[8:], payload) || inetChecksum(m) != 0 || net.IP(buf[12:16]).String() != dst {
				t.Errorf("icmp echo reply from %s: % x", dst, buf[:n])
			}
			return
		}
	}
	t.Fatalf("no icmp echo reply from %s in %v", dst, rtrWait)
}

func inetChecksum(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return ^uint16(s)
}

// listenUDP is a UDP socket bound to addr:port in ns (port 0: any).
func listenUDP(t *testing.T, ns *netns.NS, addr string, port int) *net.UDPConn {
	t.Helper()
	var c *net.UDPConn
	if err := ns.Do(func() (err error) {
		c, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.ParseIP(addr), Port: port})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// stampTest is a STAMP Session-Sender test packet, unauthenticated (RFC 8762
// §4.2.1, the SSID of RFC 8972): 44 octets.
func stampTest(seq uint32) []byte {
	p := make([]byte, 44)
	binary.BigEndian.PutUint32(p[0:], seq)
	binary.BigEndian.PutUint64(p[4:], 0x1122334455667788+uint64(seq))
	binary.BigEndian.PutUint16(p[12:], 0x8001) // S: synchronized, scale 0, multiplier 1
	binary.BigEndian.PutUint16(p[14:], rtrSSID)
	return p
}

// stampExchange sends test packet seq to the router's 862 and wants the
// reflector's answer: its layout (RFC 8762 §4.3.1), the sender's fields
// copied, the sender's TTL (64, Linux's default) recorded.
func stampExchange(t *testing.T, lr *linerateProc, c *net.UDPConn, seq uint32) {
	t.Helper()
	to := &net.UDPAddr{IP: net.ParseIP(rtrR0), Port: 862}
	req := stampTest(seq)
	buf := make([]byte, 2048)
	deadline := time.Now().Add(rtrWait)
	for time.Now().Before(deadline) {
		if _, err := c.WriteToUDP(req, to); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		for {
			n, from, err := c.ReadFromUDP(buf)
			if err != nil {
				break // resend: ARP or the engine may not have been ready
			}
			r := buf[:n]
			if n < 44 || binary.BigEndian.Uint32(r[24:]) != seq {
				continue
			}
			// Timestamp, Error Estimate, SSID, Receive Timestamp, then the
			// sender's sequence number, timestamp and Error Estimate, MBZ,
			// the sender's TTL.
			if from.String() != to.String() || binary.BigEndian.Uint16(r[14:]) != rtrSSID ||
				!bytes.Equal(r[28:36], req[4:12]) || !bytes.Equal(r[36:38], req[12:14]) || r[40] != 64 ||
				binary.BigEndian.Uint64(r[4:]) == 0 || binary.BigEndian.Uint64(r[16:]) == 0 {
				t.Errorf("STAMP reply %d from %v: % x", seq, from, r)
			}
			return
		}
	}
	out, _ := exec.Command(linerateBin, "status", "--stats", "--wide", "--control", "unix:"+lr.sock).CombinedOutput()
	t.Fatalf("no STAMP reply to test packet %d in %v; linerate status --stats:\n%s", seq, rtrWait, out)
}

// udpPasses sends datagrams from c to the router's port until the router's
// own socket on it (rx) receives one, unchanged: the dispatcher passed it.
func udpPasses(t *testing.T, c, rx *net.UDPConn, port int) {
	t.Helper()
	to := &net.UDPAddr{IP: net.ParseIP(rtrR0), Port: port}
	want := stampTest(0xfffffff0)
	_, _ = rand.Read(want[20:])
	buf := make([]byte, 2048)
	deadline := time.Now().Add(rtrWait)
	for time.Now().Before(deadline) {
		if _, err := c.WriteToUDP(want, to); err != nil {
			t.Fatal(err)
		}
		_ = rx.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		for {
			n, _, err := rx.ReadFromUDP(buf)
			if err != nil {
				break
			}
			if bytes.Equal(buf[:n], want) {
				return
			}
		}
	}
	t.Fatalf("the router's socket on %d received nothing in %v: the dispatcher took its traffic", port, rtrWait)
}

// udpTaken sends a datagram to the router's port and waits until the xdp
// port's rx count grows by one: the dispatcher redirected it to linerate.
func udpTaken(t *testing.T, lr *linerateProc, c *net.UDPConn, port int) {
	t.Helper()
	before := lr.stats(t).port("edge0").RxPackets
	if _, err := c.WriteToUDP([]byte("to linerate"), &net.UDPAddr{IP: net.ParseIP(rtrR0), Port: port}); err != nil {
		t.Fatal(err)
	}
	lr.waitStats(t, func(s *rtrStats) bool { return s.port("edge0").RxPackets > before })
}
