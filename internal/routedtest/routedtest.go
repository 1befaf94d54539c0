// Package routedtest is the end-to-end test of routed mode, shared by the
// datapaths that run it (afpacket, DPDK net_af_packet vdevs): two Linux hosts,
// each in a network namespace of its own, on either side of a linerate router
// in a third. The hosts' kernels resolve linerate's addresses by NDP and ARP,
// ping it, route UDP and TCP through it both ways, hear ICMP Time Exceeded when
// a hop limit runs out, and flood it with Neighbor Solicitations from made-up
// sources, after which its neighbour cache must still be bounded and routing
// must still work.
//
// Only tests import it.
package routedtest

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/linerate/linerate/appliance"
	"github.com/linerate/linerate/appliance/control"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/internal/netns"
	"github.com/linerate/linerate/internal/testenv"
	"github.com/linerate/linerate/plugins/route/api"
)

// Addresses of the topology.
const (
	MAC1 = "02:00:00:00:01:01" // linerate on link 1
	MAC2 = "02:00:00:00:02:01" // linerate on link 2
	R1v6 = "2001:db8:1::1"
	R1v4 = "192.0.2.1"
	H1v6 = "2001:db8:1::2"
	H1v4 = "192.0.2.2"
	R2v6 = "2001:db8:2::1"
	R2v4 = "198.51.100.1"
	H2v6 = "2001:db8:2::2"
	H2v4 = "198.51.100.2"
	// MaxNeighbors is the router's neighbour cache size.
	MaxNeighbors = 256
)

// Topology is the three namespaces: Router holds the veth ends r1 and r2,
// Host1 holds h1 (r1's peer) and Host2 h2 (r2's peer).
type Topology struct {
	Router, Host1, Host2 *netns.NS
	Engine               *appliance.Engine
	Routing              api.RoutingClient
	Control              string // the control API's address
}

// Ports gives the [[ports]] tables for the router's two ports, named r1 and r2,
// on the veth interfaces r1 and r2: the datapath's own keys (driver,
// interface or vdev); Run adds the routed-mode keys after them.
type Ports func(port, iface string) string

// New makes the namespaces and veth pairs, and configures the hosts: IPv6 on,
// addresses on their links, default routes through linerate, and checksum and
// segmentation offloads off so that what crosses linerate's packet sockets
// carries finished checksums and fits the MTU.
func New(t *testing.T) *Topology {
	t.Helper()
	testenv.RequireCmd(t, "ethtool")
	tp := &Topology{Router: netns.New(t), Host1: netns.New(t), Host2: netns.New(t)}
	netns.Veth(t, tp.Host1, "h1", tp.Router, "r1")
	netns.Veth(t, tp.Host2, "h2", tp.Router, "r2")
	host(t, tp.Host1, "h1", H1v6, H1v4, R1v6, R1v4)
	host(t, tp.Host2, "h2", H2v6, H2v4, R2v6, R2v4)
	for _, i := range []string{"r1", "r2"} {
		ethtool(t, tp.Router, i, "rx", "off", "tx", "off", "gro", "off", "gso", "off", "tso", "off")
	}
	return tp
}

