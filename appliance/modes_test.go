package appliance_test

import (
	"encoding/binary"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/linerate/linerate/appliance"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/internal/enginetest"
	"github.com/linerate/linerate/plugins"
)

// TestPipelineMode: an I/O lcore classifies by UDP port into two rings; worker
// lcores drain them. Every packet must reach the worker its rule names. The
// rings and the pool hold everything sent, so however late the workers run,
// nothing is dropped.
func TestPipelineMode(t *testing.T) {
	const n = 20000
	cfg := `
version = 1
[engine]
pin = false
[control]
listen = ""
[[pools]]
name = "default"
buffers = 32768
[[ports]]
name = "ring_stamp"
driver = "mem"
ring_size = 32768
[[ports]]
name = "ring_data"
driver = "mem"
ring_size = 32768
[[pipelines]]
name = "io"
lcores = [0]
[[pipelines.stages]]
kind = "generator"
name = "probes"
ip_version = 6
src = "2001:db8::1"
dst = "2001:db8::2"
udp_dst_port = 862
sizes = [128]
count = 5000
[[pipelines.stages]]
kind = "generator"
name = "data"
ip_version = 6
src = "2001:db8::1"
dst = "2001:db8:9::2"
udp_dst_port = 4000
sizes = [256]
count = 15000
[[pipelines.stages]]
kind = "classify"
default = "drop"
  [[pipelines.stages.rules]]
  next_header = 17
  udp_dst_port = 862
  port = "ring_stamp"
  [[pipelines.stages.rules]]
  dst_prefix = "2001:db8:9::/48"
  port = "ring_data"
[[pipelines]]
name = "stamp_worker"
lcores = [1]
rx = ["ring_stamp"]
[[pipelines.stages]]
kind = "sink"
name = "stamp_sink"
udp_port = 862
[[pipelines]]
name = "data_worker"
lcores = [1]
rx = ["ring_data"]
[[pipelines.stages]]
kind = "sink"
name = "data_sink"
`
	e := enginetest.Start(t, cfg, appliance.Options{})
	select {
	case <-e.Done():
	case <-time.After(time.Minute):
		e.Stop()
		t.Fatal("engine did not stop by itself")
	}
	s := e.Snapshot()
	if got := enginetest.Counter(s, "stamp_sink", "received"); got != 5000 {
		t.Errorf("STAMP worker received %d, want 5000 (drops %v)", got, s.Drops)
	}
	if got := enginetest.Counter(s, "stamp_sink", "tracked"); got != 5000 {
		t.Errorf("STAMP worker tracked %d, want 5000: other traffic leaked in", got)
	}
	if got := enginetest.Counter(s, "data_sink", "received"); got != n-5000 {
		t.Errorf("data worker received %d, want %d (drops %v)", got, n-5000, s.Drops)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
}

// ownerStage hands every packet whose session (the UDP source port) belongs to
// another lcore to its owner, and records which lcore saw each session.
type ownerStage struct {
	seen *sync.Map // session → lcore index
	bad  *atomic.Int64
	kept *atomic.Int64
	tids *sync.Map // lcore index → thread id
}

var ownerState = struct {
	seen       sync.Map
	bad, kept  atomic.Int64
	tids       sync.Map
	registered sync.Once
}{}

func registerOwner() {
	ownerState.registered.Do(func() {
		plugins.Register(plugins.Kind{Name: "test.owner", Summary: "test", New: func(s *plugins.Setup) (plugins.Stage, error) {
			if err := s.Config.Decode(&struct{}{}); err != nil {
				return nil, err
			}
			return &ownerStage{seen: &ownerState.seen, bad: &ownerState.bad, kept: &ownerState.kept, tids: &ownerState.tids}, nil
		}})
	})
}

func (o *ownerStage) Process(ctx *plugins.Context, b *packet.Burst) {
	o.tids.Store(ctx.Instance, unix.Gettid())
	for i := 0; i < b.N; i++ {
		p := b.H[i].P()
		l, err := p.ParseLayers()
		if err != nil || l.Flags&packet.FlagUDP == 0 {
			p.Drop(packet.ReasonMalformed)
			continue
		}
		key := uint64(binary.BigEndian.Uint16(p.Data()[l.L4:]))
		if owner := ctx.Owner(key); owner != ctx.Instance {
			ctx.Handoff(b.H[i], owner)
			continue
		}
		if prev, loaded := o.seen.LoadOrStore(key, ctx.Instance); loaded && prev.(int) != ctx.Instance {
			o.bad.Add(1)
		}
		o.kept.Add(1)
	}
}

// TestSessionOwnership: all traffic arrives on one lcore's queue; packets of
// sessions owned by the other lcore cross the handoff ring and are processed
// there, resuming at the stage that handed them off.
func TestSessionOwnership(t *testing.T) {
	registerOwner()
	cfg := `
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
rx_queues = 2
[[pipelines]]
name = "gen"
lcores = [0]
[[pipelines.stages]]
kind = "generator"
ip_version = 4
src = "192.0.2.1"
dst = "192.0.2.2"
flows = 64
sizes = [64]
count = 64000
[[pipelines.stages]]
kind = "forward"
port = "m0"
[[pipelines]]
name = "sessions"
lcores = [0, 1]
rx = ["m1"]
[[pipelines.stages]]
kind = "test.owner"
[[pipelines.stages]]
kind = "sink"
name = "sink"
`
	e := enginetest.Start(t, cfg, appliance.Options{})
	select {
	case <-e.Done():
	case <-time.After(time.Minute):
		e.Stop()
		t.Fatal("engine did not stop by itself")
	}
	s := e.Snapshot()
	var dropped uint64
	for _, d := range s.Drops {
		dropped += d.Count
	}
	if got := enginetest.Counter(s, "sink", "received"); got+dropped != 64000 || got == 0 {
		t.Errorf("sink received %d, dropped %d (%v): want 64000 in all", got, dropped, s.Drops)
	}
	if n := ownerState.bad.Load(); n != 0 {
		t.Errorf("%d packets were processed by a lcore that does not own their session", n)
	}
	lcores := map[int]bool{}
	ownerState.seen.Range(func(k, v any) bool { lcores[v.(int)] = true; return true })
	if len(lcores) != 2 {
		t.Errorf("sessions were owned by %d lcores, want 2", len(lcores))
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
}

// tickStage records the thread its lcore runs on.
type tickStage struct{ tid *atomic.Int64 }

var tickTID atomic.Int64
var tickOnce sync.Once

func (tickStage) Process(*plugins.Context, *packet.Burst) {}
func (s tickStage) Tick(*plugins.Context)                 { s.tid.Store(int64(unix.Gettid())) }

// TestCommandsRunOnTheLcore: Do runs a function on the lcore's own thread, between
// loops, and Synchronize returns once every lcore passed a quiescent point.
func TestCommandsRunOnTheLcore(t *testing.T) {
	tickOnce.Do(func() {
		plugins.Register(plugins.Kind{Name: "test.tick", Summary: "test", New: func(s *plugins.Setup) (plugins.Stage, error) {
			return tickStage{&tickTID}, nil
		}})
	})
	cfg := `
version = 1
[engine]
pin = false
[control]
listen = ""
[[pipelines]]
name = "p"
lcores = [0]
[[pipelines.stages]]
kind = "test.tick"
`
	e := enginetest.Start(t, cfg, appliance.Options{})
	defer e.Close()
	deadline := time.Now().Add(10 * time.Second)
	for tickTID.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	var tid int64
	if err := e.Do(0, func() { tid = int64(unix.Gettid()) }); err != nil {
		t.Fatal(err)
	}
	if tid != tickTID.Load() {
		t.Errorf("command ran on thread %d, the lcore runs on %d", tid, tickTID.Load())
	}
	done := make(chan struct{})
	go func() { e.Synchronize(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Synchronize did not return")
	}
	if err := e.Do(5, func() {}); err == nil {
		t.Error("Do on a lcore that does not exist succeeded")
	}
}

// TestPinnedLcore pins an lcore to CPU 0 and checks the thread's affinity.
func TestPinnedLcore(t *testing.T) {
	tickOnce.Do(func() {
		plugins.Register(plugins.Kind{Name: "test.tick", Summary: "test", New: func(s *plugins.Setup) (plugins.Stage, error) {
			return tickStage{&tickTID}, nil
		}})
	})
	cfg := `
version = 1
[engine]
pin = true
poll = "busy"
[control]
listen = ""
[[pipelines]]
name = "p"
lcores = [0]
[[pipelines.stages]]
kind = "test.tick"
`
	e := enginetest.Start(t, cfg, appliance.Options{})
	defer e.Close()
	var set unix.CPUSet
	if err := e.Do(0, func() { _ = unix.SchedGetaffinity(0, &set) }); err != nil {
		t.Fatal(err)
	}
	if set.Count() != 1 || !set.IsSet(0) {
		t.Errorf("lcore thread affinity has %d CPUs (CPU 0 set: %v), want only CPU 0", set.Count(), set.IsSet(0))
	}
	st := e.Status()
	if len(st.Lcores) != 1 || st.Lcores[0].CPU != 0 {
		t.Errorf("status lcores = %+v", st.Lcores)
	}
}
