// Package plugins holds the Stage contract and the registry of stage kinds.
// The built-in stages (forward, classify, generator, sink, link, counter) are
// in plugins/builtin; each family of its own in a package beside it (route,
// ioam, stamp, rlnc, external), and appliance/all links them all.
//
// A stage is a VPP-style vector node: Process runs over a whole burst, in place,
// and gives each packet a verdict. Plugin packages register their kinds from init,
// as Caddy modules and CoreDNS plugins do; the config names the kinds and their
// order.
package plugins

import (
	"context"
	"io"
	"log/slog"
	"net/netip"
	"os"

	"github.com/linerate/linerate/appliance/clock"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/appliance/stats"
)

// Stage processes bursts. Process works in place and never allocates. A packet it
// leaves at Continue goes on to the next stage; Forward, Drop and Consume take it
// out of the chain after this stage.
type Stage interface {
	Process(ctx *Context, b *packet.Burst)
}

// Producer is a stage that makes packets of its own: generators, probe senders,
// delay lines releasing what they held. Once per loop the engine gives it an empty
// burst; what it appends goes through the stages after it.
type Producer interface {
	Produce(ctx *Context, b *packet.Burst)
}

// Ticker is called about every TickInterval, for timers: send schedules, flushes,
// expiries.
type Ticker interface {
	Tick(ctx *Context)
}

// Starter is called on the stage's lcore before the first burst.
type Starter interface {
	Start(ctx *Context) error
}

// Stopper is called on the stage's lcore after the last burst. A stage that holds
// packets frees them here.
type Stopper interface {
	Stop(ctx *Context)
}

// Holder is a stage that keeps packets beyond a burst. The engine is empty only
// when every Holder holds nothing.
type Holder interface {
	Held() int
}

// Reloader takes a new config table while the engine runs, without dropping
// packets (linerate reload, SIGHUP), in two steps, so that a reload any
// instance of any stage refuses changes nothing anywhere. Reload checks the
// whole table and prepares what the stage will take, changing nothing; the
// commit it returns takes it, and cannot fail. The engine calls Reload on
// every instance of every stage whose table changed and then, only if none
// refused, every commit (and otherwise none). Both run on the stage's lcore
// between bursts, so they may read and change the stage's state directly;
// bursts may pass between the two. It is not the fast path: it may allocate.
// A stage that is not a Reloader keeps its table until a restart, and a
// reload that changes it is refused.
type Reloader interface {
	Reload(ctx *Context, cfg Config) (commit func(), err error)
}

// Config is a stage's own table from the config file.
type Config interface {
	// Decode decodes the stage's keys into v (a pointer to a struct with toml tags),
	// strictly: an unknown key is an error naming the file, line and key.
	Decode(v any) error
	// Where is "file:line" of the stage's table, for error messages.
	Where() string
}

// Env is what the engine offers a stage on its lcore. Context wraps it.
type Env interface {
	// Emit queues h for transmit on port, outside the chain: for packets a stage
	// made, never for one still in the burst (Forward that). A full tx buffer drops
	// it as emit_full and Emit reports false.
	Emit(h packet.Handle, port uint16) bool
	// TxDepth is the occupancy of this lcore's tx buffer towards port.
	TxDepth(port uint16) int
	// Owner is the instance that owns a session key.
	Owner(key uint64) int
	// Handoff marks h, a packet of the burst, for instance owner, where it resumes
	// at the current stage. The engine moves it when the stage returns; a full
	// ring drops it as ring_full. Handoff reports false for a bad owner.
	Handoff(h packet.Handle, owner int) bool
	// NumInstances is the number of instances of this pipeline: one per lcore
	// that runs its chain.
	NumInstances() int
	// Free gives h up, uncounted: for a stage that consumed a packet or
	// replaced it by a copy. The buffer goes back to its pool at the lcore's
	// next quiescent point, never while the burst or the running stage can
	// still refer to it (docs/architecture.md, "Who owns a buffer").
	Free(h packet.Handle)
}

// Context is a stage's view of its lcore during a call.
type Context struct {
	Instance int   // this instance's index among its pipeline's instances (one per lcore)
	Now      int64 // monotonic ns: the rx time of this burst, or the loop time; see Stamp
	Clock    clock.Clock
	Log      *slog.Logger // rate-limited
	Stage    int          // position of the running stage in the chain
	Env      Env
	Out      *Output // where reports go; nil: standard output, as text
}

// Output is where a stage writes a report its user asked to see on standard
// output (a STAMP collector's report = "-"), as the program that runs the
// engine wants it: text on a writer that keeps it off a terminal's live
// line, or, under systemd or a JSON log, one log record per report, since
// text there would land among the log's records.
type Output struct {
	Text    io.Writer    // nil: os.Stdout
	Records *slog.Logger // set: reports are records, whatever the log level
}

// Report writes one report: text (the whole of it, written at once) or,
// when Out asks for records, one record with msg and attrs.
func (c *Context) Report(text []byte, msg string, attrs ...slog.Attr) error {
	if c.Out != nil && c.Out.Records != nil {
		c.Out.Records.LogAttrs(context.Background(), slog.LevelInfo, msg, attrs...)
		return nil
	}
	_, err := c.Out.Writer().Write(text)
	return err
}

