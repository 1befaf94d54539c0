package rlnc

import (
	"encoding/binary"
	"log/slog"
	"net/netip"
	"testing"

	"github.com/linerate/linerate/appliance/clock"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/appliance/stats"
	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/plugins"
)

// The harness runs RLNC stages without the engine: a fake Env that records
// emitted packets, fixed ports, real slab pools that must be empty at the end
// of the test, and a run loop that applies verdicts as the engine does.

type emitted struct {
	h    packet.Handle
	port uint16
}

type fakeEnv struct {
	emitted   []emitted
	freed     []packet.Handle
	handoffs  []emitted
	numLcores int
}

func (e *fakeEnv) Emit(h packet.Handle, port uint16) bool {
	e.emitted = append(e.emitted, emitted{h, port})
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
	e.handoffs = append(e.handoffs, emitted{h, uint16(owner)})
	h.P().HandoffTo(owner, 0)
	return true
}
func (e *fakeEnv) NumLcores() int       { return max(e.numLcores, 1) }
func (e *fakeEnv) Free(h packet.Handle) { e.freed = append(e.freed, h) }

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
	pool     *packet.Slab
	pools    map[string]*packet.Slab
	order    []*packet.Slab
	clock    *clock.Sim
	counters map[string]*stats.Set
	hists    map[string]*stats.Histogram
	ctx      plugins.Context
	lcore    int
}

func newHarness(t testing.TB) *harness {
	t.Helper()
	h := &harness{t: t, env: &fakeEnv{}, pools: map[string]*packet.Slab{}, clock: clock.NewSim(0),
		counters: map[string]*stats.Set{}, hists: map[string]*stats.Histogram{}}
	h.clock.Set(1e9)
	h.pool = h.newPool("test", 8192, 2048)
	h.ports = fakePorts{
		{ID: 0, Name: "eth0", MTU: 1500, Pool: h.pool},
		{ID: 1, Name: "eth1", MTU: 1500, Pool: h.pool},
		{ID: 2, Name: "mem0", MTU: 9000, Pool: h.pool, Internal: true},
		{ID: 3, Name: "mem1", MTU: 9000, Pool: h.pool, Internal: true},
	}
	h.ctx = plugins.Context{Clock: h.clock, Log: slog.New(slog.DiscardHandler), Env: h.env}
	t.Cleanup(h.close)
	return h
}

func (h *harness) newPool(name string, buffers, dataRoom int) *packet.Slab {
	s, err := packet.NewSlab(packet.SlabConfig{Name: name, Buffers: buffers, DataRoom: dataRoom})
	if err != nil {
		h.t.Fatal(err)
	}
	h.pools[name] = s
	h.order = append(h.order, s)
	return s
}

func (h *harness) close() {
	h.flush()
	for _, s := range h.order {
		if n := s.InUse(); n != 0 {
			h.t.Errorf("pool %q: %d buffers still in use at the end of the test", s.Name(), n)
			continue
		}
		_ = s.Close()
	}
}

// build makes a stage of kind from TOML keys; its counters are h.counters[name].
func (h *harness) build(kind, name, keys string) (plugins.Stage, error) {
	h.t.Helper()
	tab, err := config.ParseTable(name+".toml", []byte(keys))
	if err != nil {
		h.t.Fatalf("ParseTable: %v", err)
	}
	cs := &stats.Set{}
	h.counters[name] = cs
	k, ok := plugins.Lookup(kind)
	if !ok {
		h.t.Fatalf("kind %q not registered", kind)
	}
	shared := map[string]any{}
	return k.New(&plugins.Setup{Kind: kind, Name: name, Config: tab, Ports: h.ports, Lcore: h.lcore, NumLcores: 1,
		Clock: h.clock, Log: slog.New(slog.DiscardHandler), Counters: cs,
		Histograms: func(n, help, unit string) *stats.Histogram {
			hist := stats.NewHistogram()
			h.hists[name+"/"+n] = hist
			return hist
		},
		Pool: func(pn string, buffers, dataRoom int) (packet.Pool, error) {
			if s, ok := h.pools[pn]; ok {
				return s, nil
			}
			s, err := packet.NewSlab(packet.SlabConfig{Name: pn, Buffers: buffers, DataRoom: dataRoom})
			if err != nil {
				return nil, err
			}
			h.pools[pn] = s
			h.order = append(h.order, s)
			return s, nil
		},
		Shared: func(key string, mk func() any) any {
			if v, ok := shared[key]; ok {
				return v
			}
			v := mk()
			shared[key] = v
			return v
		},
	})
}

func (h *harness) mustBuild(kind, name, keys string) plugins.Stage {
	h.t.Helper()
	st, err := h.build(kind, name, keys)
	if err != nil {
		h.t.Fatalf("%s: %v", kind, err)
	}
	return st
}

func (h *harness) counter(stage, name string) uint64 {
	h.t.Helper()
	cs := h.counters[stage]
	cs.Publish()
	var v uint64
	found := false
	cs.Each(func(n, _ string, x uint64) {
		if n == name {
			v, found = x, true
		}
	})
	if !found {
		h.t.Fatalf("stage %s has no counter %q", stage, name)
	}
	return v
}

