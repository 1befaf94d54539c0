//go:build linux

package stamp

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf/link"

	"github.com/linerate/linerate/appliance"
	"github.com/linerate/linerate/appliance/clock"
	"github.com/linerate/linerate/appliance/kernel"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/internal/enginetest"
	"github.com/linerate/linerate/internal/netns"
	"github.com/linerate/linerate/internal/testenv"
	"github.com/linerate/linerate/plugins/stamp/bpf"

	_ "github.com/linerate/linerate/ports/xdp"
)

// xdpLab is a sender namespace and a reflector namespace joined by a veth
// pair, the reflector's end with the device-bound XDP reflector attached (a
// bpf_link: it goes with the test).
type xdpLab struct {
	snd, rfl       *netns.NS
	sndMAC, rflMAC [6]byte
	prog           *bpf.Reflector
	st             *reflector
}

const (
	xdpSndIf = "lrxs"
	xdpRflIf = "lrxr"
)

func newXDPLab(t *testing.T, keys string) *xdpLab { return newXDPLabPass(t, keys, true) }

// newXDPLabPass is newXDPLab; without pass the sender's end gets no XDP_PASS
// program, for a test that puts linerate's xdp port there.
func newXDPLabPass(t *testing.T, keys string, pass bool) *xdpLab {
	t.Helper()
	testenv.RequireRoot(t)
	requireProgram(t, bpf.ReflectorNeeds, 1) // device-bound
	l := &xdpLab{snd: netns.New(t), rfl: netns.New(t)}
	netns.Veth(t, l.snd, xdpSndIf, l.rfl, xdpRflIf)
	l.sndMAC, l.rflMAC = l.snd.MAC(t, xdpSndIf), l.rfl.MAC(t, xdpRflIf)
	// A veth takes the frames its peer's XDP program sends back (XDP_TX)
	// only with an XDP program of its own (or GRO asked for): XDP_PASS.
	if pass {
		l.snd.PassXDP(t, xdpSndIf)
	}
	h := newHarness(t)
	l.st = h.MustBuildNamed("stamp.reflector", "refl", keys).(*reflector)
	var lk link.Link
	err := l.rfl.Do(func() error {
		ifi, err := net.InterfaceByName(xdpRflIf)
		if err != nil {
			return err
		}
		if l.prog, err = bpf.LoadReflector(ifi.Index); err != nil {
			return err
		}
		if err := l.prog.Configure(l.st.xdpConfig()); err != nil {
			return err
		}
		if err := l.st.syncXDP(l.prog, l.st.reg.rf.Load()); err != nil {
			return err
		}
		lk, err = link.AttachXDP(link.XDPOptions{Program: l.prog.Program, Interface: ifi.Index, Flags: link.XDPDriverMode})
		return err
	})
	if l.prog != nil {
		t.Cleanup(func() { l.prog.Close() })
	}
	if err != nil {
		t.Fatalf("the XDP reflector on %s: %v", xdpRflIf, err)
	}
	t.Cleanup(func() { lk.Close() })
	return l
}

func (l *xdpLab) counter(t *testing.T, name string) uint64 {
	t.Helper()
	c, err := l.prog.Counters()
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range bpf.ReflectorCounters {
		if n == name {
			return c[i]
		}
	}
	t.Fatalf("no counter %q", name)
	return 0
}

