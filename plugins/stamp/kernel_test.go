//go:build linux

package stamp

import (
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/linerate/linerate/appliance"
	"github.com/linerate/linerate/appliance/stats"
	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/internal/enginetest"
	"github.com/linerate/linerate/internal/netns"
	"github.com/linerate/linerate/internal/testenv"

	_ "github.com/linerate/linerate/ports/afpacket"
)

// A real SRv6 path: the Linux kernel is the End node between linerate's
// sender and reflector.
//
//	linerate ns                                  kernel ns (forwarding, seg6_enabled)
//	 sender ── afpacket lrsa ══veth══ lrka  fc00:a::1
//	                                        End SID fc00:e::1 (seg6local End)
//	 reflector ─ afpacket lrra ══veth══ lrkb  fc00:b::1
//
// Test packets fc00:a::2 → fc00:b::2 carry SRH [fc00:e::1, fc00:b::2]; the
// kernel performs End and forwards them to the reflector; replies come back
// on the return path [fc00:e::1, fc00:a::2]. A link stage in the reflector's
// pipeline holds replies for a known delay: the records show it backward and
// in the round trip.

const (
	kSender    = "fc00:a::2"
	kReflector = "fc00:b::2"
	kEnd       = "fc00:e::1"
	kDelay     = 10 * time.Millisecond
)

type srv6Lab struct {
	lr, k  *netns.NS
	sa, ra [6]byte // linerate's ends
	ka, kb [6]byte // the kernel's ends
}

func newSRv6Lab(t *testing.T) *srv6Lab {
	t.Helper()
	testenv.RequireRoot(t)
	testenv.RequireCmd(t, "ip")
	_, err := os.Stat("/proc/sys/net/ipv6/conf/all/seg6_enabled")
	testenv.Require(t, "a kernel with SRv6 (CONFIG_IPV6_SEG6_LWTUNNEL)", err == nil)
	l := &srv6Lab{lr: netns.New(t), k: netns.New(t)}
	netns.Veth(t, l.lr, "lrsa", l.k, "lrka")
	netns.Veth(t, l.lr, "lrra", l.k, "lrkb")
	l.sa, l.ra = l.lr.MAC(t, "lrsa"), l.lr.MAC(t, "lrra")
	l.ka, l.kb = l.k.MAC(t, "lrka"), l.k.MAC(t, "lrkb")
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
	l.k.IP(t, "-6", "neigh", "add", kSender, "lladdr", net.HardwareAddr(l.sa[:]).String(), "dev", "lrka", "nud", "permanent")
	l.k.IP(t, "-6", "neigh", "add", kReflector, "lladdr", net.HardwareAddr(l.ra[:]).String(), "dev", "lrkb", "nud", "permanent")
	return l
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
`, kSender, net.HardwareAddr(l.sa[:]), net.HardwareAddr(l.ka[:]), kReflector, kEnd, senderAuth,
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
// stage drops and the kernel's on the four veth ends (a backlog with no room,
// say). A test packet or a reply that never came is among them.
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
	return l.lr.Dropped(t, "lrsa") + l.lr.Dropped(t, "lrra") + l.k.Dropped(t, "lrka") + l.k.Dropped(t, "lrkb")
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
	time.Sleep(1500 * time.Millisecond)
	s := registryOfEngine(t, e).tx.Load().get(11)
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	// Replies still on the path come in; a packet dropped never does, but
	// its drop is counted. The bound only ends a wait for replies that
	// neither come nor were counted: the loss check below then fails.
	var m Metrics
	var dropped uint64
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if err := e.Do(0, func() { m = metricsOf(s) }); err != nil {
			t.Fatal(err)
		}
		dropped = l.dropped(t, e.Snapshot()) - kernelBefore
		if m.Received+dropped >= m.Sent || time.Now().After(deadline) {
			break
		}
	}
	recs := s.drain(0)
	if len(recs) < 50 {
		t.Fatalf("%d records in 1.5 s at 5 ms; stages: %+v", len(recs), e.Snapshot().Stages)
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
func TestKernelSRv6Path(t *testing.T) {
	l := newSRv6Lab(t)
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

// Authenticated over the same path: the right key gives records, a wrong
// one a counted drop and none.
func TestKernelSRv6Authenticated(t *testing.T) {
	l := newSRv6Lab(t)
	dir := t.TempDir()
	keyA, keyB := dir+"/a.key", dir+"/b.key"
	if err := os.WriteFile(keyA, []byte(strings.Repeat("5a", 32)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyB, []byte(strings.Repeat("a5", 32)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		refl     string
		wantRecs bool
	}{{"right key", keyA, true}, {"wrong key", keyB, false}} {
		t.Run(c.name, func(t *testing.T) {
			e := l.engine(t, fmt.Sprintf("authenticated = true\nkey_file = %q\n", keyA),
				fmt.Sprintf("authenticated = true\nkey_file = %q\n", c.refl), time.Millisecond)
			time.Sleep(time.Second)
			s := registryOfEngine(t, e).tx.Load().get(11)
			_ = s.stop()
			time.Sleep(3 * kDelay)
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
