package rlnc_test

import (
	"strings"
	"testing"
	"time"

	"github.com/linerate/linerate/appliance"
	"github.com/linerate/linerate/appliance/clock"
	"github.com/linerate/linerate/appliance/stats"
	"github.com/linerate/linerate/internal/enginetest"
)

// emitConfig: every RLNC stage sends on a port, through the smallest tx
// buffer the engine allows. The encoder makes 48 packets a generation of 32
// and the generator brings up to two generations a loop; the recoder makes
// as many; the decoder delivers 32 at once.
const emitConfig = `version = 1
[engine]
pin = false
tx_buffer = 64
[control]
listen = ""
[[ports]]
name = "a"
driver = "mem"
peer = "b"
[[ports]]
name = "b"
driver = "mem"
peer = "a"
[[ports]]
name = "c"
driver = "mem"
peer = "d"
[[ports]]
name = "d"
driver = "mem"
peer = "c"
[[ports]]
name = "e"
driver = "mem"
peer = "f"
[[ports]]
name = "f"
driver = "mem"
peer = "e"
[[pipelines]]
name = "src"
lcores = [0]
[[pipelines.stages]]
kind = "generator"
src = "2001:db8:1::1"
dst = "2001:db8:2::1"
sizes = [300]
count = 6400
rate = "2Mpps"
[[pipelines.stages]]
kind = "rlnc.encoder"
name = "enc"
k = 32
block = 300
SYSTEMATIC
coded = 48
flush = "1ms"
memory = "4MiB"
pool_buffers = 4096
links = [ { port = "a" } ]
[[pipelines]]
name = "mid"
lcores = [0]
rx = ["b"]
[[pipelines.stages]]
kind = "rlnc.recoder"
name = "rec"
memory = "4MiB"
pool_buffers = 4096
links = [ { port = "c", coded = 48 } ]
[[pipelines]]
name = "dst"
lcores = [0]
rx = ["d"]
[[pipelines.stages]]
kind = "rlnc.decoder"
name = "dec"
port = "e"
memory = "4MiB"
pool_buffers = 4096
[[pipelines]]
name = "out"
lcores = [0]
rx = ["f"]
[[pipelines.stages]]
kind = "sink"
name = "sink"
`

// TestEmitToPorts: what an RLNC stage sends on a port waits for room in the
// lcore's tx buffer instead of being dropped there (emit_full), and
// sent_<link> counts what the port then carries.
func TestEmitToPorts(t *testing.T) {
	for _, sys := range []string{"systematic = true", "systematic = false"} {
		t.Run(sys, func(t *testing.T) {
			sim := clock.NewSim(1_700_000_000_000_000_000)
			e := enginetest.Start(t, strings.Replace(emitConfig, "SYSTEMATIC", sys, 1), appliance.Options{Manual: true, Clock: sim})
			enginetest.Run(e, sim, 20*time.Millisecond, 20*time.Microsecond)
			e.Stop()
			s := e.Snapshot()
			for _, d := range s.Drops {
				// Packets beyond a generation's full rank are late or
				// non-innovative: nothing else may go.
				if d.Reason != "rlnc_late" && d.Reason != "rlnc_non_innovative" {
					t.Errorf("dropped %d: %s", d.Count, d.Reason)
				}
			}
			rx := func(port string) uint64 {
				for _, p := range s.Ports {
					if p.Name == port {
						return p.RxPackets
					}
				}
				t.Fatalf("no port %s", port)
				return 0
			}
			for _, c := range []struct {
				stage, counter, port string
			}{{"enc", "sent_a", "b"}, {"rec", "sent_c", "d"}, {"dec", "delivered", "f"}} {
				if sent, got := enginetest.Counter(s, c.stage, c.counter), rx(c.port); sent != got || sent == 0 {
					t.Errorf("%s %s = %d, port %s received %d", c.stage, c.counter, sent, c.port, got)
				}
			}
			if got := enginetest.Counter(s, "sink", "received"); got != 6400 {
				t.Errorf("sink received %d of 6400", got)
			}
			if n := enginetest.Counter(s, "sink", "reordered"); n != 0 {
				t.Errorf("%d reordered", n)
			}
			logCounters(t, s)
		})
	}
}

func logCounters(t *testing.T, s *stats.Snapshot) {
	for _, st := range s.Stages {
		for _, c := range st.Counters {
			switch c.Name {
			case "generations_sent", "recoded_sent", "generations_decoded", "queue_full":
				t.Logf("%s %s = %d", st.Name, c.Name, c.Value)
			}
		}
	}
}