func host(t *testing.T, ns *netns.NS, ifname, v6, v4, gw6, gw4 string) {
	t.Helper()
	err := ns.Do(func() error {
		for _, k := range []string{"all/accept_dad", "default/accept_dad", ifname + "/accept_dad",
			"all/disable_ipv6", "default/disable_ipv6", ifname + "/disable_ipv6"} {
			if err := os.WriteFile("/proc/sys/net/ipv6/conf/"+k, []byte("0"), 0); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%s: enable IPv6: %v", ns.Name(), err)
	}
	ethtool(t, ns, ifname, "rx", "off", "tx", "off", "gro", "off", "gso", "off", "tso", "off")
	ns.IP(t, "-6", "addr", "add", v6+"/64", "dev", ifname, "nodad")
	ns.IP(t, "addr", "add", v4+"/24", "dev", ifname)
	ns.IP(t, "-6", "route", "add", "default", "via", gw6, "dev", ifname)
	ns.IP(t, "route", "add", "default", "via", gw4, "dev", ifname)
}

func ethtool(t *testing.T, ns *netns.NS, ifname string, args ...string) {
	t.Helper()
	full := append([]string{"netns", "exec", ns.Name(), "ethtool", "-K", ifname}, args...)
	if out, err := exec.Command("ip", full...).CombinedOutput(); err != nil {
		t.Fatalf("ethtool -K %s %v: %v: %s", ifname, args, err, out)
	}
}

// The exception path: a TAP port between linerate and the router
// namespace's own kernel, which holds linerate's first addresses too, so that
// what linerate punts to it (a TCP connection to 2001:db8:1::1) is its own.
const (
	TapMAC  = "02:00:00:00:03:01" // linerate's side
	Tapv6   = "fd00::1"
	Tapv4   = "10.255.0.1"
	Kernv6  = "fd00::2"
	Kernv4  = "10.255.0.2"
	TapName = "lrtap0"
)

// Config is the router's config: the two ports, a TAP exception port, and
// neighbor → icmp → route → punt on one lcore.
func Config(ports Ports, extra string) string {
	return fmt.Sprintf(`version = 1
[engine]
pin = false
[control]
listen = ""
%s
[[ports]]
name = "r1"
%s
mac = %q
addresses = ["%s/64", "%s/24"]
[[ports]]
name = "r2"
%s
mac = %q
addresses = ["%s/64", "%s/24"]

[[ports]]
name = "tap0"
driver = "tap"
interface = %q
mac = %q
addresses = ["%s/64", "%s/30"]

[[pipelines]]
name = "router"
rx = ["r1", "r2", "tap0"]
[[pipelines.stages]]
kind = "neighbor"
max_entries = %d
learn_rate = "20kpps"
[[pipelines.stages]]
kind = "icmp"
[[pipelines.stages]]
kind = "route"
[[pipelines.stages]]
kind = "punt"
port = "tap0"
`, extra, ports("r1", "r1"), MAC1, R1v6, R1v4, ports("r2", "r2"), MAC2, R2v6, R2v4, TapName, TapMAC, Tapv6, Tapv4, MaxNeighbors)
}

// Start builds the router's engine inside the router namespace, starts it and
// its control API.
func (tp *Topology) Start(t *testing.T, cfgText string) {
	t.Helper()
	cfg, err := config.Parse("router.toml", []byte(cfgText))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	var e *appliance.Engine
	if err := tp.Router.Do(func() (err error) { e, err = appliance.New(cfg, appliance.Options{Log: log}); return err }); err != nil {
		t.Fatal(err)
	}
	tp.Engine = e
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Errorf("engine: %v", err)
		}
	})
	srv := control.NewServer(e, log)
	srv.RegisterServices(control.Host(e))
	tp.Control = "unix:" + filepath.Join(t.TempDir(), "linerate.sock")
	if _, err := srv.Start(tp.Control); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	cc, err := control.Dial(tp.Control)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	tp.Routing = api.NewRoutingClient(cc)
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	tp.hostKernel(t)
}

