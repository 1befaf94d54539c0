// Package stagetest tests stages as the engine runs them, without the engine:
// the harness out-of-tree stages use as the built-in ones do.
//
// A Rig is an lcore in miniature: a fake plugins.Env that records what stages
// emit, free and hand off; slab pools that must all be empty when the test
// ends; virtual time; the counters and histograms stages register; and
// verdicts applied after each stage as the engine's lcore does, with the
// ownership checks of a checked build (-tags lrcheck). A Harness adds a port
// table and builds stages from TOML keys through the registry.
package stagetest

import (
	"fmt"
	"sort"
	"testing"

	"github.com/linerate/linerate/appliance/clock"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/appliance/stats"
)

// Sent is a packet a stage forwarded, emitted or handed off, with its port
// (for a handoff, the owner instance).
type Sent struct {
	H    packet.Handle
	Port uint16
}

// Env is a plugins.Env that records what the stages do on their lcore.
type Env struct {
	Emitted   []Sent
	Freed     []packet.Handle // by Free; back to their pools at Flush
	Handoffs  []Sent          // Port holds the owner instance
	Instances int             // what NumInstances reports; 0 means 1
	Instance  int             // this instance: a handoff to it is refused
	Depth     int             // what TxDepth reports for every port
	Stage     int             // the running stage, where a handed-off packet resumes
}

// Emit records h for port.
func (e *Env) Emit(h packet.Handle, port uint16) bool {
	packet.Own(h, packet.OpClaim, uint16(e.Instance), e.Stage)
	e.Emitted = append(e.Emitted, Sent{h, port})
	return true
}

// TxDepth is e.Depth.
func (e *Env) TxDepth(port uint16) int { return e.Depth }

// Owner spreads keys over the instances by remainder.
func (e *Env) Owner(key uint64) int {
	if e.Instances <= 1 {
		return 0
	}
	return int(key % uint64(e.Instances))
}

// Handoff marks h for owner, as the engine does, and records it.
func (e *Env) Handoff(h packet.Handle, owner int) bool {
	if owner < 0 || owner >= e.NumInstances() || owner == e.Instance {
		return false
	}
	h.P().HandoffTo(owner, e.Stage)
	e.Handoffs = append(e.Handoffs, Sent{h, uint16(owner)})
	return true
}

// NumInstances is e.Instances, at least 1.
func (e *Env) NumInstances() int { return max(e.Instances, 1) }

// Free records h, to be returned at Flush, as the engine returns it at the
// lcore's next quiescent point.
func (e *Env) Free(h packet.Handle) {
	packet.Own(h, packet.OpFree, uint16(e.Instance), e.Stage)
	e.Freed = append(e.Freed, h)
}

// Flush returns what the stages freed to their pools.
func (e *Env) Flush() {
	Free(e.Freed...)
	e.Freed = e.Freed[:0]
}

// TakeEmitted returns what the stages emitted so far and forgets it: the
// caller frees it.
func (e *Env) TakeEmitted() []Sent {
	out := e.Emitted
	e.Emitted = nil
	return out
}

// Rig is the lcore: its Env, clock, pools and the stages' stats.
type Rig struct {
	T     testing.TB
	Env   *Env
	Clock *clock.Sim
	// Pools are found by the name stages ask for. Default is the first one
	// made, where Pkt takes its buffers.
	Pools   map[string]*packet.Slab
	Default *packet.Slab
	// Globals is what Global made, by key (the engine's Setup.Global).
	Globals map[string]any

	order  []*packet.Slab
	sets   []namedSet
	hists  []namedHist
	shared map[string]any
}

type namedSet struct {
	stage string
	set   *stats.Set
}

type namedHist struct {
	stage, name string
	h           *stats.Histogram
}

// New makes a rig whose clock reads 0 with wall time unixBase. When t ends it
// returns what the stages freed and emitted, and every pool must be empty.
func New(t testing.TB, unixBase int64) *Rig {
	t.Helper()
	r := &Rig{T: t, Env: &Env{}, Clock: clock.NewSim(unixBase), Pools: map[string]*packet.Slab{},
		Globals: map[string]any{}, shared: map[string]any{}}
	t.Cleanup(r.close)
	return r
}

// NewPool makes a slab pool that stages find by name.
func (r *Rig) NewPool(name string, buffers, dataRoom int) *packet.Slab {
	r.T.Helper()
	s, err := r.newPool(name, buffers, dataRoom)
	if err != nil {
		r.T.Fatal(err)
	}
	return s
}

func (r *Rig) newPool(name string, buffers, dataRoom int) (*packet.Slab, error) {
	s, err := packet.NewSlab(packet.SlabConfig{Name: name, Buffers: buffers, DataRoom: dataRoom})
	if err != nil {
		return nil, err
	}
	r.Pools[name] = s
	r.order = append(r.order, s)
	if r.Default == nil {
		r.Default = s
	}
	return s, nil
}