// Scapy's STAMP layer sends test packets to the reflector in the kernel of
// another namespace; every field of every reply is checked, by Scapy's
// decoding and by linerate's.
func TestXDPReflectorScapy(t *testing.T) {
	requireScapy(t)
	l := newXDPLab(t, `
synchronized = true
clock_error = "1us"
[[sessions]]
ssid = 4242
mode = "stateful"
`)
	const (
		n     = 4
		secs  = 3913056000 // 2024-01-01 in NTP seconds
		hlim  = 61
		tc    = 0xb9 // DSCP 46, ECN 1: the reply keeps the DSCP only
		sport = 50000
	)
	spec := map[string]any{"dst_mac": net.HardwareAddr(l.rflMAC[:]).String(), "src_mac": net.HardwareAddr(l.sndMAC[:]).String(),
		"src": addrS.String(), "dst": addrR.String(), "hlim": hlim, "tc": tc, "sport": sport, "ts": secs,
		"scale": 3, "multiplier": 7, "ssid": 4242}
	js, _ := json.Marshal(spec)
	before := time.Now().UnixNano()
	cmd := exec.Command("ip", "netns", "exec", l.snd.Name(), python, "testdata/scapy_xdp.py", xdpSndIf, "4")
	cmd.Stdin = bytes.NewReader(js)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("scapy: %v: %s", err, stderrOf(err))
	}
	after := time.Now().UnixNano()
	var sent, replies [][]byte
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		kind, hx, _ := strings.Cut(sc.Text(), " ")
		f, err := hex.DecodeString(hx)
		if err != nil {
			t.Fatalf("scapy printed %q", sc.Text())
		}
		if kind == "sent" {
			sent = append(sent, f)
		} else {
			replies = append(replies, f)
		}
	}
	if len(sent) != n || len(replies) != n {
		t.Fatalf("Scapy sent %d and took %d replies, want %d and %d; the program counted %d reflected",
			len(sent), len(replies), n, n, l.counter(t, "reflected"))
	}
	wantEE := ErrorEstimateFor(true, false, 1000)
	parsed := scapyParse(t, map[string][][]byte{"reflector": replies})
	for i, f := range replies {
		s := parsed[i]
		checkUDP(t, f)
		pay, pl := payloadOf(t, f)
		ip := packet.IPv6(f[pl.L3:])
		if ip.SrcAddr() != addrR || ip.DstAddr() != addrS || ip.HopLimit() != 255 || ip.TrafficClass() != tc&^3 {
			t.Errorf("reply %d: IPv6 %s → %s, hop limit %d, traffic class %#x", i, ip.SrcAddr(), ip.DstAddr(), ip.HopLimit(), ip.TrafficClass())
		}
		if e := packet.Ethernet(f); e.Src() != l.rflMAC || e.Dst() != l.sndMAC {
			t.Errorf("reply %d: MACs not swapped", i)
		}
		if u := packet.UDP(f[pl.L4:]); u.SrcPort() != DefaultPort || u.DstPort() != sport || !s.ChecksumOK {
			t.Errorf("reply %d: UDP %d → %d, Scapy's checksum ok %v", i, u.SrcPort(), u.DstPort(), s.ChecksumOK)
		}
		// Scapy's reading of every field of the reply.
		if s.Seq != uint32(i) || s.SSID != 4242 || s.SeqSender != uint32(i) || s.TSSender != uint64(secs+i)<<32 ||
			eeOf(s.EESender) != MakeErrorEstimate(true, false, 3, 7) || s.TTLSender != hlim || eeOf(s.EE) != wantEE {
			t.Errorf("reply %d as Scapy reads it: %+v", i, s)
		}
		if s.Reserialized != hex.EncodeToString(pay[:BaseLen]) {
			t.Errorf("reply %d: Scapy re-serialises %s from %x (MBZ)", i, s.Reserialized, pay[:BaseLen])
		}
		t2, t3 := clock.FromNTP(s.TSRx), clock.FromNTP(s.TS)
		if t2 > t3 || t2 < before-int64(time.Second) || t3 > after+int64(time.Second) {
			t.Errorf("reply %d: T2 %s, T3 %s, sent between %s and %s", i, time.Unix(0, t2).UTC(), time.Unix(0, t3).UTC(),
				time.Unix(0, before).UTC(), time.Unix(0, after).UTC())
		}
	}
	if got := l.counter(t, "reflected"); got != n {
		t.Errorf("the program counted %d reflected, want %d", got, n)
	}
	if st, err := l.prog.State(4242); err != nil || st.Seq != n || st.Replied != n {
		t.Errorf("session 4242 in the program: %+v, %v", st, err)
	}
}

