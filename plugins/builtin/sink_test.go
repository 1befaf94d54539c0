package builtin

import (
	"strings"
	"testing"
	"time"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/plugins"
	"github.com/linerate/linerate/plugins/stagetest"
)

// genPackets makes n generator packets (flows round-robin) at the harness
// clock's time, and returns them in order.
func genPackets(t *testing.T, h *harness, keys string, n int) []packet.Handle {
	t.Helper()
	g := newGen(t, h, keys)
	var out []packet.Handle
	for len(out) < n {
		b := h.produce(g)
		if b.N == 0 {
			t.Fatal("generator made nothing")
		}
		out = append(out, b.Handles()...)
	}
	stagetest.Free(out[n:]...)
	return out[:n]
}

// sinkRun sends hs to the sink in bursts of up to 64, each received at time
// rx, and checks that the sink consumed and freed every one.
func sinkRun(t *testing.T, h *harness, st plugins.Stage, hs []packet.Handle, rx int64) {
	t.Helper()
	for len(hs) > 0 {
		b := &packet.Burst{}
		for len(hs) > 0 && b.Push(hs[0]) {
			hs[0].P().RxTime = rx
			hs = hs[1:]
		}
		n := b.N
		o := h.run(b, st)
		if o.Consumed != n || len(o.Forwarded)+len(o.Continued)+len(o.Dropped) != 0 {
			t.Fatalf("%v; want all %d consumed", o, n)
		}
	}
	if n := h.InUse(); n != 0 {
		t.Fatalf("%d buffers in use after the sink", n)
	}
}

const sinkGen = `src = "2001:db8::1"
dst = "2001:db8::2"
flows = 2
sizes = [128]
`

// TestSinkLossAndReordering feeds the sink generator packets with some taken
// out and some swapped: two flows, packets alternate between them, so packet
// 2k is flow 0 sequence k and packet 2k+1 flow 1 sequence k.
func TestSinkLossAndReordering(t *testing.T) {
	for _, c := range []struct {
		name                   string
		edit                   func([]packet.Handle) ([]packet.Handle, []packet.Handle) // kept, removed
		lost, reordered, total uint64
	}{
		{name: "in order", edit: keep, total: 100},
		{name: "two lost", edit: remove(6, 14), lost: 2, total: 98},
		{name: "a run lost", edit: remove(20, 22, 24, 26, 28), lost: 5, total: 95},
		{name: "flow's first packets lost", edit: remove(1, 3), lost: 2, total: 98},
		{name: "last packet lost is not seen", edit: remove(99), lost: 0, total: 99},
		// Swapping sequence 4 and 5 of flow 1: 5 counts 4 as lost, then 4
		// arrives late: reordered, and no longer lost.
		{name: "swap", edit: swap(9, 11), reordered: 1, total: 100},
		{name: "late by many", edit: move(10, 60), reordered: 1, total: 100},
		{name: "swap and loss", edit: both(swap(9, 11), remove(50)), lost: 1, reordered: 1, total: 99},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			h.Clock.Set(int64(time.Second))
			hs := genPackets(t, h, sinkGen, 100)
			kept, removed := c.edit(hs)
			stagetest.Free(removed...)
			st := h.mustBuild("sink", "")
			sinkRun(t, h, st, kept, int64(time.Second))
			for name, want := range map[string]uint64{
				"received": c.total, "received_bytes": c.total * 124, "tracked": c.total, "untracked": 0,
				"lost": c.lost, "reordered": c.reordered,
			} {
				if got := h.Counter(name); got != want {
					t.Errorf("%s = %d, want %d", name, got, want)
				}
			}
		})
	}
}

func keep(hs []packet.Handle) ([]packet.Handle, []packet.Handle) { return hs, nil }

func remove(idx ...int) func([]packet.Handle) ([]packet.Handle, []packet.Handle) {
	return func(hs []packet.Handle) (kept, removed []packet.Handle) {
		drop := map[int]bool{}
		for _, i := range idx {
			drop[i] = true
		}
		for i, hd := range hs {
			if drop[i] {
				removed = append(removed, hd)
			} else {
				kept = append(kept, hd)
			}
		}
		return kept, removed
	}
}