// Pool finds or makes a named pool, as the engine's Setup.Pool does.
func (r *Rig) Pool(name string, buffers, dataRoom int) (packet.Pool, error) {
	if s, ok := r.Pools[name]; ok {
		return s, nil
	}
	return r.newPool(name, buffers, dataRoom)
}

// InUse is the number of buffers out of every pool.
func (r *Rig) InUse() int {
	n := 0
	for _, s := range r.order {
		n += s.InUse()
	}
	return n
}

func (r *Rig) close() {
	r.Env.Flush()
	for _, e := range r.Env.TakeEmitted() {
		packet.FreeOne(e.H)
	}
	for _, s := range r.order {
		if n := s.InUse(); n != 0 {
			r.T.Errorf("pool %q: %d buffers still in use at the end of the test", s.Name(), n)
			continue // unmapping would leave dangling handles
		}
		if err := s.Close(); err != nil {
			r.T.Errorf("close pool %q: %v", s.Name(), err)
		}
	}
}

// Counters is a new counter set for the stage instance called stage.
func (r *Rig) Counters(stage string) *stats.Set {
	s := &stats.Set{}
	r.sets = append(r.sets, namedSet{stage, s})
	return s
}

// Histograms is Setup.Histograms for the stage instance called stage.
func (r *Rig) Histograms(stage string) func(name, help, unit string) *stats.Histogram {
	return func(name, help, unit string) *stats.Histogram {
		h := stats.NewHistogram()
		r.hists = append(r.hists, namedHist{stage, name, h})
		return h
	}
}

// Shared is Setup.Shared for the stage instance called stage: one value per
// stage name and key, as the engine keeps per pipeline.
func (r *Rig) Shared(stage string) func(key string, mk func() any) any {
	return func(key string, mk func() any) any { return memo(r.shared, stage+"/"+key, mk) }
}

// Global is Setup.Global: one value per key for the whole rig.
func (r *Rig) Global(key string, mk func() any) any { return memo(r.Globals, key, mk) }

func memo(m map[string]any, key string, mk func() any) any {
	if v, ok := m[key]; ok {
		return v
	}
	v := mk()
	m[key] = v
	return v
}

// Counter is the sum of the counters called name over every stage; the test
// fails if no stage has one.
func (r *Rig) Counter(name string) uint64 {
	r.T.Helper()
	return r.counter("", name)
}

// StageCounter is the counter called name of the stage instance called stage.
func (r *Rig) StageCounter(stage, name string) uint64 {
	r.T.Helper()
	return r.counter(stage, name)
}

func (r *Rig) counter(stage, name string) uint64 {
	r.T.Helper()
	var v uint64
	found := false
	for _, ns := range r.sets {
		if stage != "" && ns.stage != stage {
			continue
		}
		ns.set.Publish()
		ns.set.Each(func(n, _ string, x uint64) {
			if n == name {
				v += x
				found = true
			}
		})
	}
	if !found {
		if stage != "" {
			r.T.Fatalf("stage %s has no counter %q", stage, name)
		}
		r.T.Fatalf("no counter %q", name)
	}
	return v
}