// hostKernel gives the router namespace's kernel its side of the TAP and
// linerate's first addresses, and routes its replies through linerate. Its
// veth interfaces stay without IPv6, and answer no ARP for addresses they do
// not hold, so that the kernel never speaks for linerate on the links.
func (tp *Topology) hostKernel(t *testing.T) {
	t.Helper()
	err := tp.Router.Do(func() error {
		for k, v := range map[string]string{
			"ipv6/conf/lo/disable_ipv6": "0", "ipv6/conf/" + TapName + "/accept_dad": "0",
			"ipv6/conf/" + TapName + "/disable_ipv6": "0",
			"ipv4/conf/r1/arp_ignore":                "1", "ipv4/conf/r2/arp_ignore": "1",
		} {
			if err := os.WriteFile("/proc/sys/net/"+k, []byte(v), 0); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("router namespace sysctls: %v", err)
	}
	r := tp.Router
	r.IP(t, "-6", "addr", "add", Kernv6+"/64", "dev", TapName, "nodad")
	r.IP(t, "addr", "add", Kernv4+"/30", "dev", TapName)
	r.IP(t, "-6", "addr", "add", R1v6+"/128", "dev", "lo")
	r.IP(t, "addr", "add", R1v4+"/32", "dev", "lo")
	r.IP(t, "-6", "route", "add", "default", "via", Tapv6, "dev", TapName)
	r.IP(t, "route", "add", "default", "via", Tapv4, "dev", TapName)
}

// Run is the whole test: the topology, the router on ports, and every check as
// a subtest.
func Run(t *testing.T, ports Ports, extra string) {
	tp := New(t)
	tp.Start(t, Config(ports, extra))
	t.Run("ping-linerate", tp.PingLinerate)
	t.Run("ping-through", tp.PingThrough)
	t.Run("udp", tp.UDP)
	t.Run("tcp", tp.TCP)
	t.Run("time-exceeded", tp.TimeExceeded)
	t.Run("neighbor-flood", tp.NeighborFlood)
	t.Run("tcp-after-flood", tp.TCP)
	t.Run("punt", tp.Punt)
	t.Run("other-hosts", tp.OtherHosts)
	tp.checkStatus(t, "ns_received", "na_sent", "arp_replies_sent", "echo_replies_v6", "echo_replies_v4", "forwarded",
		"icmp_errors_sent", "resolutions", "punted")
}

// MTU2 is r2's mtu in RunMTU.
const MTU2 = 1400

// RunMTU is the MTU test: the router's port r2 has mtu = 1400 in the config,
// and so has host 2's side of that link. The port sets it on its interface
// while it runs and puts the interface's own back when it stops; the hosts'
// kernels hear Packet Too Big and Fragmentation Needed for packets with
// Don't Fragment, and reassemble the fragments linerate makes of IPv4
// packets without it.
func RunMTU(t *testing.T, ports Ports, extra string) {
	tp := New(t)
	tp.Host2.IP(t, "link", "set", "h2", "mtu", fmt.Sprint(MTU2))
	// Registered before Start, so it runs after the engine has closed.
	t.Cleanup(func() {
		if got := ifMTU(t, tp.Router, "r2"); got != 1500 {
			t.Errorf("r2's MTU is %d after linerate stopped, want its own 1500 back", got)
		}
	})
	tp.Start(t, Config(func(port, iface string) string {
		keys := ports(port, iface)
		if port == "r2" {
			keys += fmt.Sprintf("\nmtu = %d", MTU2)
		}
		return keys
	}, extra))
	if got := ifMTU(t, tp.Router, "r2"); got != MTU2 {
		t.Errorf("r2's MTU is %d while linerate runs, want the port's %d", got, MTU2)
	}
	t.Run("fragmented", tp.Fragmented)
	t.Run("frag-needed", tp.FragNeeded)
	t.Run("packet-too-big", tp.PacketTooBig)
	tp.checkStatus(t, "forwarded", "fragmented", "fragments", "icmp_errors_sent")
}

// ifMTU is the MTU of interface name in ns.
func ifMTU(t *testing.T, ns *netns.NS, name string) int {
	t.Helper()
	mtu := -1
	if err := ns.Do(func() error {
		ifc, err := net.InterfaceByName(name)
		if err == nil {
			mtu = ifc.MTU
		}
		return err
	}); err != nil {
		t.Error(err)
	}
	return mtu
}

// udpTo is a UDP socket in ns connected to dst, with the IP_MTU_DISCOVER
// (IPV6_MTU_DISCOVER) mode pmtu.
func udpTo(t *testing.T, ns *netns.NS, network, dst string, pmtu int) *net.UDPConn {
	t.Helper()
	var c net.Conn
	if err := ns.Do(func() (err error) { c, err = net.Dial(network, dst); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	sc, _ := c.(*net.UDPConn).SyscallConn()
	var serr error
	_ = sc.Control(func(fd uintptr) {
		if network == "udp6" {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_MTU_DISCOVER, pmtu)
		} else {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, pmtu)
		}
	})
	if serr != nil {
		t.Fatal(serr)
	}
	return c.(*net.UDPConn)
}

// pathMTU is the kernel's path MTU of a connected socket (IP_MTU, IPV6_MTU).
func pathMTU(t *testing.T, c *net.UDPConn, v6 bool) int {
	t.Helper()
	sc, _ := c.SyscallConn()
	var mtu int
	var err error
	_ = sc.Control(func(fd uintptr) {
		if v6 {
			mtu, err = unix.GetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_MTU)
		} else {
			mtu, err = unix.GetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_MTU)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return mtu
}

// Fragmented: host 1 sends host 2 a 1448-byte UDP datagram in an IPv4 packet
// without Don't Fragment, larger than r2's MTU. linerate fragments it, host
// 2's kernel reassembles it, and host 1 hears no Fragmentation Needed.
func (tp *Topology) Fragmented(t *testing.T) {
	var srv net.PacketConn
	if err := tp.Host2.Do(func() (err error) { srv, err = net.ListenPacket("udp4", H2v4+":9300"); return err }); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	c := udpTo(t, tp.Host1, "udp4", H2v4+":9300", unix.IP_PMTUDISC_DONT)
	msg := make([]byte, 1448)
	for i := range msg {
		msg[i] = byte(i * 13)
	}
	buf := make([]byte, 2000)
	got := false
	// Sent again until it arrives: the first waits for linerate to resolve
	// host 2.
	for try := 0; try < 20 && !got; try++ {
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
		_ = srv.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		n, _, err := srv.ReadFrom(buf)
		if err == nil {
			if n != len(msg) || !bytes.Equal(buf[:n], msg) {
				t.Fatalf("host 2 received %d bytes, not the datagram sent", n)
			}
			got = true
		}
	}
	if !got {
		t.Fatal("the datagram never reached host 2")
	}
	if m := pathMTU(t, c, false); m != 1500 {
		t.Errorf("host 1's path MTU to host 2 is %d: it heard Fragmentation Needed for a packet without DF", m)
	}
	// Counters are published at the end of a burst: the one that sent the
	// fragments may still be finishing.
	if !waitFor(5*time.Second, func() bool { return tp.counter("fragmented") > 0 }) {
		t.Error("linerate fragmented nothing")
	}
}

// FragNeeded: the same datagram with Don't Fragment makes linerate answer
// Fragmentation Needed with r2's MTU, which host 1's kernel takes as the
// path MTU.
func (tp *Topology) FragNeeded(t *testing.T) {
	tp.learnPathMTU(t, "udp4", H2v4+":9301", unix.IP_PMTUDISC_DO, false)
}

// PacketTooBig: an IPv6 datagram too big for r2 gets Packet Too Big; host
// 1's kernel takes its MTU as the path MTU.
func (tp *Topology) PacketTooBig(t *testing.T) {
	tp.learnPathMTU(t, "udp6", "["+H2v6+"]:9302", unix.IPV6_PMTUDISC_DO, true)
}

func (tp *Topology) learnPathMTU(t *testing.T, network, dst string, pmtu int, v6 bool) {
	c := udpTo(t, tp.Host1, network, dst, pmtu)
	if m := pathMTU(t, c, v6); m != 1500 {
		t.Fatalf("path MTU %d before anything was sent", m)
	}
	msg := make([]byte, 1448) // 1476 bytes of IPv4, 1496 of IPv6: more than r2's 1400
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if m := pathMTU(t, c, v6); m == MTU2 {
			return
		}
		_, _ = c.Write(msg) // EMSGSIZE once the kernel knows
	}
	t.Fatalf("host 1's path MTU to %s is %d, want r2's %d", dst, pathMTU(t, c, v6), MTU2)
}

// waitFor polls cond until it holds, for up to d.
func waitFor(d time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(d); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// counter sums a stage counter over every lcore.
func (tp *Topology) counter(name string) uint64 {
	var v uint64
	for _, st := range tp.Engine.Snapshot().Stages {
		for _, c := range st.Counters {
			if c.Name == name {
				v += c.Value
			}
		}
	}
	return v
}

// drops is the engine's count of a drop reason.
func (tp *Topology) drops(reason string) uint64 {
	var v uint64
	for _, d := range tp.Engine.Snapshot().Drops {
		if d.Reason == reason {
			v += d.Count
		}
	}
	return v
}

// OtherHosts: host 1 sends frames to another host's MAC on its link: one
// VLAN-tagged, one not IP. linerate's promiscuous port sees them, and drops
// them as route_not_for_us; the router namespace's kernel must never get
// them through the TAP. The same frames to linerate's MAC are punted to it.
func (tp *Topology) OtherHosts(t *testing.T) {
	var tap int
	if err := tp.Router.Do(func() error {
		ifc, err := net.InterfaceByName(TapName)
		if err != nil {
			return err
		}
		if tap, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_NONBLOCK, int(htons(unix.ETH_P_ALL))); err != nil {
			return err
		}
		return unix.Bind(tap, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifc.Index})
	}); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(tap)
	var fd, ifindex int
	if err := tp.Host1.Do(func() error {
		ifc, err := net.InterfaceByName("h1")
		if err != nil {
			return err
		}
		ifindex = ifc.Index
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	hostMAC := packet.MAC(tp.Host1.MAC(t, "h1"))
	frames := func(dst packet.MAC, mark string) [][]byte {
		var out [][]byte
		for _, tag := range []bool{true, false} {
			f := make([]byte, 14)
			packet.Ethernet(f).Encode(&packet.EthernetFields{Dst: dst, Src: hostMAC, Type: 0x88b5})
			if tag {
				f = append(f[:12], 0x81, 0x00, 0x00, 7, 0x88, 0xb5)
			}
			out = append(out, append(f, []byte(fmt.Sprintf("%-46s", mark))...))
		}
		return out
	}
	before := tp.drops("route_not_for_us")
	other := packet.MAC{2, 0, 0, 0, 1, 0x99}
	mine, _ := net.ParseMAC(MAC1)
	for _, f := range append(frames(other, "linerate other host"), frames(packet.MAC(mine), "linerate to us")...) {
		if err := unix.Sendto(fd, f, 0, &unix.SockaddrLinklayer{Ifindex: ifindex, Protocol: htons(0x88b5)}); err != nil {
			t.Fatal(err)
		}
	}
	buf := make([]byte, 2048)
	ours, others := 0, 0
	for deadline := time.Now().Add(10 * time.Second); ours < 2 && time.Now().Before(deadline); {
		n, _, err := unix.Recvfrom(tap, buf, 0)
		if err == unix.EAGAIN {
			time.Sleep(time.Millisecond)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case bytes.Contains(buf[:n], []byte("linerate to us")):
			ours++
		case bytes.Contains(buf[:n], []byte("linerate other host")):
			others++
		}
	}
	if ours != 2 || others != 0 {
		t.Errorf("the kernel got %d of our 2 frames through the TAP, and %d of another host's", ours, others)
	}
	// Sent first, they were dropped before ours were punted; the count is
	// published at the end of the burst.
	waitFor(5*time.Second, func() bool { return tp.drops("route_not_for_us")-before >= 2 })
	if n := tp.drops("route_not_for_us") - before; n < 2 {
		t.Errorf("route_not_for_us counted %d of another host's 2 frames", n)
	}
}

// ping sends Echo Requests from ns to dst until a reply comes, up to 5 s: the
// first may wait for address resolution.
func ping(t *testing.T, ns *netns.NS, dst string) {
	t.Helper()
	a := netip.MustParseAddr(dst)
	network, typ, reply := "ip6:ipv6-icmp", uint8(packet.ICMPv6EchoRequest), uint8(packet.ICMPv6EchoReply)
	if a.Is4() {
		network, typ, reply = "ip4:icmp", packet.ICMPv4Echo, packet.ICMPv4EchoReply
	}
	var c net.PacketConn
	if err := ns.Do(func() (err error) { c, err = net.ListenPacket(network, ""); return err }); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	id := uint16(rand.Uint32())
	buf := make([]byte, 1500)
	for seq := uint16(1); seq <= 10; seq++ {
		msg := make([]byte, 8+32)
		msg[0] = typ
		binary.BigEndian.PutUint16(msg[4:], id)
		binary.BigEndian.PutUint16(msg[6:], seq)
		copy(msg[8:], "linerate routed mode ping payload")
		if a.Is4() {
			packet.ICMPv4(msg).SetChecksum(packet.ICMPv4(msg).CalculateChecksum())
		} // the kernel sums ICMPv6 itself
		if _, err := c.WriteTo(msg, &net.IPAddr{IP: a.AsSlice()}); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		for {
			n, from, err := c.ReadFrom(buf)
			if err != nil {
				break // timed out: send again
			}
			m := buf[:n]
			if n >= 8 && m[0] == reply && binary.BigEndian.Uint16(m[4:]) == id && binary.BigEndian.Uint16(m[6:]) == seq {
				if from.(*net.IPAddr).IP.String() != a.String() || !bytes.Equal(m[8:], msg[8:]) {
					t.Fatalf("reply from %v with %q", from, m[8:])
				}
				return
			}
		}
	}
	t.Fatalf("no Echo Reply from %s", dst)
}

// neigh is the kernel's neighbour entry for addr in ns: "lladdr … STATE".
func neigh(t *testing.T, ns *netns.NS, addr string) string {
	t.Helper()
	out, err := exec.Command("ip", "-n", ns.Name(), "neigh", "show", addr).CombinedOutput()
	if err != nil {
		t.Fatalf("ip neigh: %v: %s", err, out)
	}
	return strings.TrimSpace(string(out))
}

// PingLinerate: each host resolves linerate's address on its link, by NDP and
// by ARP, and pings it.
func (tp *Topology) PingLinerate(t *testing.T) {
	for _, c := range []struct {
		ns        *netns.NS
		addr, mac string
	}{{tp.Host1, R1v6, MAC1}, {tp.Host1, R1v4, MAC1}, {tp.Host2, R2v6, MAC2}, {tp.Host2, R2v4, MAC2}} {
		ping(t, c.ns, c.addr)
		n := neigh(t, c.ns, c.addr)
		if !strings.Contains(n, "lladdr "+c.mac) || !containsAny(n, "REACHABLE", "STALE", "DELAY", "PROBE") {
			t.Errorf("%s: the kernel's entry for %s is %q", c.ns.Name(), c.addr, n)
		}
		if strings.Contains(n, "router") != strings.Contains(c.addr, ":") {
			t.Errorf("%s: %q: an NA says router, ARP cannot", c.ns.Name(), n)
		}
	}
}

func containsAny(s string, subs ...string) bool {
	for _, x := range subs {
		if strings.Contains(s, x) {
			return true
		}
	}
	return false
}

// PingThrough: each host pings the other through linerate, which resolves
// them by NDP and ARP itself: the entries it learnt from the hosts' own
// solicitations are deleted first, through the control API.
func (tp *Topology) PingThrough(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, n := range []struct{ addr, port string }{{H1v6, "r1"}, {H1v4, "r1"}, {H2v6, "r2"}, {H2v4, "r2"}} {
		_, err := tp.Routing.DeleteNeighbor(ctx, &api.DeleteNeighborRequest{Address: n.addr, Port: n.port})
		if err != nil && status.Code(err) != codes.NotFound {
			t.Fatal(err)
		}
	}
	ping(t, tp.Host1, H2v6)
	ping(t, tp.Host1, H2v4)
	ping(t, tp.Host2, H1v6)
	ping(t, tp.Host2, H1v4)
	ns, err := tp.Routing.ListNeighbors(ctx, &api.ListNeighborsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{H1v6: "r1", H1v4: "r1", H2v6: "r2", H2v4: "r2"}
	for _, n := range ns.Neighbors {
		if p, ok := want[n.Address]; ok && p == n.Port && n.State == "REACHABLE" {
			delete(want, n.Address)
		}
	}
	if len(want) != 0 {
		t.Errorf("linerate did not resolve %v: %v", want, ns.Neighbors)
	}
}

// UDP sends datagrams both ways, IPv6 and IPv4, and every one must arrive
// intact.
func (tp *Topology) UDP(t *testing.T) {
	for _, c := range []struct {
		name             string
		from, to         *netns.NS
		network, dst, at string
	}{
		{"v6 1→2", tp.Host1, tp.Host2, "udp6", H2v6, "[" + H2v6 + "]:9000"},
		{"v6 2→1", tp.Host2, tp.Host1, "udp6", H1v6, "[" + H1v6 + "]:9000"},
		{"v4 1→2", tp.Host1, tp.Host2, "udp4", H2v4, H2v4 + ":9000"},
		{"v4 2→1", tp.Host2, tp.Host1, "udp4", H1v4, H1v4 + ":9000"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var srv, cl net.PacketConn
			if err := c.to.Do(func() (err error) { srv, err = net.ListenPacket(c.network, c.at); return err }); err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			if err := c.from.Do(func() (err error) { cl, err = net.ListenPacket(c.network, ":0"); return err }); err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			dst, _ := net.ResolveUDPAddr(c.network, c.at)
			const n = 200
			got := map[uint32]bool{}
			buf := make([]byte, 2000)
			for i := uint32(0); i < n; i++ {
				msg := make([]byte, 64+int(i)*7)
				binary.BigEndian.PutUint32(msg, i)
				for k := 4; k < len(msg); k++ {
					msg[k] = byte(int(i) + k)
				}
				if _, err := cl.WriteTo(msg, dst); err != nil {
					t.Fatal(err)
				}
				// One at a time: a burst would outrun the hosts' socket buffers,
				// which is not what this tests.
				_ = srv.SetReadDeadline(time.Now().Add(2 * time.Second))
				k, _, err := srv.ReadFrom(buf)
				if err != nil {
					t.Fatalf("datagram %d: %v", i, err)
				}
				if !bytes.Equal(buf[:k], msg) {
					t.Fatalf("datagram %d differs", i)
				}
				got[i] = true
			}
			if len(got) != n {
				t.Errorf("%d of %d datagrams", len(got), n)
			}
		})
	}
}

// TCP opens connections both ways, IPv6 and IPv4, and echoes a megabyte over
// each.
func (tp *Topology) TCP(t *testing.T) {
	for _, c := range []struct {
		name     string
		from, to *netns.NS
		network  string
		at       string
	}{
		{"v6 1→2", tp.Host1, tp.Host2, "tcp6", "[" + H2v6 + "]:7000"},
		{"v6 2→1", tp.Host2, tp.Host1, "tcp6", "[" + H1v6 + "]:7000"},
		{"v4 1→2", tp.Host1, tp.Host2, "tcp4", H2v4 + ":7000"},
		{"v4 2→1", tp.Host2, tp.Host1, "tcp4", H1v4 + ":7000"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var l net.Listener
			if err := c.to.Do(func() (err error) { l, err = net.Listen(c.network, c.at); return err }); err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				conn, err := l.Accept()
				if err != nil {
					return
				}
				defer conn.Close()
				_, _ = io.Copy(conn, conn)
			}()
			var conn net.Conn
			if err := c.from.Do(func() (err error) { conn, err = net.DialTimeout(c.network, c.at, 5*time.Second); return err }); err != nil {
				t.Fatal(err)
			}
			_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
			data := make([]byte, 1<<20)
			r := rand.New(rand.NewPCG(1, 2))
			for i := range data {
				data[i] = byte(r.Uint32())
			}
			errc := make(chan error, 1)
			go func() {
				_, err := conn.Write(data)
				if err == nil {
					err = conn.(*net.TCPConn).CloseWrite()
				}
				errc <- err
			}()
			got, err := io.ReadAll(conn)
			if err != nil {
				t.Fatalf("read: %v (after %d bytes)", err, len(got))
			}
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			conn.Close()
			if !bytes.Equal(got, data) {
				t.Fatalf("echoed %d bytes, differing from the %d sent", len(got), len(data))
			}
			l.Close()
			wg.Wait()
		})
	}
}

// TimeExceeded sends a datagram with hop limit (TTL) 1 from host 1 to host
// 2: linerate answers with ICMPv6 (ICMP) Time Exceeded, quoting it.
func (tp *Topology) TimeExceeded(t *testing.T) {
	for _, v6 := range []bool{true, false} {
		name, network, raw, dst := "v6", "udp6", "ip6:ipv6-icmp", "["+H2v6+"]:9101"
		if !v6 {
			name, network, raw, dst = "v4", "udp4", "ip4:icmp", H2v4+":9101"
		}
		t.Run(name, func(t *testing.T) {
			var ic net.PacketConn
			var u net.PacketConn
			if err := tp.Host1.Do(func() (err error) {
				if ic, err = net.ListenPacket(raw, ""); err != nil {
					return err
				}
				u, err = net.ListenPacket(network, ":0")
				return err
			}); err != nil {
				t.Fatal(err)
			}
			defer ic.Close()
			defer u.Close()
			sc, _ := u.(*net.UDPConn).SyscallConn()
			var serr error
			_ = sc.Control(func(fd uintptr) {
				if v6 {
					serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_UNICAST_HOPS, 1)
				} else {
					serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_TTL, 1)
				}
			})
			if serr != nil {
				t.Fatal(serr)
			}
			to, _ := net.ResolveUDPAddr(network, dst)
			payload := []byte("expire me")
			buf := make([]byte, 1500)
			for try := 0; try < 5; try++ {
				if _, err := u.WriteTo(payload, to); err != nil {
					t.Fatal(err)
				}
				_ = ic.SetReadDeadline(time.Now().Add(time.Second))
				for {
					n, from, err := ic.ReadFrom(buf)
					if err != nil {
						break
					}
					m := buf[:n]
					if v6 && m[0] == packet.ICMPv6TimeExceeded && m[1] == 0 {
						// The quoted packet: IPv6 to host 2, UDP to 9101.
						q := packet.IPv6(m[8:])
						if len(q) >= 48 && q.DstAddr() == netip.MustParseAddr(H2v6) && binary.BigEndian.Uint16(q[42:]) == 9101 &&
							from.(*net.IPAddr).IP.Equal(net.ParseIP(R1v6)) {
							return
						}
					}
					if !v6 && m[0] == packet.ICMPv4TimeExceeded && m[1] == 0 && packet.ICMPv4(m).IsChecksumValid() {
						q := packet.IPv4(m[8:])
						if len(q) >= 28 && q.DstAddr() == netip.MustParseAddr(H2v4) && binary.BigEndian.Uint16(q[22:]) == 9101 &&
							from.(*net.IPAddr).IP.Equal(net.ParseIP(R1v4)) {
							return
						}
					}
				}
			}
			t.Fatal("no Time Exceeded came back")
		})
	}
}

