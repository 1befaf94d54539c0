// Package ports holds the Port contract and the registry of datapath drivers.
// Each driver lives in its own package (ports/mem, ports/pcap, ports/afpacket,
// ports/dpdk, ports/xdp) and registers itself from init.
package ports

import (
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"

	"github.com/linerate/linerate/appliance/clock"
	"github.com/linerate/linerate/appliance/packet"
)

// Port is one datapath endpoint. Each rx queue is polled by one lcore and each tx
// queue is fed by one lcore, so a queue never needs a lock.
type Port interface {
	Name() string
	// RxBurst appends up to b.Room() received packets to b and returns how many.
	// It may set RxTime (a hardware or file timestamp, with Info.TimestampSource
	// saying so); the engine sets InPort, InQueue and the other timestamps.
	RxBurst(queue int, b *packet.Burst) int
	// TxBurst transmits from the front of b and returns how many it took, n. It
	// does not modify b: the port now owns (and frees) b.H[:n]; b.H[n:b.N] stay
	// with the caller.
	TxBurst(queue int, b *packet.Burst) int
	// Pool is where packets emitted towards this port come from.
	Pool() packet.Pool
	Info() Info
	// Stats is the port's counters since it opened, from any goroutine; a
	// counter the kernel resets on each read is summed by the port. The
	// engine reads it a last time once its lcores have stopped, before
	// Close: what the run's summary shows.
	Stats() Stats
	Close() error
}

// ParallelCloser is a Port whose Close may run while other ports close: its
// close waits on the kernel (an AF_PACKET socket's release waits for an RCU
// grace period), not on state it shares. The engine closes such ports at
// once, so that a restart's forwarding gap is one wait, not one a port.
type ParallelCloser interface {
	ParallelClose()
}