// xdpOffloadModes are the paths a stage with an offload takes on an xdp
// port: "xdp", its program in the kernel (where the kernel has what it
// needs); "fallback", offload = "auto" where the kernel lacks
// bpf_ktime_get_tai_ns (forced with LINERATE_KERNEL_DISABLE, so on every
// kernel): the stage in Go behind the AF_XDP socket, said once in the log.
// Each test runs f on both with the same expectations but where the work
// was done; "refused", offload = "xdp" on that kernel, fails to build,
// naming the feature in one line.
func xdpOffloadModes(t *testing.T, needs func(int) ([]kernel.Feature, error), build func(t *testing.T, offload string) error,
	f func(t *testing.T, offload string, inKernel bool)) {
	t.Run("xdp", func(t *testing.T) {
		requireProgram(t, needs, 0)
		f(t, "xdp", true)
	})
	t.Run("fallback", func(t *testing.T) {
		t.Setenv(kernel.DisableEnv, "bpf_ktime_get_tai_ns")
		f(t, "auto", false)
	})
	t.Run("refused", func(t *testing.T) {
		t.Setenv(kernel.DisableEnv, "bpf_ktime_get_tai_ns")
		err := build(t, "xdp")
		if err == nil || !strings.Contains(err.Error(), `offload = "xdp": the kernel lacks bpf_ktime_get_tai_ns (Linux >= 6.1)`) ||
			strings.Contains(err.Error(), "\n") {
			t.Errorf("offload = \"xdp\" without bpf_ktime_get_tai_ns: %v", err)
		}
	})
}

// logLines is a logger for an engine and what it logged.
type logLines struct{ b testenv.Output }

func (l *logLines) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(&l.b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// count is how many lines hold every one of parts.
func (l *logLines) count(parts ...string) int {
	n := 0
	for _, line := range strings.Split(l.b.String(), "\n") {
		all := line != ""
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			n++
		}
	}
	return n
}

// checkGoLog: a stage in the kernel logged no fallback; one in Go said so,
// once, naming the feature the kernel lacks.
func checkGoLog(t *testing.T, l *logLines, stage string, inKernel bool) {
	t.Helper()
	want := 1
	if inKernel {
		want = 0
	}
	if n := l.count("stage runs in Go"); n != want || l.count("stage runs in Go", `stage=`+stage, "bpf_ktime_get_tai_ns") != want {
		t.Errorf("%d lines say the stage runs in Go, want %d:\n%s", n, want, l.b.String())
	}
}

// xdpEngine builds (and, with start, starts) an engine from toml in ns.
func xdpEngine(t *testing.T, ns *netns.NS, name, toml string, log *slog.Logger, start bool) (*appliance.Engine, error) {
	t.Helper()
	cfg, err := config.Parse(name, []byte(toml))
	if err != nil {
		t.Fatal(err)
	}
	var e *appliance.Engine
	if err := ns.Do(func() (err error) {
		e, err = appliance.New(cfg, appliance.Options{Log: log})
		return err
	}); err != nil {
		return nil, err
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Error(err)
		}
	})
	if start {
		if err := e.Start(); err != nil {
			t.Fatal(err)
		}
	}
	return e, nil
}

