package plugins

import (
	"fmt"
	"log/slog"
	"sort"
	"testing"

	"github.com/linerate/linerate/appliance/clock"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/appliance/stats"
	"github.com/linerate/linerate/config"
)

// The harness runs one stage (or a short chain) without the engine: a fake Env
// that records what stages emit, free and hand off, a fixed set of ports, real
// slab pools that must all be empty when the test ends, and a run loop that
// applies verdicts as appliance/lcore.go's instance.run does.

// fakeEnv records the calls a stage makes on its lcore.
type fakeEnv struct {
	emitted   []sent
	freed     []packet.Handle // by Free, returned to their pools at flush
	handoffs  []sent          // port holds the owner
	numLcores int
}

type sent struct {
	h    packet.Handle
	port uint16
}

func (e *fakeEnv) Emit(h packet.Handle, port uint16) bool {
	e.emitted = append(e.emitted, sent{h, port})
	return true
}

func (e *fakeEnv) TxDepth(port uint16) int { return 0 }

func (e *fakeEnv) Owner(key uint64) int {
	if e.numLcores <= 1 {
		return 0
	}
	return int(key % uint64(e.numLcores))
}

func (e *fakeEnv) Handoff(h packet.Handle, owner int) bool {
	e.handoffs = append(e.handoffs, sent{h, uint16(owner)})
	return true
}

func (e *fakeEnv) NumLcores() int { return max(e.numLcores, 1) }

func (e *fakeEnv) Free(h packet.Handle) { e.freed = append(e.freed, h) }

var _ Env = (*fakeEnv)(nil)

// fakePorts is a fixed port table.
type fakePorts []PortInfo

func (f fakePorts) Port(name string) (PortInfo, bool) {
	for _, p := range f {
		if p.Name == name {
			return p, true
		}
	}
	return PortInfo{}, false
}

func (f fakePorts) All() []PortInfo { return append([]PortInfo(nil), f...) }

// Ports of every harness: two NIC-like ports and an internal ring.
const (
	portEth0  = 0
	portEth1  = 1
	portRing0 = 2
)

type harness struct {
	t        testing.TB
	env      *fakeEnv
	ports    fakePorts
	pools    map[string]*packet.Slab
	order    []*packet.Slab
	clock    *clock.Sim
	counters *stats.Set
	hists    map[string]*stats.Histogram
	ctx      Context
	lcore    int
	nlcores  int
}

// newHarness makes a harness with a "default" pool of 1024 buffers of 2048
// bytes. At cleanup every pool must be empty.
func newHarness(t testing.TB) *harness {
	t.Helper()
	h := &harness{t: t, env: &fakeEnv{}, pools: map[string]*packet.Slab{}, clock: clock.NewSim(0),
		counters: &stats.Set{}, hists: map[string]*stats.Histogram{}, nlcores: 1}
	h.ports = fakePorts{
		{ID: portEth0, Name: "eth0", MTU: 1500, MAC: [6]byte{2, 0, 0, 0, 0, 0xe0}},
		{ID: portEth1, Name: "eth1", MTU: 1500, MAC: [6]byte{2, 0, 0, 0, 0, 0xe1}},
		{ID: portRing0, Name: "ring0", Internal: true},
	}
	h.newPool("default", 1024, 2048)
	h.ctx = Context{Clock: h.clock, Log: slog.New(slog.DiscardHandler), Env: h.env}
	t.Cleanup(h.close)
	return h
}

// newPool makes a slab pool the stages can find by name.
func (h *harness) newPool(name string, buffers, dataRoom int) *packet.Slab {
	h.t.Helper()
	s, err := packet.NewSlab(packet.SlabConfig{Name: name, Buffers: buffers, DataRoom: dataRoom})
	if err != nil {
		h.t.Fatal(err)
	}
	h.pools[name] = s
	h.order = append(h.order, s)
	for i := range h.ports {
		if h.ports[i].Pool == nil {
			h.ports[i].Pool = s
		}
	}
	return s
}

// close checks that every buffer came back, then unmaps the pools.
func (h *harness) close() {
	h.flush()
	for _, s := range h.order {
		if n := s.InUse(); n != 0 {
			h.t.Errorf("pool %q: %d buffers still in use at the end of the test", s.Name(), n)
			continue // unmapping would leave dangling handles
		}
		if err := s.Close(); err != nil {
			h.t.Errorf("close pool %q: %v", s.Name(), err)
		}
	}
}

// inUse is the number of buffers out of every pool.
func (h *harness) inUse() int {
	n := 0
	for _, s := range h.order {
		n += s.InUse()
	}
	return n
}

// setup is what a factory gets for a stage of kind with the TOML keys given.
func (h *harness) setup(kind, keys string) *Setup {
	h.t.Helper()
	tab, err := config.ParseTable(kind+".toml", []byte(keys))
	if err != nil {
		h.t.Fatalf("ParseTable: %v", err)
	}
	return &Setup{
		Kind: kind, Name: kind + "#0", Config: tab, Ports: h.ports, Lcore: h.lcore, NumLcores: h.nlcores,
		Clock: h.clock, Log: slog.New(slog.DiscardHandler), Counters: h.counters,
		Histograms: func(name, help, unit string) *stats.Histogram {
			hist := stats.NewHistogram()
			h.hists[name] = hist
			return hist
		},
		Pool: func(name string, buffers, dataRoom int) (packet.Pool, error) {
			if s, ok := h.pools[name]; ok {
				return s, nil
			}
			s, err := packet.NewSlab(packet.SlabConfig{Name: name, Buffers: buffers, DataRoom: dataRoom})
			if err != nil {
				return nil, err
			}
			h.pools[name] = s
			h.order = append(h.order, s)
			return s, nil
		},
		Shared: func(key string, mk func() any) any { return mk() },
	}
}

