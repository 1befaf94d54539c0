package ioam

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

// The harness runs IOAM stages without the engine: a fake Env, a fixed port
// table, a real slab pool that must be empty when the test ends, and a run
// loop that applies verdicts as the engine does.

type fakeEnv struct {
	emitted []packet.Handle
	freed   []packet.Handle
	depth   int
}

func (e *fakeEnv) Emit(h packet.Handle, port uint16) bool {
	e.emitted = append(e.emitted, h)
	return true
}
func (e *fakeEnv) TxDepth(port uint16) int                 { return e.depth }
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
	pools    []*packet.Slab
	ports    fakePorts
	clock    *clock.Sim
	counters *stats.Set
	hists    map[string]*stats.Histogram
	ctx      plugins.Context
	shared   map[string]any
}

// testUnixBase is the harness clock's wall time at virtual zero: 2024-01-01.
const testUnixBase = 1704067200 * 1e9

// testStart is the harness clock's first reading: 1 s of virtual time, so
// that no rx time is zero.
const testStart = 1e9

// testSec is the Unix seconds of testStart.
const testSec = testUnixBase/1e9 + 1

func newHarness(t testing.TB) *harness {
	t.Helper()
	h := &harness{t: t, env: &fakeEnv{}, clock: clock.NewSim(testUnixBase), counters: &stats.Set{},
		hists: map[string]*stats.Histogram{}, shared: map[string]any{}}
	pool, err := packet.NewSlab(packet.SlabConfig{Name: "ioam-test", Buffers: 2048, DataRoom: 2048})
	if err != nil {
		t.Fatal(err)
	}
	h.pool = pool
	h.pools = append(h.pools, pool)
	h.ports = fakePorts{
		{ID: 0, Name: "eth0", MTU: 1500, Pool: pool},
		{ID: 1, Name: "eth1", MTU: 1500, Pool: pool},
		{ID: 2, Name: "big", MTU: 9000, Pool: pool},
	}
	h.ctx = plugins.Context{Clock: h.clock, Log: slog.New(slog.DiscardHandler), Env: h.env}
	h.clock.Set(testStart)
	t.Cleanup(h.close)
	return h
}

func (h *harness) close() {
	h.flush()
	for _, e := range h.env.emitted {
		packet.FreeOne(e)
	}
	h.env.emitted = nil
	for _, s := range h.pools {
		if n := s.InUse(); n != 0 {
			h.t.Errorf("pool %q: %d buffers in use at the end of the test", s.Name(), n)
			continue
		}
		if err := s.Close(); err != nil {
			h.t.Error(err)
		}
	}
}

func (h *harness) flush() {
	for _, x := range h.env.freed {
		packet.FreeOne(x)
	}
	h.env.freed = h.env.freed[:0]
}

func (h *harness) setup(kind, keys string) *plugins.Setup {
	h.t.Helper()
	tab, err := config.ParseTable(kind+".toml", []byte(keys))
	if err != nil {
		h.t.Fatalf("ParseTable: %v", err)
	}
	return &plugins.Setup{Kind: kind, Name: kind + "#0", Config: tab, Ports: h.ports, NumLcores: 1, Clock: h.clock,
		Log: slog.New(slog.DiscardHandler), Counters: h.counters,
		Histograms: func(name, help, unit string) *stats.Histogram {
			x := stats.NewHistogram()
			h.hists[name] = x
			return x
		},
		Pool: func(name string, buffers, dataRoom int) (packet.Pool, error) {
			s, err := packet.NewSlab(packet.SlabConfig{Name: name, Buffers: buffers, DataRoom: dataRoom})
			if err == nil {
				h.pools = append(h.pools, s)
			}
			return s, err
		},
		Shared: func(key string, mk func() any) any {
			if v, ok := h.shared[key]; ok {
				return v
			}
			v := mk()
			h.shared[key] = v
			return v
		},
	}
}

func (h *harness) build(kind, keys string) (plugins.Stage, error) {
	h.t.Helper()
	k, ok := plugins.Lookup(kind)
	if !ok {
		h.t.Fatalf("no kind %q", kind)
	}
	return k.New(h.setup(kind, keys))
}

