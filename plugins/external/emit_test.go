package external_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/gopacket/gopacket/pcapgo"

	"github.com/linerate/linerate/appliance"
	"github.com/linerate/linerate/internal/enginetest"
	"github.com/linerate/linerate/internal/testenv"
)

// buildMirror builds the example plugin that makes packets.
func buildMirror(t *testing.T) string {
	t.Helper()
	goBin := testenv.RequireCmd(t, "go")
	bin := filepath.Join(trustedTree(t), "linerate-mirror")
	if out, err := exec.Command(goBin, "build", "-o", bin, "../sdk/examples/mirror").CombinedOutput(); err != nil {
		t.Fatalf("build the mirror: %v\n%s", err, out)
	}
	return bin
}

// readPcap is every frame of a pcap file, read by gopacket (the oracle).
func readPcap(t *testing.T, path string) [][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for {
		data, _, err := r.ReadPacketData()
		if err != nil {
			return out
		}
		out = append(out, data)
	}
}

// TestMirrorToPort: the mirror plugin copies every packet into buffers
// linerate lends it and emits the copies to a port of linerate's (a pcap
// port writing a file); the originals go on down the chain to another. The
// two files, read by gopacket, hold the same frames byte for byte, every
// emit is counted, and every buffer (the lent spares too) comes back.
func TestMirrorToPort(t *testing.T) {
	bin := buildMirror(t)
	dir := t.TempDir()
	const n = 20_000
	cfg := fmt.Sprintf(`
version = 1
[engine]
pin = false
[control]
listen = ""
[[pools]]
name = "default"
buffers = 8192
[[ports]]
name = "out"
driver = "pcap"
tx_file = %q
[[ports]]
name = "span"
driver = "pcap"
tx_file = %q
[[pipelines]]
name = "source"
lcores = [0]
[[pipelines.stages]]
kind = "generator"
ip_version = 4
src = "192.0.2.1"
dst = "198.51.100.1"
flows = 16
sizes = [64, 200, 1400]
count = %d
rate = "100kpps"
[[pipelines.stages]]
kind = "external"
name = "mirror"
plugin = %q
user = "nobody"
config = { port = "span", buffers = 1024 }
[[pipelines.stages]]
kind = "forward"
port = "out"
`, filepath.Join(dir, "out.pcap"), filepath.Join(dir, "span.pcap"), n, bin)
	e := enginetest.Start(t, cfg, appliance.Options{})
	select {
	case <-e.Done():
	case <-time.After(2 * time.Minute):
		e.Stop()
		t.Fatal("the engine did not stop by itself")
	}
	s := e.Snapshot()
	// A busy machine may leave the plugin's ring full for a while
	// (plugin_ring_full): what was lent was mirrored, every packet of it.
	dropped, why := drops(s)
	lent := enginetest.Counter(s, "mirror", "lent")
	emitted, bad := enginetest.Counter(s, "mirror", "emitted"), enginetest.Counter(s, "mirror", "bad_emit")
	if lent+dropped != n || emitted != lent || bad != 0 {
		t.Errorf("lent %d, emitted %d, bad_emit %d, dropped %d (%v) of %d", lent, emitted, bad, dropped, why, n)
	}
	for name, used := range e.InUse() {
		if used != 0 {
			t.Errorf("pool %q has %d buffers in use", name, used)
		}
	}
	out, span := readPcap(t, filepath.Join(dir, "out.pcap")), readPcap(t, filepath.Join(dir, "span.pcap"))
	if len(out) != int(lent) || len(span) != int(lent) {
		t.Fatalf("%d frames forwarded and %d mirrored, want %d each", len(out), len(span), lent)
	}
	slices.SortFunc(out, bytes.Compare)
	slices.SortFunc(span, bytes.Compare)
	for i := range out {
		if !bytes.Equal(out[i], span[i]) {
			t.Fatalf("the mirrored frames are not the forwarded ones (frame %d of the sorted lists)", i)
		}
	}
}

func mirrorConfig(bin string, count int, rate, extra string) string {
	return pluginConfig(bin, "mirror", "every = 2, buffers = 1024", count, rate, extra)
}

