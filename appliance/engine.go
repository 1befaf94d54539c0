// Package appliance is linerate's engine: it builds pools, ports and pipelines
// from a config, runs each pipeline's chain of stages on pinned lcores, moves
// packets between them through rings, and exposes stats and control.
package appliance

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/linerate/linerate/appliance/clock"
	"github.com/linerate/linerate/appliance/cpuset"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/appliance/ring"
	"github.com/linerate/linerate/appliance/stats"
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
	// Manual runs no lcore goroutines: the caller drives the loops with Step, in
	// virtual time (simulations).
	Manual  bool
	Version string
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

	wg       sync.WaitGroup
	done     chan struct{}
	stopOnce sync.Once
	closed   bool

	// driverWarnings are what port drivers reported through Setup.Warn.
	driverWarnings []string
}

type portEntry struct {
	id           uint16
	name         string
	driver       string
	port         ports.Port
	info         ports.Info
	pool         packet.Pool
	poolID       uint16
	ownPoolOnly  bool
	engineStamps bool
	internal     bool
	// driverRxBytes: the driver stamps rx itself, so rx bytes are the driver's.
	driverRxBytes bool
	// handleTx: the driver transmits from the tx buffer and stamps TxTime itself;
	// tx bytes are then the driver's.
	handleTx ports.HandleTx
	cfgPort  config.Port
}

type pipeline struct {
	name      string
	instances []*instance
	handoff   [][]*ring.Handles // [from][to]
	shared    map[string]any
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
	txSize := cfg.Engine.TxBuffer
	if txSize <= 0 {
		txSize = 256
	}
	for _, lc := range e.lcores {
		lc.setupTx(e.ports, txSize)
	}
	return nil
}

func (e *Engine) buildPools() error {
	for _, pc := range e.cfg.Pools {
		s, err := packet.NewSlab(packet.SlabConfig{Name: pc.Name, Buffers: pc.Buffers, DataRoom: pc.DataRoom, Headroom: pc.Headroom})
		if err != nil {
			return fmt.Errorf("%s: %w", pc.Where(), err)
		}
		e.pools[pc.Name] = s
		e.ownPools = append(e.ownPools, s)
	}
	if _, ok := e.pools["default"]; !ok {
		s, err := packet.NewSlab(packet.SlabConfig{Name: "default", Buffers: 16384})
		if err != nil {
			return err
		}
		e.pools["default"] = s
		e.ownPools = append(e.ownPools, s)
	}
	return nil
}

// lcoreCPUs is the ordered set of CPUs the pipelines run on. A pipeline without
// lcores runs on the last CPU the process may use.
func (e *Engine) lcoreCPUs() ([]int, error) {
	allowed := cpuset.Allowed()
	def := allowed[len(allowed)-1]
	seen := map[int]bool{}
	var out []int
	for _, p := range e.cfg.Pipelines {
		list := p.CPUs
		if len(list) == 0 {
			list = []int{def}
		}
		for _, c := range list {
			if c < 0 {
				return nil, fmt.Errorf("%s: pipeline %q: lcore %d is not a CPU", p.Where(), p.Name, c)
			}
			if !seen[c] {
				seen[c] = true
				out = append(out, c)
			}
		}
	}
	if len(out) == 0 {
		out = []int{def}
	}
	return out, nil
}

