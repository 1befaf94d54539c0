//go:build linux

package tap

import (
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/internal/netns"
	"github.com/linerate/linerate/internal/porttest"
	"github.com/linerate/linerate/ports"
)

var (
	ourMAC = packet.MAC{0x02, 0, 0, 0, 0x7a, 0x01}
	ourIP  = [4]byte{192, 0, 2, 1}
	hostIP = [4]byte{192, 0, 2, 2}
)

// openTap makes a namespace and a tap port in it, with the kernel side at
// hostIP/24.
func openTap(t *testing.T, pool packet.Pool) (*netns.NS, *Port) {
	t.Helper()
	ns := netns.New(t)
	var p *Port
	if err := ns.Do(func() (err error) {
		p, err = New(Options{Name: "tap", Interface: "lrtap0", Pool: pool})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	ns.IP(t, "addr", "add", "192.0.2.2/24", "dev", "lrtap0")
	return ns, p
}

func frame(t *testing.T, pool packet.Pool, build func(d []byte) int) *packet.Burst {
	t.Helper()
	var b packet.Burst
	if pool.Alloc(&b, 1) != 1 {
		t.Fatal("no buffer")
	}
	d, _ := b.P(0).Append(1000)
	n := build(d)
	_ = b.P(0).Trim(1000 - n)
	return &b
}

func arpRequest(d []byte) int {
	e := packet.Ethernet(d)
	e.Encode(&packet.EthernetFields{Dst: packet.BroadcastMAC, Src: ourMAC, Type: packet.EtherTypeARP})
	packet.ARP(d[14:]).Encode(&packet.ARPFields{Op: packet.ARPRequest, SenderMAC: ourMAC, SenderIP: ourIP, TargetIP: hostIP})
	clear(d[42:60])
	return 60
}

func echoRequest(hostMAC packet.MAC) func(d []byte) int {
	return func(d []byte) int {
		e := packet.Ethernet(d)
		e.Encode(&packet.EthernetFields{Dst: hostMAC, Src: ourMAC, Type: packet.EtherTypeIPv4})
		ip := packet.IPv4(d[14:])
		_ = ip.Encode(&packet.IPv4Fields{TotalLength: 20 + 8 + 4, TTL: 64, Protocol: packet.ProtocolICMP, Src: ourIP, Dst: hostIP})
		ip.SetChecksum(ip.CalculateChecksum())
		m := packet.ICMPv4(d[34:46])
		m.Encode(&packet.ICMPv4Fields{Type: packet.ICMPv4Echo, Rest: 0x77770001})
		copy(m[8:], "ping")
		m.SetChecksum(m.CalculateChecksum())
		return 46
	}
}

// poll receives until match finds a frame, and returns it as soon as it
// comes. It fails after 10 s: the kernel answers from its softirq, which a
// loaded machine can defer to ksoftirqd for far longer than an idle one takes.
func poll(t *testing.T, p *Port, match func(d []byte) bool) []byte {
	t.Helper()
	var b packet.Burst
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		b.N = 0
		p.RxBurst(0, &b)
		for i := 0; i < b.N; i++ {
			if d := b.P(i).Data(); match(d) {
				out := append([]byte(nil), d...)
				packet.Free(&b)
				return out
			}
		}
		packet.Free(&b)
		time.Sleep(time.Millisecond)
	}
	t.Fatal("no matching frame from the kernel")
	return nil
}

// receive polls p for up to wait until match finds a frame.
func receive(p *Port, wait time.Duration, match func(d []byte) bool) bool {
	var b packet.Burst
	for deadline := time.Now().Add(wait); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		b.N = 0
		p.RxBurst(0, &b)
		found := false
		for i := 0; i < b.N; i++ {
			found = found || match(b.P(i).Data())
		}
		packet.Free(&b)
		if found {
			return true
		}
	}
	return false
}

