//go:build dpdk

package dpdk

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/linerate/linerate/appliance"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/internal/netns"
)

// TestAFPacketCrossing: two kernel hosts, each in a namespace of its own, talk
// through the appliance: host A (10.9.0.1) ↔ veth ↔ net_af_packet port a ↔
// engine ↔ port b ↔ veth ↔ host B (10.9.0.2). A pings B with payloads of several
// sizes; B's kernel answers; the replies must come back with the same payload.
// ARP crosses the appliance too, both ways.
func TestAFPacketCrossing(t *testing.T) {
	requireEAL(t)
	hostA, hostB, app := netns.New(t), netns.New(t), netns.New(t)
	netns.Veth(t, hostA, "ha", app, "pa")
	netns.Veth(t, hostB, "hb", app, "pb")
	hostA.IP(t, "addr", "add", "10.9.0.1/24", "dev", "ha")
	hostB.IP(t, "addr", "add", "10.9.0.2/24", "dev", "hb")

	cfg := fmt.Sprintf(`version = 1
[engine]
pin = false
[control]
listen = ""
[[ports]]
name = "a"
driver = "dpdk"
device = "%s,iface=pa"
[[ports]]
name = "b"
driver = "dpdk"
device = "%s,iface=pb"
[[pipelines]]
name = "ab"
rx = ["a"]
[[pipelines.stages]]
kind = "forward"
port = "b"
[[pipelines]]
name = "ba"
rx = ["b"]
[[pipelines.stages]]
kind = "forward"
port = "a"
`, vdev("net_af_packet"), vdev("net_af_packet"))
	// The PMD opens its sockets where rte_vdev_init runs: inside the namespace.
	// newEngine, not buildEngine: t.Fatal on the namespace's thread would
	// end that goroutine and leave Do waiting for ever.
	var e *appliance.Engine
	if err := app.Do(func() (err error) { e, err = newEngine(cfg, appliance.Options{}); return err }); err != nil {
		t.Fatalf("engine: %v", err)
	}
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	defer e.Close()

	var replies int
	err := hostA.Do(func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		tv := unix.NsecToTimeval(int64(200 * time.Millisecond))
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			return err
		}
		to := &unix.SockaddrInet4{Addr: [4]byte{10, 9, 0, 2}}
		for seq, size := range []int{56, 1000, 1400} {
			payload := pattern(size, byte(seq))
			req := echoRequest(0x4c52, uint16(seq), payload)
			got := false
			for try := 0; try < 25 && !got; try++ { // the first one waits for ARP
				if err := unix.Sendto(fd, req, 0, to); err != nil {
					return fmt.Errorf("send echo %d: %w", seq, err)
				}
				deadline := time.Now().Add(200 * time.Millisecond)
				buf := make([]byte, 2048)
				for time.Now().Before(deadline) {
					n, _, err := unix.Recvfrom(fd, buf, 0)
					if err != nil {
						break
					}
					ip := buf[:n]
					icmp := ip[int(ip[0]&0x0f)*4:]
					if icmp[0] == 0 && binary.BigEndian.Uint16(icmp[4:]) == 0x4c52 && binary.BigEndian.Uint16(icmp[6:]) == uint16(seq) {
						if !bytes.Equal(icmp[8:], payload) {
							return fmt.Errorf("echo %d: the reply's payload differs (%d bytes, want %d)", seq, len(icmp)-8, size)
						}
						got = true
						replies++
						break
					}
				}
			}
			if !got {
				return fmt.Errorf("no echo reply for %d bytes", size)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	e.Stop()
	s := e.Snapshot()
	a, b := portSnap(s, "a"), portSnap(s, "b")
	// At least: ARP request and reply, and the echoes, each way.
	if a.RxPackets < 4 || b.TxPackets < 4 || b.RxPackets < 4 || a.TxPackets < 4 {
		t.Errorf("port a rx %d tx %d, port b rx %d tx %d", a.RxPackets, a.TxPackets, b.RxPackets, b.TxPackets)
	}
	if replies != 3 {
		t.Errorf("%d replies", replies)
	}
}

// echoRequest builds an ICMP echo request with its checksum.
func echoRequest(id, seq uint16, payload []byte) []byte {
	m := make([]byte, 8+len(payload))
	m[0] = 8
	binary.BigEndian.PutUint16(m[4:], id)
	binary.BigEndian.PutUint16(m[6:], seq)
	copy(m[8:], payload)
	binary.BigEndian.PutUint16(m[2:], ^packet.Checksum(m, 0))
	return m
}

// TestAFPacketMTU: a net_af_packet port changes its kernel interface's MTU
// with its own, and Close puts the interface's back. Without mtu the
// interface keeps what it has.
func TestAFPacketMTU(t *testing.T) {
	requireEAL(t)
	ns := netns.New(t)
	netns.Veth(t, ns, "lrma", ns, "lrmb")
	ifMTU := func() int {
		var mtu int
		if err := ns.Do(func() error {
			ifc, err := net.InterfaceByName("lrma")
			if err == nil {
				mtu = ifc.MTU
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return mtu
	}
	for _, c := range []struct{ set, open, after int }{{1400, 1400, 1500}, {0, 2000, 2000}} {
		if c.set == 0 {
			ns.IP(t, "link", "set", "lrma", "mtu", "2000")
		}
		var p *Port
		if err := ns.Do(func() (err error) {
			p, err = Open(Options{Name: "m", Device: vdev("net_af_packet") + ",iface=lrma", MTU: c.set})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if got := ifMTU(); got != c.open {
			t.Errorf("mtu %d: the interface's MTU is %d while the port is open, want %d", c.set, got, c.open)
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		if got := ifMTU(); got != c.after {
			t.Errorf("mtu %d: the interface's MTU is %d after Close, want %d", c.set, got, c.after)
		}
	}
}

// TestTxFrontAFPacket: net_af_packet takes chains and frees what it sent
// inside rte_eth_tx_burst. A window that starts in front of the mbuf's buffer
// leaves as a chain, the kernel at the other end of the veth receives the
// packet's bytes, and every mbuf goes back to the pool exactly once: a sent
// chain, whose head the PMD has freed, is not taken for a copy whose original
// is still to be freed.
func TestTxFrontAFPacket(t *testing.T) {
	requireEAL(t)
	host, app := netns.New(t), netns.New(t)
	netns.Veth(t, host, "fh", app, "fp")
	var port *Port
	if err := app.Do(func() (err error) {
		port, err = Open(Options{Name: "afp", Device: vdev("net_af_packet") + ",iface=fp"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer port.Close()
	var fd int
	if err := host.Do(func() error {
		ifi, err := net.InterfaceByName("fh")
		if err != nil {
			return err
		}
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, int(htons(unix.ETH_P_ALL)))
		if err != nil {
			return err
		}
		tv := unix.NsecToTimeval(int64(200 * time.Millisecond))
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index})
	}); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)

	pool := port.DPDKPool()
	avail := pool.Available()
	data := bytes.Repeat([]byte("payload!"), 100)
	front := bytes.Repeat([]byte{0xF0}, 250) // more than DPDK's 128 of headroom
	h := frame(t, pool, data)
	d, err := h.P().Prepend(len(front))
	if err != nil {
		t.Fatal(err)
	}
	copy(d, front)
	want := append(append([]byte(nil), front...), data...)
	var b packet.Burst
	b.Push(h)
	if port.TxBurst(0, &b) != 1 {
		t.Fatal("tx refused")
	}
	if x := port.Stats().Extra; x["tx_chained"] != 1 || x["tx_copied"] != 0 {
		t.Errorf("chained %d, copied %d; want 1, 0", x["tx_chained"], x["tx_copied"])
	}
	if got := pool.Available(); got != avail {
		t.Errorf("pool: %d available, %d before", got, avail)
	}
	buf := make([]byte, 2048)
	for deadline := time.Now().Add(10 * time.Second); ; {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err == nil && bytes.Equal(buf[:n], want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the kernel did not receive the packet (last: %d bytes, %v)", n, err)
		}
	}
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }
