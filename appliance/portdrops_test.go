package appliance_test

import (
	"fmt"
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/linerate/linerate/appliance"
	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/internal/enginetest"
	"github.com/linerate/linerate/internal/netns"
)

// TestSummaryKernelDrops: the run summary's rx dropped is what the kernel
// dropped, though nobody read the port's counters while it ran. An
// afpacket port's ring of two 4 KiB blocks takes 200 frames of 1000 bytes
// while its lcore is held (a manual engine, not stepped): what the ring had
// no room for the kernel counts in PACKET_STATISTICS, which it resets on
// each read. The engine reads the ports' counters once more when the lcores
// have stopped, before it closes them: what the summary shows after stop
// is sent minus received.
func TestSummaryKernelDrops(t *testing.T) {
	ns := netns.New(t)
	netns.Veth(t, ns, "lra", ns, "lrb")
	// The test's sender on lrb, and an observer on lra opened before the
	// port: the kernel hands a frame to the newest packet socket first, so
	// a frame the observer has, the port's socket has had.
	send, observe := packetSocket(t, ns, "lrb"), packetSocket(t, ns, "lra")
	cfg, err := config.Parse("drops.toml", []byte(`
version = 1
[engine]
pin = false
[control]
listen = ""
[[pools]]
name = "default"
buffers = 1024
[[ports]]
name = "p0"
driver = "afpacket"
interface = "lra"
block_size = 4096
blocks = 2
[[pipelines]]
name = "rx"
rx = ["p0"]
[[pipelines.stages]]
kind = "sink"
`))
	if err != nil {
		t.Fatal(err)
	}
	var e *appliance.Engine
	if err := ns.Do(func() (err error) {
		e, err = appliance.New(cfg, appliance.Options{Manual: true, Log: enginetest.Quiet})
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

	const n = 200
	frame := make([]byte, 1000)
	copy(frame, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 1, 0x88, 0xb5})
	for i := 0; i < n; i++ {
		for {
			_, err := unix.Write(send, frame)
			if err == nil {
				break
			}
			if err != unix.EAGAIN && err != unix.ENOBUFS {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	// Every frame has been offered to the port's socket once the observer
	// has it. The bound only turns a frame that never comes into a failure.
	buf := make([]byte, 2048)
	for seen, deadline := 0, time.Now().Add(time.Minute); seen < n; {
		if time.Now().After(deadline) {
			t.Fatalf("the observer saw %d of %d frames", seen, n)
		}
		if m, _, err := unix.Recvfrom(observe, buf, unix.MSG_DONTWAIT); err == nil && m == len(frame) {
			seen++
		} else if err == unix.EAGAIN {
			time.Sleep(time.Millisecond)
		}
	}
	// The lcore takes what the ring holds: its two full blocks.
	received := 0
	for i := 0; i < 100; i++ {
		received += e.Step()
	}
	e.Stop()
	s := e.Snapshot() // as run's summary: after stop
	p := s.Ports[0]
	t.Logf("sent %d, received %d; summary: rx %d, rx dropped %d, %v", n, received, p.RxPackets, p.RxDropped, p.Extra)
	if received == 0 || received >= n || p.RxPackets != uint64(received) {
		t.Fatalf("received %d of %d (summary %d): the ring did not overflow as it should", received, n, p.RxPackets)
	}
	if p.RxDropped != uint64(n-received) || p.Extra["tp_drops"] != uint64(n-received) {
		t.Errorf("the summary's rx dropped is %d (tp_drops %d), the kernel dropped %d − %d = %d", p.RxDropped,
			p.Extra["tp_drops"], n, received, n-received)
	}
	if p.Extra["tp_packets"] != n {
		t.Errorf("tp_packets %d, want %d", p.Extra["tp_packets"], n)
	}
}

// packetSocket is an AF_PACKET socket bound to ifname in ns, with room for
// every frame the test sends.
func packetSocket(t *testing.T, ns *netns.NS, ifname string) int {
	t.Helper()
	fd := -1
	err := ns.Do(func() error {
		ifc, err := net.InterfaceByName(ifname)
		if err != nil {
			return err
		}
		proto := int(uint16(unix.ETH_P_ALL)<<8 | uint16(unix.ETH_P_ALL)>>8)
		if fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, proto); err != nil {
			return err
		}
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20); err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: uint16(proto), Ifindex: ifc.Index})
	})
	if fd >= 0 {
		t.Cleanup(func() { unix.Close(fd) })
	}
	if err != nil {
		t.Fatal(fmt.Errorf("packet socket on %s: %w", ifname, err))
	}
	return fd
}