func controlCPUs(cfg, lcores []int) []int {
	if len(cfg) > 0 {
		return cfg
	}
	used := map[int]bool{}
	for _, c := range lcores {
		used[c] = true
	}
	var out []int
	all := cpuset.Allowed()
	for _, c := range all {
		if !used[c] {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return all
	}
	return out
}

func (e *Engine) openPorts() error {
	for i, pc := range e.cfg.Ports {
		pool := e.pools[pc.Pool]
		if pool == nil {
			return fmt.Errorf("%s: port %q: no pool %q", pc.Where(), pc.Name, pc.Pool)
		}
		txq := pc.TxQueues
		if txq == 0 {
			txq = len(e.lcores)
		}
		pe := &portEntry{id: uint16(i), name: pc.Name, driver: pc.Driver, pool: pool, poolID: pool.ID(), cfgPort: pc}
		name := pc.Name
		mtu := 0 // left out: the device keeps its own
		if pc.MTUSet() {
			mtu = pc.MTU
		}
		s := &ports.Setup{Name: pc.Name, Config: pc.Table, Pool: pool, RxQueues: pc.RxQueues, TxQueues: txq,
			Clock: e.clock, Log: e.log.With("port", pc.Name), DryRun: e.opt.DryRun, Offline: e.opt.Offline, Section: e.section,
			Lcores: e.rt.lcoreCPUs, MTU: mtu,
			Warn: func(msg string) { e.driverWarnings = append(e.driverWarnings, fmt.Sprintf("port %q: %s", name, msg)) }}
		if err := knownDriver(pc); err != nil {
			return err
		}
		p, err := ports.Open(pc.Driver, s)
		if err != nil {
			return located(err, pc.Where(), fmt.Sprintf("port %q", pc.Name))
		}
		if e.opt.DryRun {
			pe.info = ports.Info{Driver: pc.Driver, RxQueues: pc.RxQueues, TxQueues: txq, MTU: pc.MTU}
		} else {
			pe.port = p
			pe.info = p.Info()
			// A port with buffers of its own (DPDK mbufs) receives into them, and
			// packets emitted towards it come from them.
			if own := p.Pool(); own != nil && own != pool {
				pe.pool, pe.poolID = own, own.ID()
				if _, dup := e.pools[own.Name()]; !dup {
					e.pools[own.Name()] = own
				}
			}
			if pe.info.TxQueues < len(e.lcores) {
				return fmt.Errorf("%s: port %q has %d tx queues; each of the %d lcores needs its own",
					pc.Where(), pc.Name, pe.info.TxQueues, len(e.lcores))
			}
		}
		if pe.info.MTU == 0 {
			pe.info.MTU = pc.MTU
		}
		pe.ownPoolOnly = pe.info.OwnPoolOnly
		pe.engineStamps = pe.info.TimestampSource == "" || pe.info.TimestampSource == "engine"
		_, pe.internal = p.(interface{ InFlight() int })
		e.ports = append(e.ports, pe)
		e.portIndex[pc.Name] = pe
	}
	if e.opt.DryRun {
		return nil
	}
	lookup := func(name string) ports.Port {
		if pe := e.portIndex[name]; pe != nil {
			return pe.port
		}
		return nil
	}
	for _, pe := range e.ports {
		if j, ok := pe.port.(ports.Joiner); ok {
			if err := j.Join(lookup); err != nil {
				return fmt.Errorf("%s: %w", pe.cfgPort.Where(), err)
			}
			pe.info = pe.port.Info()
			if pe.info.MTU == 0 {
				pe.info.MTU = pe.cfgPort.MTU // as above: the re-read must not lose it
			}
		}
	}
	return nil
}

// section hands a driver its top-level section (config.RegisterSection).
func (e *Engine) section(name string) ports.Config { return e.cfg.Section(name) }

func (e *Engine) lcoreByCPU(cpu int) *lcore {
	for _, lc := range e.lcores {
		if lc.cpu == cpu {
			return lc
		}
	}
	return nil
}

func (e *Engine) buildPipeline(pc config.Pipeline) error {
	pl := &pipeline{name: pc.Name, shared: map[string]any{}}
	cpus := pc.CPUs
	if len(cpus) == 0 {
		cpus = []int{e.lcores[len(e.lcores)-1].cpu}
		if all := cpuset.Allowed(); len(all) > 0 {
			cpus = []int{all[len(all)-1]}
		}
	}
	for i, cpu := range cpus {
		lc := e.lcoreByCPU(cpu)
		in := &instance{pipe: pl, idx: i, lc: lc}
		in.ctx = plugins.Context{Instance: i, Clock: e.clock, Log: rateLimited(e.log.With("pipeline", pc.Name, "lcore", cpu))}
		in.ctx.Env = env{in}
		pl.instances = append(pl.instances, in)
		lc.instances = append(lc.instances, in)
	}
	// Rx queues are spread round-robin over the instances.
	var rxs []rxQueue
	for _, r := range pc.Rx {
		name, q := r, -1
		if k := strings.LastIndexByte(r, ':'); k > 0 {
			n, err := strconv.Atoi(r[k+1:])
			if err != nil {
				return fmt.Errorf("%s: pipeline %q: rx %q: bad queue", pc.Where(), pc.Name, r)
			}
			name, q = r[:k], n
		}
		pe := e.portIndex[name]
		if pe == nil {
			return fmt.Errorf("%s: pipeline %q: rx port %q does not exist", pc.Where(), pc.Name, name)
		}
		if q >= pe.info.RxQueues && !e.opt.DryRun {
			return fmt.Errorf("%s: pipeline %q: port %q has no rx queue %d", pc.Where(), pc.Name, name, q)
		}
		if q >= 0 {
			rxs = append(rxs, rxQueue{port: pe, queue: q, internal: pe.internal})
			continue
		}
		for k := 0; k < max(pe.info.RxQueues, 1); k++ {
			rxs = append(rxs, rxQueue{port: pe, queue: k, internal: pe.internal})
		}
	}
	if !e.opt.DryRun {
		for i, rq := range rxs {
			in := pl.instances[i%len(pl.instances)]
			in.rx = append(in.rx, rq)
		}
	}
	if len(pc.Stages) == 0 {
		return fmt.Errorf("%s: pipeline %q has no stages", pc.Where(), pc.Name)
	}
	for _, in := range pl.instances {
		for k, sc := range pc.Stages {
			si, err := e.buildStage(pl, in, k, sc)
			if err != nil {
				return err
			}
			in.stages = append(in.stages, si)
			if si.producer != nil {
				in.producers = append(in.producers, k)
			}
			if _, ok := si.st.(plugins.Ticker); ok {
				in.tickers = append(in.tickers, k)
			}
		}
		in.unclaimed = in.stages[len(in.stages)-1]
	}
	n := len(pl.instances)
	pl.handoff = make([][]*ring.Handles, n)
	for i := range pl.handoff {
		pl.handoff[i] = make([]*ring.Handles, n)
		for j := range pl.handoff[i] {
			if i != j {
				size := e.cfg.Engine.RingSize
				if size <= 0 {
					size = 1024
				}
				r := ring.NewHandles(size)
				pl.handoff[i][j] = r
				pl.instances[j].handoffIn = append(pl.instances[j].handoffIn, r)
			}
		}
	}
	e.pipelines = append(e.pipelines, pl)
	return nil
}

func (e *Engine) buildStage(pl *pipeline, in *instance, k int, sc config.Stage) (*stageInst, error) {
	kind, ok := plugins.Lookup(sc.Kind)
	if !ok {
		var names []string
		for _, k := range plugins.Kinds() {
			names = append(names, k.Name)
		}
		msg := fmt.Sprintf("stage kind %q is unknown", sc.Kind)
		if best := config.Suggest(sc.Kind, names); best != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", best)
		}
		return nil, fmt.Errorf("%s: %s; 'linerate stages' lists the %d kinds this binary has", sc.Where(), msg, len(names))
	}
	name := sc.Name
	if name == "" {
		name = fmt.Sprintf("%s#%d", sc.Kind, k)
	}
	si := &stageInst{kind: sc.Kind, name: name, counters: &stats.Set{}}
	s := &plugins.Setup{
		Kind: sc.Kind, Name: name, Config: sc.Table, Ports: portResolver{e}, Instance: in.idx,
		NumInstances: len(pl.instances), Clock: e.clock, Log: e.log.With("stage", name, "pipeline", pl.name),
		Counters: si.counters,
		Histograms: func(hname, help, unit string) *stats.Histogram {
			h := stats.NewHistogram()
			si.hists = append(si.hists, namedHist{name: hname, help: help, unit: unit, h: h})
			return h
		},
		Pool: e.stagePool,
		Global: func(key string, mk func() any) any {
			if e.global == nil {
				e.global = map[string]any{}
			}
			if v, ok := e.global[key]; ok {
				return v
			}
			v := mk()
			e.global[key] = v
			return v
		},
		Section: func(name string) plugins.Config { return e.cfg.Section(name) },
		Shared: func(key string, mk func() any) any {
			key = name + "/" + key
			if v, ok := pl.shared[key]; ok {
				return v
			}
			v := mk()
			pl.shared[key] = v
			return v
		},
	}
	st, err := kind.New(s)
	if err != nil {
		return nil, located(err, sc.Where(), fmt.Sprintf("stage %q (%s)", name, sc.Kind))
	}
	si.st = st
	si.producer, _ = st.(plugins.Producer)
	si.holder, _ = st.(plugins.Holder)
	si.finite, _ = st.(plugins.Finite)
	return si, nil
}