// NeighborFlood sends Neighbor Solicitations for linerate's address from
// 20000 made-up sources, each with its own link-layer address, as fast as a
// packet socket goes. linerate's neighbour cache must stay within its
// capacity, grow no faster than its learn rate, keep the hosts' entries, and
// go on routing.
func (tp *Topology) NeighborFlood(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	before, err := tp.Routing.ListNeighbors(ctx, &api.ListNeighborsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var fd, ifindex int
	if err := tp.Host1.Do(func() error {
		ifc, err := net.InterfaceByName("h1")
		if err != nil {
			return err
		}
		ifindex = ifc.Index
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	target := netip.MustParseAddr(R1v6).As16()
	dst := packet.SolicitedNode(target)
	frame := make([]byte, 14+40+24+8)
	r := rand.New(rand.NewPCG(3, 4))
	start := time.Now()
	const flood = 20000
	sent := 0
	for i := 0; i < flood; i++ {
		src := netip.MustParseAddr("2001:db8:1::").As16()
		binary.BigEndian.PutUint64(src[8:], r.Uint64())
		mac := packet.MAC{0x02, byte(r.Uint32()), byte(r.Uint32()), byte(r.Uint32()), byte(r.Uint32()), byte(r.Uint32())}
		packet.Ethernet(frame).Encode(&packet.EthernetFields{Dst: packet.MulticastMAC(dst), Src: mac, Type: packet.EtherTypeIPv6})
		packet.IPv6(frame[14:]).Encode(&packet.IPv6Fields{PayloadLength: 32, NextHeader: packet.ProtocolICMPv6, HopLimit: 255, Src: src, Dst: dst})
		m := frame[54:]
		f := packet.NDPFields{Type: packet.ICMPv6NeighborSolicit, Target: target}
		_, _ = f.Encode(m)
		packet.PutNDPLinkAddr(m[24:], packet.NDPOptSourceLinkAddr, mac)
		packet.ICMPv6(m).SetChecksum(packet.ICMPv6(m).CalculateChecksum(src, dst))
		err := unix.Sendto(fd, frame, 0, &unix.SockaddrLinklayer{Ifindex: ifindex, Protocol: htons(unix.ETH_P_IPV6)})
		if err == unix.ENOBUFS || err == unix.EAGAIN {
			time.Sleep(100 * time.Microsecond)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		sent++
	}
	took := time.Since(start)
	time.Sleep(200 * time.Millisecond) // let linerate take the last of them
	after, err := tp.Routing.ListNeighbors(ctx, &api.ListNeighborsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	size := int(after.Created - after.Removed)
	if size > MaxNeighbors || int(after.Capacity) != MaxNeighbors || len(after.Neighbors) > MaxNeighbors {
		t.Errorf("%d entries (%d listed) in a cache of %d", size, len(after.Neighbors), after.Capacity)
	}
	// learn_rate is 20000/s with bursts of 2000: enough to fill the cache
	// many times over, so that it evicts. Whatever linerate learnt it learnt
	// before the snapshot, so the rate bounds it by the time from the start
	// of the flood to the snapshot's return, however late a loaded machine
	// let linerate take the flood (or the sleep end).
	upTo := time.Since(start)
	learnt := after.Created - before.Created
	if limit := uint64(2000 + 20000*upTo.Seconds()); learnt > limit {
		t.Errorf("learnt %d entries in %v, more than the learn rate allows (%d)", learnt, upTo, limit)
	}
	t.Logf("flood of %d solicitations in %v: %d entries made, %d in the cache, %d evicted", sent, took.Round(time.Millisecond),
		learnt, size, after.Evicted-before.Evicted)
	if learnt <= MaxNeighbors || after.Evicted == before.Evicted {
		t.Errorf("the flood made %d entries and evicted %d: it never filled the cache", learnt, after.Evicted-before.Evicted)
	}
	// The hosts' entries, confirmed by linerate's own solicitations, were
	// not evicted.
	have := map[string]bool{}
	for _, n := range after.Neighbors {
		have[n.Address+"%"+n.Port] = n.Mac != ""
	}
	for _, k := range []string{H1v6 + "%r1", H1v4 + "%r1", H2v6 + "%r2", H2v4 + "%r2"} {
		if !have[k] {
			t.Errorf("the flood pushed %s out of the cache", k)
		}
	}
	// The hosts are still there, and still reachable through linerate.
	ping(t, tp.Host1, H2v6)
	ping(t, tp.Host2, H1v4)
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// Punt connects from host 1 to a TCP service of the host running linerate,
// on linerate's own address: linerate punts the connection to the kernel
// through the TAP, and routes the kernel's answers back out.
func (tp *Topology) Punt(t *testing.T) {
	for _, c := range []struct{ network, at string }{{"tcp6", "[" + R1v6 + "]:2222"}, {"tcp4", R1v4 + ":2222"}} {
		t.Run(c.network, func(t *testing.T) {
			var l net.Listener
			if err := tp.Router.Do(func() (err error) { l, err = net.Listen(c.network, c.at); return err }); err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			go func() {
				conn, err := l.Accept()
				if err != nil {
					return
				}
				defer conn.Close()
				_, _ = io.Copy(conn, conn)
			}()
			var conn net.Conn
			if err := tp.Host1.Do(func() (err error) { conn, err = net.DialTimeout(c.network, c.at, 5*time.Second); return err }); err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
			data := bytes.Repeat([]byte("to the host and back "), 4000)
			go func() {
				_, _ = conn.Write(data)
				_ = conn.(*net.TCPConn).CloseWrite()
			}()
			got, err := io.ReadAll(conn)
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("echo through the TAP: %d of %d bytes, %v", len(got), len(data), err)
			}
		})
	}
	s := tp.Engine.Snapshot()
	for _, p := range s.Ports {
		if p.Name == "tap0" && (p.RxPackets == 0 || p.TxPackets == 0) {
			t.Errorf("tap0 moved %d in, %d out", p.RxPackets, p.TxPackets)
		}
	}
}

// checkStatus: linerate's own counters saw what the hosts did: each of
// counters is above 0.
func (tp *Topology) checkStatus(t *testing.T, counters ...string) {
	s := tp.Engine.Snapshot()
	sum := func(name string) uint64 {
		var v uint64
		for _, st := range s.Stages {
			for _, c := range st.Counters {
				if c.Name == name {
					v += c.Value
				}
			}
		}
		return v
	}
	for _, c := range counters {
		if sum(c) == 0 {
			t.Errorf("counter %s is 0", c)
		}
	}
	t.Logf("forwarded %d, NAs sent %d, Echo Replies %d+%d, ICMP errors %d, drops %v", sum("forwarded"), sum("na_sent"),
		sum("echo_replies_v6"), sum("echo_replies_v4"), sum("icmp_errors_sent"), s.Drops)
	for _, p := range s.Ports {
		t.Logf("port %s (%s): rx %d, tx %d, rx dropped %d", p.Name, p.Driver, p.RxPackets, p.TxPackets, p.RxDropped)
	}
}