func swap(i, j int) func([]packet.Handle) ([]packet.Handle, []packet.Handle) {
	return func(hs []packet.Handle) ([]packet.Handle, []packet.Handle) {
		hs[i], hs[j] = hs[j], hs[i]
		return hs, nil
	}
}

// move takes packet i out and puts it back at position j.
func move(i, j int) func([]packet.Handle) ([]packet.Handle, []packet.Handle) {
	return func(hs []packet.Handle) ([]packet.Handle, []packet.Handle) {
		x := hs[i]
		out := append(append([]packet.Handle(nil), hs[:i]...), hs[i+1:]...)
		out = append(out[:j], append([]packet.Handle{x}, out[j:]...)...)
		return out, nil
	}
}

func both(a, b func([]packet.Handle) ([]packet.Handle, []packet.Handle)) func([]packet.Handle) ([]packet.Handle, []packet.Handle) {
	return func(hs []packet.Handle) ([]packet.Handle, []packet.Handle) {
		k, r1 := a(hs)
		k, r2 := b(k)
		return k, append(r1, r2...)
	}
}

// TestSinkDuplicates: a packet whose sequence number arrived within the
// last 64 of its flow is a duplicate, neither reordered nor filling a gap;
// an older one cannot be told from a late packet.
func TestSinkDuplicates(t *testing.T) {
	h := newHarness(t)
	h.Clock.Set(int64(time.Second))
	// Two generators of one config make the same packets: the second's are
	// copies of the first's. 200 packets, 100 per flow.
	first := genPackets(t, h, sinkGen, 200)
	again := genPackets(t, h, sinkGen, 200)
	st := h.mustBuild("sink", "")
	// Flow 0 and 1 at sequence 99 and 97 (within the window); then 10
	// at sequences 0..4, 100 behind (beyond it).
	dups := append([]packet.Handle{again[198], again[195]}, again[:10]...)
	stagetest.Free(again[10:195]...)
	stagetest.Free(again[196:198]...)
	stagetest.Free(again[199])
	sinkRun(t, h, st, append(first, dups...), int64(time.Second))
	for name, want := range map[string]uint64{"tracked": 212, "duplicates": 2, "reordered": 10, "lost": 0} {
		if got := h.Counter(name); got != want {
			t.Errorf("%s = %d, want %d", name, got, want)
		}
	}
}

// TestSinkLatency: the latency is the sink's rx time less the generator's tx
// timestamp.
func TestSinkLatency(t *testing.T) {
	h := newHarness(t)
	st := h.mustBuild("sink", "")
	var want []int64
	for i, lat := range []time.Duration{10 * time.Microsecond, 250 * time.Microsecond, time.Millisecond, 0} {
		h.Clock.Set(int64(time.Duration(i+1) * time.Second))
		hs := genPackets(t, h, sinkGen, 10)
		sinkRun(t, h, st, hs, h.Clock.Now()+int64(lat))
		for range hs {
			want = append(want, int64(lat))
		}
	}
	s := h.Hist("latency")
	if s.Count != uint64(len(want)) {
		t.Fatalf("latency count %d, want %d", s.Count, len(want))
	}
	var sum int64
	for _, v := range want {
		sum += v
	}
	if s.Sum != uint64(sum) || s.Max != uint64(time.Millisecond) {
		t.Errorf("latency sum %d max %d, want %d and %d", s.Sum, s.Max, sum, time.Millisecond)
	}
	// Ten each of 0, 10µs, 250µs and 1ms: the 60th percentile is 250µs.
	if q := s.Quantile(0.6); q < uint64(249*time.Microsecond) || q > uint64(251*time.Microsecond) {
		t.Errorf("60th percentile latency %v, want 250µs", time.Duration(q))
	}

	// A packet that arrives "before" it was sent (clocks of two hosts) is not
	// recorded.
	h.Clock.Set(int64(10 * time.Second))
	hs := genPackets(t, h, sinkGen, 3)
	sinkRun(t, h, st, hs, h.Clock.Now()-1)
	if got := h.Hist("latency").Count; got != uint64(len(want)) {
		t.Errorf("latency count %d after negative latencies, want %d", got, len(want))
	}
	if got := h.Counter("tracked"); got != uint64(len(want)+3) {
		t.Errorf("tracked %d, want %d", got, len(want)+3)
	}
}

