package appliance_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/linerate/linerate/appliance"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/internal/enginetest"
)

// lossyCrossLcore is the configuration that showed buffers freed while a burst
// still held them: a generator on lcore 0 forwards into a mem link; on lcore 1
// a lossy link feeds a sink, both freeing packets of the burst they process,
// from the one pool the generator allocates from.
func lossyCrossLcore(count int, loss float64) string {
	return fmt.Sprintf(`
version = 1
[engine]
pin = false
[control]
listen = ""
[[ports]]
name = "m0"
driver = "mem"
peer = "m1"
[[ports]]
name = "m1"
driver = "mem"
peer = "m0"
[[pipelines]]
name = "gen"
lcores = [0]
[[pipelines.stages]]
kind = "generator"
ip_version = 4
src = "192.0.2.1"
dst = "192.0.2.2"
flows = 8
sizes = [64]
count = %d
[[pipelines.stages]]
kind = "forward"
port = "m0"
[[pipelines]]
name = "lossy"
lcores = [1]
rx = ["m1"]
[[pipelines.stages]]
kind = "link"
loss = %g
[[pipelines.stages]]
kind = "sink"
name = "sink"
`, count, loss)
}

// TestLossyCrossLcore runs the reproduction of the buffer-reuse bug: 3,000,000
// packets through a lossy link before a sink on another lcore. Every packet is
// received or dropped with a named reason, none is unclaimed, and every buffer
// comes back. In a checked build (-tags lrcheck) any reuse of a buffer the
// burst still holds aborts.
func TestLossyCrossLcore(t *testing.T) {
	n := 3_000_000
	if testing.Short() {
		n = 300_000
	}
	for _, loss := range []float64{0.01, 0} {
		t.Run(fmt.Sprint("loss=", loss), func(t *testing.T) {
			e := enginetest.Start(t, lossyCrossLcore(n, loss), appliance.Options{})
			select {
			case <-e.Done():
			case <-time.After(5 * time.Minute):
				e.Stop()
				t.Fatal("engine did not stop by itself")
			}
			s := e.Snapshot()
			recv := enginetest.Counter(s, "sink", "received")
			// The generator outruns the mem link, whose ring drops the
			// excess as tx_full; what crosses meets the link's loss.
			var dropped, lost, full uint64
			for _, d := range s.Drops {
				dropped += d.Count
				switch d.Reason {
				case "link_loss":
					lost += d.Count
				case packet.ReasonTxFull.String():
					full += d.Count
				default:
					t.Errorf("%d packets dropped as %s", d.Count, d.Reason)
				}
			}
			if recv+dropped != uint64(n) {
				t.Errorf("sink received %d and %d were dropped (%v): want %d in all", recv, dropped, s.Drops, n)
			}
			crossed := recv + lost
			if recv == 0 {
				t.Error("nothing reached the sink")
			}
			if loss > 0 && (lost < uint64(float64(crossed)*loss/2) || lost > uint64(float64(crossed)*loss*2)) {
				t.Errorf("link lost %d of %d at loss %g", lost, crossed, loss)
			}
			if loss == 0 && lost != 0 {
				t.Errorf("link lost %d at loss 0", lost)
			}
			t.Logf("received %d, link_loss %d, tx_full %d", recv, lost, full)
			for name, used := range e.InUse() {
				if used != 0 {
					t.Errorf("pool %q has %d buffers in use after the engine stopped", name, used)
				}
			}
		})
	}
}
