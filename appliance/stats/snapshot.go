package stats

import "time"

// Snapshot is a reader's view of the whole appliance at one moment: what the
// control API's Stats returns, what /metrics exports and what the CLI prints.
type Snapshot struct {
	Time      time.Time
	Uptime    time.Duration
	Ports     []PortSnapshot
	Stages    []StageSnapshot
	Lcores    []LcoreSnapshot
	Pools     []PoolSnapshot
	Drops     []DropCount // totals by reason over every stage and port
	Histogram []NamedHist // stage histograms (latency, delay …)
}

// PortSnapshot is one port's counters.
type PortSnapshot struct {
	Name, Driver       string
	RxPackets, RxBytes uint64
	TxPackets, TxBytes uint64
	RxDropped          uint64
	TxDropped          uint64
	RxErrors           uint64
	TimestampSource    string
	LinkUp             bool
	Extra              map[string]uint64
}

// StageSnapshot is one stage instance's counters and drops.
type StageSnapshot struct {
	Pipeline string
	Name     string
	Kind     string
	Lcore    int // engine index of the lcore the instance runs on
	Packets  uint64
	Counters []CounterValue
	Drops    []DropCount
}

// CounterValue is a named counter's value.
type CounterValue struct {
	Name, Help string
	Value      uint64
}

// DropCount is the number of packets dropped for one reason.
type DropCount struct {
	Reason string
	Count  uint64
}

// LcoreSnapshot is one lcore's loop statistics.
type LcoreSnapshot struct {
	ID        int // engine index
	CPU       int // -1 when not pinned
	Loops     uint64
	BusyLoops uint64 // loops that moved at least one packet
	Packets   uint64
	Gap       *HistSnapshot // loop gaps in ns
}

// PoolSnapshot is one pool's occupancy.
type PoolSnapshot struct {
	Name      string
	Size      int
	InUse     int
	AllocFail uint64
	Copies    uint64
}

// NamedHist is a histogram with its owner, for export.
type NamedHist struct {
	Owner string // "pipeline/stage"
	Name  string
	Help  string
	Unit  string // "ns", "bytes" …
	Hist  *HistSnapshot
}

// Counter sums the counter called name over every instance of the stage
// called stage.
func (s *Snapshot) Counter(stage, name string) uint64 {
	var v uint64
	for _, st := range s.Stages {
		if st.Name != stage {
			continue
		}
		for _, c := range st.Counters {
			if c.Name == name {
				v += c.Value
			}
		}
	}
	return v
}