// TestMirrorDownTheChain: with no port, the plugin's Produce sends its
// copies to the stage after the external one, beside the originals: the
// sink gets every packet and a copy of every second one.
func TestMirrorDownTheChain(t *testing.T) {
	bin := buildMirror(t)
	const n = 20_000
	e := enginetest.Start(t, mirrorConfig(bin, n, "100kpps", ""), appliance.Options{})
	select {
	case <-e.Done():
	case <-time.After(2 * time.Minute):
		e.Stop()
		t.Fatal("the engine did not stop by itself")
	}
	s := e.Snapshot()
	got := enginetest.Counter(s, "sink", "received")
	dropped, why := drops(s)
	emitted, lent := enginetest.Counter(s, "mirror", "emitted"), enginetest.Counter(s, "mirror", "lent")
	// Every second packet lent is copied, unless the plugin found no buffer
	// (its no_buffer): copies held up on their way to the other lcore keep
	// the pool's buffers from coming back to be lent again, on a busy
	// machine. Whatever was emitted is accounted for.
	if lent == 0 || emitted == 0 || emitted > lent/2 || got+dropped != n+emitted {
		t.Errorf("emitted %d of %d lent; sink received %d + dropped %d (%v), want %d in all", emitted, lent, got, dropped, why, n+emitted)
	}
	for name, used := range e.InUse() {
		if used != 0 {
			t.Errorf("pool %q has %d buffers in use", name, used)
		}
	}
}

// TestKillWhileEmitting kills the mirror plugin with SIGKILL under load,
// while it holds spare buffers and emits into them: every packet is
// accounted for (sent and emitted = received or dropped, the reclaimed as plugin_lost), the
// spare buffers come back once it is reaped, and the restarted plugin emits
// again.
func TestKillWhileEmitting(t *testing.T) {
	bin := buildMirror(t)
	e := enginetest.Start(t, mirrorConfig(bin, 0, "100kpps", `fail = "closed"`+"\n"+`restart_after = "50ms"`), appliance.Options{})
	killPlugin(t, e, bin, "mirror", "emitted", 5_000)
	e.Stop()
	s := e.Snapshot()
	sent := enginetest.Counter(s, "generator#0", "sent")
	emitted := enginetest.Counter(s, "mirror", "emitted")
	got := enginetest.Counter(s, "sink", "received")
	reclaimed := enginetest.Counter(s, "mirror", "reclaimed")
	dropped, why := drops(s)
	if sent == 0 || got+dropped != sent+emitted || why["plugin_lost"] != reclaimed {
		t.Errorf("sent %d + emitted %d: received %d + dropped %d (%v); reclaimed %d", sent, emitted, got, dropped, why, reclaimed)
	}
	if bad := enginetest.Counter(s, "mirror", "bad_emit"); bad != 0 {
		t.Errorf("bad_emit %d", bad)
	}
	for name, used := range e.InUse() {
		if used != 0 {
			t.Errorf("pool %q has %d buffers in use", name, used)
		}
	}
}

// TestEmitsAllocateNothing: taking the plugin's emits and lending it spare
// buffers allocate nothing on the lcore.
func TestEmitsAllocateNothing(t *testing.T) {
	bin := buildMirror(t)
	e := enginetest.Start(t, mirrorConfig(bin, 0, "", ""), appliance.Options{Manual: true})
	counter := func(stage, name string) uint64 { return enginetest.Counter(e.Snapshot(), stage, name) }
	waitFor(t, "emits from the plugin", time.Minute, func() bool {
		for i := 0; i < 100; i++ {
			e.Step()
		}
		return counter("mirror", "emitted") > 10_000
	})
	if a := testing.AllocsPerRun(2000, func() { e.Step() }); a != 0 {
		t.Errorf("a loop allocates %.2f times", a)
	}
	e.Stop()
	for name, used := range e.InUse() {
		if used != 0 {
			t.Errorf("pool %q has %d buffers in use", name, used)
		}
	}
}
