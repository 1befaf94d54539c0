//go:build linux

package stamp

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/linerate/linerate/appliance"
	"github.com/linerate/linerate/appliance/kernel"
	"github.com/linerate/linerate/appliance/stats"
	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/internal/enginetest"
	"github.com/linerate/linerate/internal/netns"
	"github.com/linerate/linerate/internal/testenv"

	_ "github.com/linerate/linerate/ports/afpacket"
)

// A real SRv6 path: an End node between linerate's sender and reflector.
//
//	linerate ns                                  End node's ns
//	 sender ── afpacket lrsa ══veth══ lrka  fc00:a::1
//	                                        End SID fc00:e::1
//	 reflector ─ afpacket lrra ══veth══ lrkb  fc00:b::1
//
// Test packets fc00:a::2 → fc00:b::2 carry SRH [fc00:e::1, fc00:b::2]; the
// End node performs End and forwards them to the reflector; replies come
// back on the return path [fc00:e::1, fc00:a::2]. A link stage in the
// reflector's pipeline holds replies for a known delay: the records show it
// backward and in the round trip.
//
// Two End nodes, each test on both (srv6EndNodes): the Linux kernel
// (seg6local End), where it has seg6local, and on every kernel
// testdata/srv6_end.py, End written with Scapy from RFC 8986, apart from
// linerate's SRv6 code, on AF_PACKET sockets in a namespace whose IPv6 is
// off.

const (
	kSender    = "fc00:a::2"
	kReflector = "fc00:b::2"
	kEnd       = "fc00:e::1"
	kDelay     = 10 * time.Millisecond
)

type srv6Lab struct {
	lr, k  *netns.NS
	sa, ra [6]byte // linerate's ends
	ka, kb [6]byte // the End node's ends
	scapy  *scapyEnd
}

// srv6EndNodes runs f as a subtest per End node: "kernel" skips, naming
// seg6local, where the kernel lacks it; "scapy" runs on every kernel.
func srv6EndNodes(t *testing.T, f func(t *testing.T, l *srv6Lab)) {
	for _, node := range []string{"kernel", "scapy"} {
		t.Run(node, func(t *testing.T) { f(t, newSRv6Lab(t, node)) })
	}
}

func newSRv6Lab(t *testing.T, node string) *srv6Lab {
	t.Helper()
	testenv.RequireRoot(t)
	testenv.RequireCmd(t, "ip")
	if node == "kernel" {
		testenv.RequireKernel(t, kernel.Seg6Local)
	} else {
		requireScapy(t)
	}
	l := &srv6Lab{lr: netns.New(t), k: netns.New(t)}
	netns.Veth(t, l.lr, "lrsa", l.k, "lrka")
	netns.Veth(t, l.lr, "lrra", l.k, "lrkb")
	l.sa, l.ra = l.lr.MAC(t, "lrsa"), l.lr.MAC(t, "lrra")
	l.ka, l.kb = l.k.MAC(t, "lrka"), l.k.MAC(t, "lrkb")
	if node == "scapy" {
		// The namespace's IPv6 stays off: its kernel neither forwards nor
		// answers the test packets, Scapy's End alone does.
		l.scapy = startScapyEnd(t, l.k, map[string]any{
			"sid":    kEnd,
			"ifaces": map[string]string{"lrka": macStr(l.ka), "lrkb": macStr(l.kb)},
			"routes": [][3]string{{"fc00:a::/64", "lrka", macStr(l.sa)}, {"fc00:b::/64", "lrkb", macStr(l.ra)}},
		})
		return l
	}
	l.k.Sysctl(t, [][2]string{
		{"ipv6/conf/all/forwarding", "1"},
		{"ipv6/conf/lrka/addr_gen_mode", "1"}, {"ipv6/conf/lrkb/addr_gen_mode", "1"},
		{"ipv6/conf/lrka/accept_dad", "0"}, {"ipv6/conf/lrkb/accept_dad", "0"},
		{"ipv6/conf/all/disable_ipv6", "0"}, {"ipv6/conf/lrka/disable_ipv6", "0"}, {"ipv6/conf/lrkb/disable_ipv6", "0"},
		{"ipv6/conf/all/seg6_enabled", "1"}, {"ipv6/conf/lrka/seg6_enabled", "1"}, {"ipv6/conf/lrkb/seg6_enabled", "1"},
	})
	l.k.IP(t, "addr", "add", "fc00:a::1/64", "dev", "lrka", "nodad")
	l.k.IP(t, "addr", "add", "fc00:b::1/64", "dev", "lrkb", "nodad")
	l.k.IP(t, "-6", "route", "add", kEnd+"/128", "encap", "seg6local", "action", "End", "dev", "lrka")
	l.k.IP(t, "-6", "neigh", "add", kSender, "lladdr", macStr(l.sa), "dev", "lrka", "nud", "permanent")
	l.k.IP(t, "-6", "neigh", "add", kReflector, "lladdr", macStr(l.ra), "dev", "lrkb", "nud", "permanent")
	return l
}

