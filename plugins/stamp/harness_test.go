package stamp

import (
	"log/slog"
	"net/netip"
	"testing"
	"time"

	"github.com/linerate/linerate/appliance/clock"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/appliance/stats"
	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/plugins"
)

// The harness runs STAMP stages without the engine: a fake Env, a fixed port
// table, a real slab pool that must be empty at the end, virtual time, and
// one registry shared by every stage it builds (the engine's Global).

type fakeEnv struct {
	emitted []packet.Handle
	freed   []packet.Handle
}

func (e *fakeEnv) Emit(h packet.Handle, port uint16) bool {
	e.emitted = append(e.emitted, h)
	return true
}
func (e *fakeEnv) TxDepth(port uint16) int                 { return 0 }
func (e *fakeEnv) Owner(key uint64) int                    { return 0 }
func (e *fakeEnv) Handoff(h packet.Handle, owner int) bool { return false }
func (e *fakeEnv) NumLcores() int                          { return 1 }
func (e *fakeEnv) Free(h packet.Handle)                    { e.freed = append(e.freed, h) }

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
	pool     *packet.Slab
	ports    fakePorts
	clock    *clock.Sim
	counters map[string]*stats.Set
	hists    map[string]*stats.Histogram
	ctx      plugins.Context
	global   map[string]any
	shared   map[string]any
}

// testUnixBase is the harness clock's wall time at virtual zero: 2024-01-01.
const testUnixBase = 1704067200 * 1e9

func newHarness(t testing.TB) *harness {
	t.Helper()
	h := &harness{t: t, env: &fakeEnv{}, clock: clock.NewSim(testUnixBase), counters: map[string]*stats.Set{},
		hists: map[string]*stats.Histogram{}, global: map[string]any{}, shared: map[string]any{}}
	pool, err := packet.NewSlab(packet.SlabConfig{Name: "stamp-test", Buffers: 4096, DataRoom: 2048})
	if err != nil {
		t.Fatal(err)
	}
	h.pool = pool
	h.ports = fakePorts{
		{ID: 0, Name: "eth0", MTU: 1500, Pool: pool, MAC: [6]byte{2, 0, 0, 0, 0, 0xa0}},
		{ID: 1, Name: "eth1", MTU: 1500, Pool: pool, MAC: [6]byte{2, 0, 0, 0, 0, 0xa1}},
	}
	h.ctx = plugins.Context{Clock: h.clock, Log: slog.New(slog.DiscardHandler), Env: h.env}
	h.clock.Set(int64(time.Second))
	t.Cleanup(h.close)
	return h
}

func (h *harness) close() {
	h.flush()
	for _, e := range h.env.emitted {
		packet.FreeOne(e)
	}
	if n := h.pool.InUse(); n != 0 {
		h.t.Errorf("%d buffers in use at the end of the test", n)
		return
	}
	if err := h.pool.Close(); err != nil {
		h.t.Error(err)
	}
}

func (h *harness) flush() {
	for _, x := range h.env.freed {
		packet.FreeOne(x)
	}
	h.env.freed = h.env.freed[:0]
}

func (h *harness) setup(kind, name, keys string) *plugins.Setup {
	h.t.Helper()
	tab, err := config.ParseTable(name+".toml", []byte(keys))
	if err != nil {
		h.t.Fatalf("ParseTable: %v", err)
	}
	set := &stats.Set{}
	h.counters[name] = set
	return &plugins.Setup{Kind: kind, Name: name, Config: tab, Ports: h.ports, NumLcores: 1, Clock: h.clock,
		Log: slog.New(slog.DiscardHandler), Counters: set,
		Histograms: func(n, help, unit string) *stats.Histogram {
			x := stats.NewHistogram()
			h.hists[name+"/"+n] = x
			return x
		},
		Pool: func(string, int, int) (packet.Pool, error) { return h.pool, nil },
		Shared: func(key string, mk func() any) any {
			key = name + "/" + key
			if v, ok := h.shared[key]; ok {
				return v
			}
			v := mk()
			h.shared[key] = v
			return v
		},
		Global: func(key string, mk func() any) any {
			if v, ok := h.global[key]; ok {
				return v
			}
			v := mk()
			h.global[key] = v
			return v
		},
	}
}