// stagePool finds or makes a named pool for stages that keep packets.
func (e *Engine) stagePool(name string, buffers, dataRoom int) (packet.Pool, error) {
	if p, ok := e.pools[name]; ok {
		return p, nil
	}
	s, err := packet.NewSlab(packet.SlabConfig{Name: name, Buffers: buffers, DataRoom: dataRoom})
	if err != nil {
		return nil, err
	}
	e.pools[name] = s
	e.ownPools = append(e.ownPools, s)
	return s, nil
}

// checkRx makes sure every rx queue has exactly one poller.
func (e *Engine) checkRx() error {
	seen := map[string]string{}
	for _, pl := range e.pipelines {
		for _, in := range pl.instances {
			for _, rq := range in.rx {
				key := fmt.Sprintf("%s:%d", rq.port.name, rq.queue)
				if other, dup := seen[key]; dup {
					return fmt.Errorf("rx queue %s is polled by both pipeline %q and %q", key, other, pl.name)
				}
				seen[key] = pl.name
			}
		}
	}
	return nil
}

type portResolver struct{ e *Engine }

func (r portResolver) Port(name string) (plugins.PortInfo, bool) {
	pe := r.e.portIndex[name]
	if pe == nil {
		return plugins.PortInfo{}, false
	}
	return pe.pluginInfo(), true
}