func macStr(m [6]byte) string { return net.HardwareAddr(m[:]).String() }

// scapyEnd is testdata/srv6_end.py running in a namespace until the test
// ends (its stdin closes then).
type scapyEnd struct {
	in    io.WriteCloser
	lines chan string
}

func startScapyEnd(t *testing.T, ns *netns.NS, spec map[string]any) *scapyEnd {
	t.Helper()
	js, _ := json.Marshal(spec)
	cmd := exec.Command("ip", "netns", "exec", ns.Name(), python, "testdata/srv6_end.py", string(js))
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &testenv.Output{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	e := &scapyEnd{in: in, lines: make(chan string, 16)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			e.lines <- sc.Text()
		}
		close(e.lines)
	}()
	t.Cleanup(func() {
		in.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("srv6_end.py: %v: %s", err, stderr.String())
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Errorf("srv6_end.py did not exit when its stdin closed: %s", stderr.String())
		}
	})
	if line := e.line(t); line != "ready" {
		t.Fatalf("srv6_end.py: %q: %s", line, stderr.String())
	}
	return e
}

// line is the script's next line; the deadline only ends a wait for a
// script that died or hangs.
func (e *scapyEnd) line(t *testing.T) string {
	t.Helper()
	select {
	case l, ok := <-e.lines:
		if !ok {
			t.Fatal("srv6_end.py exited")
		}
		return l
	case <-time.After(60 * time.Second):
		t.Fatal("srv6_end.py said nothing for 60 s")
	}
	return ""
}

// dropped is what the End node dropped: its refusals and what its
// sockets had no room for.
func (e *scapyEnd) dropped(t *testing.T) uint64 {
	t.Helper()
	if _, err := io.WriteString(e.in, "stats\n"); err != nil {
		t.Fatal(err)
	}
	var c struct {
		Dropped     uint64 `json:"dropped"`
		SocketDrops uint64 `json:"socket_drops"`
	}
	line := e.line(t)
	if err := json.Unmarshal([]byte(line), &c); err != nil {
		t.Fatalf("srv6_end.py: %q: %v", line, err)
	}
	return c.Dropped + c.SocketDrops
}