// outcome is what became of a burst.
type outcome struct {
	forwarded []emitted
	dropped   map[string]int
	consumed  int
	continued []packet.Handle
}

// run passes b through st and applies verdicts as the engine does.
func (h *harness) run(st plugins.Stage, b *packet.Burst) outcome {
	h.t.Helper()
	o := outcome{dropped: map[string]int{}}
	h.ctx.Now = h.clock.Now()
	st.Process(&h.ctx, b)
	for i := 0; i < b.N; i++ {
		hd := b.H[i]
		p := hd.P()
		switch p.Verdict() {
		case packet.Continue:
			o.continued = append(o.continued, hd)
		case packet.Forward:
			o.forwarded = append(o.forwarded, emitted{hd, p.OutPort})
		case packet.Drop:
			o.dropped[p.Reason.String()]++
			packet.FreeOne(hd)
		case packet.Consume:
			o.consumed++
		case packet.Handoff:
			// In env.handoffs; the test frees it.
		default:
			h.t.Errorf("verdict %v", p.Verdict())
			packet.FreeOne(hd)
		}
	}
	b.N = 0
	h.flush()
	return o
}

// produce drains st's Producer fully.
func (h *harness) produce(st plugins.Stage) []packet.Handle {
	var out []packet.Handle
	pr, ok := st.(plugins.Producer)
	if !ok {
		return nil
	}
	for {
		var b packet.Burst
		h.ctx.Now = h.clock.Now()
		pr.Produce(&h.ctx, &b)
		if b.N == 0 {
			return out
		}
		for i := 0; i < b.N; i++ {
			if b.H[i].P().Verdict() != packet.Continue {
				h.t.Errorf("produced packet with verdict %v", b.H[i].P().Verdict())
			}
		}
		out = append(out, b.H[:b.N]...)
	}
}

func (h *harness) tick(st plugins.Stage) {
	h.ctx.Now = h.clock.Now()
	if tk, ok := st.(plugins.Ticker); ok {
		tk.Tick(&h.ctx)
	}
}

func (h *harness) flush() {
	for _, hd := range h.env.freed {
		packet.FreeOne(hd)
	}
	h.env.freed = h.env.freed[:0]
}

func (h *harness) takeEmitted() []emitted {
	e := h.env.emitted
	h.env.emitted = nil
	return e
}

func freeAll(hs []packet.Handle) {
	for _, hd := range hs {
		packet.FreeOne(hd)
	}
}

// pkt makes a packet of the harness pool holding data, received on port in.
func (h *harness) pkt(data []byte, in uint16) packet.Handle {
	h.t.Helper()
	hd, ok := h.pool.AllocOne()
	if !ok {
		h.t.Fatal("test pool empty")
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

// burstOf makes bursts of at most 64 packets from frames.
func (h *harness) bursts(frames [][]byte, in uint16) []*packet.Burst {
	var out []*packet.Burst
	for len(frames) > 0 {
		n := min(len(frames), packet.MaxBurst)
		b := &packet.Burst{}
		for _, f := range frames[:n] {
			b.Push(h.pkt(f, in))
		}
		out = append(out, b)
		frames = frames[n:]
	}
	return out
}

// handlesBursts groups handles into bursts.
func handlesBursts(hs []packet.Handle) []*packet.Burst {
	var out []*packet.Burst
	for len(hs) > 0 {
		n := min(len(hs), packet.MaxBurst)
		b := &packet.Burst{N: n}
		copy(b.H[:], hs[:n])
		out = append(out, b)
		hs = hs[n:]
	}
	return out
}

var (
	testSrc = netip.MustParseAddr("2001:db8:1::1")
	testDst = netip.MustParseAddr("2001:db8:2::1")
)

// udpFrame builds an Ethernet/IPv6/UDP frame with the UDP checksum set.
func udpFrame(src, dst netip.Addr, sport, dport uint16, payload []byte) []byte {
	d := make([]byte, 14+40+8+len(payload))
	copy(d[0:6], []byte{2, 0, 0, 0, 0, 2})
	copy(d[6:12], []byte{2, 0, 0, 0, 0, 1})
	binary.BigEndian.PutUint16(d[12:], 0x86DD)
	ip := packet.IPv6(d[14:])
	ip[0] = 0x60
	ip.SetPayloadLength(uint16(8 + len(payload)))
	ip.SetNextHeader(17)
	ip.SetHopLimit(64)
	ip.SetSrc(src.As16())
	ip.SetDst(dst.As16())
	u := d[54:]
	binary.BigEndian.PutUint16(u[0:], sport)
	binary.BigEndian.PutUint16(u[2:], dport)
	binary.BigEndian.PutUint16(u[4:], uint16(8+len(payload)))
	copy(u[8:], payload)
	s16, d16 := src.As16(), dst.As16()
	c := packet.UDP(u).ChecksumIPv6(s16, d16)
	binary.BigEndian.PutUint16(u[6:], c)
	return d
}