func (r portResolver) All() []plugins.PortInfo {
	out := make([]plugins.PortInfo, 0, len(r.e.ports))
	for _, pe := range r.e.ports {
		out = append(out, pe.pluginInfo())
	}
	return out
}

func (pe *portEntry) pluginInfo() plugins.PortInfo {
	pi := plugins.PortInfo{ID: pe.id, Name: pe.name, Pool: pe.pool, MTU: pe.info.MTU, MAC: pe.info.MAC, Queue: pe.info.RxQueues,
		Internal: pe.internal, DriverMAC: pe.info.MAC, IfID: pe.cfgPort.IfID}
	if m := pe.cfgPort.MAC; m != (config.MAC{}) {
		pi.MAC = m
	}
	for _, a := range pe.cfgPort.Addresses {
		pi.Addrs = append(pi.Addrs, a.Prefix)
	}
	return pi
}

// Start applies the runtime settings and starts every lcore.
func (e *Engine) Start() error {
	if e.opt.DryRun {
		return errors.New("engine: a dry-run engine cannot start")
	}
	if !e.phase.CompareAndSwap(phaseNew, phaseRun) {
		return errors.New("engine: already started")
	}
	e.started = time.Now()
	for _, pe := range e.ports {
		if s, ok := pe.port.(ports.Starter); ok {
			if err := s.Start(e.clock); err != nil {
				return fmt.Errorf("port %q: %w", pe.name, err)
			}
		}
	}
	if err := e.rt.apply(); err != nil {
		return err
	}
	e.askStamping()
	if e.opt.Manual {
		for _, lc := range e.lcores {
			for _, in := range lc.instances {
				if err := in.start(); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for _, lc := range e.lcores {
		started := make(chan error, 1)
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			lc.run(started)
		}()
		if err := <-started; err != nil {
			e.phase.Store(phaseStop)
			e.wg.Wait()
			return err
		}
	}
	go e.watch()
	return nil
}

// askStamping lets drivers that can stamp rx packets in their own pass do so,
// when the engine's clock is the host's monotonic clock they stamp with.
func (e *Engine) askStamping() {
	if _, host := e.clock.(*clock.System); !host {
		return
	}
	for _, pe := range e.ports {
		if h, ok := pe.port.(ports.HandleTx); ok {
			pe.handleTx = h
		}
	}
	for _, pl := range e.pipelines {
		for _, in := range pl.instances {
			for i := range in.rx {
				rq := &in.rx[i]
				if s, ok := rq.port.port.(ports.RxStamper); ok && rq.port.engineStamps {
					rq.stamped = s.StampRx(rq.queue, rq.port.id)
					rq.port.driverRxBytes = rq.port.driverRxBytes || rq.stamped
				}
			}
		}
	}
}

// Step runs one loop iteration of every lcore on the calling goroutine. Only for
// engines built with Manual, in virtual time.
func (e *Engine) Step() int {
	moved := 0
	for i := range e.lcores {
		moved += e.StepLcore(i)
	}
	return moved
}

// StepLcore runs one loop iteration of the i-th lcore (lcores in the order the
// pipelines first name them) on the calling goroutine, for Manual engines whose
// caller times one lcore apart from the others (a device under test beside its
// traffic source). It returns 0 for an i out of range.
func (e *Engine) StepLcore(i int) int {
	if i < 0 || i >= len(e.lcores) {
		return 0
	}
	lc := e.lcores[i]
	if packet.Checked {
		defer lc.explain()
	}
	return lc.step(e.clock.Now(), e.phase.Load() == phaseDrain)
}

// Done is closed when the engine has stopped.
func (e *Engine) Done() <-chan struct{} { return e.done }

// watch stops the engine by itself when every finite source is done and nothing
// is in flight (a pcap replayed once, a generator with a count).
func (e *Engine) watch() {
	if !e.autoExit() {
		return
	}
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	quiet := 0
	for {
		select {
		case <-e.done:
			return
		case <-t.C:
		}
		if e.phase.Load() != phaseRun {
			return
		}
		if e.sourcesDone() && e.quiet() {
			quiet++
		} else {
			quiet = 0
		}
		if quiet >= 3 {
			e.log.Info("every finite input is done; stopping")
			go e.Stop()
			return
		}
	}
}

// autoExit: the engine has at least one finite source and no endless one.
func (e *Engine) autoExit() bool {
	finite := 0
	polled := map[*portEntry]bool{}
	for _, pl := range e.pipelines {
		for _, in := range pl.instances {
			for _, rq := range in.rx {
				polled[rq.port] = true
			}
			for _, k := range in.producers {
				s := in.stages[k]
				if s.holder != nil && s.finite == nil {
					continue // a delay line: not a source
				}
				if s.finite == nil {
					return false
				}
				finite++
			}
		}
	}
	for pe := range polled {
		if pe.internal {
			continue
		}
		if _, ok := pe.port.(ports.Finite); !ok {
			return false
		}
		finite++
	}
	return finite > 0
}

func (e *Engine) sourcesDone() bool {
	for _, pe := range e.ports {
		if f, ok := pe.port.(ports.Finite); ok && !f.Done() {
			return false
		}
	}
	for _, pl := range e.pipelines {
		for _, in := range pl.instances {
			for _, s := range in.stages {
				if s.finite != nil && !s.finite.Done() {
					return false
				}
			}
		}
	}
	return true
}

// quiet: every lcore's last loop moved nothing and held nothing, and no mem ring
// carries a packet.
func (e *Engine) quiet() bool {
	for _, lc := range e.lcores {
		if !lc.idle.Load() && !lc.stopped.Load() {
			return false
		}
	}
	for _, pe := range e.ports {
		if m, ok := pe.port.(interface{ InFlight() int }); ok && m.InFlight() > 0 {
			return false
		}
	}
	return true
}

// DrainTimeout bounds how long Stop waits for in-flight packets.
const DrainTimeout = 3 * time.Second

// Stop stops the engine gracefully: sources stop, in-flight packets run to the
// end of their chains, then the lcores stop, stages free what they hold and the
// ports close. Safe to call more than once and from any goroutine.
func (e *Engine) Stop() {
	e.stopOnce.Do(func() {
		if e.phase.Load() == phaseNew {
			e.phase.Store(phaseStop)
			e.release()
			close(e.done)
			return
		}
		e.phase.Store(phaseDrain)
		if e.opt.Manual {
			for i := 0; i < 100000; i++ {
				if e.Step() == 0 && e.quiet() {
					break
				}
			}
		} else {
			deadline := time.Now().Add(DrainTimeout)
			quiet := 0
			for time.Now().Before(deadline) && quiet < 3 {
				time.Sleep(time.Millisecond)
				if e.quiet() {
					quiet++
				} else {
					quiet = 0
				}
			}
		}
		e.phase.Store(phaseStop)
		if e.opt.Manual {
			for _, lc := range e.lcores {
				lc.shutdown()
			}
		}
		e.wg.Wait()
		e.release()
		close(e.done)
	})
}

// release closes ports and frees what they still hold. Pools stay mapped until
// Close so that stats remain readable.
func (e *Engine) release() {
	if e.closed {
		return
	}
	e.closed = true
	for _, pe := range e.ports {
		if pe.port == nil {
			continue
		}
		if d, ok := pe.port.(interface{ Drain() int }); ok {
			d.Drain()
		}
		if err := pe.port.Close(); err != nil {
			e.log.Warn("close port", "port", pe.name, "err", err)
		}
	}
	if e.ownClk != nil {
		e.ownClk.Close()
	}
}

// Close stops the engine if needed and unmaps its pools. It reports buffers that
// were never returned: every buffer goes back to its pool.
func (e *Engine) Close() error {
	e.Stop()
	var errs []error
	for _, s := range e.ownPools {
		if err := s.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	e.ownPools = nil
	return errors.Join(errs...)
}

// InUse is the number of buffers out of the engine's pools.
func (e *Engine) InUse() map[string]int {
	out := map[string]int{}
	for name, p := range e.pools {
		out[name] = p.Stats().InUse
	}
	return out
}

// Do runs fn on lcore id between two loops and waits for it. A stopped lcore
// runs it on the caller.
func (e *Engine) Do(id int, fn func()) error {
	if id < 0 || id >= len(e.lcores) {
		return fmt.Errorf("engine: no lcore %d", id)
	}
	lc := e.lcores[id]
	if e.phase.Load() != phaseRun || e.opt.Manual || lc.stopped.Load() {
		fn()
		return nil
	}
	c := &command{fn: fn, done: make(chan struct{})}
	lc.cmdMu.Lock()
	for !lc.cmds.Put(c) {
		time.Sleep(10 * time.Microsecond)
	}
	lc.cmdMu.Unlock()
	select {
	case <-c.done:
		return nil
	case <-e.done:
		return errors.New("engine: stopped")
	}
}

// Synchronize waits until every running lcore has passed a quiescent point (the
// end of a loop) after the call. A table published before it through an atomic
// pointer is then seen by every lcore, and the one it replaced by none.
func (e *Engine) Synchronize() {
	if e.opt.Manual || e.phase.Load() != phaseRun {
		return
	}
	marks := make([]uint64, len(e.lcores))
	for i, lc := range e.lcores {
		marks[i] = lc.epoch.Load()
	}
	for i, lc := range e.lcores {
		for lc.epoch.Load() <= marks[i] && !lc.stopped.Load() {
			time.Sleep(20 * time.Microsecond)
		}
	}
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

// Snapshot reads every published counter.
func (e *Engine) Snapshot() *stats.Snapshot {
	s := &stats.Snapshot{Time: time.Now()}
	if !e.started.IsZero() {
		s.Uptime = time.Since(e.started)
	}
	for _, pe := range e.ports {
		ps := stats.PortSnapshot{Name: pe.name, Driver: pe.driver, TimestampSource: pe.info.TimestampSource}
		// Packets and bytes are what the engine moved; drops, errors and extras
		// are the driver's own.
		for _, lc := range e.lcores {
			if int(pe.id) < len(lc.tx) {
				t := &lc.tx[pe.id]
				ps.RxPackets += t.rxPackets.Load()
				ps.RxBytes += t.rxBytes.Load()
				ps.TxPackets += t.txPackets.Load()
				ps.TxBytes += t.txBytes.Load()
			}
		}
		if pe.port != nil {
			st := pe.port.Stats()
			ps.RxDropped, ps.TxDropped, ps.RxErrors, ps.Extra = st.RxDropped, st.TxDropped, st.RxErrors, st.Extra
			if pe.driverRxBytes {
				ps.RxBytes = st.RxBytes
			}
			if pe.handleTx != nil {
				ps.TxBytes = st.TxBytes
			}
			ps.LinkUp = pe.port.Info().LinkUp
		}
		s.Ports = append(s.Ports, ps)
	}
	totals := map[string]uint64{}
	for _, pl := range e.pipelines {
		for _, in := range pl.instances {
			for _, si := range in.stages {
				ss := stats.StageSnapshot{Pipeline: pl.name, Name: si.name, Kind: si.kind, Lcore: in.lc.id,
					Packets: si.packets.Load()}
				si.counters.Each(func(name, help string, v uint64) {
					ss.Counters = append(ss.Counters, stats.CounterValue{Name: name, Help: help, Value: v})
				})
				ss.Drops = dropList(&si.drops)
				for _, d := range ss.Drops {
					totals[d.Reason] += d.Count
				}
				s.Stages = append(s.Stages, ss)
				for _, h := range si.hists {
					s.Histogram = append(s.Histogram, stats.NamedHist{Owner: pl.name + "/" + si.name, Name: h.name,
						Help: h.help, Unit: h.unit, Hist: h.h.Snapshot()})
				}
			}
		}
	}
	for _, lc := range e.lcores {
		drops := dropList(&lc.drops)
		if len(drops) > 0 || lc.copies.Load() > 0 {
			es := stats.StageSnapshot{Pipeline: "", Name: "engine", Kind: "engine", Lcore: lc.id, Drops: drops,
				Counters: []stats.CounterValue{{Name: "tx_copies", Help: "packets copied into a port's own pool at transmit", Value: lc.copies.Load()}}}
			for _, d := range drops {
				totals[d.Reason] += d.Count
			}
			s.Stages = append(s.Stages, es)
		}
		s.Lcores = append(s.Lcores, stats.LcoreSnapshot{ID: lc.id, CPU: lc.cpu, Loops: lc.loops.Load(),
			BusyLoops: lc.busy.Load(), Packets: lc.packets.Load(), Gap: lc.gap.Snapshot()})
	}
	names := make([]string, 0, len(e.pools))
	for n := range e.pools {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		ps := e.pools[n].Stats()
		s.Pools = append(s.Pools, stats.PoolSnapshot{Name: n, Size: ps.Size, InUse: ps.InUse, AllocFail: ps.AllocFail, Copies: ps.Copies})
	}
	reasons := make([]string, 0, len(totals))
	for r := range totals {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	for _, r := range reasons {
		s.Drops = append(s.Drops, stats.DropCount{Reason: r, Count: totals[r]})
	}
	return s
}

func dropList(d *[packet.MaxReasons]stats.Counter) []stats.DropCount {
	var out []stats.DropCount
	for r := range d {
		if v := d[r].Load(); v > 0 {
			out = append(out, stats.DropCount{Reason: packet.Reason(r).String(), Count: v})
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
	return fmt.Errorf("%s: %s: %w", where, what, err)
}

// knownDriver checks that this binary has pc's driver, suggesting the closest
// it has.
func knownDriver(pc config.Port) error {
	have := ports.Drivers()
	if slices.Contains(have, pc.Driver) {
		return nil
	}
	msg := fmt.Sprintf("%s: port %q: unknown driver %q", pc.Where(), pc.Name, pc.Driver)
	if best := config.Suggest(pc.Driver, have); best != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", best)
	}
	msg += "; this binary has " + strings.Join(have, ", ")
	if where, ok := ports.Absent(pc.Driver); ok {
		msg += "; " + where
	}
	return errors.New(msg)
}
