package stagetest

import (
	"testing"

	"github.com/linerate/linerate/appliance/packet"
)

// Chain applies each stage's verdicts as the engine does: what a stage
// decides leaves the burst, the rest goes on, and every fate is reported in
// the burst's order.
func TestChain(t *testing.T) {
	r := New(t, 0)
	r.NewPool("default", 16, 256)
	r.Env.Instances = 2
	b := r.Burst(7, []byte{0}, []byte{1}, []byte{2}, []byte{3}, []byte{4}, []byte{5})
	var consumed packet.Handle
	o := r.Chain(b, 2, func(k int, b *packet.Burst) {
		for i := 0; i < b.N; i++ {
			p := b.P(i)
			switch {
			case k == 0 && p.Data()[0] == 1:
				p.Forward(3)
			case k == 0 && p.Data()[0] == 2:
				p.Drop(packet.ReasonMalformed)
			case k == 1 && p.Data()[0] == 3:
				consumed = b.H[i]
				p.Consume()
			case k == 1 && p.Data()[0] == 4:
				if !r.Env.Handoff(b.H[i], 1) {
					t.Error("handoff to lcore 1 of 2 refused")
				}
			case k == 1 && p.Data()[0] == 5:
				r.Env.Free(b.H[i])
				p.Consume()
			}
		}
	})
	want := []struct {
		v    packet.Verdict
		port uint16
	}{{packet.Continue, 0}, {packet.Forward, 3}, {packet.Drop, 0}, {packet.Consume, 0}, {packet.Handoff, 1}, {packet.Consume, 0}}
	for i, w := range want {
		if f := o.Fates[i]; f.Verdict != w.v || f.Port != w.port {
			t.Errorf("packet %d: %v to %d, want %v to %d", i, f.Verdict, f.Port, w.v, w.port)
		}
	}
	if len(o.Forwarded) != 1 || o.Forwarded[0].Port != 3 || o.Dropped[packet.ReasonMalformed.String()] != 1 ||
		o.Consumed != 2 || len(o.Continued) != 1 || b.N != 0 {
		t.Fatalf("%v, burst left %d", o, b.N)
	}
	if len(r.Env.Handoffs) != 1 || r.Env.Handoffs[0].H.P().Stage != 1 {
		t.Errorf("handoffs %v: want one, to resume at stage 1", r.Env.Handoffs)
	}
	// Dropped and freed packets are back; the others are the test's.
	if n := r.InUse(); n != 4 {
		t.Errorf("%d buffers in use, want 4", n)
	}
	o.Free()
	FreeSent(r.Env.Handoffs)
	Free(consumed)
	if n := r.InUse(); n != 0 {
		t.Errorf("%d buffers in use after freeing, want 0", n)
	}
}

// A handoff needs another lcore, as the engine's does.
func TestHandoffRefused(t *testing.T) {
	r := New(t, 0)
	r.NewPool("default", 4, 256)
	h := r.Pkt([]byte{1}, 0)
	defer Free(h)
	for _, c := range []struct{ lcores, owner int }{{1, 0}, {2, 0}, {2, 2}, {2, -1}} {
		r.Env.Instances = c.lcores
		if r.Env.Handoff(h, c.owner) {
			t.Errorf("%d lcores: handoff to %d accepted", c.lcores, c.owner)
		}
	}
}

// Counters and histograms are found by name across stages, or in one.
func TestStats(t *testing.T) {
	r := New(t, 0)
	r.Counters("a").New("packets", "").Add(2)
	r.Counters("b").New("packets", "").Add(3)
	r.Counters("b").New("bytes", "").Add(9)
	if got := r.Counter("packets"); got != 5 {
		t.Errorf("packets over both stages: %d, want 5", got)
	}
	if got := r.StageCounter("b", "packets"); got != 3 {
		t.Errorf("b's packets: %d, want 3", got)
	}
	if got := r.CounterNames("b"); len(got) != 2 || got[0] != "bytes" || got[1] != "packets" {
		t.Errorf("b's counters: %v", got)
	}
	r.Histograms("a")("delay", "", "ns").Record(5)
	if s := r.Hist("a/delay"); s.Count != 1 || r.Hist("delay").Count != 1 {
		t.Errorf("histogram count %d", s.Count)
	}
}
