// Package appliance is linerate's engine: it builds pools, ports and pipelines
// from a config, runs each pipeline's chain of stages on pinned lcores, moves
// packets between them through rings, and exposes stats and control.
//
// One job per file:
//
//	engine.go     Options, Engine, New and build: the order things are made in
//	pools.go      packet pools, shared and per stage
//	placement.go  which CPU each lcore and the control plane run on
//	ports.go      opening ports, port info for stages, rx placement checks
//	pipelines.go  pipelines, their instances and stages
//	lifecycle.go  Start, the watch loop and automatic exit
//	drain.go      Stop, drain and release of every buffer
//	commands.go   Do and Synchronize: running code on an lcore
//	snapshot.go   the stats snapshot
//	status.go     Status and stage instances, for the control plane
//	reload.go     Reload of reloadable config
//	offload.go    stages' in-kernel programs, handed to the ports that host them
//	plan.go       what a dry run finds of this host: Options.Plan
//	lcore.go      one polling thread: its loop, frees and commands
//	instance.go   one pipeline instance on an lcore: rx, the chain, handoffs
//	tx.go         per-port tx buffers, flush and copy to a foreign pool
//	env.go        plugins.Env for a stage
package appliance

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/linerate/linerate/appliance/clock"
	"github.com/linerate/linerate/appliance/offload"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/plugins"
	"github.com/linerate/linerate/ports"
)

// Options are how a program runs an engine, beside the config file.
type Options struct {
	Log   *slog.Logger
	Clock clock.Clock // nil: the host clock
	// TuneRuntime lets the engine set GOMAXPROCS, GOGC, GOMEMLIMIT and thread
	// affinity for the whole process. The CLI does; tests and libraries do not.
	TuneRuntime bool
	// DryRun builds every stage and checks every key but opens no port and starts
	// nothing: `linerate validate`.
	DryRun bool
	// Offline, with DryRun, checks the config alone and nothing of this host
	// (interfaces, devices, files): `linerate validate --offline`.
	Offline bool
	// Plan, in a dry run that checks this host (DryRun without Offline),
	// hears what each port and each offloading stage will get of it: as
	// asked, by a fallback, or not at all, and why (linerate doctor -c,
	// linerate validate). Nil when nobody listens.
	Plan func(ports.Finding)
	// Manual runs no lcore goroutines: the caller drives the loops with Step, in
	// virtual time (simulations).
	Manual  bool
	Version string
	// Output is where stages write the reports their users asked for on
	// standard output (plugins.Output); zero: os.Stdout, as text.
	Output plugins.Output
}

// Phases of the engine.
const (
	phaseNew int32 = iota
	phaseRun
	phaseDrain
	phaseStop
)

const (
	pollBusy = iota
	pollAdaptive
)

// Engine runs one config.
type Engine struct {
	cfg *config.File
	// cur is the config last applied (by New or Reload), under reloadMu.
	cur      *config.File
	reloadMu sync.Mutex
	reloads  atomic.Uint64
	opt      Options
	log      *slog.Logger
	clock    clock.Clock
	ownClk   *clock.System
	poll     int
	rt       rtConfig
	phase    atomic.Int32
	started  time.Time

	pools     map[string]packet.Pool
	ownPools  []*packet.Slab
	ports     []*portEntry
	portIndex map[string]*portEntry
	lcores    []*lcore
	pipelines []*pipeline
	global    map[string]any // plugins.Setup.Global
	offloads  []*offload.Request

	// manualMu orders a Manual engine's steps with its readers: its lcores
	// publish their counters only every publishEvery busy loops, as running
	// ones do, and Snapshot publishes the rest under it.
	manualMu sync.Mutex

	wg       sync.WaitGroup
	done     chan struct{}
	stopOnce sync.Once
	closed   bool

	// driverWarnings are what port drivers reported through Setup.Warn.
	driverWarnings []string
}

