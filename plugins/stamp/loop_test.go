//go:build linux

package stamp

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/linerate/linerate/appliance"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/internal/enginetest"
	"github.com/linerate/linerate/internal/netns"

	_ "github.com/linerate/linerate/ports/afpacket"
)

// testFrame is a Session-Sender's test packet as linerate's sender would
// send it: from src to dst, 862 to 862, sequence seq.
func testFrame(t testing.TB, ssid uint16, seq uint32, src, dst netip.Addr, srcMAC, dstMAC [6]byte) []byte {
	t.Helper()
	s, err := buildTx(SenderSession{SSID: ssid, Src: src, Reflector: dst, SrcPort: DefaultPort, ReflectorPort: DefaultPort,
		Interval: time.Second, HopLimit: 64, SrcMAC: srcMAC, DstMAC: dstMAC}, &senderDefaults{})
	if err != nil {
		t.Fatal(err)
	}
	f := append([]byte(nil), s.tmpl...)
	pay := f[s.pay:]
	binary.BigEndian.PutUint32(pay[s.lay.seq:], seq)
	binary.BigEndian.PutUint64(pay[s.lay.ts:], uint64(time.Now().Unix()+2208988800)<<32)
	binary.BigEndian.PutUint16(pay[s.lay.errEst:], uint16(MakeErrorEstimate(false, false, 0, 1)))
	u := packet.UDP(f[s.l4:])
	u.SetChecksum(0)
	u.SetChecksum(^packet.Checksum(u, s.pseudo))
	return f
}

// rawSocket opens an AF_PACKET socket on ifname, in ns, for sending frames.
func rawSocket(t testing.TB, ns *netns.NS, ifname string) (fd int, sa *unix.SockaddrLinklayer) {
	t.Helper()
	if err := ns.Do(func() error {
		ifc, err := net.InterfaceByName(ifname)
		if err != nil {
			return err
		}
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		sa = &unix.SockaddrLinklayer{Ifindex: ifc.Index, Halen: 6}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd, sa
}

// startEngine builds an engine from toml inside ns (its afpacket sockets stay
// there) and starts it.
func startEngine(t testing.TB, ns *netns.NS, name, toml string) *appliance.Engine {
	t.Helper()
	cfg, err := config.Parse(name+".toml", []byte(toml))
	if err != nil {
		t.Fatal(err)
	}
	var e *appliance.Engine
	if err := ns.Do(func() (err error) {
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

// stageCounter reads a counter of the stage name from a snapshot.
func stageCounter(e *appliance.Engine, stage, counter string) uint64 {
	var n uint64
	for _, st := range e.Snapshot().Stages {
		if st.Name == stage {
			for _, c := range st.Counters {
				if c.Name == counter {
					n += c.Value
				}
			}
		}
	}
	return n
}

// waitFor polls cond until it holds or a generous deadline passes.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// Two default reflectors face each other on a veth pair, both with session
// 7. One spoofed test packet, "from" one of them to the other, is answered
// once; the answer is not answered again.
func TestReflectorsFaceEachOther(t *testing.T) {
	ns := netns.New(t)
	netns.Veth(t, ns, "lrla", ns, "lrlb")
	ma, mb := ns.MAC(t, "lrla"), ns.MAC(t, "lrlb")
	reflector := func(ifname string) string {
		return fmt.Sprintf(`
version = 1
[engine]
pin = false
[control]
listen = ""
[[ports]]
name = "p0"
driver = "afpacket"
interface = %q
[[pipelines]]
name = "node"
rx = ["p0"]
[[pipelines.stages]]
kind = "stamp.reflector"
name = "reflector"
forward = "in"
[[pipelines.stages.sessions]]
ssid = 7
`, ifname)
	}
	ea := startEngine(t, ns, "a", reflector("lrla"))
	eb := startEngine(t, ns, "b", reflector("lrlb"))
	// A test packet that claims to come from a's address (and a's MAC), to
	// b: b answers it to a.
	fd, sa := rawSocket(t, ns, "lrla")
	f := testFrame(t, 7, 1, addrS, addrR, ma, mb)
	copy(sa.Addr[:], mb[:])
	if err := unix.Sendto(fd, f, 0, sa); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a to drop b's answer (or the two to loop)", func() bool {
		return dropsOf(ea.Snapshot(), "reflector", "stamp_reflected") >= 1 || stageCounter(ea, "reflector", "reflected") >= 100
	})
	// Had a answered, the two would keep at it: give them the time for a
	// few hundred rounds, then count.
	time.Sleep(500 * time.Millisecond)
	ra, rb := stageCounter(ea, "reflector", "reflected"), stageCounter(eb, "reflector", "reflected")
	da, db := dropsOf(ea.Snapshot(), "reflector", "stamp_reflected"), dropsOf(eb.Snapshot(), "reflector", "stamp_reflected")
	t.Logf("a reflected %d, dropped %d as reflected; b reflected %d, dropped %d", ra, da, rb, db)
	if ra != 0 || rb != 1 || da != 1 || db != 0 {
		t.Errorf("a reflected %d and dropped %d, b reflected %d and dropped %d: want 0, 1, 1, 0", ra, da, rb, db)
	}
}

// Two nodes measure each other over a veth pair with the same SSID both
// ways, each with a collector, a reflector and a sender in one pipeline on
// the default port: each gets its records, and nothing is dropped.
func TestNodesMeasureEachOther(t *testing.T) {
	ns := netns.New(t)
	netns.Veth(t, ns, "lrma", ns, "lrmb")
	ma, mb := ns.MAC(t, "lrma"), ns.MAC(t, "lrmb")
	node := func(ifname string, self, peer netip.Addr, mac, peerMAC [6]byte) string {
		return fmt.Sprintf(`
version = 1
[engine]
pin = false
[control]
listen = ""
[[ports]]
name = "p0"
driver = "afpacket"
interface = %q
[[pipelines]]
name = "node"
rx = ["p0"]
[[pipelines.stages]]
kind = "stamp.collector"
name = "collector"
[[pipelines.stages]]
kind = "stamp.reflector"
name = "reflector"
forward = "in"
[[pipelines.stages.sessions]]
ssid = 7
[[pipelines.stages]]
kind = "stamp.sender"
name = "sender"
src = %q
src_mac = %q
dst_mac = %q
interval = "10ms"
[[pipelines.stages.sessions]]
ssid = 7
reflector = %q
[[pipelines.stages]]
kind = "forward"
port = "p0"
`, ifname, self, net.HardwareAddr(mac[:]), net.HardwareAddr(peerMAC[:]), peer)
	}
	ea := startEngine(t, ns, "a", node("lrma", addrS, addrR, ma, mb))
	eb := startEngine(t, ns, "b", node("lrmb", addrR, addrS, mb, ma))
	const want = 50
	waitFor(t, "records on both nodes", func() bool {
		return stageCounter(ea, "collector", "records") >= want && stageCounter(eb, "collector", "records") >= want
	})
	for _, x := range []struct {
		name string
		e    *appliance.Engine
	}{{"a", ea}, {"b", eb}} {
		for _, st := range x.e.Snapshot().Stages {
			if len(st.Drops) > 0 {
				t.Errorf("node %s: %s dropped %+v", x.name, st.Name, st.Drops)
			}
		}
		if r := stageCounter(x.e, "reflector", "reflected"); r < want {
			t.Errorf("node %s reflected %d", x.name, r)
		}
		t.Logf("node %s: %d records, %d reflected", x.name, stageCounter(x.e, "collector", "records"),
			stageCounter(x.e, "reflector", "reflected"))
	}
}