// engine builds linerate inside its namespace (the afpacket sockets stay
// there) and starts it on real lcores.
func (l *srv6Lab) engine(t *testing.T, senderAuth, reflectorAuth string, delay time.Duration) *appliance.Engine {
	t.Helper()
	toml := fmt.Sprintf(`
version = 1
[engine]
pin = false
[control]
listen = ""
[[ports]]
name = "s0"
driver = "afpacket"
interface = "lrsa"
block_timeout = "1ms"
[[ports]]
name = "r0"
driver = "afpacket"
interface = "lrra"
block_timeout = "1ms"

[[pipelines]]
name = "sender"
lcores = [1]
rx = ["s0"]
[[pipelines.stages]]
kind = "stamp.collector"
name = "collector"
[[pipelines.stages]]
kind = "stamp.sender"
name = "sender"
src = %q
src_mac = %q
dst_mac = %q
synchronized = true
clock_error = "1us"
[[pipelines.stages.sessions]]
ssid = 11
reflector = %q
segments = [%q]
interval = "5ms"
reflector_mode = "stateful"
tlvs = ["timestamp_info", "direct_measurement"]
%s
[[pipelines.stages]]
kind = "forward"
port = "s0"

[[pipelines]]
name = "reflector"
lcores = [1]
rx = ["r0"]
[[pipelines.stages]]
kind = "stamp.reflector"
name = "reflector"
addresses = [%q]
synchronized = true
clock_error = "1us"
[[pipelines.stages.sessions]]
ssid = 11
mode = "stateful"
return_path = [%q]
%s
[[pipelines.stages]]
kind = "link"
name = "return-delay"
delay = %q
[[pipelines.stages]]
kind = "forward"
port = "r0"
`, kSender, macStr(l.sa), macStr(l.ka), kReflector, kEnd, senderAuth,
		kReflector, kEnd, reflectorAuth, delay.String())
	cfg, err := config.Parse("srv6.toml", []byte(toml))
	if err != nil {
		t.Fatal(err)
	}
	var e *appliance.Engine
	if err := l.lr.Do(func() (err error) {
		e, err = appliance.New(cfg, appliance.Options{Log: enginetest.Quiet})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Error(err)
		}
	})
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	return e
}

func dropsOf(s *stats.Snapshot, stage, reason string) uint64 {
	var n uint64
	for _, st := range s.Stages {
		if st.Name == stage {
			for _, d := range st.Drops {
				if d.Reason == reason {
					n += d.Count
				}
			}
		}
	}
	return n
}

// dropped is everything counted as dropped on the path: linerate's port and
// stage drops, the kernel's on the four veth ends (a backlog with no room,
// say) and Scapy's End node's. A test packet or a reply that never came is
// among them.
func (l *srv6Lab) dropped(t *testing.T, s *stats.Snapshot) uint64 {
	t.Helper()
	var n uint64
	for _, p := range s.Ports {
		n += p.RxDropped + p.TxDropped + p.Extra["tx_kick_error"]
	}
	for _, d := range s.Drops {
		n += d.Count
	}
	for _, st := range s.Stages {
		for _, d := range st.Drops {
			n += d.Count
		}
	}
	return n + l.kernelDropped(t)
}

func (l *srv6Lab) kernelDropped(t *testing.T) uint64 {
	t.Helper()
	n := l.lr.Dropped(t, "lrsa") + l.lr.Dropped(t, "lrra") + l.k.Dropped(t, "lrka") + l.k.Dropped(t, "lrkb")
	if l.scapy != nil {
		n += l.scapy.dropped(t)
	}
	return n
}

// stampTol covers what turning monotonic readings into the records' Unix
// times can add or take: the wall offset each stage read at its last refresh
// (clock.System keeps the narrowest of several bracketed reads) and the wire
// format's rounding.
const stampTol = 100 * time.Microsecond