// CounterNames lists, sorted, the counters the stages called stages
// registered (every stage's when none is named).
func (r *Rig) CounterNames(stages ...string) []string {
	var out []string
	for _, ns := range r.sets {
		if len(stages) > 0 && !contains(stages, ns.stage) {
			continue
		}
		ns.set.Each(func(n, _ string, _ uint64) { out = append(out, n) })
	}
	sort.Strings(out)
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Hist is a snapshot of the histogram called name, or "stage/name"; the test
// fails if there is none. Of several, the last registered counts.
func (r *Rig) Hist(name string) *stats.HistSnapshot {
	r.T.Helper()
	for i := len(r.hists) - 1; i >= 0; i-- {
		nh := r.hists[i]
		if nh.name == name || nh.stage+"/"+nh.name == name {
			nh.h.Publish()
			return nh.h.Snapshot()
		}
	}
	r.T.Fatalf("no histogram %q", name)
	return nil
}

// HistNames lists, sorted, the names of the histograms the stages registered.
func (r *Rig) HistNames() []string {
	var out []string
	for _, nh := range r.hists {
		out = append(out, nh.name)
	}
	sort.Strings(out)
	return out
}

// Pkt makes a packet of the default pool holding data, received on port in at
// the clock's time.
func (r *Rig) Pkt(data []byte, in uint16) packet.Handle {
	r.T.Helper()
	return r.PktFrom(r.Default, data, in)
}

// PktFrom is Pkt from another pool.
func (r *Rig) PktFrom(pool packet.Pool, data []byte, in uint16) packet.Handle {
	r.T.Helper()
	hd, ok := pool.AllocOne()
	if !ok {
		r.T.Fatalf("pool %q is empty", pool.Name())
	}
	p := hd.P()
	d, err := p.Append(len(data))
	if err != nil {
		r.T.Fatal(err)
	}
	copy(d, data)
	p.InPort = in
	p.RxTime = r.Clock.Now()
	return hd
}

// Burst makes a burst of packets from frames, received on port in.
func (r *Rig) Burst(in uint16, frames ...[]byte) *packet.Burst {
	r.T.Helper()
	b := &packet.Burst{}
	for _, f := range frames {
		b.Push(r.Pkt(f, in))
	}
	return b
}

// Fate is what became of one packet of a burst.
type Fate struct {
	Verdict packet.Verdict // Continue: it went through every stage
	H       packet.Handle  // freed already when dropped
	Port    uint16         // where it was forwarded (or handed off)
	Reason  string         // why it was dropped
}

// Take returns the bytes of a packet that left the chain, freeing it, or why
// it did not: its drop reason, or "consumed".
func (f Fate) Take() (data []byte, dropped string) {
	switch f.Verdict {
	case packet.Drop:
		return nil, f.Reason
	case packet.Consume:
		return nil, "consumed"
	}
	return TakeData(f.H), ""
}

// Outcome is what became of a burst.
type Outcome struct {
	Fates     []Fate         // one per packet, in the burst's order
	Forwarded []Sent         // in order; the test frees them
	Dropped   map[string]int // by reason name; freed already
	Consumed  int
	Continued []packet.Handle // at Continue after the last stage; the test frees them
}

// Chain passes b through n stages from the first, process(k, b) running stage
// k, and applies verdicts as the engine does: Continue stays in the burst;
// Forward, Drop, Consume and Handoff leave it (Drop frees the packet; a handed
// off one stays in Env.Handoffs). Packets the stages freed through Env.Free go
// back to their pools when the burst is done. b is empty afterwards.
func (r *Rig) Chain(b *packet.Burst, n int, process func(k int, b *packet.Burst)) Outcome {
	r.T.Helper()
	o := Outcome{Fates: make([]Fate, b.N), Dropped: map[string]int{}}
	var idx [packet.MaxBurst]int
	for i := range b.N {
		idx[i] = i
	}
	for k := 0; k < n; k++ {
		r.Env.Stage = k
		process(k, b)
		j := 0
		for i := 0; i < b.N; i++ {
			hd := b.H[i]
			p := hd.P()
			if p.Verdict() != packet.Consume {
				packet.Own(hd, packet.OpVerdict, uint16(r.Env.Instance), k)
			}
			f := &o.Fates[idx[i]]
			*f = Fate{Verdict: p.Verdict(), H: hd}
			switch p.Verdict() {
			case packet.Continue:
				b.H[j], idx[j] = hd, idx[i]
				j++
			case packet.Forward:
				f.Port = p.OutPort
				o.Forwarded = append(o.Forwarded, Sent{hd, p.OutPort})
			case packet.Drop:
				f.Reason = p.Reason.String()
				o.Dropped[f.Reason]++
				packet.FreeOne(hd)
			case packet.Consume:
				o.Consumed++
			case packet.Handoff:
				f.Port = p.OutPort
			default:
				r.T.Errorf("stage %d left verdict %v", k, p.Verdict())
				packet.FreeOne(hd)
			}
		}
		b.N = j
	}
	for i := 0; i < b.N; i++ {
		o.Fates[idx[i]] = Fate{Verdict: packet.Continue, H: b.H[i]}
	}
	o.Continued = append(o.Continued, b.H[:b.N]...)
	b.N = 0
	r.Env.Flush()
	return o
}

// Free frees what o still holds: what was forwarded or continued.
func (o Outcome) Free() {
	FreeSent(o.Forwarded)
	Free(o.Continued...)
}

func (o Outcome) String() string {
	return fmt.Sprintf("forwarded %d, dropped %v, consumed %d, continued %d", len(o.Forwarded), o.Dropped, o.Consumed, len(o.Continued))
}

// Free returns handles to their pools.
func Free(hs ...packet.Handle) {
	for _, h := range hs {
		packet.FreeOne(h)
	}
}

// FreeSent returns forwarded or emitted packets to their pools.
func FreeSent(s []Sent) {
	for _, x := range s {
		packet.FreeOne(x.H)
	}
}

// TakeData copies a packet's bytes and frees it.
func TakeData(h packet.Handle) []byte {
	out := append([]byte(nil), h.P().Data()...)
	packet.FreeOne(h)
	return out
}
