package route

import (
	"log/slog"
	"net/netip"
	"testing"

	"github.com/linerate/linerate/appliance/clock"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/appliance/stats"
	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/plugins"
)

// The harness runs routed stages without the engine: two routed ports and a
// TAP, a fake Env that records what the stages emit and free, real pools that
// must be empty at the end, and a run loop that applies verdicts as the engine
// does.

const (
	port0 = 0 // 2001:db8:1::1/64, 192.0.2.1/24
	port1 = 1 // 2001:db8:2::1/64, 198.51.100.1/24
	portT = 2 // a TAP: fd00::1/64
)

var (
	mac0     = packet.MAC{2, 0, 0, 0, 1, 1}
	mac1     = packet.MAC{2, 0, 0, 0, 2, 1}
	macT     = packet.MAC{2, 0, 0, 0, 3, 1}
	macTHost = packet.MAC{2, 0, 0, 0, 3, 2}
	host1    = packet.MAC{2, 0, 0, 0, 1, 2} // 2001:db8:1::2, 192.0.2.2
	host2    = packet.MAC{2, 0, 0, 0, 2, 2} // 2001:db8:2::2, 198.51.100.2
)

type emitted struct {
	h    packet.Handle
	port uint16
}

type fakeEnv struct {
	emitted []emitted
	freed   []packet.Handle
}

func (e *fakeEnv) Emit(h packet.Handle, port uint16) bool {
	e.emitted = append(e.emitted, emitted{h, port})
	return true
}
func (e *fakeEnv) TxDepth(uint16) int              { return 0 }
func (e *fakeEnv) Owner(uint64) int                { return 0 }
func (e *fakeEnv) Handoff(packet.Handle, int) bool { return false }
func (e *fakeEnv) NumLcores() int                  { return 1 }
func (e *fakeEnv) Free(h packet.Handle)            { e.freed = append(e.freed, h) }
func (e *fakeEnv) takeEmitted() (out []emitted)    { out, e.emitted = e.emitted, nil; return out }

type fakePorts []plugins.PortInfo

func (f fakePorts) Port(name string) (plugins.PortInfo, bool) {
	for _, p := range f {
		if p.Name == name {
			return p, true
		}
	}
	return plugins.PortInfo{}, false
}

func (f fakePorts) All() []plugins.PortInfo { return append([]plugins.PortInfo(nil), f...) }

type harness struct {
	t        testing.TB
	env      *fakeEnv
	ports    fakePorts
	pools    map[string]*packet.Slab
	order    []*packet.Slab
	clock    *clock.Sim
	counters *stats.Set
	global   map[string]any
	routes   []config.Route
	neigh    []config.Neighbor
	ctx      plugins.Context
	starters []plugins.Stage
}

func pfx(s ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, x := range s {
		out = append(out, netip.MustParsePrefix(x))
	}
	return out
}

func newHarness(t testing.TB) *harness {
	t.Helper()
	h := &harness{t: t, env: &fakeEnv{}, pools: map[string]*packet.Slab{}, clock: clock.NewSim(1e9),
		counters: &stats.Set{}, global: map[string]any{}}
	def := h.newPool("default", 512)
	h.ports = fakePorts{
		{ID: port0, Name: "eth0", MTU: 1500, MAC: mac0, DriverMAC: mac0, Pool: def, IfID: 1,
			Addrs: pfx("2001:db8:1::1/64", "192.0.2.1/24")},
		{ID: port1, Name: "eth1", MTU: 1500, MAC: mac1, DriverMAC: mac1, Pool: def, IfID: 2,
			Addrs: pfx("2001:db8:2::1/64", "198.51.100.1/24")},
		{ID: portT, Name: "tap0", MTU: 1500, MAC: macT, DriverMAC: macTHost, Pool: def, IfID: 3, Addrs: pfx("fd00::1/64")},
	}
	h.ctx = plugins.Context{Clock: h.clock, Log: slog.New(slog.DiscardHandler), Env: h.env}
	t.Cleanup(h.close)
	return h
}

func (h *harness) newPool(name string, n int) *packet.Slab {
	s, err := packet.NewSlab(packet.SlabConfig{Name: h.t.Name() + "/" + name, Buffers: n})
	if err != nil {
		h.t.Fatal(err)
	}
	h.pools[name] = s
	h.order = append(h.order, s)
	return s
}

