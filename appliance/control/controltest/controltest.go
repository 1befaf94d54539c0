// Package controltest is a fake engine for tests of the control plane, the
// metrics exporter and the CLI: a Source with two ports, two pipelines over two
// lcores, stage counters, drops and histograms with known contents.
package controltest

import (
	"sync"
	"time"

	"github.com/linerate/linerate/appliance"
	"github.com/linerate/linerate/appliance/stats"
)

// Source is a control.Source that returns what it was given.
type Source struct {
	mu     sync.Mutex
	snap   *stats.Snapshot
	status appliance.Status
}

// Snapshot implements control.Source.
func (s *Source) Snapshot() *stats.Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.snap
}

// Status implements control.Source.
func (s *Source) Status() appliance.Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status
}

// Set replaces what the source returns.
func (s *Source) Set(snap *stats.Snapshot, st appliance.Status) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.snap, s.status = snap, st
}

// Loop gaps recorded on every lcore, in ns: 900 quick polls, 90 slower, 9
// preemptions and one GC pause.
var LoopGaps = []struct{ Value, N uint64 }{{200, 900}, {2000, 90}, {50_000, 9}, {3_000_000, 1}}

// Latencies recorded in the "edge/sink" latency histogram, in ns.
var Latencies = []struct{ Value, N uint64 }{{10_000, 50}, {20_000, 40}, {1_000_000, 10}}

// Started is the fake engine's start time.
var Started = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func hist(vals []struct{ Value, N uint64 }) *stats.HistSnapshot {
	h := stats.NewHistogram()
	for _, v := range vals {
		for range v.N {
			h.Record(v.Value)
		}
	}
	h.Publish()
	return h.Snapshot()
}

// New is a running engine with known counters.
func New() *Source {
	s := &Source{}
	s.Set(Snapshot(), Status())
	return s
}

// Status is the fake engine's shape.
func Status() appliance.Status {
	return appliance.Status{
		Version:    "1.2.3-test",
		ConfigPath: "/etc/linerate/lab.toml",
		State:      appliance.StateRunning,
		Started:    Started,
		Lcores: []appliance.LcoreInfo{
			{ID: 0, CPU: 2, Pipelines: []string{"edge"}},
			{ID: 1, CPU: -1, Pipelines: []string{"edge", "coded"}},
		},
		Ports: []appliance.PortInfo{
			{Name: "p0", Driver: "mem", RxQueues: 2, TxQueues: 2, MTU: 1500, MAC: "02:00:00:00:00:01", TimestampSource: "software", LinkUp: true},
			{Name: "p1", Driver: "afpacket", RxQueues: 1, TxQueues: 2, MTU: 9000, MAC: "02:00:00:00:00:02", TimestampSource: "hardware", LinkUp: false},
		},
		Pipelines: []appliance.PipelineInfo{
			{Name: "edge", Lcores: []int{0, 1}, Stages: []string{"classify", "ioam.encap", "forward"}},
			{Name: "coded", Lcores: []int{1}, Stages: []string{"rlnc.encoder", "forward"}},
		},
	}
}

// Snapshot is the fake engine's counters.
func Snapshot() *stats.Snapshot {
	counter := func(name, help string, v uint64) stats.CounterValue {
		return stats.CounterValue{Name: name, Help: help, Value: v}
	}
	return &stats.Snapshot{
		Time:   Started.Add(90 * time.Minute),
		Uptime: 90 * time.Minute,
		Ports: []stats.PortSnapshot{
			{Name: "p0", Driver: "mem", RxPackets: 1000, RxBytes: 64000, TxPackets: 990, TxBytes: 63360,
				RxDropped: 1, TxDropped: 2, RxErrors: 3, TimestampSource: "software", LinkUp: true},
			{Name: "p1", Driver: "afpacket", RxPackets: 500, RxBytes: 750000, TxPackets: 400, TxBytes: 600000,
				TimestampSource: "hardware", Extra: map[string]uint64{"ring_full": 7, "poll_wakeups": 11}},
		},
		Stages: []stats.StageSnapshot{
			{Pipeline: "edge", Name: "classify", Kind: "classify", Lcore: 2, Packets: 600,
				Counters: []stats.CounterValue{counter("matched", "Packets that matched a rule.", 550)},
				Drops:    []stats.DropCount{{Reason: "malformed", Count: 4}}},
			{Pipeline: "edge", Name: "classify", Kind: "classify", Lcore: -1, Packets: 400,
				Counters: []stats.CounterValue{counter("matched", "Packets that matched a rule.", 390)}},
			{Pipeline: "edge", Name: "encap", Kind: "ioam.encap", Lcore: 2, Packets: 550,
				Counters: []stats.CounterValue{
					counter("encapsulated", "Packets given an IOAM header.", 540),
					counter("too_big_total", "Packets that would outgrow the MTU.", 10),
				},
				Drops: []stats.DropCount{{Reason: "too_big", Count: 10}}},
			{Pipeline: "coded", Name: "encoder", Kind: "rlnc.encoder", Lcore: -1, Packets: 300,
				Counters: []stats.CounterValue{counter("generations", "Generations closed.", 12)},
				Drops:    []stats.DropCount{{Reason: "no_buffer", Count: 5}, {Reason: "malformed", Count: 1}}},
		},
		Lcores: []stats.LcoreSnapshot{
			{ID: 0, CPU: 2, Loops: 100000, BusyLoops: 2500, Packets: 1150, Gap: hist(LoopGaps)},
			{ID: 1, CPU: -1, Loops: 80000, BusyLoops: 1200, Packets: 700, Gap: hist(LoopGaps)},
		},
		Pools: []stats.PoolSnapshot{
			{Name: "p0", Size: 4096, InUse: 128, AllocFail: 0, Copies: 3},
			{Name: "p1", Size: 8192, InUse: 0, AllocFail: 2},
		},
		Drops: []stats.DropCount{
			{Reason: "malformed", Count: 5}, {Reason: "too_big", Count: 10},
			{Reason: "no_buffer", Count: 5}, {Reason: "tx_full", Count: 2},
		},
		Histogram: []stats.NamedHist{
			{Owner: "edge/encap", Name: "latency", Help: "Time from rx to the end of the stage.", Unit: "ns", Hist: hist(Latencies)},
			{Owner: "coded/encoder", Name: "generation_size", Help: "Bytes in a closed generation.", Unit: "bytes",
				Hist: hist([]struct{ Value, N uint64 }{{1500, 3}, {6000, 9}})},
		},
	}
}
