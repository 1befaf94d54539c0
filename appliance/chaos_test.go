package appliance_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/linerate/linerate/appliance"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/internal/enginetest"
	"github.com/linerate/linerate/plugins"
)

// chaos is a test stage that does, at random, everything a stage may do with
// a packet: leave it, forward it (to a real port or to none), drop it, free
// and consume it, hand it to another lcore, emit a copy, replace it by a copy,
// open a gap that may need a copy, or keep it and give it back later through
// Produce. With the built-in stages around it, it exercises every ownership
// hand-over of the engine.
type chaos struct {
	rng   *rand.Rand
	ports []uint16
	pool  packet.Pool
	held  []packet.Handle
	odds  [numActions]int
	total int
}

const (
	actContinue = iota
	actForward
	actDrop
	actFree
	actHandoff
	actEmitCopy
	actReplace
	actGap
	actHold
	numActions
)

var reasonChaos = packet.RegisterReason("chaos")

var registerChaosOnce sync.Once

func registerChaos() {
	registerChaosOnce.Do(func() {
		plugins.Register(plugins.Kind{Name: "test.chaos", Summary: "random verdicts", New: newChaos})
	})
}

func newChaos(s *plugins.Setup) (plugins.Stage, error) {
	var c struct {
		Seed uint64 `toml:"seed"`
		Odds []int  `toml:"odds"` // weight of each action, by number
	}
	if err := s.Config.Decode(&c); err != nil {
		return nil, err
	}
	st := &chaos{rng: rand.New(rand.NewPCG(c.Seed, uint64(s.Instance)))}
	for i := range st.odds {
		st.odds[i] = 1
		if i < len(c.Odds) {
			st.odds[i] = c.Odds[i]
		}
		st.total += st.odds[i]
	}
	for _, pi := range s.Ports.All() {
		st.ports = append(st.ports, pi.ID)
	}
	st.ports = append(st.ports, 999) // no such port
	pool, err := s.Pool("chaos", 256, 2048)
	if err != nil {
		return nil, err
	}
	st.pool = pool
	return st, nil
}

func (c *chaos) action() int {
	r := c.rng.IntN(c.total)
	for a, w := range c.odds {
		if r < w {
			return a
		}
		r -= w
	}
	return actContinue
}

// copyOf is a copy of h in the chaos pool, or 0 when it is empty.
func (c *chaos) copyOf(h packet.Handle) packet.Handle {
	q, ok := c.pool.AllocOne()
	if !ok {
		return 0
	}
	if err := q.P().CopyFrom(h.P(), c.pool.Headroom()); err != nil {
		c.pool.FreeOne(q)
		return 0
	}
	q.P().Continue()
	return q
}

func (c *chaos) Process(ctx *plugins.Context, b *packet.Burst) {
	for i := 0; i < b.N; i++ {
		h := b.H[i]
		p := h.P()
		switch c.action() {
		case actForward:
			p.Forward(c.ports[c.rng.IntN(len(c.ports))])
		case actDrop:
			p.Drop(reasonChaos)
		case actFree:
			p.Consume()
			ctx.Env.Free(h)
		case actHandoff:
			ctx.Handoff(h, c.rng.IntN(ctx.Env.NumInstances()))
		case actEmitCopy:
			if q := c.copyOf(h); q != 0 {
				ctx.Emit(q, c.ports[c.rng.IntN(len(c.ports))])
			}
		case actReplace:
			if q := c.copyOf(h); q != 0 {
				ctx.Env.Free(h)
				b.H[i] = q
			}
		case actGap:
			if _, err := b.InsertGap(i, c.rng.IntN(p.Len()+1), c.rng.IntN(600), ctx.Env); err != nil {
				p.Drop(reasonChaos)
			}
		case actHold:
			if len(c.held) < 32 {
				p.Consume()
				ctx.Hold(h)
				c.held = append(c.held, h)
			}
		}
	}
}

// Produce gives back some of what the stage keeps.
func (c *chaos) Produce(ctx *plugins.Context, b *packet.Burst) {
	n := min(c.rng.IntN(len(c.held)+1), b.Room())
	for _, h := range c.held[:n] {
		h.P().Continue()
		b.Push(h)
	}
	c.held = append(c.held[:0], c.held[n:]...)
}

func (c *chaos) Held() int { return len(c.held) }

func (c *chaos) Stop(ctx *plugins.Context) {
	for _, h := range c.held {
		ctx.Env.Free(h)
	}
	c.held = c.held[:0]
}