// build makes a stage of kind from TOML keys through the registry.
func (h *harness) build(kind, keys string) (Stage, error) {
	h.t.Helper()
	k, ok := Lookup(kind)
	if !ok {
		h.t.Fatalf("stage kind %q is not registered", kind)
	}
	return k.New(h.setup(kind, keys))
}

// mustBuild is build that fails the test on an error.
func (h *harness) mustBuild(kind, keys string) Stage {
	h.t.Helper()
	st, err := h.build(kind, keys)
	if err != nil {
		h.t.Fatalf("%s: %v", kind, err)
	}
	return st
}

// counter is the value of the stage counter called name.
func (h *harness) counter(name string) uint64 {
	h.t.Helper()
	h.counters.Publish()
	var v uint64
	found := false
	h.counters.Each(func(n, _ string, x uint64) {
		if n == name {
			v, found = x, true
		}
	})
	if !found {
		h.t.Fatalf("no counter %q", name)
	}
	return v
}

// counterNames lists the counters the stages registered, sorted.
func (h *harness) counterNames() []string {
	var out []string
	h.counters.Each(func(n, _ string, _ uint64) { out = append(out, n) })
	sort.Strings(out)
	return out
}

// hist is a snapshot of the histogram called name.
func (h *harness) hist(name string) *stats.HistSnapshot {
	h.t.Helper()
	hist, ok := h.hists[name]
	if !ok {
		h.t.Fatalf("no histogram %q", name)
	}
	hist.Publish()
	return hist.Snapshot()
}

// pkt makes a packet of the default pool holding data, received on port in at
// the harness clock's time.
func (h *harness) pkt(data []byte, in uint16) packet.Handle {
	return h.pktFrom(h.pools["default"], data, in)
}

func (h *harness) pktFrom(pool packet.Pool, data []byte, in uint16) packet.Handle {
	h.t.Helper()
	hd, ok := pool.AllocOne()
	if !ok {
		h.t.Fatalf("pool %q is empty", pool.Name())
	}
	p := hd.P()
	d, err := p.Append(len(data))
	if err != nil {
		h.t.Fatal(err)
	}
	copy(d, data)
	p.InPort = in
	p.RxTime = h.clock.Now()
	return hd
}

// burst makes a burst of packets from frames, received on port in.
func (h *harness) burst(in uint16, frames ...[]byte) *packet.Burst {
	b := &packet.Burst{}
	for _, f := range frames {
		b.Push(h.pkt(f, in))
	}
	return b
}

// outcome is what became of a burst's packets.
type outcome struct {
	forwarded []sent         // in order; the test frees them (h.free)
	dropped   map[string]int // by reason name; freed already
	consumed  int
	continued []packet.Handle // left at Continue after the last stage; the test frees them
}

// run passes b through stages from the first, at the harness clock's time, and
// applies verdicts as the engine does: Continue stays in the burst, Forward,
// Drop and Consume leave it (Drop frees the packet). Packets a stage freed
// through Env.Free go back to their pools when the burst is done.
func (h *harness) run(b *packet.Burst, stages ...Stage) outcome {
	h.t.Helper()
	o := outcome{dropped: map[string]int{}}
	h.ctx.Now = h.clock.Now()
	for k, st := range stages {
		h.ctx.Stage = k
		st.Process(&h.ctx, b)
		j := 0
		for i := 0; i < b.N; i++ {
			hd := b.H[i]
			p := hd.P()
			switch p.Verdict() {
			case packet.Continue:
				b.H[j] = hd
				j++
			case packet.Forward:
				o.forwarded = append(o.forwarded, sent{hd, p.OutPort})
			case packet.Drop:
				o.dropped[p.Reason.String()]++
				packet.FreeOne(hd)
			case packet.Consume:
				o.consumed++
			default:
				h.t.Errorf("stage %d left verdict %v", k, p.Verdict())
				packet.FreeOne(hd)
			}
		}
		b.N = j
	}
	o.continued = append(o.continued, b.H[:b.N]...)
	b.N = 0
	h.flush()
	return o
}

// produce calls p.Produce at the harness clock's time on an empty burst.
func (h *harness) produce(p Producer) *packet.Burst {
	b := &packet.Burst{}
	h.ctx.Now = h.clock.Now()
	p.Produce(&h.ctx, b)
	return b
}

// flush returns what stages freed through Env.Free.
func (h *harness) flush() {
	for _, hd := range h.env.freed {
		packet.FreeOne(hd)
	}
	h.env.freed = h.env.freed[:0]
}

// free returns handles to their pools.
func (h *harness) free(hs ...packet.Handle) {
	for _, hd := range hs {
		packet.FreeOne(hd)
	}
}

// freeSent returns forwarded or emitted packets to their pools.
func (h *harness) freeSent(s []sent) {
	for _, x := range s {
		packet.FreeOne(x.h)
	}
}

// freeAll frees everything an outcome still holds.
func (o outcome) freeAll(h *harness) {
	h.freeSent(o.forwarded)
	h.free(o.continued...)
}

func (o outcome) String() string {
	return fmt.Sprintf("forwarded %d, dropped %v, consumed %d, continued %d", len(o.forwarded), o.dropped, o.consumed, len(o.continued))
}