// New builds an engine from a config: pools, ports (unless DryRun), lcores and a
// chain of stage instances per lcore. Errors name the config file and line.
func New(cfg *config.File, o Options) (*Engine, error) {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	e := &Engine{cfg: cfg, cur: cfg, opt: o, log: o.Log, pools: map[string]packet.Pool{}, portIndex: map[string]*portEntry{},
		done: make(chan struct{})}
	if err := e.build(); err != nil {
		e.release()
		for _, s := range e.ownPools {
			_ = s.Close()
		}
		return nil, err
	}
	return e, nil
}

func (e *Engine) build() error {
	cfg, o := e.cfg, e.opt
	if o.Clock == nil {
		e.ownClk = clock.NewSystem()
		e.clock = e.ownClk
	} else {
		e.clock = o.Clock
	}
	switch cfg.Engine.Poll {
	case "busy":
		e.poll = pollBusy
	default:
		e.poll = pollAdaptive
	}
	if err := e.buildPools(); err != nil {
		return err
	}
	cpus, err := e.lcoreCPUs()
	if err != nil {
		return err
	}
	for i, c := range cpus {
		e.lcores = append(e.lcores, newLcore(e, i, c))
	}
	e.rt = rtConfig{pin: cfg.Engine.Pin == nil || *cfg.Engine.Pin, lcoreCPUs: cpus, gogc: cfg.Engine.GOGC,
		memLimit: int64(cfg.Engine.MemoryLimit), tune: o.TuneRuntime && !o.DryRun && !o.Manual}
	if o.Manual {
		e.rt.pin = false
	}
	e.rt.controlCPUs = controlCPUs(cfg.Engine.ControlCPUs, cpus)
	if err := e.openPorts(); err != nil {
		return err
	}
	for _, pc := range cfg.Pipelines {
		if err := e.buildPipeline(pc); err != nil {
			return err
		}
	}
	if err := e.checkRx(); err != nil {
		return err
	}
	err = e.composeOffloads()
	if err == nil {
		err = e.offloadKernel()
	}
	e.planOffloads()
	if err != nil {
		return err
	}
	txSize := cfg.Engine.TxBuffer
	if txSize <= 0 {
		txSize = 256
	}
	for _, lc := range e.lcores {
		lc.setupTx(e.ports, txSize)
	}
	return nil
}

// Clock is the engine's time source.
func (e *Engine) Clock() clock.Clock { return e.clock }

// Lcores is the number of lcores.
func (e *Engine) Lcores() int { return len(e.lcores) }

// Port returns a port by name.
func (e *Engine) Port(name string) (ports.Port, bool) {
	pe := e.portIndex[name]
	if pe == nil || pe.port == nil {
		return nil, false
	}
	return pe.port, true
}

// Stages returns the instances of a stage by name, one per lcore, for programs
// and tests that talk to a stage directly.
func (e *Engine) Stages(name string) []plugins.Stage {
	var out []plugins.Stage
	for _, pl := range e.pipelines {
		for _, in := range pl.instances {
			for _, s := range in.stages {
				if s.name == name {
					out = append(out, s.st)
				}
			}
		}
	}
	return out
}

// located prefixes err with where (file:line) and what, unless err already
// names its own place in the file: a key's error is more precise than its
// table's.
func located(err error, where, what string) error {
	var ce *config.Error
	if errors.As(err, &ce) && ce.Line > 0 {
		return err
	}
	if strings.HasPrefix(err.Error(), what+": ") {
		// A driver's constructor names its port, for callers without an
		// engine.
		return fmt.Errorf("%s: %w", where, err)
	}
	if rest, ok := strings.CutPrefix(err.Error(), where+": "); ok && where != "" {
		// A stage that named its own location (s.Config.Where()): once.
		return &locatedError{msg: where + ": " + what + ": " + rest, err: err}
	}
	return fmt.Errorf("%s: %s: %w", where, what, err)
}

// locatedError is an error that said where it was, said once, with what
// was there in between.
type locatedError struct {
	msg string
	err error
}

func (e *locatedError) Error() string { return e.msg }
func (e *locatedError) Unwrap() error { return e.err }