func (h *harness) build(kind, name, keys string) (plugins.Stage, error) {
	h.t.Helper()
	k, ok := plugins.Lookup(kind)
	if !ok {
		h.t.Fatalf("no kind %q", kind)
	}
	return k.New(h.setup(kind, name, keys))
}

func (h *harness) mustBuild(kind, name, keys string) plugins.Stage {
	h.t.Helper()
	st, err := h.build(kind, name, keys)
	if err != nil {
		h.t.Fatalf("%s: %v", kind, err)
	}
	return st
}

func (h *harness) registry() *Registry { return h.global["stamp"].(*Registry) }

// counter reads a counter of stage name.
func (h *harness) counter(name, counter string) uint64 {
	h.t.Helper()
	set := h.counters[name]
	set.Publish()
	var v uint64
	found := false
	set.Each(func(n, _ string, x uint64) {
		if n == counter {
			v, found = x, true
		}
	})
	if !found {
		h.t.Fatalf("stage %s has no counter %q", name, counter)
	}
	return v
}

// pkt makes a packet holding data, received on port in at the clock's time.
func (h *harness) pkt(data []byte, in uint16) packet.Handle {
	h.t.Helper()
	hd, ok := h.pool.AllocOne()
	if !ok {
		h.t.Fatal("pool empty")
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

// result is what became of one packet.
type result struct {
	data    []byte // bytes when it left the chain (forwarded or continued)
	dropped string
	port    uint16 // forwarded to; packet.NoPort when it continued
	rxTime  int64
}

// runBurst passes a burst through stages, applying verdicts, and returns each
// packet's fate in order, freeing them all.
func (h *harness) runBurst(b *packet.Burst, stages ...plugins.Stage) []result {
	h.t.Helper()
	n := b.N
	out := make([]result, n)
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	h.ctx.Now = h.clock.Now()
	for _, st := range stages {
		st.Process(&h.ctx, b)
		j := 0
		for i := 0; i < b.N; i++ {
			hd := b.H[i]
			p := hd.P()
			switch p.Verdict() {
			case packet.Continue:
				b.H[j] = hd
				idx[j] = idx[i]
				j++
			case packet.Drop:
				out[idx[i]].dropped = p.Reason.String()
				packet.FreeOne(hd)
			case packet.Consume:
				out[idx[i]].dropped = "consumed"
			default:
				out[idx[i]] = result{data: append([]byte(nil), p.Data()...), port: p.OutPort, rxTime: p.RxTime}
				packet.FreeOne(hd)
			}
		}
		b.N = j
		h.flush()
	}
	for i := 0; i < b.N; i++ {
		p := b.H[i].P()
		out[idx[i]] = result{data: append([]byte(nil), p.Data()...), port: packet.NoPort, rxTime: p.RxTime}
		packet.FreeOne(b.H[i])
	}
	b.N = 0
	return out
}

// run passes one frame through stages.
func (h *harness) run(data []byte, in uint16, stages ...plugins.Stage) result {
	h.t.Helper()
	b := &packet.Burst{}
	b.Push(h.pkt(data, in))
	return h.runBurst(b, stages...)[0]
}

// produce runs a Producer once and returns copies of what it made (freed).
func (h *harness) produce(st plugins.Stage) [][]byte {
	h.t.Helper()
	b := &packet.Burst{}
	h.ctx.Now = h.clock.Now()
	st.(plugins.Producer).Produce(&h.ctx, b)
	var out [][]byte
	for i := 0; i < b.N; i++ {
		out = append(out, append([]byte(nil), b.H[i].P().Data()...))
		packet.FreeOne(b.H[i])
	}
	return out
}

// advance moves virtual time.
func (h *harness) advance(d time.Duration) { h.clock.Advance(d) }

var (
	addrS = netip.MustParseAddr("2001:db8:a::2") // sender
	addrR = netip.MustParseAddr("2001:db8:b::2") // reflector
	addrE = netip.MustParseAddr("2001:db8:e::1") // an SRv6 End SID between them
)
