package packaging

import (
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/linerate/linerate/internal/netns"
	"github.com/linerate/linerate/internal/testenv"
	"github.com/linerate/linerate/ports/afpacket"
)

// gapEtherType marks the test's frames (IEEE 802 local experimental).
const gapEtherType = 0x88B5

// gapInterval is how often the sender sends: one frame a millisecond, so a
// gap is measured to about a millisecond.
const gapInterval = time.Millisecond

// TestForwardingGap measures how long traffic stops when a bump-in-the-wire
// appliance restarts, as systemd restarts it: linerate forwards between two
// veths (afpacket), a sender on one side sends a numbered frame every
// millisecond and a receiver on the other notes when each arrives. The gap
// of each event is the longest time without a frame around it:
//
//   - restart: SIGTERM (systemctl restart: stop drains, then start);
//   - crash: SIGKILL, then a start after the unit's RestartSec (100 ms);
//   - upgrade: SIGTERM, then a start of another copy of the binary (the
//     package's postinst try-restart, after dpkg unpacked it).
//
// It asserts no time (machines swing): it reports the figures, which
// docs/operations.md quotes, and checks that traffic comes back each time.
func TestForwardingGap(t *testing.T) {
	testenv.RequireRoot(t)
	src, mid, dst := netns.New(t), netns.New(t), netns.New(t)
	netns.Veth(t, src, "a0", mid, "a1")
	netns.Veth(t, mid, "b1", dst, "b0")
	dir := t.TempDir()
	cfg := filepath.Join(dir, "wire.toml")
	if err := os.WriteFile(cfg, []byte(`version = 1
[engine]
pin = false
[control]
listen = ""
[[ports]]
name = "a1"
driver = "afpacket"
interface = "a1"
[[ports]]
name = "b1"
driver = "afpacket"
interface = "b1"
[[pipelines]]
name = "wire"
rx = ["a1"]
stages = [{ kind = "forward", port = "b1" }]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	// The upgrade's new binary: another file, as dpkg leaves it.
	newBin := filepath.Join(dir, "linerate-new")
	copyFile(t, linerateBin, newBin)

	tx := packetSocket(t, src, "a0")
	rx := packetSocket(t, dst, "b0")
	var mu sync.Mutex
	var arrivals []time.Time
	go func() {
		buf := make([]byte, 2048)
		for {
			n, _, err := unix.Recvfrom(rx, buf, 0)
			if err != nil {
				return
			}
			if n >= 14 && binary.BigEndian.Uint16(buf[12:]) == gapEtherType {
				mu.Lock()
				arrivals = append(arrivals, time.Now())
				mu.Unlock()
			}
		}
	}()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		frame := make([]byte, 64)
		copy(frame, []byte{0x02, 0, 0, 0, 0, 0xb0, 0x02, 0, 0, 0, 0, 0xa0})
		binary.BigEndian.PutUint16(frame[12:], gapEtherType)
		t := time.NewTicker(gapInterval)
		defer t.Stop()
		for seq := uint64(0); ; seq++ {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			binary.BigEndian.PutUint64(frame[14:], seq)
			_ = unix.Send(tx, frame, 0)
		}
	}()
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(arrivals) }

	startLR := func(bin string) *proc {
		return start(t, nil, "ip", "netns", "exec", mid.Name(), bin, "run", "-c", cfg, "--live=false", "--log-level", "warn")
	}
	flowing := func(p *proc) {
		n := count()
		waitFor(t, "frames through linerate", p, func() bool { return count() > n+100 })
	}
	lr := startLR(linerateBin)
	flowing(lr)

	events := []struct {
		name string
		do   func(p *proc) *proc
	}{
		{"restart (SIGTERM, start)", func(p *proc) *proc {
			t0 := time.Now()
			_ = p.stop()
			t.Logf("the stop (drain, summary, exit) took %v", time.Since(t0))
			return startLR(linerateBin)
		}},
		{"crash (SIGKILL, 100 ms, start)", func(p *proc) *proc {
			p.stopSig = os.Kill
			_ = p.stop()
			time.Sleep(100 * time.Millisecond)
			return startLR(linerateBin)
		}},
		{"upgrade (SIGTERM, start the new binary)", func(p *proc) *proc {
			_ = p.stop()
			return startLR(newBin)
		}},
	}
	for _, ev := range events {
		time.Sleep(300 * time.Millisecond)
		mu.Lock()
		from := len(arrivals)
		mu.Unlock()
		lr = ev.do(lr)
		flowing(lr)
		time.Sleep(300 * time.Millisecond)
		mu.Lock()
		window := append([]time.Time(nil), arrivals[max(from-1, 0):]...)
		mu.Unlock()
		gaps := make([]time.Duration, 0, len(window))
		for i := 1; i < len(window); i++ {
			gaps = append(gaps, window[i].Sub(window[i-1]))
		}
		sort.Slice(gaps, func(i, j int) bool { return gaps[i] > gaps[j] })
		t.Logf("%-42s forwarding gap %v (next longest %v)", ev.name, gaps[0].Round(time.Millisecond), gaps[1].Round(time.Millisecond))
	}
	if err := lr.stop(); err != nil {
		t.Errorf("linerate: %v\n%s", err, lr.out.String())
	}
	_ = unix.Close(tx)
	_ = unix.Close(rx)
}

// packetSocket is an AF_PACKET socket bound to ifname in ns.
func packetSocket(t *testing.T, ns *netns.NS, ifname string) int {
	t.Helper()
	var fd int
	err := ns.Do(func() error {
		var err error
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, int(htons(unix.ETH_P_ALL)))
		if err != nil {
			return err
		}
		ifi, err := net.InterfaceByName(ifname)
		if err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index})
	})
	if err != nil {
		t.Fatalf("packet socket on %s: %v", ifname, err)
	}
	return fd
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func copyFile(t *testing.T, from, to string) {
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

// TestGapDoc: docs/operations.md gives the restart gap's spread under load
// as well as alone, and its ring paragraph's figure is the afpacket
// defaults': blocks × block_timeout of traffic at one frame a millisecond.
func TestGapDoc(t *testing.T) {
	b, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := strings.Join(strings.Fields(string(b)), " ")
	held := time.Duration(afpacket.DefaultBlocks) * afpacket.DefaultBlockTimeout
	for _, want := range []string{
		"| 0.09–0.59 s (median 0.15 s) |", "| 0.23–0.74 s |", "gap, loaded",
		fmt.Sprintf("(%d blocks of %d MiB, `block_timeout = \"%v\"`)", afpacket.DefaultBlocks, afpacket.DefaultBlockSize>>20, afpacket.DefaultBlockTimeout),
		fmt.Sprintf("at one frame a millisecond, that is about %d ms", held.Milliseconds()),
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("docs/operations.md does not say %q", want)
		}
	}
}
