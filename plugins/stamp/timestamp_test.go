//go:build linux

package stamp

import (
	"encoding/binary"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/linerate/linerate/appliance/clock"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/internal/netns"
)

// captureSocket is a plain AF_PACKET socket on ifname, in ns, with
// SO_TIMESTAMPNS: the kernel's own capture time of each frame, as tcpdump
// would read it.
func captureSocket(t testing.TB, ns *netns.NS, ifname string) int {
	t.Helper()
	fd := -1
	if err := ns.Do(func() error {
		ifc, err := net.InterfaceByName(ifname)
		if err != nil {
			return err
		}
		all := int(uint16(unix.ETH_P_ALL)<<8 | uint16(unix.ETH_P_ALL)>>8)
		if fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, all); err != nil {
			return err
		}
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1); err != nil {
			return err
		}
		// Room for all the test's frames: it reads them at the end.
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 16<<20); err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: uint16(all), Ifindex: ifc.Index})
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// frameRead is a frame a capture socket read, with the kernel's time of it.
type frameRead struct {
	data     []byte
	incoming bool  // received on the interface, not sent from it
	at       int64 // Unix ns
}

// readFrames takes what fd has now.
func readFrames(t testing.TB, fd int) []frameRead {
	t.Helper()
	var out []frameRead
	buf, oob := make([]byte, 1<<16), make([]byte, 256)
	for {
		n, oobn, _, from, err := unix.Recvmsg(fd, buf, oob, 0)
		if err == unix.EAGAIN {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		f := frameRead{data: append([]byte(nil), buf[:n]...)}
		if sa, ok := from.(*unix.SockaddrLinklayer); ok {
			f.incoming = sa.Pkttype != unix.PACKET_OUTGOING
		}
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SCM_TIMESTAMPNS && len(m.Data) >= 16 {
				f.at = int64(binary.NativeEndian.Uint64(m.Data))*1e9 + int64(binary.NativeEndian.Uint64(m.Data[8:]))
			}
		}
		out = append(out, f)
	}
}

// stampPayload is a frame's STAMP payload, if it is UDP with at least a base
// packet.
func stampPayload(f []byte) []byte {
	var l packet.Layers
	if packet.Parse(f, &l) != nil || l.Flags&packet.FlagUDP == 0 {
		return nil
	}
	u := packet.UDP(f[l.L4:l.End])
	if pay := u.Payload(); len(pay) >= BaseLen {
		return pay
	}
	return nil
}

// T2 at the wire: a linerate reflector on an afpacket port (defaults: the
// kernel's rx stamps) answers test packets over a veth, and each reply's T2
// is within 50 µs (median) of the kernel's own capture time of its request
// on the reflector's interface. The engine's stamps, taken when the ring was
// polled, lagged by about a millisecond.
func TestReflectorT2AtTheWire(t *testing.T) {
	ns := netns.New(t)
	netns.Veth(t, ns, "lrta", ns, "lrtb")
	ma, mb := ns.MAC(t, "lrta"), ns.MAC(t, "lrtb")
	e := startEngine(t, ns, "reflector", fmt.Sprintf(`
version = 1
[engine]
pin = false
[control]
listen = ""
[[ports]]
name = "r0"
driver = "afpacket"
interface = "lrtb"
[[pipelines]]
name = "reflector"
rx = ["r0"]
[[pipelines.stages]]
kind = "stamp.reflector"
addresses = [%q]
forward = "in"
rate_limit = "0"
[[pipelines.stages.sessions]]
ssid = 5
`, addrR))
	capFD := captureSocket(t, ns, "lrtb") // the reflector's side: when each request arrived
	repFD := captureSocket(t, ns, "lrta") // the sender's side: the replies
	fd, sa := rawSocket(t, ns, "lrta")
	copy(sa.Addr[:], mb[:])
	const n = 200
	for i := 0; i < n; i++ {
		for {
			err := unix.Sendto(fd, testFrame(t, 5, uint32(i), addrS, addrR, ma, mb), 0, sa)
			if err == nil {
				break
			}
			if err != unix.EAGAIN && err != unix.ENOBUFS {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Microsecond)
		}
		time.Sleep(2 * time.Millisecond)
	}
	t2 := map[uint32]int64{}
	defer func() {
		if t.Failed() {
			t.Logf("%d replies; reflector stages: %+v", len(t2), e.Snapshot().Stages)
		}
	}()
	waitFor(t, "the replies", func() bool {
		for _, f := range readFrames(t, repFD) {
			if pay := stampPayload(f.data); f.incoming && pay != nil && reflected(pay, false) {
				rp := ReflectorPacket(pay)
				t2[rp.SenderSeq()] = clock.FromNTP(rp.ReceiveTimestamp())
			}
		}
		// A busy machine may lose a request or a reply to a full ring; the
		// median needs most of them, not all.
		return len(t2) >= n*9/10
	})
	var diffs []int64
	for _, f := range readFrames(t, capFD) {
		if pay := stampPayload(f.data); f.incoming && pay != nil && !reflected(pay, false) {
			if v, ok := t2[SenderPacket(pay).Seq()]; ok {
				diffs = append(diffs, max(v-f.at, f.at-v))
			}
		}
	}
	if len(diffs) < n/2 {
		t.Fatalf("%d of %d requests captured and answered", len(diffs), n)
	}
	slices.Sort(diffs)
	med := diffs[len(diffs)/2]
	t.Logf("%d requests: |T2 − the kernel's capture time| median %v, p90 %v, max %v", len(diffs),
		time.Duration(med), time.Duration(diffs[len(diffs)*9/10]), time.Duration(diffs[len(diffs)-1]))
	if med > int64(50*time.Microsecond) {
		t.Errorf("median |T2 − capture time| %v: more than 50µs", time.Duration(med))
	}
}