// chaosConfig makes a random engine from seed: a generator and chaos stages on
// lcore 0 feed a small mem ring; two lcores take it through more chaos, a lossy
// link and a sink. Tx buffers and rings are small, so tx_full and ring_full
// happen; packets forwarded to the mem port come round again.
func chaosConfig(seed uint64) string {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	odds := func() string {
		w := make([]string, numActions)
		for i := range w {
			w[i] = fmt.Sprint(r.IntN(4))
		}
		w[actContinue] = fmt.Sprint(4 + r.IntN(8))
		return strings.Join(w, ", ")
	}
	chaosStage := func() string {
		return fmt.Sprintf("[[pipelines.stages]]\nkind = \"test.chaos\"\nseed = %d\nodds = [%s]\n", r.Uint64()>>1, odds())
	}
	var b strings.Builder
	fmt.Fprintf(&b, `version = 1
[engine]
pin = false
tx_buffer = %d
[control]
listen = ""
[[pools]]
name = "default"
buffers = 1024
[[ports]]
name = "m0"
driver = "mem"
peer = "m1"
ring_size = %d
[[ports]]
name = "m1"
driver = "mem"
peer = "m0"
ring_size = 64
rx_queues = 2
[[ports]]
name = "hole"
driver = "null"
[[pipelines]]
name = "src"
lcores = [0]
[[pipelines.stages]]
kind = "generator"
ip_version = %d
src = "%s"
dst = "%s"
flows = %d
sizes = [%d]
count = %d
`, 64+r.IntN(128), 64<<r.IntN(3), 4+2*r.IntN(2), "", "", 1+r.IntN(8), 64+r.IntN(1400), 200+r.IntN(3000))
	out := b.String()
	if strings.Contains(out, "ip_version = 4") {
		out = strings.Replace(out, `src = ""`+"\n"+`dst = ""`, `src = "192.0.2.1"`+"\n"+`dst = "192.0.2.2"`, 1)
	} else {
		out = strings.Replace(out, `src = ""`+"\n"+`dst = ""`, `src = "2001:db8::1"`+"\n"+`dst = "2001:db8::2"`, 1)
	}
	b.Reset()
	b.WriteString(out)
	for range r.IntN(3) {
		b.WriteString(chaosStage())
	}
	b.WriteString("[[pipelines.stages]]\nkind = \"forward\"\nport = \"m0\"\n")
	fmt.Fprintf(&b, "[[pipelines]]\nname = \"dst\"\nlcores = [0, 1]\nrx = [\"m1\"]\n")
	b.WriteString(chaosStage())
	fmt.Fprintf(&b, "[[pipelines.stages]]\nkind = \"link\"\nloss = %g\ndelay = \"%dus\"\nseed = %d\nqueue = %d\n",
		float64(r.IntN(20))/100, r.IntN(200), r.Uint64()>>1|1, 16+r.IntN(512))
	for range r.IntN(3) {
		b.WriteString(chaosStage())
	}
	b.WriteString("[[pipelines.stages]]\nkind = \"sink\"\nname = \"sink\"\n")
	return b.String()
}

// runChaos runs the engine chaosConfig(seed) makes, stops it, then checks that every buffer came back exactly
// once: none in use, and each pool hands out all its buffers, all different.
func runChaos(t *testing.T, seed uint64, manual bool) {
	registerChaos()
	cfg := chaosConfig(seed)
	if manual {
		clk := newSimClock()
		e := enginetest.Start(t, cfg, appliance.Options{Manual: true, Clock: clk})
		for range 3000 {
			clk.Advance(10 * time.Microsecond)
			e.Step()
		}
		e.Stop()
		checkPools(t, e, cfg)
		return
	}
	// Packets may circle between the mem ports, or wait in a ring nobody
	// reads, for ever: the engine stops when told, drains what it can and
	// frees the rest.
	e := enginetest.Start(t, cfg, appliance.Options{})
	select {
	case <-e.Done():
	case <-time.After(200 * time.Millisecond):
	}
	e.Stop()
	checkPools(t, e, cfg)
}

func checkPools(t *testing.T, e *appliance.Engine, cfg string) {
	t.Helper()
	for name, used := range e.InUse() {
		if used != 0 {
			t.Errorf("pool %q has %d buffers in use after the engine stopped\n%s", name, used, cfg)
		}
	}
	for _, s := range e.Snapshot().Drops {
		if s.Reason == packet.ReasonUnknown.String() {
			t.Errorf("%d packets dropped for an unknown verdict", s.Count)
		}
	}
	for _, pool := range packet.Pools() {
		if _, mine := e.InUse()[pool.Name()]; !mine {
			continue
		}
		var all []packet.Handle
		seen := map[packet.Handle]bool{}
		for {
			h, ok := pool.AllocOne()
			if !ok {
				break
			}
			if seen[h] {
				t.Errorf("pool %q handed out buffer %#x twice: it was freed twice", pool.Name(), uintptr(h))
			}
			seen[h] = true
			all = append(all, h)
		}
		if size := pool.Stats().Size; len(all) != size {
			t.Errorf("pool %q: %d of %d buffers came back", pool.Name(), len(all), size)
		}
		packet.FreeHandles(all)
	}
}

// FuzzPipelines runs random pipelines of the built-in stages and the chaos
// stage on two lcores in virtual time: every buffer must come back exactly
// once, whatever the verdicts, handoffs, copies, losses and full buffers. Run
// it with -tags lrcheck as well: the checked build aborts on any hand-over
// the ownership rules forbid.
func FuzzPipelines(f *testing.F) {
	for seed := range uint64(8) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, seed uint64) { runChaos(t, seed, true) })
}

// TestChaosThreads runs a few of the fuzzer's engines on two real threads,
// where the lcores race for the shared pools.
func TestChaosThreads(t *testing.T) {
	for seed := range uint64(3) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runChaos(t, seed, false) })
	}
}