// TestKernelPeer talks to the host's stack through the device: the kernel
// answers an ARP request and then a ping.
func TestKernelPeer(t *testing.T) {
	pool := porttest.Pool(t, 256, 0)
	ns, p := openTap(t, pool)
	var ifc *net.Interface
	if err := ns.Do(func() (err error) { ifc, err = net.InterfaceByName("lrtap0"); return err }); err != nil {
		t.Fatal(err)
	}
	info := p.Info()
	if info.Driver != "tap" || info.MTU != ifc.MTU || net.HardwareAddr(info.MAC[:]).String() != ifc.HardwareAddr.String() || !info.LinkUp {
		t.Errorf("info %+v, interface %+v", info, ifc)
	}
	if n := p.TxBurst(0, frame(t, pool, arpRequest)); n != 1 {
		t.Fatalf("TxBurst took %d", n)
	}
	reply := poll(t, p, func(d []byte) bool {
		return len(d) >= 42 && packet.Ethernet(d).EtherType() == packet.EtherTypeARP && packet.ARP(d[14:]).Op() == packet.ARPReply
	})
	a := packet.ARP(reply[14:])
	if a.SenderIP() != hostIP || a.SenderMAC() != packet.MAC(info.MAC) || a.TargetMAC() != ourMAC || packet.Ethernet(reply).Dst() != ourMAC {
		t.Errorf("ARP reply %+v", a.Fields())
	}
	if n := p.TxBurst(0, frame(t, pool, echoRequest(packet.MAC(info.MAC)))); n != 1 {
		t.Fatalf("TxBurst took %d", n)
	}
	echo := poll(t, p, func(d []byte) bool {
		return len(d) >= 42 && packet.Ethernet(d).EtherType() == packet.EtherTypeIPv4 && d[23] == packet.ProtocolICMP
	})
	m := packet.ICMPv4(echo[34:])
	if m.Type() != packet.ICMPv4EchoReply || m.Rest() != 0x77770001 || !m.IsChecksumValid() || string(m[8:12]) != "ping" {
		t.Errorf("echo reply %x", echo)
	}
	st := p.Stats()
	if st.TxPackets != 2 || st.RxPackets < 2 || st.RxErrors != 0 {
		t.Errorf("stats %+v", st)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ns.Do(func() error { _, err := net.InterfaceByName("lrtap0"); return err }); err == nil {
		t.Error("the device outlived the port")
	}
}

// TestNoAllocs: an empty poll and a transmit allocate nothing.
func TestNoAllocs(t *testing.T) {
	pool := porttest.Pool(t, 256, 0)
	_, p := openTap(t, pool)
	var b packet.Burst
	if n := testing.AllocsPerRun(100, func() { b.N = 0; p.RxBurst(0, &b); packet.Free(&b) }); n != 0 {
		t.Errorf("RxBurst: %v allocations", n)
	}
	tx := frame(t, pool, arpRequest)
	h := tx.H[0]
	packet.FreeOne(h)
	tx.N = 0
	if n := testing.AllocsPerRun(100, func() {
		pool.Alloc(tx, 1)
		d, _ := tx.P(0).Append(60)
		arpRequest(d)
		p.TxBurst(0, tx)
		tx.N = 0
	}); n != 0 {
		t.Errorf("TxBurst: %v allocations", n)
	}
	// Drain the kernel's replies.
	time.Sleep(10 * time.Millisecond)
	for {
		b.N = 0
		if p.RxBurst(0, &b) == 0 {
			break
		}
		packet.Free(&b)
	}
}

func TestConfig(t *testing.T) {
	pool := porttest.Pool(t, 256, 0)
	tab := func(s string) config.Table {
		tb, err := config.ParseTable("t.toml", []byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return tb
	}
	for _, c := range []struct{ doc, err string }{
		{``, "interface is required: the TAP device's name"},
		{`interface = "a-name-far-too-long"`, `interface name "a-name-far-too-long" is longer than 15 bytes`},
		{`interface = "x"` + "\nmtu = 9000", `t.toml:2: mtu: unknown key`},
	} {
		_, err := ports.Open("tap", &ports.Setup{Name: "p", Config: tab(c.doc), Pool: pool, RxQueues: 1, TxQueues: 1, DryRun: true})
		if err == nil || err.Error() != c.err {
			t.Errorf("%q: %v, want %s", c.doc, err, c.err)
		}
	}
	p, err := ports.Open("tap", &ports.Setup{Name: "p", Config: tab(`interface = "lrtap0"` + "\nup = false"), Pool: pool, RxQueues: 1, TxQueues: 1, DryRun: true})
	if p != nil || err != nil {
		t.Errorf("dry run: %v %v", p, err)
	}
}

// devMTU is the device's MTU, or -1 when there is none.
func devMTU(t *testing.T, ns *netns.NS, name string) int {
	t.Helper()
	mtu := -1
	_ = ns.Do(func() error {
		ifc, err := net.InterfaceByName(name)
		if err == nil {
			mtu = ifc.MTU
		}
		return nil
	})
	return mtu
}

// TestMTU: a set mtu is the device's while the port is open.
func TestMTU(t *testing.T) {
	pool := porttest.Pool(t, 16, 0)
	ns := netns.New(t)
	var p ports.Port
	if err := ns.Do(func() (err error) {
		p, err = ports.Open("tap", &ports.Setup{Name: "p", Config: porttest.Config(`interface = "lrtap0"`), Pool: pool,
			RxQueues: 1, TxQueues: 1, MTU: 1400})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if got := devMTU(t, ns, "lrtap0"); got != 1400 || p.Info().MTU != 1400 {
		t.Errorf("device MTU %d, port's %d; want 1400", got, p.Info().MTU)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestPersistentDevice: a TAP made beforehand (ip tuntap add) outlives the
// port. The port attaches to it; its kernel side's addresses and routes stay
// across a close and a new open, as docs/routing.md says; and a set mtu is
// put back at Close.
func TestPersistentDevice(t *testing.T) {
	pool := porttest.Pool(t, 256, 0)
	ns := netns.New(t)
	ns.IP(t, "tuntap", "add", "dev", "lrtap0", "mode", "tap")
	ns.IP(t, "addr", "add", "192.0.2.2/24", "dev", "lrtap0")
	ns.IP(t, "link", "set", "lrtap0", "up")
	ns.IP(t, "route", "add", "198.51.100.0/24", "via", "192.0.2.1", "dev", "lrtap0")
	ns.Sysctl(t, [][2]string{{"ipv6/conf/lrtap0/disable_ipv6", "0"}})
	ns.IP(t, "-6", "addr", "add", "fd00::2/64", "dev", "lrtap0", "nodad")
	ns.IP(t, "-6", "route", "add", "2001:db8:2::/48", "via", "fd00::1", "dev", "lrtap0")
	kernelSide := func() string {
		t.Helper()
		var out []byte
		for _, args := range [][]string{{"addr", "show", "dev", "lrtap0"}, {"-4", "route", "show", "dev", "lrtap0"},
			{"-6", "route", "show", "dev", "lrtap0"}} {
			o, err := exec.Command("ip", append([]string{"-n", ns.Name()}, args...)...).CombinedOutput()
			if err != nil {
				t.Fatalf("ip %v: %v: %s", args, err, o)
			}
			out = append(out, o...)
		}
		return string(out)
	}
	for round := range 2 {
		var p *Port
		if err := ns.Do(func() (err error) {
			p, err = New(Options{Name: "tap", Interface: "lrtap0", Pool: pool, MTU: 1400})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if got := devMTU(t, ns, "lrtap0"); got != 1400 {
			t.Errorf("round %d: device MTU %d while open", round, got)
		}
		// The kernel side answers through the device as before. (Asked
		// again until it does: the kernel activates a device's queue a
		// moment after the port attaches, and drops what it sends before.)
		answered := false
		for deadline := time.Now().Add(10 * time.Second); !answered && time.Now().Before(deadline); {
			if n := p.TxBurst(0, frame(t, pool, arpRequest)); n != 1 {
				t.Fatalf("TxBurst took %d", n)
			}
			answered = receive(p, 100*time.Millisecond, func(d []byte) bool {
				return len(d) >= 42 && packet.Ethernet(d).EtherType() == packet.EtherTypeARP && packet.ARP(d[14:]).Op() == packet.ARPReply
			})
		}
		if !answered {
			t.Fatalf("round %d: no ARP reply from the kernel side", round)
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		if got := devMTU(t, ns, "lrtap0"); got != 1500 {
			t.Errorf("round %d: device MTU %d after Close, want its own 1500", round, got)
		}
		side := kernelSide()
		if !strings.Contains(side, "inet 192.0.2.2/24") || !strings.Contains(side, "198.51.100.0/24 via 192.0.2.1") ||
			!strings.Contains(side, "inet6 fd00::2/64") || !strings.Contains(side, "2001:db8:2::/48 via fd00::1") {
			t.Errorf("round %d: the kernel side after Close:\n%s", round, side)
		}
	}
}