// The reflector with an offload on a real xdp port: linerate runs in the
// reflector's namespace with an xdp port on the veth and stamp.reflector.
// Scapy sends base test packets and test packets with a TLV. In the kernel
// the program reflects the first and leaves the others to the Go stage
// through the port's AF_XDP socket; in the fallback the Go stage answers
// all. Every one is answered alike; the stage's counters show which path
// took which.
func TestXDPOffloadEngine(t *testing.T) {
	requireScapy(t)
	testenv.RequireRoot(t)
	testenv.RequireKernel(t, kernel.XSKMap, kernel.Loop) // every xdp port's
	toml := func(offload string) string {
		return fmt.Sprintf(`
version = 1
[engine]
pin = false
[control]
listen = ""
[[ports]]
name = "x0"
driver = "xdp"
interface = %q
[[ports.match]]
next_header = 17
udp_dst_port = 862

[[pipelines]]
name = "reflector"
lcores = [1]
rx = ["x0"]
[[pipelines.stages]]
kind = "stamp.reflector"
name = "refl"
offload = %q
forward = "in"
synchronized = true
clock_error = "1us"
[[pipelines.stages.sessions]]
ssid = 4242
mode = "stateful"
`, xdpRflIf, offload)
	}
	lab := func(t *testing.T) (snd, rfl *netns.NS, sndMAC, rflMAC [6]byte) {
		snd, rfl = netns.New(t), netns.New(t)
		netns.Veth(t, snd, xdpSndIf, rfl, xdpRflIf)
		snd.PassXDP(t, xdpSndIf)
		return snd, rfl, snd.MAC(t, xdpSndIf), rfl.MAC(t, xdpRflIf)
	}
	build := func(t *testing.T, offload string) error {
		_, rfl, _, _ := lab(t)
		_, err := xdpEngine(t, rfl, "xdp.toml", toml(offload), enginetest.Quiet, false)
		return err
	}
	xdpOffloadModes(t, bpf.ReflectorNeeds, build, func(t *testing.T, offload string, inKernel bool) {
		snd, rfl, sndMAC, rflMAC := lab(t)
		var log logLines
		e, err := xdpEngine(t, rfl, "xdp.toml", toml(offload), log.logger(), true)
		if err != nil {
			t.Fatal(err)
		}
		checkGoLog(t, &log, "refl", inKernel)
		const n = 6
		tlv := []int{1, 4}
		spec := map[string]any{"dst_mac": net.HardwareAddr(rflMAC[:]).String(), "src_mac": net.HardwareAddr(sndMAC[:]).String(),
			"src": addrS.String(), "dst": addrR.String(), "hlim": 61, "tc": 0, "sport": 50000, "ts": 3913056000,
			"scale": 3, "multiplier": 7, "ssid": 4242, "tlv": tlv, "tlv_hex": "8001000400000000"}
		js, _ := json.Marshal(spec)
		cmd := exec.Command("ip", "netns", "exec", snd.Name(), python, "testdata/scapy_xdp.py", xdpSndIf, fmt.Sprint(n))
		cmd.Stdin = bytes.NewReader(js)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("scapy: %v: %s", err, stderrOf(err))
		}
		bySeq := map[uint32][]byte{}
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			kind, hx, _ := strings.Cut(sc.Text(), " ")
			f, err := hex.DecodeString(hx)
			if err != nil || kind != "reply" {
				continue
			}
			checkUDP(t, f)
			pay, _ := payloadOf(t, f)
			rp := ReflectorPacket(pay)
			// One stateful sequence over both paths: the program's
			// counter, which the Go stage takes its numbers from too.
			if rp.SSID() != 4242 || rp.SenderTTL() != 61 || rp.Seq() != rp.SenderSeq() {
				t.Errorf("reply %+v", ParseReflectorOrZero(pay))
			}
			bySeq[rp.SenderSeq()] = f
		}
		if len(bySeq) != n {
			t.Fatalf("%d of %d test packets answered", len(bySeq), n)
		}
		for _, i := range tlv {
			pay, _ := payloadOf(t, bySeq[uint32(i)])
			if len(pay) != BaseLen+8 {
				t.Errorf("reply %d: %d bytes of payload, want the TLV back", i, len(pay))
			}
		}
		// In the kernel the TLVs' go to Go; in the fallback the program
		// never runs.
		wantToGo := uint64(0)
		if inKernel {
			wantToGo = uint64(len(tlv))
		}
		// What Go sent went through the AF_XDP socket: all in the
		// fallback.
		wantTx := wantToGo
		if !inKernel {
			wantTx = n
		}
		// The program's counters reach the stage's within a tick or so.
		var reflected, toGo, tx uint64
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			s := e.Snapshot()
			reflected = enginetest.Counter(s, "refl", "reflected")
			toGo = enginetest.Counter(s, "refl", "xdp_to_go")
			tx = s.Ports[0].TxPackets
			if reflected == n && toGo == wantToGo && tx == wantTx {
				break
			}
		}
		if reflected != n || toGo != wantToGo || tx != wantTx {
			t.Errorf("reflected %d, of which %d left to Go by the program, %d sent by Go; want %d, %d, %d",
				reflected, toGo, tx, n, wantToGo, wantTx)
		}
		t.Logf("reflected %d: %d sent by Go", reflected, tx)
	})
}