// Info describes a port's shape.
type Info struct {
	Driver   string
	RxQueues int
	TxQueues int
	MTU      int
	MAC      [6]byte
	// TimestampSource says where rx timestamps come from: "engine" (the
	// lcore's clock when it takes the burst), "kernel" (the kernel's
	// software stamp), "hardware" (the NIC's), "file" (a capture's record
	// times). A port whose source is not "engine" sets RxTime itself.
	TimestampSource string
	// TimestampDetail says, for people, where on the receive path the stamp
	// is taken and how far from the wire it can be.
	TimestampDetail string
	// OwnPoolOnly: the port can transmit only buffers of its own pool (DPDK, AF_XDP);
	// the engine copies others, and counts the copy.
	OwnPoolOnly bool
	// LinkUp reports the link state where the driver knows it.
	LinkUp bool
	// Ifindex is the kernel's index of the port's network interface (xdp,
	// afpacket), in the interface's network namespace; 0 where the driver
	// has none. The kernel's programs on the interface know it by this.
	Ifindex int
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

// RxStamper is a port that stamps received packets itself, in the per-packet
// pass its driver makes anyway: InPort, InQueue, RxTime from CLOCK_MONOTONIC
// (the engine's host clock) and a clear verdict. The engine then skips its own
// stamping pass for that queue and takes rx bytes from the driver's Stats. The
// engine asks only when its clock is the host's.
type RxStamper interface {
	StampRx(queue int, port uint16) bool
}

// HandleTx is a port that transmits straight from the engine's tx buffer and
// does the engine's per-packet tx work in its own pass: it writes the transit
// delay a stage asked for (packet.Packet.SetTxDelay) as of now on each packet
// it takes, and counts tx bytes in its Stats. It need not store TxTime: from
// then on the packet is the driver's, and nothing reads it. It stops before the
// first packet that is not one of its own buffers and reports foreign, so the
// engine copies that one (counted) and goes on; fewer taken without foreign
// means its ring is full. The engine uses it only when its clock is the host's.
type HandleTx interface {
	TxHandles(queue int, hs []packet.Handle, now int64) (n int, foreign bool)
}

// Reloader is a port that takes some of its driver keys anew while it runs
// (linerate reload): the xdp port's match rules. CheckReload checks the whole
// table, refuses a change of any other key, and changes nothing. Reload takes
// the table; on an error the port keeps its old one.
type Reloader interface {
	CheckReload(cfg Config) error
	Reload(cfg Config) error
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
	// DryRun asks the driver only to decode and check its keys (linerate validate):
	// it opens nothing and returns a nil Port.
	DryRun bool
	// Offline, with DryRun, checks the keys alone, nothing of this host (its
	// interfaces, devices, files): for a config meant for another machine
	// (linerate validate --offline).
	Offline bool
	// Section returns a top-level table of the config file that belongs to the
	// driver's runtime, such as [dpdk]; an empty Config when the file has none.
	Section func(name string) Config
	// Lcores are the CPUs the engine runs lcores on, for drivers whose runtime
	// must know them (DPDK's EAL core list).
	Lcores []int
	// MTU is the port's mtu key, 0 when the file leaves it out. A driver with a
	// device sets the device's MTU to it (and puts the old one back at Close),
	// or refuses it; with 0 it keeps the device's. The engine takes Info's
	// MTU, or the config's default when Info has none.
	MTU int
	// Warn reports something `linerate validate` should print without failing (a
	// NIC without hugepages or vfio-pci). Nil when nobody listens.
	Warn func(msg string)
	// Plan, in a dry run that checks this host, hears what the port will get
	// of the host: each thing it needs, as asked, by a fallback, or not at all
	// (linerate doctor -c, linerate validate). Nil when nobody listens.
	Plan func(Finding)
}

// Outcome is what a port or stage gets of something it needs on this host.
type Outcome string

const (
	// AsAsked: it runs as the config asks.
	AsAsked Outcome = "ok"
	// FallsBack: it runs, on something less (the engine's clock for the
	// kernel's rx stamps, a stage in Go for its XDP offload); Detail says
	// what and why.
	FallsBack Outcome = "fallback"
	// Fails: it cannot run here; Detail names what is missing.
	Fails Outcome = "fail"
)

// Finding is one thing a port (or stage) needs of the host, and what it gets.
type Finding struct {
	Subject string  // `port "s0"`, `stage "reflector"`
	Need    string  // what it needs: "rx timestamps", "XDP attach"
	Outcome Outcome // ok, fallback or fail
	Detail  string  // what it uses, or uses instead and why, or what is missing
}

// LcoreHook is a driver runtime that must know each lcore thread: DPDK registers
// it as an EAL thread. Start runs on the lcore's locked, pinned thread before its
// first loop; Stop after its last.
type LcoreHook interface {
	LcoreStart(cpu int) error
	LcoreStop()
}

var hooks []LcoreHook

// RegisterLcoreHook adds a hook the engine calls on every lcore thread. Drivers
// register it when their first port opens.
func RegisterLcoreHook(h LcoreHook) {
	mu.Lock()
	defer mu.Unlock()
	for _, x := range hooks {
		if x == h {
			return
		}
	}
	hooks = append(hooks, h)
}

// LcoreHooks lists the registered hooks.
func LcoreHooks() []LcoreHook {
	mu.RLock()
	defer mu.RUnlock()
	return append([]LcoreHook(nil), hooks...)
}

var atExit []func()

// AtExit registers f to run when the process is done with every engine: driver
// runtimes that must be ended explicitly (DPDK's rte_eal_cleanup). The linerate
// command calls RunAtExit before it exits.
func AtExit(f func()) {
	mu.Lock()
	defer mu.Unlock()
	atExit = append(atExit, f)
}

// RunAtExit runs the AtExit functions, last registered first, once each.
func RunAtExit() {
	mu.Lock()
	fs := atExit
	atExit = nil
	mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}

// Joiner is a port that must be joined to other ports once all are open (mem
// links find their peer). The engine calls Join before any burst.
type Joiner interface {
	Join(lookup func(name string) Port) error
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
		return nil, fmt.Errorf("unknown driver %q (this binary has %s)", driver, strings.Join(Drivers(), ", "))
	}
	return f(s)
}

var absent = map[string]string{}

// RegisterAbsent names a driver this binary does not have, with where to get
// it ("in the build with -tags dpdk"): what a config naming it is told.
func RegisterAbsent(driver, where string) {
	mu.Lock()
	defer mu.Unlock()
	absent[driver] = where
}

// Absent says where to get a driver this binary does not have, if known.
func Absent(driver string) (string, bool) {
	mu.RLock()
	defer mu.RUnlock()
	w, ok := absent[driver]
	return w, ok
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