// run measures the path with a link of delay on the return path and returns
// the session's metrics and records, once every test packet sent is
// answered or counted as dropped. It checks what holds however the machine
// schedules the lcores and the kernel's softirqs:
//
//   - every record is well formed: one hop of the kernel each way, the
//     direct measurement counter of its own sequence number;
//   - every record is causal: T1 ≤ T2 ≤ T3 ≤ T4, and the reply reached the
//     collector no sooner than delay after the test packet reached the
//     reflector (the link holds it that long after its rx time, T2);
//   - records come in arrival order (T4 does not go back) with distinct
//     sender and reflector sequence numbers, and no duplicates;
//   - what is lost either way was counted as dropped somewhere on the path.
func (l *srv6Lab) run(t *testing.T, delay time.Duration) (Metrics, []Record) {
	t.Helper()
	kernelBefore := l.kernelDropped(t)
	e := l.engine(t, "", "", delay)
	s := registryOfEngine(t, e).tx.Load().get(11)
	// 300 test packets at 5 ms: 1.5 s, or what a loaded machine makes it.
	waitFor(t, "300 test packets sent", func() bool { return sessionMetrics(t, e, s).Sent >= 300 })
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	// Replies still on the path come in; a packet dropped never does, but
	// its drop is counted. The bound only ends a wait for replies that
	// neither come nor were counted: the loss check below then fails.
	var m Metrics
	var dropped uint64
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		m = sessionMetrics(t, e, s)
		dropped = l.dropped(t, e.Snapshot()) - kernelBefore
		if m.Received+dropped >= m.Sent || time.Now().After(deadline) {
			break
		}
	}
	recs := s.drain(0)
	if len(recs) < 50 {
		t.Fatalf("%d records of %d test packets; stages: %+v", len(recs), m.Sent, e.Snapshot().Stages)
	}
	if err := e.Close(); err != nil { // its reflector would answer the next run too
		t.Fatal(err)
	}
	t.Logf("link %v: %d sent, %d records, %d dropped; rtt min %v p50 %v p99 %v; forward min %v p50 %v; backward min %v p50 %v p99 %v",
		delay, m.Sent, len(recs), dropped, time.Duration(m.RTT.Min), time.Duration(m.RTT.P50), time.Duration(m.RTT.P99),
		time.Duration(m.Forward.Min), time.Duration(m.Forward.P50), time.Duration(m.Backward.Min), time.Duration(m.Backward.P50),
		time.Duration(m.Backward.P99))
	if uint64(len(recs)) != m.Received || m.RecordsLost != 0 {
		t.Errorf("%d records, %d received, %d records lost", len(recs), m.Received, m.RecordsLost)
	}
	seqs, rseqs := map[uint32]bool{}, map[uint32]bool{}
	tol := int64(stampTol)
	for i, r := range recs {
		// The kernel's End hop took one from each direction's hop limit.
		if r.SenderTTL != 63 || r.HopLimit != 254 || r.Flags&(RecTLVUnrecognized|RecTLVMalformed|RecTLVIntegrity|RecDuplicate) != 0 {
			t.Fatalf("record %+v", r)
		}
		if r.Flags&RecDirectMeasurement == 0 || r.DirectMeasurement.SenderTx != r.Seq+1 {
			t.Fatalf("direct measurement %+v for seq %d", r.DirectMeasurement, r.Seq)
		}
		if uint64(r.Seq) >= m.Sent || seqs[r.Seq] || rseqs[r.ReflectorSeq] {
			t.Fatalf("record %d: seq %d, reflector seq %d, after %d records of %d sent", i, r.Seq, r.ReflectorSeq, i, m.Sent)
		}
		seqs[r.Seq], rseqs[r.ReflectorSeq] = true, true
		if r.T2 < r.T1-tol || r.T3 < r.T2-tol || r.T4 < r.T3-tol {
			t.Fatalf("record %d (seq %d) is not causal: T1 %d T2 %+d T3 %+d T4 %+d ns", i, r.Seq, r.T1, r.T2-r.T1, r.T3-r.T1, r.T4-r.T1)
		}
		if held := time.Duration(r.T4 - r.T2); held < delay-stampTol {
			t.Fatalf("record %d (seq %d): reply in %v after the test packet reached the reflector, through a %v link", i, r.Seq, held, delay)
		}
		if i > 0 && r.T4 < recs[i-1].T4-tol {
			t.Fatalf("record %d (seq %d) arrived at %d, before record %d at %d", i, r.Seq, r.T4, i-1, recs[i-1].T4)
		}
	}
	if m.Duplicates != 0 {
		t.Errorf("%d duplicates", m.Duplicates)
	}
	if lost := m.LostForward + m.LostBackward; lost < 0 || uint64(lost) > dropped || m.LostRoundTrip < 0 || uint64(m.LostRoundTrip) > dropped {
		t.Errorf("loss %d forward, %d backward, %d round trip, but %d counted drops on the path", m.LostForward, m.LostBackward, m.LostRoundTrip, dropped)
	}
	return m, recs
}

