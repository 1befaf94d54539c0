package appliance_test

import (
	"testing"
	"time"

	"github.com/linerate/linerate/appliance"
	"github.com/linerate/linerate/appliance/clock"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/internal/enginetest"
)

// TestManualSnapshotCurrent: a Manual engine's lcores publish their counters
// only every few busy loops, as running ones do, so its Snapshot publishes
// what was stepped since: after each busy step, the engine's count of what
// went to the null port is the port's own, and the lcore's and the stages'
// counts agree with it.
func TestManualSnapshotCurrent(t *testing.T) {
	e := enginetest.Start(t, forwardMemConfig, appliance.Options{Manual: true})
	null, _ := e.Port("null0")
	for i := 1; i <= 5; i++ {
		if e.Step() == 0 {
			t.Fatalf("step %d moved nothing", i)
		}
		s := e.Snapshot()
		var tx uint64
		for _, p := range s.Ports {
			if p.Name == "null0" {
				tx = p.TxPackets
			}
		}
		if want := null.Stats().TxPackets; tx != want {
			t.Errorf("step %d: the snapshot says %d packets went to null0, the port %d", i, tx, want)
		}
		// Each step's burst goes over the mem link and out to null0 in
		// that step: the source's forward stage sends it at once.
		var made, fwd uint64
		for _, st := range s.Stages {
			switch st.Pipeline + "/" + st.Kind {
			case "source/forward":
				made = st.Packets
			case "forward/forward":
				fwd = st.Packets
			}
		}
		if made != uint64(i)*packet.MaxBurst || fwd != tx || made != fwd {
			t.Errorf("step %d: source %d, forward stage %d, null0 %d", i, made, fwd, tx)
		}
		if len(s.Lcores) != 1 || s.Lcores[0].Loops != uint64(i) {
			t.Errorf("step %d: lcores %+v", i, s.Lcores)
		}
	}
	e.Stop()
}

// countingClock is a simulated clock that counts its readings.
type countingClock struct {
	*clock.Sim
	reads int
}

func (c *countingClock) Now() int64 { c.reads++; return c.Sim.Now() }

// TestClockReadsPerLoop: a loop of BenchmarkForwardMem's engine reads the clock
// twice, at its start and for the burst it receives from the mem link. Its
// transmits, to a mem link and the null port, which never read TxTime, read
// none (a third reading, before the flush, cost about 0.4 ns a packet here).
func TestClockReadsPerLoop(t *testing.T) {
	clk := &countingClock{Sim: clock.NewSim(0)}
	e := enginetest.Start(t, forwardMemConfig, appliance.Options{Manual: true, Clock: clk})
	for range 10 {
		e.Step()
	}
	clk.reads = 0
	const loops = 100
	for range loops {
		clk.Advance(time.Microsecond)
		if e.Step() == 0 {
			t.Fatal("a loop moved nothing")
		}
	}
	if clk.reads != 2*loops {
		t.Errorf("%d loops read the clock %d times, want %d", loops, clk.reads, 2*loops)
	}
	e.Stop()
}
