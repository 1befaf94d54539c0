//go:build dpdk

package dpdk

import (
	"encoding/binary"
	"net"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/linerate/linerate/appliance/clock"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/internal/netns"
)

// No vdev of DPDK 22.11 offers RTE_ETH_RX_OFFLOAD_TIMESTAMP (net_pcap has the
// code but does not announce it; net_af_packet does not read the ring's
// stamps), so a vdev port is stamped in the driver's C rx pass: its Info
// says so, and each RxTime is no earlier than the kernel's own capture time
// of the frame (SO_TIMESTAMPNS on another socket). How much later it is,
// the poll's lag, is logged.
func TestPMDRxTimestamps(t *testing.T) {
	requireEAL(t)
	ns := netns.New(t)
	netns.Veth(t, ns, "lrda", ns, "lrdb")
	clk := clock.NewSystem()
	t.Cleanup(clk.Close)
	var p *Port
	if err := ns.Do(func() (err error) {
		p, err = Open(Options{Name: "ts", Device: vdev("net_af_packet") + ",iface=lrda", Clock: clk})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	if info := p.Info(); info.TimestampSource != TimestampEngine || info.TimestampDetail != detailEngine {
		t.Fatalf("timestamp source %q (%s)", info.TimestampSource, info.TimestampDetail)
	}
	if err := ns.Do(func() error {
		_, err := Open(Options{Name: "hw", Device: vdev("net_pcap") + ",iface=lrdb", RxTimestamp: TimestampHardware})
		if err == nil {
			t.Error("rx_timestamp = hardware on net_pcap: no error")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	p.StampRx(0, 0)
	var capFD, sendFD, idx int
	if err := ns.Do(func() error {
		a, err := net.InterfaceByName("lrda")
		if err != nil {
			return err
		}
		b, err := net.InterfaceByName("lrdb")
		if err != nil {
			return err
		}
		idx = b.Index
		all := uint16(unix.ETH_P_ALL)<<8 | uint16(unix.ETH_P_ALL)>>8
		if capFD, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, int(all)); err != nil {
			return err
		}
		if err := unix.SetsockoptInt(capFD, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1); err != nil {
			return err
		}
		if err := unix.SetsockoptInt(capFD, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 16<<20); err != nil {
			return err
		}
		if err := unix.Bind(capFD, &unix.SockaddrLinklayer{Protocol: all, Ifindex: a.Index}); err != nil {
			return err
		}
		sendFD, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(capFD)
	defer unix.Close(sendFD)
	const n = 100
	ours := func(f []byte) (int, bool) {
		if len(f) < 22 || string(f[14:18]) != "LRTS" {
			return 0, false
		}
		return int(binary.BigEndian.Uint32(f[18:])), true
	}
	m0 := clock.Mono()
	w := time.Now().UnixNano()
	off := w - (m0+clock.Mono())/2 // the wall clock's offset, read apart from the port's
	rx := map[int]int64{}
	var b packet.Burst
	poll := func() {
		b.Reset()
		k := p.RxBurst(0, &b)
		for i := 0; i < k; i++ {
			if s, ok := ours(b.P(i).Data()); ok {
				rx[s] = b.P(i).RxTime + off
			}
		}
		packet.Free(&b)
	}
	for seq := 0; seq < n; seq++ {
		f := make([]byte, 64)
		copy(f, []byte{2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x88, 0xb5, 'L', 'R', 'T', 'S'})
		binary.BigEndian.PutUint32(f[18:], uint32(seq))
		if err := unix.Sendto(sendFD, f, 0, &unix.SockaddrLinklayer{Ifindex: idx, Halen: 6}); err != nil {
			t.Fatal(err)
		}
		for end := time.Now().Add(500 * time.Microsecond); time.Now().Before(end); {
			poll()
		}
	}
	for deadline := time.Now().Add(10 * time.Second); len(rx) < n && time.Now().Before(deadline); {
		poll()
	}
	var lags []int64
	buf, oob := make([]byte, 2048), make([]byte, 256)
	for {
		k, oobn, _, _, err := unix.Recvmsg(capFD, buf, oob, 0)
		if err != nil {
			break
		}
		s, ok := ours(buf[:k])
		r, got := rx[s]
		if !ok || !got {
			continue
		}
		msgs, _ := unix.ParseSocketControlMessage(oob[:oobn])
		for _, m := range msgs {
			if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SCM_TIMESTAMPNS && len(m.Data) >= 16 {
				lags = append(lags, r-(int64(binary.NativeEndian.Uint64(m.Data))*1e9+int64(binary.NativeEndian.Uint64(m.Data[8:]))))
			}
		}
	}
	if len(lags) < n/2 {
		t.Fatalf("%d of %d frames received and captured (%d received)", len(lags), n, len(rx))
	}
	slices.Sort(lags)
	t.Logf("%d frames: RxTime − capture time median %v, max %v", len(lags), time.Duration(lags[len(lags)/2]),
		time.Duration(lags[len(lags)-1]))
	// Never before the kernel had the frame, but for the two offsets' error.
	if lags[0] < -int64(5*time.Microsecond) {
		t.Errorf("an RxTime %v before the kernel's capture time", time.Duration(-lags[0]))
	}
}