func (h *harness) close() {
	h.flush()
	for _, st := range h.starters {
		if s, ok := st.(plugins.Stopper); ok {
			s.Stop(&h.ctx)
		}
	}
	h.flush()
	for _, e := range h.env.emitted {
		packet.FreeOne(e.h)
	}
	for _, s := range h.order {
		if n := s.InUse(); n != 0 {
			h.t.Errorf("pool %q: %d buffers still in use", s.Name(), n)
			continue
		}
		_ = s.Close()
	}
}

func (h *harness) setup(kind, keys string) *plugins.Setup {
	h.t.Helper()
	tab, err := config.ParseTable(kind+".toml", []byte(keys))
	if err != nil {
		h.t.Fatal(err)
	}
	return &plugins.Setup{Kind: kind, Name: kind + "#0", Config: tab, Ports: h.ports, NumLcores: 1, Clock: h.clock,
		Log: slog.New(slog.DiscardHandler), Counters: h.counters,
		Histograms: func(string, string, string) *stats.Histogram { return stats.NewHistogram() },
		Pool: func(name string, buffers, dataRoom int) (packet.Pool, error) {
			if s, ok := h.pools[name]; ok {
				return s, nil
			}
			return h.newPool(name, buffers), nil
		},
		Shared: func(key string, mk func() any) any { return mk() },
		Global: func(key string, mk func() any) any {
			if v, ok := h.global[key]; ok {
				return v
			}
			v := mk()
			h.global[key] = v
			return v
		},
		Routes: h.routes, Neighbors: h.neigh}
}

// build makes and starts a stage.
func (h *harness) build(kind, keys string) plugins.Stage {
	h.t.Helper()
	k, ok := plugins.Lookup(kind)
	if !ok {
		h.t.Fatalf("no kind %q", kind)
	}
	st, err := k.New(h.setup(kind, keys))
	if err != nil {
		h.t.Fatalf("%s: %v", kind, err)
	}
	if s, ok := st.(plugins.Starter); ok {
		if err := s.Start(&h.ctx); err != nil {
			h.t.Fatal(err)
		}
	}
	h.starters = append(h.starters, st)
	return st
}

func (h *harness) routed() *Routed { return h.global["route"].(*Routed) }

func (h *harness) counter(name string) uint64 {
	h.t.Helper()
	h.counters.Publish()
	var v uint64
	found := false
	h.counters.Each(func(n, _ string, x uint64) {
		if n == name {
			v += x
			found = true
		}
	})
	if !found {
		h.t.Fatalf("no counter %q", name)
	}
	return v
}

func (h *harness) pkt(data []byte, in uint16) packet.Handle {
	h.t.Helper()
	hd, ok := h.pools["default"].AllocOne()
	if !ok {
		h.t.Fatal("pool empty")
	}
	p := hd.P()
	d, _ := p.Append(len(data))
	copy(d, data)
	p.InPort = in
	p.RxTime = h.clock.Now()
	return hd
}

type outcome struct {
	forwarded []emitted
	dropped   map[string]int
	consumed  int
	continued []packet.Handle
}

// run passes frames received on port in through stages.
func (h *harness) run(in uint16, frames [][]byte, stages ...plugins.Stage) outcome {
	h.t.Helper()
	b := &packet.Burst{}
	for _, f := range frames {
		b.Push(h.pkt(f, in))
	}
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
				o.forwarded = append(o.forwarded, emitted{hd, p.OutPort})
			case packet.Drop:
				o.dropped[p.Reason.String()]++
				packet.FreeOne(hd)
			case packet.Consume:
				o.consumed++
			default:
				h.t.Errorf("verdict %v", p.Verdict())
			}
		}
		b.N = j
	}
	o.continued = append(o.continued, b.H[:b.N]...)
	h.flush()
	return o
}

// tick runs the stages' timers at the harness clock's time.
func (h *harness) tick(stages ...plugins.Stage) {
	h.ctx.Now = h.clock.Now()
	for _, st := range stages {
		if t, ok := st.(plugins.Ticker); ok {
			t.Tick(&h.ctx)
		}
	}
	h.flush()
}

func (h *harness) flush() {
	for _, hd := range h.env.freed {
		packet.FreeOne(hd)
	}
	h.env.freed = h.env.freed[:0]
}

// data copies a packet's bytes and frees it.
func data(hd packet.Handle) []byte {
	out := append([]byte(nil), hd.P().Data()...)
	packet.FreeOne(hd)
	return out
}

func (o outcome) free() {
	for _, e := range o.forwarded {
		packet.FreeOne(e.h)
	}
	for _, hd := range o.continued {
		packet.FreeOne(hd)
	}
}
