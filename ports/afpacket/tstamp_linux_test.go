//go:build linux

package afpacket

import (
	"encoding/binary"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/linerate/linerate/appliance/clock"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/internal/porttest"
)

// capture opens a plain AF_PACKET socket on ifname with SO_TIMESTAMPNS: the
// kernel's own capture time of each frame, as tcpdump would read it.
func (l *link) capture(t *testing.T, ifname string) int {
	t.Helper()
	fd := -1
	if err := l.ns.Do(func() error {
		ifc, err := net.InterfaceByName(ifname)
		if err != nil {
			return err
		}
		if fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL))); err != nil {
			return err
		}
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1); err != nil {
			return err
		}
		// Room for all the test's frames: it reads them at the end.
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 16<<20); err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifc.Index})
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// captured reads what the capture socket has: each test frame's sequence
// number and its capture time in Unix ns.
func captured(t *testing.T, fd int) map[int]int64 {
	t.Helper()
	out := map[int]int64{}
	buf, oob := make([]byte, 1<<16), make([]byte, 256)
	for {
		n, oobn, _, _, err := unix.Recvmsg(fd, buf, oob, 0)
		if err == unix.EAGAIN {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SCM_TIMESTAMPNS && len(m.Data) >= 16 {
				ts := unix.Timespec{Sec: int64(binary.NativeEndian.Uint64(m.Data)), Nsec: int64(binary.NativeEndian.Uint64(m.Data[8:]))}
				if f := buf[:n]; isOurs(f) {
					out[seqOf(f)] = ts.Nano()
				}
			}
		}
	}
}

func median(v []int64) int64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// Kernel stamps: each frame's RxTime is the kernel's receive time, on the
// engine clock. Against the kernel's own capture time of the same frame
// (SO_TIMESTAMPNS on another socket) the median difference is under 50 µs;
// the engine's stamps, taken when the ring is polled, lag by the block
// timeout.
func TestRxKernelTimestamps(t *testing.T) {
	l := newLink(t, 0)
	pool := porttest.Pool(t, 512, 2048)
	clk := clock.NewSystem()
	t.Cleanup(clk.Close)
	o := smallRing("ts", pool)
	o.Clock = clk
	p := l.open(t, o)
	if info := p.Info(); info.TimestampSource != TimestampKernel || !strings.Contains(info.TimestampDetail, "kernel") {
		t.Fatalf("info: source %q (%s)", info.TimestampSource, info.TimestampDetail)
	}
	capFD := l.capture(t, "lra")
	raw := l.raw(t, "lrb")
	const n = 200
	sent := make(chan error, 1)
	go func() {
		for i := 0; i < n; i++ {
			for {
				_, err := unix.Write(raw.fd, mkFrame(plain, i, 100))
				if err == nil {
					break
				}
				if err != unix.EAGAIN && err != unix.ENOBUFS {
					sent <- err
					return
				}
				time.Sleep(100 * time.Microsecond)
			}
			if i%10 == 9 {
				time.Sleep(time.Millisecond) // many blocks, not one burst
			}
		}
		sent <- nil
	}()
	defer func() {
		if err := <-sent; err != nil {
			t.Error(err)
		}
	}()
	// The wall clock's offset from the monotonic one, read here apart from
	// the engine clock's: the mapping is checked, not just undone.
	m0 := clock.Mono()
	w := time.Now().UnixNano()
	off := w - (m0+clock.Mono())/2
	rx := map[int]int64{}   // seq → RxTime as Unix ns
	poll := map[int]int64{} // seq → when the burst was taken: the engine's stamp
	var b packet.Burst
	for deadline := time.Now().Add(10 * time.Second); len(rx) < n && time.Now().Before(deadline); {
		b.Reset()
		k := p.RxBurst(0, &b)
		taken := clk.Now() + clk.UnixOffset()
		for i := 0; i < k; i++ {
			pk := b.P(i)
			if f := pk.Data(); isOurs(f) {
				if pk.RxTime == 0 || pk.Flags()&packet.FlagHWTimestamp != 0 {
					t.Fatalf("frame %d: RxTime %d, flags %#x", seqOf(f), pk.RxTime, pk.Flags())
				}
				rx[seqOf(f)], poll[seqOf(f)] = pk.RxTime+off, taken
			}
		}
		packet.Free(&b)
		if k == 0 {
			time.Sleep(200 * time.Microsecond)
		}
	}
	caps := captured(t, capFD)
	var kernel, engine []int64
	for seq, c := range caps {
		if r, ok := rx[seq]; ok {
			kernel = append(kernel, max(r-c, c-r))
			engine = append(engine, poll[seq]-c)
		}
	}
	if len(kernel) < n/2 {
		t.Fatalf("%d of %d frames received and captured (%d received, %d captured)", len(kernel), n, len(rx), len(caps))
	}
	t.Logf("%d frames: |RxTime − capture time| median %v, max %v; the engine's poll time lags it by median %v, max %v",
		len(kernel), time.Duration(median(kernel)), time.Duration(slices.Max(kernel)),
		time.Duration(median(engine)), time.Duration(slices.Max(engine)))
	if m := median(kernel); m > int64(50*time.Microsecond) {
		t.Errorf("median |RxTime − capture time| %v: more than 50µs", time.Duration(m))
	}
}

// The modes: a veth has no hardware stamps, so auto is kernel and hardware
// is an error that says why; engine, or no host clock, leaves RxTime to the
// engine.
func TestRxTimestampModes(t *testing.T) {
	l := newLink(t, 0)
	pool := porttest.Pool(t, 64, 2048)
	clk := clock.NewSystem()
	t.Cleanup(clk.Close)
	for _, c := range []struct {
		mode string
		clk  clock.Clock
		want string // the source, or a word of the error
	}{
		{TimestampAuto, clk, TimestampKernel},
		{TimestampKernel, clk, TimestampKernel},
		{TimestampEngine, clk, TimestampEngine},
		{TimestampAuto, nil, TimestampEngine},
		{TimestampAuto, clock.NewSim(0), TimestampEngine},
		{TimestampHardware, clk, "no receive hardware timestamps"},
		{TimestampKernel, clock.NewSim(0), "host clock"},
		{"bogus", clk, "not auto, hardware, kernel or engine"},
	} {
		o := smallRing("m", pool)
		o.RxTimestamp, o.Clock = c.mode, c.clk
		var p *Port
		err := l.ns.Do(func() (err error) { p, err = New(o); return err })
		if err != nil {
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: %v, want %q", c.mode, err, c.want)
			}
			continue
		}
		if got := p.Info(); got.TimestampSource != c.want || got.TimestampDetail == "" {
			t.Errorf("%s: source %q (%q), want %q", c.mode, got.TimestampSource, got.TimestampDetail, c.want)
		}
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	}
}