// A Linux router namespace with linerate's xdp port on its client-side
// interface and the reflector offloaded: the router's own traffic (ARP, a
// TCP exchange it forwards between client and server) passes untouched,
// the client's STAMP test packets to the router are reflected by the
// kernel program and reach the client's own UDP socket (its kernel checks
// the checksum), and nothing stays attached once linerate closes.
//
//	client ns  lrcc ══veth══ lrrc [xdp port]  router ns  lrrs ══veth══ lrss  server ns
//	10.1.0.2                  10.1.0.1                    10.2.0.1          10.2.0.2
func TestXDPRouterNamespace(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequireKernel(t, kernel.XSKMap, kernel.Loop) // every xdp port's
	lab := func(t *testing.T) (cl, rt, sv *netns.NS) {
		cl, rt, sv = netns.New(t), netns.New(t), netns.New(t)
		netns.Veth(t, cl, "lrcc", rt, "lrrc")
		netns.Veth(t, rt, "lrrs", sv, "lrss")
		cl.IP(t, "addr", "add", "10.1.0.2/24", "dev", "lrcc")
		cl.IP(t, "route", "add", "default", "via", "10.1.0.1")
		rt.IP(t, "addr", "add", "10.1.0.1/24", "dev", "lrrc")
		rt.IP(t, "addr", "add", "10.2.0.1/24", "dev", "lrrs")
		sv.IP(t, "addr", "add", "10.2.0.2/24", "dev", "lrss")
		sv.IP(t, "route", "add", "default", "via", "10.2.0.1")
		rt.Sysctl(t, [][2]string{{"ipv4/ip_forward", "1"}})
		cl.PassXDP(t, "lrcc") // the client takes the program's XDP_TX frames
		return cl, rt, sv
	}
	toml := func(offload string) string {
		return `
version = 1
[engine]
pin = false
[control]
listen = ""
[[ports]]
name = "x0"
driver = "xdp"
interface = "lrrc"
[[ports.match]]
next_header = 17
udp_dst_port = 862

[[pipelines]]
name = "reflector"
lcores = [1]
rx = ["x0"]
[[pipelines.stages]]
kind = "stamp.reflector"
name = "refl"
offload = "` + offload + `"
forward = "in"
addresses = ["10.1.0.1"]
unknown = "reflect"
allow = ["10.1.0.0/24"]
synchronized = true
clock_error = "1us"
`
	}
	build := func(t *testing.T, offload string) error {
		_, rt, _ := lab(t)
		_, err := xdpEngine(t, rt, "router.toml", toml(offload), enginetest.Quiet, false)
		return err
	}
	xdpOffloadModes(t, bpf.ReflectorNeeds, build, func(t *testing.T, offload string, inKernel bool) {
		testXDPRouterNamespace(t, lab, toml(offload), inKernel)
	})
}