// TestSinkUntracked: what the sink cannot track it still consumes and counts.
func TestSinkUntracked(t *testing.T) {
	h := newHarness(t)
	h.Clock.Set(int64(time.Second))
	st := h.mustBuild("sink", "udp_port = 20000\nflows = 2")
	var hs []packet.Handle
	// Tracked: generator packets to port 20000, flows 0 and 1.
	hs = append(hs, genPackets(t, h, sinkGen, 4)...)
	// Untracked: flows 2 and 3 are beyond flows = 2.
	four := genPackets(t, h, strings.Replace(sinkGen, "flows = 2", "flows = 4", 1), 4)
	hs = append(hs, four[2:]...)
	stagetest.Free(four[:2]...)
	// Untracked: another UDP port; frames too short for the fields; not UDP;
	// not IP; not parsable.
	hs = append(hs, genPackets(t, h, sinkGen+"udp_dst_port = 20001\n", 1)...)
	hs = append(hs, genPackets(t, h, "ip_version = 4\nsrc = \"192.0.2.1\"\ndst = \"192.0.2.2\"\nudp_dst_port = 20000\nsizes = [61]\n", 1)...)
	for _, f := range [][]byte{
		udp6(1, 20000).bytes(), // 32 bytes of zeros: flow 0, sequence 0, but not a generator packet's length …
		frame{src: "2001:db8::1", dst: "2001:db8::2", proto: 6, payload: 40}.bytes(),
		frame{etherType: packet.EtherTypeARP}.bytes(),
		make([]byte, 10),
	} {
		hs = append(hs, h.Pkt(f, portEth0))
	}
	sinkRun(t, h, st, hs, h.Clock.Now())
	// … so the UDP frame with 32 zero bytes counts as tracked: flow 0 sequence
	// 0 again, a duplicate.
	for name, want := range map[string]uint64{
		"received": 12, "tracked": 5, "untracked": 7, "lost": 0, "reordered": 0, "duplicates": 1,
	} {
		if got := h.Counter(name); got != want {
			t.Errorf("%s = %d, want %d", name, got, want)
		}
	}
}

// TestSinkAnyPort: udp_port = 0 tracks generator packets to any port.
func TestSinkAnyPort(t *testing.T) {
	h := newHarness(t)
	h.Clock.Set(int64(time.Second))
	st := h.mustBuild("sink", "")
	hs := genPackets(t, h, sinkGen+"udp_dst_port = 7\n", 3)
	v4 := genPackets(t, h, "ip_version = 4\nsrc = \"192.0.2.1\"\ndst = \"192.0.2.2\"\nudp_dst_port = 9\nflows = 3\n", 3)
	stagetest.Free(v4[:2]...)
	hs = append(hs, v4[2]) // flow 2, sequence 0
	sinkRun(t, h, st, hs, h.Clock.Now())
	if h.Counter("tracked") != 4 || h.Counter("untracked") != 0 || h.Counter("lost") != 0 {
		t.Errorf("tracked %d untracked %d lost %d, want 4, 0, 0", h.Counter("tracked"), h.Counter("untracked"), h.Counter("lost"))
	}
}

func TestSinkConfigErrors(t *testing.T) {
	for _, c := range []struct{ keys, want string }{
		{"udp_port = 70000", "udp_port 70000 is outside 0..65535"},
		{"flows = 0", "flows 0 is outside 1..65536"},
		{"flows = 65537", "flows 65537 is outside 1..65536"},
		{"flow = 3", `sink#0.toml:1: flow: unknown key (did you mean "flows"?)`},
	} {
		h := newHarness(t)
		if _, err := h.build("sink", c.keys); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want one containing %q", c.keys, err, c.want)
		}
	}
}
