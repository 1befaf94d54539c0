// Package ports holds the Port contract and the registry of datapath drivers.
// Each driver lives in its own package (ports/mem, ports/pcap, ports/afpacket,
// ports/dpdk, ports/xdp) and registers itself from init.
package ports

import (
	"fmt"
	"log/slog"
	"sort"
	"sync"

	"github.com/linerate/linerate/appliance/clock"
	"github.com/linerate/linerate/appliance/packet"
)

// Port is one datapath endpoint. Each rx queue is polled by one lcore and each tx
// queue is fed by one lcore, so a queue never needs a lock.
type Port interface {
	Name() string
	// RxBurst appends up to b.Room() received packets to b and returns how many.
	// It sets each packet's InPort, InQueue and RxTime (when it has a hardware or
	// file timestamp; the engine stamps the rest).
	RxBurst(queue int, b *packet.Burst) int
	// TxBurst transmits from the front of b and returns how many it took. Packets
	// not taken stay with the caller; the port owns (and frees) the ones it took.
	TxBurst(queue int, b *packet.Burst) int
	// Pool is where packets emitted towards this port come from.
	Pool() packet.Pool
	Info() Info
	Stats() Stats
	Close() error
}

// Info describes a port's shape.
type Info struct {
	Driver   string
	RxQueues int
	TxQueues int
	MTU      int
	MAC      [6]byte
	// TimestampSource says where rx timestamps come from: "engine", "hardware",
	// "file", "kernel".
	TimestampSource string
	// OwnPoolOnly: the port can transmit only buffers of its own pool (DPDK, AF_XDP);
	// the engine copies others, and counts the copy.
	OwnPoolOnly bool
	// LinkUp reports the link state where the driver knows it.
	LinkUp bool
}

// Stats are a port's counters.
type Stats struct {
	RxPackets, RxBytes uint64
	TxPackets, TxBytes uint64
	RxDropped          uint64 // lost before reaching the engine (ring full, too big)
	TxDropped          uint64
	RxErrors           uint64
	// Extra holds driver counters (DPDK xstats, TPACKET stats) by name.
	Extra map[string]uint64
}

// Finite is a port whose input ends (a pcap file read once). The engine stops by
// itself when every finite input is done and nothing is left in flight.
type Finite interface {
	Done() bool
}

// Starter is a port that needs the engine's clock or a start signal (a pcap file
// replayed at file timing).
type Starter interface {
	Start(c clock.Clock) error
}

// Config is a port's own table from the config file.
type Config interface {
	Decode(v any) error
	Where() string
}

// Setup is what a driver factory gets.
type Setup struct {
	Name     string
	Config   Config
	Pool     packet.Pool // the pool the port's rx buffers come from
	RxQueues int
	TxQueues int
	Clock    clock.Clock
	Log      *slog.Logger
	// Peer finds another port by name, for drivers that join ports (mem links).
	// It may return nil when the peer is not made yet; such drivers join lazily.
	Peer func(name string) Port
}

// Factory opens a port.
type Factory func(s *Setup) (Port, error)

var (
	mu      sync.RWMutex
	drivers = map[string]Factory{}
)

// Register adds a driver. Driver packages call it from init.
func Register(driver string, f Factory) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := drivers[driver]; dup {
		panic(fmt.Sprintf("ports: driver %q registered twice", driver))
	}
	drivers[driver] = f
}

// Open opens a port with a registered driver.
func Open(driver string, s *Setup) (Port, error) {
	mu.RLock()
	f, ok := drivers[driver]
	mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("port %q: unknown driver %q (have %v)", s.Name, driver, Drivers())
	}
	return f(s)
}

// Drivers lists the registered drivers.
func Drivers() []string {
	mu.RLock()
	defer mu.RUnlock()
	var out []string
	for d := range drivers {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}