func testXDPRouterNamespace(t *testing.T, lab func(t *testing.T) (cl, rt, sv *netns.NS), toml string, inKernel bool) {
	cl, rt, sv := lab(t)
	cfg, err := config.Parse("router.toml", []byte(toml))
	if err != nil {
		t.Fatal(err)
	}
	var log logLines
	var e *appliance.Engine
	if err := rt.Do(func() (err error) {
		e, err = appliance.New(cfg, appliance.Options{Log: log.logger()})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	checkGoLog(t, &log, "refl", inKernel)
	closed := false
	t.Cleanup(func() {
		if !closed {
			e.Close()
		}
	})
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}

	// The router's own traffic: TCP from client to server, forwarded.
	var ln net.Listener
	if err := sv.Do(func() (err error) { ln, err = net.Listen("tcp4", "10.2.0.2:5001"); return err }); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 1<<16)
		for {
			n, err := c.Read(buf)
			if err != nil {
				return
			}
			if _, err := c.Write(buf[:n]); err != nil {
				return
			}
		}
	}()
	var conn net.Conn
	if err := cl.Do(func() (err error) { conn, err = net.DialTimeout("tcp4", "10.2.0.2:5001", 10*time.Second); return err }); err != nil {
		t.Fatalf("TCP through the router: %v", err)
	}
	defer conn.Close()
	msg := bytes.Repeat([]byte("linerate"), 4096)
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	go conn.Write(msg)
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(conn, got); err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("TCP echo through the router: %v", err)
	}

	// STAMP from the client's own UDP socket to the router.
	var uc *net.UDPConn
	if err := cl.Do(func() (err error) {
		uc, err = net.DialUDP("udp4", nil, &net.UDPAddr{IP: net.ParseIP("10.1.0.1"), Port: DefaultPort})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer uc.Close()
	const n = 5
	for i := range n {
		if _, err := uc.Write(senderPayload(uint32(i), eeNTP, 0)); err != nil {
			t.Fatal(err)
		}
		uc.SetReadDeadline(time.Now().Add(10 * time.Second))
		buf := make([]byte, 256)
		k, err := uc.Read(buf)
		if err != nil {
			t.Fatalf("reply %d: %v", i, err)
		}
		rp := ReflectorPacket(buf[:k])
		if k != BaseLen || rp.SenderSeq() != uint32(i) || rp.SenderTTL() != 64 || rp.ReceiveTimestamp() == 0 {
			t.Fatalf("reply %d: %x", i, buf[:k])
		}
	}
	// In the kernel the program counted them, nothing went up to Go; in
	// the fallback Go answered each through the AF_XDP socket.
	wantTx := uint64(0)
	if !inKernel {
		wantTx = n
	}
	deadline := time.Now().Add(10 * time.Second)
	var reflected, toGo, tx uint64
	for time.Now().Before(deadline) {
		s := e.Snapshot()
		reflected, toGo = enginetest.Counter(s, "refl", "reflected"), enginetest.Counter(s, "refl", "xdp_to_go")
		tx = s.Ports[0].TxPackets
		if reflected == n && tx == wantTx {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if reflected != n || toGo != 0 || tx != wantTx {
		t.Errorf("reflected %d, left to Go by the program %d, sent by Go %d; want %d, none, %d", reflected, toGo, tx, n, wantTx)
	}

	closed = true
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("ip", "-n", rt.Name(), "link", "show", "lrrc").CombinedOutput(); err != nil || bytes.Contains(out, []byte("xdp")) {
		t.Errorf("after linerate closed: %v\n%s", err, out)
	}
}

// The collector's device-bound variant loads, with its rings, for a real
// interface: the rx timestamp kfunc needs one.
func TestXDPCollectorDevBound(t *testing.T) {
	testenv.RequireRoot(t)
	requireProgram(t, bpf.CollectorNeeds, 1)
	ns := netns.New(t)
	netns.Veth(t, ns, "lrxa", ns, "lrxb")
	err := ns.Do(func() error {
		ifi, err := net.InterfaceByName("lrxa")
		if err != nil {
			return err
		}
		c, err := bpf.LoadCollector(ifi.Index, 2)
		if err != nil {
			return err
		}
		return c.Close()
	})
	if err != nil {
		t.Fatal(err)
	}
}

// collectorPeer is the reflector the collector's tests send to, in a
// namespace of its own beside the sender's.
type collectorPeer struct {
	snd            *netns.NS
	sndMAC, rflMAC [6]byte
	reflected      func(t *testing.T) uint64
}

const collectorPeerKeys = `
forward = "in"
synchronized = true
clock_error = "1us"
[[sessions]]
ssid = 7
mode = "stateful"
`

// xdpReflectorPeer is the device-bound XDP reflector on the far end; the
// sender's end gets no XDP_PASS program, linerate's xdp port is there.
func xdpReflectorPeer(t *testing.T) collectorPeer {
	l := newXDPLabPass(t, collectorPeerKeys, false)
	return collectorPeer{snd: l.snd, sndMAC: l.sndMAC, rflMAC: l.rflMAC,
		reflected: func(t *testing.T) uint64 { return l.counter(t, "reflected") }}
}

// goReflectorPeer is linerate's Go reflector on an afpacket port on the
// far end: a peer for every kernel.
func goReflectorPeer(t *testing.T) collectorPeer {
	testenv.RequireRoot(t)
	p := collectorPeer{snd: netns.New(t)}
	rfl := netns.New(t)
	netns.Veth(t, p.snd, xdpSndIf, rfl, xdpRflIf)
	p.sndMAC, p.rflMAC = p.snd.MAC(t, xdpSndIf), rfl.MAC(t, xdpRflIf)
	e, err := xdpEngine(t, rfl, "peer.toml", fmt.Sprintf(`
version = 1
[engine]
pin = false
[control]
listen = ""
[[ports]]
name = "r0"
driver = "afpacket"
interface = %q
block_timeout = "1ms"
[[pipelines]]
name = "reflector"
lcores = [1]
rx = ["r0"]
[[pipelines.stages]]
kind = "stamp.reflector"
name = "refl"
%s`, xdpRflIf, strings.Replace(collectorPeerKeys, "[[sessions]]", "[[pipelines.stages.sessions]]", 1)), enginetest.Quiet, true)
	if err != nil {
		t.Fatal(err)
	}
	p.reflected = func(t *testing.T) uint64 { return enginetest.Counter(e.Snapshot(), "refl", "reflected") }
	return p
}

// The collector with an offload on a real xdp port: linerate's sender
// sends through the port to a reflector in another namespace; the replies
// come back to the port. In the kernel the collector's program takes them
// and hands them through the owner instance's ring to the collector (the
// peer is the device-bound XDP reflector); in the fallback they go up
// through the port's AF_XDP socket to the Go stage (the peer is linerate's
// Go reflector, which every kernel runs). The records and counters show
// them all.
func TestXDPCollectorEngine(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequireKernel(t, kernel.XSKMap, kernel.Loop) // every xdp port's
	const n = 20
	toml := func(p collectorPeer, offload string) string {
		return fmt.Sprintf(`
version = 1
[engine]
pin = false
[control]
listen = ""
[[ports]]
name = "x0"
driver = "xdp"
interface = %q
[[ports.match]]          # what the kernel program leaves to Go
next_header = 17
udp_dst_port = 50000

[[pipelines]]
name = "sender"
lcores = [1]
rx = ["x0"]
[[pipelines.stages]]
kind = "stamp.collector"
name = "coll"
offload = %q
[[pipelines.stages]]
kind = "stamp.sender"
src = %q
src_mac = %q
dst_mac = %q
src_port = 50000
port = "x0"
synchronized = true
clock_error = "1us"
[[pipelines.stages.sessions]]
ssid = 7
reflector = %q
interval = "5ms"
count = %d
reflector_mode = "stateful"
`, xdpSndIf, offload, addrS, net.HardwareAddr(p.sndMAC[:]), net.HardwareAddr(p.rflMAC[:]), addrR, n)
	}
	build := func(t *testing.T, offload string) error {
		p := goReflectorPeer(t)
		_, err := xdpEngine(t, p.snd, "collector.toml", toml(p, offload), enginetest.Quiet, false)
		return err
	}
	xdpOffloadModes(t, bpf.CollectorNeeds, build, func(t *testing.T, offload string, inKernel bool) {
		peer := goReflectorPeer
		if inKernel {
			peer = xdpReflectorPeer
		}
		p := peer(t)
		var log logLines
		e, err := xdpEngine(t, p.snd, "collector.toml", toml(p, offload), log.logger(), true)
		if err != nil {
			t.Fatal(err)
		}
		checkGoLog(t, &log, "coll", inKernel)
		// Counters reach a snapshot a little after the packets: wait for
		// all of them, the peer's too.
		var records, viaProgram, toGo, reflected uint64
		done := func() bool {
			if reflected != n || records != n {
				return false
			}
			if !inKernel {
				return viaProgram == 0 && toGo == 0
			}
			return viaProgram > 0 && viaProgram+toGo == n
		}
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			s := e.Snapshot()
			records = enginetest.Counter(s, "coll", "records")
			viaProgram = enginetest.Counter(s, "coll", "xdp_records")
			toGo = enginetest.Counter(s, "coll", "xdp_to_go")
			reflected = p.reflected(t)
			if done() {
				break
			}
		}
		t.Logf("records %d: %d taken in the kernel, %d left to Go by the program; %d reflected", records, viaProgram, toGo, reflected)
		if !done() {
			t.Errorf("records %d, through the program %d, left to Go by it %d, reflected %d; want %d records and reflected, in the kernel: %v",
				records, viaProgram, toGo, reflected, n, inKernel)
		}
	})
}
