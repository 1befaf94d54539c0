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

// TestTxBytesPartialSend: a port that takes only the front of a burst (a
// mem link whose ring is full) is counted for what it took, bytes included,
// with frames of three sizes so that a count of the wrong packets' lengths
// shows. What went is read back from the link's far end.
func TestTxBytesPartialSend(t *testing.T) {
	const cfg = `
version = 1
[engine]
pin = false
[control]
listen = ""
[[ports]]
name = "m0"
driver = "mem"
peer = "m1"
ring_size = 64
[[ports]]
name = "m1"
driver = "mem"
peer = "m0"
[[pipelines]]
name = "source"
lcores = [0]
[[pipelines.stages]]
kind = "generator"
ip_version = 4
src = "192.0.2.1"
dst = "198.51.100.1"
flows = 3
sizes = [64, 100, 333]
[[pipelines.stages]]
kind = "forward"
port = "m0"
`
	e := enginetest.Start(t, cfg, appliance.Options{Manual: true})
	m1, _ := e.Port("m1")
	var got, gotBytes uint64
	var b packet.Burst
	drain := func() { // what m1 holds, counted
		for {
			b.N = 0
			n := m1.RxBurst(0, &b)
			if n == 0 {
				break
			}
			for i := range n {
				gotBytes += uint64(b.H[i].P().Len())
			}
			got += uint64(n)
			packet.Free(&b)
		}
	}
	for step := 0; step < 20; step++ {
		e.Step()
		if step%3 != 2 {
			continue // let the ring fill: the next bursts go in part
		}
		drain()
	}
	s := e.Snapshot()
	var tx, txBytes, full uint64
	for _, p := range s.Ports {
		if p.Name == "m0" {
			tx, txBytes = p.TxPackets, p.TxBytes
		}
	}
	for _, d := range s.Drops {
		if d.Reason == packet.ReasonTxFull.String() {
			full += d.Count
		}
	}
	if full == 0 {
		t.Fatal("no burst was sent in part: the test proves nothing")
	}
	drain() // what the ring still holds went too (Stop would free it)
	e.Stop()
	if tx != got || txBytes != gotBytes {
		t.Errorf("m0 counted %d packets, %d bytes; its peer received %d, %d bytes", tx, txBytes, got, gotBytes)
	}
}
