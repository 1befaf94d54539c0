//go:build linux

package tester

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/linerate/linerate/appliance"
	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/internal/enginetest"
	"github.com/linerate/linerate/internal/netns"

	_ "github.com/linerate/linerate/plugins/builtin"
	_ "github.com/linerate/linerate/ports/afpacket"
)

// lab is a tester namespace and a DUT namespace joined by two veth pairs:
// the tester sends on tga, the DUT receives it on dua and sends on dub, the
// tester receives on tgb.
type lab struct {
	tg, dut *netns.NS
}

func newLab(t *testing.T) *lab {
	l := &lab{tg: netns.New(t), dut: netns.New(t)}
	netns.Veth(t, l.tg, "tga", l.dut, "dua")
	netns.Veth(t, l.dut, "dub", l.tg, "tgb")
	return l
}

// startDUT builds and starts a linerate engine from toml in the DUT's
// namespace.
func (l *lab) startDUT(t *testing.T, toml string) *appliance.Engine {
	t.Helper()
	cfg, err := config.Parse("dut.toml", []byte(toml))
	if err != nil {
		t.Fatal(err)
	}
	var e *appliance.Engine
	if err := l.dut.Do(func() (err error) {
		e, err = appliance.New(cfg, appliance.Options{Log: enginetest.Quiet})
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
	return e
}

// profile is a one-stream test profile over the lab's tester ports.
func profile(t *testing.T, test string) *Profile {
	t.Helper()
	p, err := Parse("test.toml", []byte(`
version = 1
[engine]
pin = false
[control]
listen = ""
[[ports]]
name = "tg0"
driver = "afpacket"
interface = "tga"
rx_timestamp = "kernel"
block_size = 65536
blocks = 64
[[ports]]
name = "tg1"
driver = "afpacket"
interface = "tgb"
rx_timestamp = "kernel"
block_size = 65536
blocks = 256
`+test))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// capDUT is a linerate DUT that forwards dua to dub through a link stage of
// the given capacity and loss.
//
// The link's queue and bucket are small against a trial's excess above the
// cap (a trial 5 % above it for 2 s brings 800 packets more than the link
// sends; queue and bucket hold 700), so such a trial loses packets; and
// large enough to ride out the DUT's own lcore being preempted for tens of
// milliseconds on a busy machine.
func capDUT(rate string, loss float64) string {
	return fmt.Sprintf(`
version = 1
[engine]
pin = false
[control]
listen = ""
[[ports]]
name = "a"
driver = "afpacket"
interface = "dua"
block_size = 65536
blocks = 256
[[ports]]
name = "b"
driver = "afpacket"
interface = "dub"
block_size = 65536
blocks = 64
[[pipelines]]
name = "fwd"
rx = ["a"]
[[pipelines.stages]]
kind = "link"

rate = %q
loss = %g
queue = 256
burst = "64KiB"
[[pipelines.stages]]
kind = "forward"
port = "b"
`, rate, loss)
}

const stream = `
[[test.streams]]
tx = "tg0"
rx = "tg1"
src = "198.18.0.1"
dst = "198.18.1.1"
flows = 4
`

// A linerate DUT whose link stage caps the rate at 8 kpps of 128-byte
// frames: the NDR found is the cap, within the precision.
func TestNDRMatchesCap(t *testing.T) {
	l := newLab(t)
	// 128-byte frames are 124 bytes in the buffer; the link counts 24 more:
	// 148 bytes, 1184 bits. 8 kpps is 9.472 Mbit/s.
	const capPPS = 8000
	dut := l.startDUT(t, capDUT("9472kbit", 0))
	defer func() {
		snap := dut.Snapshot()
		for _, p := range snap.Ports {
			t.Logf("DUT port %s: rx %d tx %d rx_dropped %d tx_dropped %d %v", p.Name, p.RxPackets, p.TxPackets, p.RxDropped, p.TxDropped, p.Extra)
		}
		t.Logf("DUT drops %v", snap.Drops)
	}()
	p := profile(t, `
[test]
frame_sizes = [128]
final_duration = "2s"
initial_duration = "250ms"
precision = 0.05
max_rate = "30kpps"
min_rate = "1kpps"
warmup = "100ms"
drain = "200ms"
latency = [0.5]
latency_duration = "500ms"
`+stream)
	r := &Runner{Profile: p, Do: l.tg.Do}
	defer func() {
		t.Logf("kernel drops: tga %d tgb %d dua %d dub %d", l.tg.Dropped(t, "tga"), l.tg.Dropped(t, "tgb"), l.dut.Dropped(t, "dua"), l.dut.Dropped(t, "dub"))
	}()
	rep, err := r.Run(t.Context(), func(pr Progress) { t.Logf("%+v", pr) })
	if err != nil {
		t.Fatal(err)
	}
	s := rep.Sizes[0].Searches[0]
	for _, tr := range s.Trials {
		t.Logf("%-16s %8.0f pps: asked %d made %d nobuf %d sent %d received %d late %d loss %.4f%% wall %v tester drops %v retries %d", tr.Phase, tr.Rate, tr.Streams[0].Asked, tr.Streams[0].Made, tr.Streams[0].NoBuffer, tr.Streams[0].Sent, tr.Streams[0].Received, tr.Streams[0].Late, 100*tr.LossRatio(), tr.Wall.Round(time.Millisecond), tr.TesterDrops, tr.Retries)
	}
	ndr := s.Results[0]
	t.Logf("NDR %.0f pps (upper %.0f), PDR %.0f pps, %d trials in %v", ndr.Lower, ndr.Upper, s.Results[1].Lower, len(s.Trials), s.Wall)
	if !ndr.LowerFound || math.Abs(ndr.Lower-capPPS) > 0.05*capPPS {
		t.Errorf("NDR %.0f pps: the cap is %d pps, precision 5 %%", ndr.Lower, capPPS)
	}
	lat := rep.Sizes[0].Latency[0].Trial.Latency
	if lat == nil || lat.Count == 0 {
		t.Fatal("no latency samples at 50 % of the PDR")
	}
	t.Logf("latency at 50%% of PDR: min %d p50 %d p99 %d max %d ns (%d samples)", lat.Min, lat.P50, lat.P99, lat.Max, lat.Count)
}
