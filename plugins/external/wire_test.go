package external_test

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"golang.org/x/sys/unix"

	"github.com/linerate/linerate/appliance"
	lrconfig "github.com/linerate/linerate/config"
	"github.com/linerate/linerate/internal/enginetest"
	"github.com/linerate/linerate/internal/netns"
	"github.com/linerate/linerate/internal/tshark"
)

// TestMirrorOnTheWire: linerate on two veths (afpacket ports) in a namespace
// of its own, the mirror plugin behind it. The kernel of a peer namespace
// sends UDP datagrams into one veth; the plugin copies each into a buffer
// linerate lends it and emits the copy out of the other veth, where the peer
// captures it (gopacket's AF_PACKET handle) and tshark decodes it: every
// datagram comes back, byte for byte as the kernel framed it.
func TestMirrorOnTheWire(t *testing.T) {
	tshark.Require(t)
	bin := buildMirror(t)
	box, peer := netns.New(t), netns.New(t)
	netns.Veth(t, peer, "p0", box, "in0")
	netns.Veth(t, peer, "p1", box, "span0")
	peer.IP(t, "addr", "add", "10.77.0.2/24", "dev", "p0")
	peer.IP(t, "neigh", "add", "10.77.0.1", "lladdr", "02:00:00:00:77:01", "dev", "p0", "nud", "permanent")

	cfg, err := lrconfig.Parse("wire.toml", []byte(fmt.Sprintf(`
version = 1
[engine]
pin = false
[control]
listen = ""
[[ports]]
name = "in"
driver = "afpacket"
interface = "in0"
[[ports]]
name = "span"
driver = "afpacket"
interface = "span0"
[[pipelines]]
name = "box"
lcores = [0]
rx = ["in"]
[[pipelines.stages]]
kind = "external"
name = "mirror"
plugin = %q
user = "nobody"
config = { port = "span" }
[[pipelines.stages]]
kind = "sink"
name = "sink"
`, bin)))
	if err != nil {
		t.Fatal(err)
	}
	var e *appliance.Engine
	if err := box.Do(func() (err error) { e, err = appliance.New(cfg, appliance.Options{Log: enginetest.Quiet}); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	var capture *pcapgo.EthernetHandle
	if err := peer.Do(func() (err error) { capture, err = pcapgo.NewEthernetHandle("p1"); return err }); err != nil {
		t.Fatal(err)
	}
	defer capture.Close()
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	counter := func(stage, name string) uint64 { return enginetest.Counter(e.Snapshot(), stage, name) }
	waitFor(t, "the plugin up", time.Minute, func() bool { return pluginPID(t, bin) != 0 })

	const n = 200
	var udp *net.UDPConn
	if err := peer.Do(func() error {
		c, err := net.Dial("udp4", "10.77.0.1:7777")
		udp, _ = c.(*net.UDPConn)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	sent := map[string]bool{}
	for i := 0; i < n; i++ {
		msg := fmt.Sprintf("mirrored datagram %03d %s", i, strings.Repeat("x", i))
		sent[msg] = true
		if _, err := udp.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		if i%50 == 49 {
			// The afpacket port's ring holds far more; pacing only spares
			// the veth's backlog on a busy machine.
			time.Sleep(10 * time.Millisecond)
		}
	}
	var frames [][]byte
	got := map[string]bool{}
	deadline := time.Now().Add(time.Minute)
	for len(got) < n && time.Now().Before(deadline) {
		data, _, err := capture.ReadPacketData()
		if errors.Is(err, unix.EAGAIN) {
			time.Sleep(time.Millisecond)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		pkt := gopacket.NewPacket(data, layers.LayerTypeEthernet, gopacket.Default)
		if u, ok := pkt.Layer(layers.LayerTypeUDP).(*layers.UDP); ok && u.DstPort == 7777 {
			if !sent[string(u.Payload)] {
				t.Fatalf("a mirrored datagram the peer never sent: %q", u.Payload)
			}
			got[string(u.Payload)] = true
			frames = append(frames, append([]byte(nil), data...))
		}
	}
	if len(got) != n {
		t.Fatalf("%d of %d datagrams mirrored out of span0 (emitted %d, lent %d)", len(got), n,
			counter("mirror", "emitted"), counter("mirror", "lent"))
	}
	// tshark decodes the mirrored frames as the peer's kernel made them.
	file := filepath.Join(t.TempDir(), "span.pcap")
	tshark.WritePcap(t, file, frames)
	out := tshark.Run(t, "-r", file, "-T", "fields", "-e", "ip.src", "-e", "ip.dst", "-e", "udp.dstport", "-e", "udp.length")
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(frames) {
		t.Fatalf("tshark read %d frames of %d", len(lines), len(frames))
	}
	for i, l := range lines {
		f := strings.Split(l, "\t")
		if len(f) != 4 || f[0] != "10.77.0.2" || f[1] != "10.77.0.1" || f[2] != "7777" {
			t.Fatalf("frame %d: tshark says %q", i, l)
		}
	}
	e.Stop()
	if bad := counter("mirror", "bad_emit"); bad != 0 {
		t.Errorf("bad_emit %d", bad)
	}
	for name, used := range e.InUse() {
		if used != 0 {
			t.Errorf("pool %q has %d buffers in use", name, used)
		}
	}
}
