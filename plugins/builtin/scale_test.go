package builtin

import (
	"encoding/binary"
	"testing"
	"time"
	"unsafe"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/plugins"
)

// TestGeneratorAllFlowsFast: 65536 flows of 64-byte frames keep finished
// per-flow templates and the burst-at-once path (before, above 1 MiB of
// templates, every packet was patched), and the frames are right: each
// flow's address and port, its own sequence, valid checksums.
func TestGeneratorAllFlowsFast(t *testing.T) {
	h := newHarness(t)
	const flows = 65536
	c := genCase{v4: true, src: "10.1.0.0", dst: "10.2.0.1", sizes: []int{64}, flows: flows, sport: 1, hopLimit: 64}
	g := newGen(t, h, c.keys())
	if g.perFlow == nil || !g.fast {
		t.Fatalf("per-flow templates %v, fast %v: want both", g.perFlow != nil, g.fast)
	}
	for i := 1; i < len(g.perFlow); i++ {
		if d := uintptr(unsafe.Pointer(g.perFlow[i].small)) - uintptr(unsafe.Pointer(g.perFlow[i-1].small)); d != 64 {
			t.Fatalf("flow %d's frame is %d bytes after flow %d's, want 64: one array in send order", i, d, i-1)
		}
	}
	k := 0
	for k < 2*flows {
		h.Clock.Advance(time.Microsecond)
		b := h.produce(g)
		for i := 0; i < b.N; i, k = i+1, k+1 {
			flow := k % flows
			// Every 997th packet gets the full decode (gopacket, both checksums).
			if k%997 == 0 {
				checkGenFrame(t, c, b.P(i).Data(), 64, flow)
			}
			d := b.P(i).Data()
			v := binary.BigEndian.Uint64(d[14+20+8:])
			if got, want := v, uint64(flow)<<48|uint64(k/flows); got != want {
				t.Fatalf("packet %d: fields %#x, want %#x", k, got, want)
			}
		}
		packet.Free(b)
	}
}

// TestSinkFlowTrack: a flow's state is 16 bytes (four to a cache line), and
// the first packet of a flow, sequence 0 or not, starts it as the seen flag
// did: what came before a first packet is lost, what comes after is tracked.
func TestSinkFlowTrack(t *testing.T) {
	if s := unsafe.Sizeof(flowTrack{}); s != 16 {
		t.Fatalf("flowTrack is %d bytes, want 16", s)
	}
	h := newHarness(t)
	g := h.mustBuild("generator", "sizes = [64]\n"+flowAddrs).(plugins.Producer)
	k := h.mustBuild("sink", "flows = 4\n")
	made := h.produce(g)
	frame := append([]byte(nil), made.P(0).Data()...)
	packet.Free(made)
	for i, c := range []struct{ flow, seq, lost, reordered, dups uint64 }{
		{2, 0, 0, 0, 0}, // sequence 0 first: nothing lost
		{2, 0, 0, 0, 1}, // and a second 0 is a duplicate, not a first packet
		{3, 5, 5, 0, 1}, // 0..4 never came
		{3, 3, 4, 1, 1}, // late: fills a gap
		{2, 1, 4, 1, 1},
		{1, 0, 4, 1, 1},
	} {
		f := append([]byte(nil), frame...)
		binary.BigEndian.PutUint64(f[14+20+8:], c.flow<<48|c.seq)
		b := &packet.Burst{}
		b.Push(h.Pkt(f, portEth0))
		h.run(b, k)
		if l, r, d := h.Counter("lost"), h.Counter("reordered"), h.Counter("duplicates"); l != c.lost ||
			r != c.reordered || d != c.dups {
			t.Fatalf("packet %d (flow %d seq %d): lost %d reordered %d duplicates %d, want %d %d %d",
				i, c.flow, c.seq, l, r, d, c.lost, c.reordered, c.dups)
		}
	}
}