func (h *harness) mustBuild(kind, keys string) plugins.Stage {
	h.t.Helper()
	st, err := h.build(kind, keys)
	if err != nil {
		h.t.Fatalf("%s: %v", kind, err)
	}
	return st
}

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

// pkt makes a packet holding data, received on port in.
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

// result is what became of one packet through a chain.
type result struct {
	data    []byte // the packet's bytes when it left the chain (forwarded or continued)
	dropped string
}

// run passes one packet through stages, applying verdicts, and returns a copy
// of its bytes (it frees the packet).
func (h *harness) run(data []byte, in uint16, local bool, stages ...plugins.Stage) result {
	h.t.Helper()
	b := &packet.Burst{}
	hd := h.pkt(data, in)
	if local {
		hd.P().SetFlag(packet.FlagLocal)
	}
	b.Push(hd)
	rs := h.runBurst(b, stages...)
	return rs[0]
}

// runBurst passes a burst through stages and returns each packet's fate, in
// order, freeing them all.
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
				out[idx[i]].data = append([]byte(nil), p.Data()...)
				packet.FreeOne(hd)
			}
		}
		b.N = j
		h.flush()
	}
	for i := 0; i < b.N; i++ {
		out[idx[i]].data = append([]byte(nil), b.H[i].P().Data()...)
		packet.FreeOne(b.H[i])
	}
	b.N = 0
	return out
}

// frame builds an Ethernet/IPv6/UDP frame with payload bytes of payload and
// the given extension headers (raw, next headers already chained; the last's
// next header is set to UDP here).
type frameSpec struct {
	src, dst string
	hopLimit uint8
	vlan     int
	ext      [][]byte // extension headers; each ext[i][0] is overwritten with the next one
	extTypes []uint8  // their header types
	payload  int
}

func buildFrame(t testing.TB, f frameSpec) []byte {
	t.Helper()
	if f.src == "" {
		f.src = "2001:db8:1::1"
	}
	if f.dst == "" {
		f.dst = "2001:db8:2::1"
	}
	if f.hopLimit == 0 {
		f.hopLimit = 64
	}
	var b []byte
	b = append(b, 2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1)
	if f.vlan > 0 {
		b = binary.BigEndian.AppendUint16(b, 0x8100)
		b = binary.BigEndian.AppendUint16(b, uint16(f.vlan))
	}
	b = binary.BigEndian.AppendUint16(b, 0x86DD)
	l3 := len(b)
	extLen := 0
	for _, e := range f.ext {
		extLen += len(e)
	}
	udpLen := 8 + f.payload
	ip := make([]byte, 40)
	first := uint8(packet.ProtocolUDP)
	if len(f.ext) > 0 {
		first = f.extTypes[0]
	}
	src, dst := netip.MustParseAddr(f.src).As16(), netip.MustParseAddr(f.dst).As16()
	packet.IPv6(ip).Encode(&packet.IPv6Fields{TrafficClass: 0x28, FlowLabel: 0x12345, PayloadLength: uint16(extLen + udpLen),
		NextHeader: first, HopLimit: f.hopLimit, Src: src, Dst: dst})
	b = append(b, ip...)
	for i, e := range f.ext {
		e = append([]byte(nil), e...)
		if i+1 < len(f.ext) {
			e[0] = f.extTypes[i+1]
		} else {
			e[0] = packet.ProtocolUDP
		}
		b = append(b, e...)
	}
	u := make([]byte, udpLen)
	binary.BigEndian.PutUint16(u[0:], 10000)
	binary.BigEndian.PutUint16(u[2:], 20000)
	binary.BigEndian.PutUint16(u[4:], uint16(udpLen))
	for i := 8; i < udpLen; i++ {
		u[i] = byte(i)
	}
	b = append(b, u...)
	ul := packet.UDP(b[len(b)-udpLen:])
	var l packet.Layers
	if err := packet.Parse(b, &l); err != nil {
		t.Fatalf("buildFrame: %v", err)
	}
	ul.SetChecksum(0)
	c := l.UDPChecksum(b)
	if c == 0 {
		c = 0xFFFF
	}
	ul.SetChecksum(c)
	_ = l3
	return b
}