// The path without the delay, then with it. Every record of the second run
// shows the link on the return path: the reply came no sooner than the
// link's delay after the test packet reached the reflector (run checks each
// one). How much the minima and medians grew is logged, not asserted: the
// path's own part (the kernel's forwarding, the AF_PACKET rings handing over
// their blocks up to block_timeout late, the lcores' turns) is whatever a
// loaded machine's scheduling makes it.
func TestKernelSRv6Path(t *testing.T) { srv6EndNodes(t, testSRv6Path) }

func testSRv6Path(t *testing.T, l *srv6Lab) {
	base, _ := l.run(t, 0)
	m, recs := l.run(t, kDelay)
	var minHeld int64 = -1
	for _, r := range recs {
		if h := r.T4 - r.T2; minHeld < 0 || h < minHeld {
			minHeld = h
		}
	}
	t.Logf("with the %v link: reply after the reflector's rx at least %v; minima grew by backward %v, round trip %v, forward %v; medians by backward %v, round trip %v",
		kDelay, time.Duration(minHeld), time.Duration(m.Backward.Min-base.Backward.Min), time.Duration(m.RTT.Min-base.RTT.Min),
		time.Duration(m.Forward.Min-base.Forward.Min), time.Duration(m.Backward.P50-base.Backward.P50), time.Duration(m.RTT.P50-base.RTT.P50))
}

// sessionMetrics reads s's metrics on the collector's lcore.
func sessionMetrics(t *testing.T, e *appliance.Engine, s *txSession) Metrics {
	t.Helper()
	var m Metrics
	if err := e.Do(0, func() { m = metricsOf(s) }); err != nil {
		t.Fatal(err)
	}
	return m
}

// Authenticated over the same path: the right key gives records, a wrong
// one a counted drop and none.
func TestKernelSRv6Authenticated(t *testing.T) { srv6EndNodes(t, testSRv6Authenticated) }

func testSRv6Authenticated(t *testing.T, l *srv6Lab) {
	dir := t.TempDir()
	keyA, keyB := dir+"/a.key", dir+"/b.key"
	if err := os.WriteFile(keyA, []byte(strings.Repeat("5a", 32)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyB, []byte(strings.Repeat("a5", 32)), 0o600); err != nil {
		t.Fatal(err)
	}
	// The wrong key is the sender's, so that replies of the first subtest
	// that a slow End node (Scapy on a loaded host) still delivers after its
	// engine closed, signed with key A, are refused by the second's
	// collector instead of counted as its session's records.
	for _, c := range []struct {
		name     string
		sender   string
		wantRecs bool
	}{{"right key", keyA, true}, {"wrong key", keyB, false}} {
		t.Run(c.name, func(t *testing.T) {
			e := l.engine(t, fmt.Sprintf("authenticated = true\nkey_file = %q\n", c.sender),
				fmt.Sprintf("authenticated = true\nkey_file = %q\n", keyA), time.Millisecond)
			s := registryOfEngine(t, e).tx.Load().get(11)
			// 50 answers, or 50 refusals: however long it takes.
			waitFor(t, "50 records or bad HMACs", func() bool {
				return sessionMetrics(t, e, s).Received >= 50 || dropsOf(e.Snapshot(), "reflector", "stamp_bad_hmac") >= 50
			})
			_ = s.stop()
			recs := s.drain(0)
			bad := dropsOf(e.Snapshot(), "reflector", "stamp_bad_hmac")
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			t.Logf("%d records, %d stamp_bad_hmac drops", len(recs), bad)
			if c.wantRecs && (len(recs) < 50 || bad != 0) {
				t.Errorf("right key: %d records, %d bad HMACs", len(recs), bad)
			}
			if !c.wantRecs && (len(recs) != 0 || bad < 50) {
				t.Errorf("wrong key: %d records, %d bad HMACs", len(recs), bad)
			}
		})
	}
}
