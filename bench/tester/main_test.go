package main

import (
	"bytes"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"golang.org/x/sys/unix"

	"github.com/linerate/linerate/appliance"
	"github.com/linerate/linerate/bench/internal/genframe"
	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/internal/netns"
	"github.com/linerate/linerate/internal/testenv"
)

// TestSameFrames: the C loop and the generator send the same frames on
// afpacket. Each sends 1000 frames into a veth whose other end, in a
// namespace of its own, a packet socket captures. Both captures must be
// genframe's frame byte for byte apart from the generator's fields and the
// UDP checksum, whose values must be valid: flow 0 and rising sequence
// numbers (from 0; the receiving kernel may drop some under load),
// timestamps on CLOCK_MONOTONIC within the run, and IPv4 and UDP checksums
// that tshark accepts.
func TestSameFrames(t *testing.T) {
	testenv.RequireRoot(t)
	tshark := testenv.RequireCmd(t, "tshark")
	const n = 1000
	tx, rx := netns.New(t), netns.New(t)
	netns.Veth(t, tx, "gt", rx, "gr")
	f := genframe.IPv4(60)
	fd := captureSocket(t, rx, "gr")
	defer unix.Close(fd)

	t0 := monoNow(t)
	var cerr error
	if err := tx.Do(func() error {
		if r := cloop("gt", f, true, n, 20*time.Second, &cerr); cerr == nil && r.pps == 0 {
			t.Error("the C loop sent nothing")
		}
		return cerr
	}); err != nil {
		t.Fatalf("C loop: %v", err)
	}
	t1 := monoNow(t)
	cf := capture(t, fd)

	cfg, err := config.Parse("bench.toml", []byte(genConfig("gt", 64, n)))
	if err != nil {
		t.Fatal(err)
	}
	var e *appliance.Engine
	if err := tx.Do(func() (err error) {
		e, err = appliance.New(cfg, appliance.Options{Log: slog.New(slog.DiscardHandler)})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	g0 := monoNow(t)
	if err := e.Start(); err != nil {
		_ = e.Close()
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); e.Snapshot().Counter("generator#0", "sent") < n && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	e.Stop()
	g1 := monoNow(t)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	gf := capture(t, fd)

	for _, side := range []struct {
		name   string
		frames [][]byte
		t0, t1 int64
	}{{"C", cf, t0, t1}, {"generator", gf, g0, g1}} {
		t.Logf("%s: %d frames captured", side.name, len(side.frames))
		if len(side.frames) < n/2 {
			t.Fatalf("%s: captured %d of %d frames", side.name, len(side.frames), n)
		}
		if err := f.Check(side.frames, side.t0, side.t1, true); err != nil {
			t.Fatalf("%s: %v", side.name, err)
		}
		path := filepath.Join(t.TempDir(), side.name+".pcap")
		writePcap(t, path, side.frames)
		if good := tsharkGood(t, tshark, path); good != len(side.frames) {
			t.Errorf("%s: tshark finds %d of %d frames with good IPv4 and UDP checksums", side.name, good, len(side.frames))
		}
	}
}

func monoNow(t *testing.T) int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		t.Fatal(err)
	}
	return ts.Nano()
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// captureSocket is a packet socket on ifname in ns with room for every frame
// of the test.
func captureSocket(t *testing.T, ns *netns.NS, ifname string) int {
	var fd int
	if err := ns.Do(func() error {
		ifi, err := net.InterfaceByName(ifname)
		if err != nil {
			return err
		}
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_IP)))
		if err != nil {
			return err
		}
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 64<<20); err != nil {
			return err
		}
		tv := unix.NsecToTimeval(int64(500 * time.Millisecond))
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_IP), Ifindex: ifi.Index})
	}); err != nil {
		t.Fatal(err)
	}
	return fd
}

// capture reads the UDP frames to genframe.DstPort that fd holds, until half a
// second passes without one.
func capture(t *testing.T, fd int) [][]byte {
	var out [][]byte
	buf := make([]byte, 4096)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err == unix.EAGAIN || err == unix.EWOULDBLOCK {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if d := buf[:n]; n >= 42 && d[23] == 17 && int(d[36])<<8|int(d[37]) == genframe.DstPort {
			out = append(out, bytes.Clone(d))
		}
	}
}

func writePcap(t *testing.T, path string, frames [][]byte) {
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := pcapgo.NewWriter(f)
	if err := w.WriteFileHeader(65535, layers.LinkTypeEthernet); err != nil {
		t.Fatal(err)
	}
	for _, d := range frames {
		if err := w.WritePacket(gopacket.CaptureInfo{Timestamp: time.Now(), CaptureLength: len(d), Length: len(d)}, d); err != nil {
			t.Fatal(err)
		}
	}
}

// tsharkGood is how many frames of the capture at path tshark finds with good
// IPv4 and UDP checksums.
func tsharkGood(t *testing.T, tshark, path string) int {
	cmd := exec.Command(tshark, "-n", "-r", path, "-o", "ip.check_checksum:TRUE", "-o", "udp.check_checksum:TRUE",
		"-T", "fields", "-e", "ip.checksum.status", "-e", "udp.checksum.status")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tshark: %v\n%s", err, stderr.Bytes())
	}
	good := 0
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == "1" && f[1] == "1" { // 1: good
			good++
		}
	}
	return good
}