// Writer is where text for standard output goes: Text, or os.Stdout. A
// stream (an export to "-") writes there even when reports are records.
func (o *Output) Writer() io.Writer {
	if o == nil || o.Text == nil {
		return os.Stdout
	}
	return o.Text
}

// BurstForwarder is an Env that takes a whole burst for one port at once: no
// verdict per packet and no partition pass. The engine's Env is one.
type BurstForwarder interface {
	ForwardBurst(b *packet.Burst, port uint16)
}

// ForwardBurst sends every packet of b to port and empties b: for a stage that
// forwards the whole burst to one port, the common case of a forwarding chain's
// last stage. Every packet of b must still be at Continue.
func (c *Context) ForwardBurst(b *packet.Burst, port uint16) {
	if f, ok := c.Env.(BurstForwarder); ok {
		f.ForwardBurst(b, port)
		return
	}
	for i := 0; i < b.N; i++ {
		b.H[i].P().Forward(port)
	}
}

// Stamp reads the clock for a time a stage writes into a packet (STAMP's T1
// and T3) and moves Now on to it, so the stages after it in the chain (a
// link's delay, a rate) count from that same reading: a timestamp taken
// after Now would otherwise shorten every delay measured from it by the time
// between the two readings.
func (c *Context) Stamp() int64 {
	if t := c.Clock.Now(); t > c.Now {
		c.Now = t
	}
	return c.Now
}

// Emit queues h for transmit on port; see Env.
func (c *Context) Emit(h packet.Handle, port uint16) bool { return c.Env.Emit(h, port) }

// Hold records that the stage keeps h beyond the burst (a delay line, a queue
// for Produce): a checked build then refuses any other owner's hand-over of
// it. It costs nothing in an ordinary build.
func (c *Context) Hold(h packet.Handle) { packet.Own(h, packet.OpHold, packet.NoOwner, c.Stage) }

// Owner is the instance that owns key.
func (c *Context) Owner(key uint64) int { return c.Env.Owner(key) }

// Mine reports whether this instance owns key.
func (c *Context) Mine(key uint64) bool {
	return c.Env.NumInstances() <= 1 || c.Env.Owner(key) == c.Instance
}

// Handoff sends h to the instance that owns its session.
func (c *Context) Handoff(h packet.Handle, owner int) bool { return c.Env.Handoff(h, owner) }

// PortInfo is what a stage may know about a port at setup.
type PortInfo struct {
	ID    uint16
	Name  string
	Pool  packet.Pool // where packets emitted towards this port come from
	MTU   int
	MAC   [6]byte
	Queue int // for ring-like ports: number of queues
	// Internal ports (mem links, rings) feed no hardware: holding their packets
	// starves nothing.
	Internal bool
	// Routed mode (docs/routing.md). MAC above is the config's mac when it sets
	// one, otherwise DriverMAC, the driver's own: the interface's address (for a
	// TAP port, the host kernel's side). Addrs are the port's addresses with
	// their on-link prefix lengths; IfID is its interface id.
	DriverMAC [6]byte
	Addrs     []netip.Prefix
	IfID      uint32
	// Ifindex is the kernel's index of the port's network interface, 0 for
	// a port on none (ports.Info.Ifindex): how an in-kernel offload (XDP)
	// knows the port a packet came in on.
	Ifindex int
}

// Ports resolves port names at setup.
type Ports interface {
	Port(name string) (PortInfo, bool)
	All() []PortInfo
}

// Setup is what a stage factory gets: its config table and the engine's
// resources. It is valid only during the call.
type Setup struct {
	Kind   string
	Name   string // instance name: the config's "name", or kind#index
	Config Config
	Ports  Ports
	// Instance is this instance's index among its pipeline's instances, one
	// per lcore that runs the pipeline; NumInstances is how many there are.
	// Session owners (Env.Owner) are instance indices.
	Instance     int
	NumInstances int
	Clock        clock.Clock
	Log          *slog.Logger
	// Counters is the stage instance's counter set; the engine publishes it once
	// per burst and exports it.
	Counters *stats.Set
	// Histograms registers a named histogram for export.
	Histograms func(name, help string, unit string) *stats.Histogram
	// Pool makes or finds a named slab pool for stages that keep packets.
	Pool func(name string, buffers, dataRoom int) (packet.Pool, error)
	// Shared returns the value stored under key for this pipeline, making it with
	// mk on first use: state shared by the instances of one stage across lcores
	// (session tables owned per lcore, control handles). Setup-time only.
	Shared func(key string, mk func() any) any
	// Global is Shared for the whole engine: state that stages of any pipeline
	// share, such as routed mode's route table and neighbour cache. Setup-time
	// only.
	Global func(key string, mk func() any) any
	// Section is a top-level table of the config file that belongs to the
	// stage's plugin ([[routes]] to routed mode): a Config holding that one
	// key, empty when the file has none. The plugin registers it with
	// config.RegisterSection, so the file was checked against it at parse.
	Section func(name string) Config
}

// TickInterval is how often Ticker.Tick runs, at most.
const TickInterval = 10_000 // ns

// Finite is a source that ends (a generator with a count or a duration). An
// engine whose sources are all finite stops by itself once they are done and
// nothing is left in flight. Done is called from a control goroutine, so it
// reads state the lcore publishes atomically.
type Finite interface {
	Done() bool
}
