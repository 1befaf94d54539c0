package builtin

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/plugins/stagetest"
)

func buildLink(t testing.TB, h *harness, keys string) *link {
	t.Helper()
	return h.mustBuild("link", keys).(*link)
}

// numbered is a frame of n bytes whose bytes 14..17 hold id.
func numbered(id, n int) []byte {
	d := make([]byte, n)
	copy(d, append(macB[:], macA[:]...))
	binary.BigEndian.PutUint32(d[14:], uint32(id))
	return d
}

func idOf(hd packet.Handle) int { return int(binary.BigEndian.Uint32(hd.P().Data()[14:])) }

// send passes frames numbered from first into the link at the harness clock's
// time, from port in; it returns the outcome (the link consumes or drops
// everything).
func send(t *testing.T, h *harness, l *link, in uint16, first, count, size int) stagetest.Outcome {
	t.Helper()
	var o stagetest.Outcome
	for i := 0; i < count; {
		b := &packet.Burst{}
		for ; i < count && b.N < packet.MaxBurst; i++ {
			b.Push(h.Pkt(numbered(first+i, size), in))
		}
		r := h.run(b, l)
		if len(r.Forwarded)+len(r.Continued) != 0 {
			t.Fatalf("link let packets through Process: %v", r)
		}
		o.Consumed += r.Consumed
		if o.Dropped == nil {
			o.Dropped = map[string]int{}
		}
		for k, v := range r.Dropped {
			o.Dropped[k] += v
		}
	}
	return o
}

// release is one packet out of the link: its id and the time it came out.
type release struct {
	id int
	at int64
}

// drain calls Produce at the harness clock's time until the link gives
// nothing more, checks each packet is left at Continue, records and frees them.
func drain(t *testing.T, h *harness, l *link) []release {
	t.Helper()
	var out []release
	for {
		b := h.produce(l)
		if b.N == 0 {
			return out
		}
		for i := 0; i < b.N; i++ {
			if v := b.P(i).Verdict(); v != packet.Continue {
				t.Fatalf("released packet has verdict %v", v)
			}
			out = append(out, release{idOf(b.H[i]), h.Clock.Now()})
		}
		packet.Free(b)
	}
}

// stepUntil advances the clock by step up to end, draining at each step.
func stepUntil(t *testing.T, h *harness, l *link, step time.Duration, end int64) []release {
	t.Helper()
	var out []release
	for {
		out = append(out, drain(t, h, l)...)
		if h.Clock.Now() >= end {
			return out
		}
		h.Clock.Advance(step)
	}
}

// TestLinkDelay: each packet comes out exactly when its delay is over, not a
// nanosecond earlier.
func TestLinkDelay(t *testing.T) {
	h := newHarness(t)
	l := buildLink(t, h, "delay = \"1ms\"\nqueue = 100")
	const t0 = int64(time.Second)
	h.Clock.Set(t0)
	send(t, h, l, portRing0, 0, 3, 100)
	h.Clock.Set(t0 + 300)
	send(t, h, l, portRing0, 3, 2, 100)
	if l.Held() != 5 || h.Counter("delivered") != 0 {
		t.Fatalf("held %d, delivered %d; want 5 and 0", l.Held(), h.Counter("delivered"))
	}
	for _, c := range []struct {
		at   int64
		want []int
	}{
		{t0 + int64(time.Millisecond) - 1, nil},
		{t0 + int64(time.Millisecond), []int{0, 1, 2}},
		{t0 + int64(time.Millisecond) + 299, nil},
		{t0 + int64(time.Millisecond) + 300, []int{3, 4}},
		{t0 + int64(time.Hour), nil},
	} {
		h.Clock.Set(c.at)
		var got []int
		for _, r := range drain(t, h, l) {
			got = append(got, r.id)
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("at +%v: released %v, want %v", time.Duration(c.at-t0), got, c.want)
		}
	}
	if l.Held() != 0 || h.Counter("delivered") != 5 {
		t.Errorf("held %d, delivered %d; want 0 and 5", l.Held(), h.Counter("delivered"))
	}
}

// TestLinkProduceBurstBound: Produce fills at most one burst; the rest waits
// for the next call.
func TestLinkProduceBurstBound(t *testing.T) {
	for _, keys := range []string{"queue = 200", "queue = 200\nreorder = 0.000001"} {
		h := newHarness(t)
		l := buildLink(t, h, keys)
		send(t, h, l, portRing0, 0, 150, 60)
		var sizes []int
		for {
			b := h.produce(l)
			if b.N == 0 {
				break
			}
			sizes = append(sizes, b.N)
			packet.Free(b)
		}
		if fmt.Sprint(sizes) != "[64 64 22]" {
			t.Errorf("%s: bursts %v, want [64 64 22]", keys, sizes)
		}
	}
}

// TestLinkJitter: with jitter each delay is within delay ± jitter and spread
// over it; without keep_order packets overtake, with it they never do.
func TestLinkJitter(t *testing.T) {
	const (
		delay  = int64(time.Millisecond)
		jitter = int64(100 * time.Microsecond)
		n      = 1000
	)
	for _, keepOrder := range []bool{false, true} {
		t.Run(fmt.Sprintf("keep_order=%v", keepOrder), func(t *testing.T) {
			h := newHarness(t)
			l := buildLink(t, h, fmt.Sprintf("delay = \"1ms\"\njitter = \"100us\"\nkeep_order = %v\nqueue = %d\nseed = 3", keepOrder, n))
			// One packet every 1µs: closer than the jitter.
			sentAt := make([]int64, n)
			var rel []release
			for i := 0; i < n; i++ {
				sentAt[i] = h.Clock.Now()
				send(t, h, l, portRing0, i, 1, 60)
				for range 10 {
					rel = append(rel, drain(t, h, l)...)
					h.Clock.Advance(100 * time.Nanosecond)
				}
			}
			rel = append(rel, stepUntil(t, h, l, 100*time.Nanosecond, sentAt[n-1]+delay+jitter)...)
			if len(rel) != n {
				t.Fatalf("%d released, want %d", len(rel), n)
			}
			overtaken, lo, hi := 0, int64(math.MaxInt64), int64(0)
			for i, r := range rel {
				d := r.at - sentAt[r.id]
				lo, hi = min(lo, d), max(hi, d)
				if d < delay-jitter || d > delay+jitter+100 { // +100: the drain step
					t.Fatalf("packet %d delayed %v, outside 1ms ± 100µs", r.id, time.Duration(d))
				}
				if i > 0 && r.id < rel[i-1].id {
					overtaken++
				}
			}
			if keepOrder && overtaken != 0 {
				t.Errorf("keep_order: %d packets overtaken", overtaken)
			}
			if !keepOrder && overtaken < n/10 {
				t.Errorf("jitter without keep_order: only %d of %d packets overtaken", overtaken, n)
			}
			// The draws cover the range. With keep_order a packet waits for the
			// one ahead of it, so at this spacing delays bunch near the top.
			if (!keepOrder && (hi-lo < jitter*18/10 || lo > delay-jitter*9/10)) || hi < delay+jitter*9/10 {
				t.Errorf("delays span %v..%v, want most of 900µs..1.1ms", time.Duration(lo), time.Duration(hi))
			}
		})
	}
}

// TestLinkReorder: reorder sends a fraction of packets at once, ahead of the
// delay line; the rest keep their order.
func TestLinkReorder(t *testing.T) {
	const n = 4000
	h := newHarness(t)
	h.NewPool("big", n+64, 2048)
	l := buildLink(t, h, fmt.Sprintf("delay = \"1ms\"\nreorder = 0.25\nqueue = %d\nseed = 11", n))
	pool := h.Pools["big"]
	for i := 0; i < n; {
		b := &packet.Burst{}
		for ; i < n && b.N < packet.MaxBurst; i++ {
			b.Push(h.PktFrom(pool, numbered(i, 60), portRing0))
		}
		h.run(b, l)
	}
	now := drain(t, h, l)
	h.Clock.Advance(time.Millisecond)
	later := drain(t, h, l)
	if len(now)+len(later) != n {
		t.Fatalf("%d + %d released, want %d", len(now), len(later), n)
	}
	// Binomial(4000, 0.25): mean 1000, σ ≈ 27.
	if d := len(now) - n/4; d < -140 || d > 140 {
		t.Errorf("%d sent at once, want about %d", len(now), n/4)
	}
	for _, rs := range [][]release{now, later} {
		for i := 1; i < len(rs); i++ {
			if rs[i].id < rs[i-1].id {
				t.Fatalf("packets %d and %d swapped within one release", rs[i-1].id, rs[i].id)
			}
		}
	}
}

// lossRun sends n packets through a link built from keys and returns the ids
// it dropped.
func lossRun(t *testing.T, keys string, n int) (dropped []int, lost uint64) {
	t.Helper()
	h := newHarness(t)
	l := buildLink(t, h, keys+fmt.Sprintf("\nqueue = %d", packet.MaxBurst))
	for i := 0; i < n; i += packet.MaxBurst {
		o := send(t, h, l, portRing0, i, min(packet.MaxBurst, n-i), 60)
		got := map[int]bool{}
		for _, r := range drain(t, h, l) {
			got[r.id] = true
		}
		for id := i; id < i+min(packet.MaxBurst, n-i); id++ {
			if !got[id] {
				dropped = append(dropped, id)
			}
		}
		if o.Dropped["link_loss"] != min(packet.MaxBurst, n-i)-len(got) {
			t.Fatalf("link_loss drops %d, missing %d", o.Dropped["link_loss"], min(packet.MaxBurst, n-i)-len(got))
		}
	}
	return dropped, h.Counter("lost")
}

// TestLinkLoss: the loss rate is right, the same seed loses the same packets,
// and another seed others.
func TestLinkLoss(t *testing.T) {
	const n = 10000
	for _, p := range []float64{0.002, 0.1, 0.5} {
		a, lost := lossRun(t, fmt.Sprintf("loss = %g\nseed = 42", p), n)
		if uint64(len(a)) != lost {
			t.Errorf("loss %g: lost counter %d, %d packets missing", p, lost, len(a))
		}
		// Within five standard deviations of the binomial mean.
		mean, sd := n*p, math.Sqrt(n*p*(1-p))
		if math.Abs(float64(len(a))-mean) > 5*sd {
			t.Errorf("loss %g: %d of %d lost, want %.0f ± %.0f", p, len(a), n, mean, 5*sd)
		}
		b, _ := lossRun(t, fmt.Sprintf("loss = %g\nseed = 42", p), n)
		if fmt.Sprint(a) != fmt.Sprint(b) {
			t.Errorf("loss %g: seed 42 lost different packets in two runs", p)
		}
		c, _ := lossRun(t, fmt.Sprintf("loss = %g\nseed = 43", p), n)
		if fmt.Sprint(a) == fmt.Sprint(c) {
			t.Errorf("loss %g: seeds 42 and 43 lost the same packets", p)
		}
	}
}

// TestLinkLossPattern: the pattern repeats exactly, across bursts.
func TestLinkLossPattern(t *testing.T) {
	for _, c := range []struct {
		pattern string
		n       int
		want    string
	}{
		{"0010", 12, "[2 6 10]"},
		{"1", 3, "[0 1 2]"},
		{"0", 100, "[]"},
		{" x.. ", 7, "[0 3 6]"},
		{"0000000001", 200, "[9 19 29 39 49 59 69 79 89 99 109 119 129 139 149 159 169 179 189 199]"},
	} {
		got, lost := lossRun(t, fmt.Sprintf("loss_pattern = %q", c.pattern), c.n)
		if fmt.Sprint(got) != c.want && !(got == nil && c.want == "[]") {
			t.Errorf("pattern %q over %d packets: lost %v, want %s", c.pattern, c.n, got, c.want)
		}
		if lost != uint64(len(got)) {
			t.Errorf("pattern %q: lost counter %d, want %d", c.pattern, lost, len(got))
		}
	}
}

// TestLinkRate: a serialising link lets a frame out when its last bit is sent:
// (length + 24) × 8 bits at rate, back to back; a deeper bucket lets a burst
// out at once.
func TestLinkRate(t *testing.T) {
	for _, c := range []struct {
		name  string
		keys  string
		size  int
		count int
		want  []int64 // departure of each packet after the first arrives
	}{
		{"1Gbit", `rate = "1Gbit"`, 1500, 3, []int64{12192, 24384, 36576}},
		{"10Mbit/64B", `rate = "10Mbit"`, 60, 2, []int64{67200, 134400}},
		{"1Gbit+delay", "rate = \"1Gbit\"\ndelay = \"10us\"", 1500, 2, []int64{22192, 34384}},
		// A bucket of one 1518-byte frame plus two 1524-byte wire frames: three
		// leave together, then the rate holds.
		{"1Gbit/burst", "rate = \"1Gbit\"\nburst = 4566", 1500, 5, []int64{12192, 12192, 12192, 24384, 36576}},
		{"1Gbit/burst=64KiB", "rate = \"1Gbit\"\nburst = \"64KiB\"", 1500, 4, []int64{12192, 12192, 12192, 12192}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			l := buildLink(t, h, c.keys+"\nqueue = 100")
			const t0 = int64(time.Second)
			h.Clock.Set(t0)
			send(t, h, l, portRing0, 0, c.count, c.size)
			rel := stepUntil(t, h, l, time.Nanosecond*8, t0+c.want[len(c.want)-1])
			if len(rel) != c.count {
				t.Fatalf("%d released, want %d", len(rel), c.count)
			}
			for i, r := range rel {
				if r.id != i || r.at-t0 != c.want[i] {
					t.Errorf("packet %d (id %d) out at +%dns, want +%dns", i, r.id, r.at-t0, c.want[i])
				}
			}
		})
	}
}

// TestLinkRateSustained: packets offered faster than the rate leave at the
// rate; after the link goes idle the next frame leaves after its own
// serialisation.
func TestLinkRateSustained(t *testing.T) {
	h := newHarness(t)
	l := buildLink(t, h, "rate = \"100Mbit\"\nqueue = 1000")
	// 1000-byte frames: 8192 bits, 81920ns at 100Mbit. Offer one every
	// 40960ns, twice the rate, and look for releases every 1280ns.
	const ser = 81920
	var rel []release
	for i := 0; i < 200; i++ {
		send(t, h, l, portRing0, i, 1, 1000)
		for range 32 {
			rel = append(rel, drain(t, h, l)...)
			h.Clock.Advance(1280)
		}
	}
	rel = append(rel, stepUntil(t, h, l, 1280, 200*ser)...)
	if len(rel) != 200 {
		t.Fatalf("%d released, want 200", len(rel))
	}
	for i, r := range rel {
		if r.at != int64(i+1)*ser {
			t.Fatalf("packet %d out at %d, want %d", i, r.at, (i+1)*ser)
		}
	}
	h.Clock.Advance(time.Second)
	t1 := h.Clock.Now()
	send(t, h, l, portRing0, 999, 1, 1000)
	if got := stepUntil(t, h, l, 1280, t1+ser); len(got) != 1 || got[0].at != t1+ser {
		t.Errorf("after idle: released %v, want one at +%d", got, ser)
	}
}

// TestLinkQueueFull: beyond queue packets the link drops as link_queue_full.
func TestLinkQueueFull(t *testing.T) {
	h := newHarness(t)
	l := buildLink(t, h, "delay = \"1ms\"\nqueue = 4")
	o := send(t, h, l, portRing0, 0, 6, 60)
	if o.Consumed != 4 || o.Dropped["link_queue_full"] != 2 || l.Held() != 4 || h.Counter("queue_full") != 2 {
		t.Fatalf("%v, held %d, queue_full %d; want 4 consumed, 2 link_queue_full", o, l.Held(), h.Counter("queue_full"))
	}
	// Room again once some leave.
	h.Clock.Advance(time.Millisecond)
	if got := len(drain(t, h, l)); got != 4 {
		t.Fatalf("%d released, want 4", got)
	}
	if o := send(t, h, l, portRing0, 6, 4, 60); o.Consumed != 4 {
		t.Errorf("after release: %v", o)
	}
	l.Stop(&h.Ctx)
}

// TestLinkCopies: packets from a port that feeds hardware are copied into the
// link's own pool and the originals freed at once through Env.Free; packets
// from internal ports, and made by stages, are held as they are.
func TestLinkCopies(t *testing.T) {
	h := newHarness(t)
	l := buildLink(t, h, "delay = \"10us\"\nqueue = 16")
	linkPool := h.Pools["link/link#0"]
	if linkPool == nil || linkPool.DataRoom() < 9216 || linkPool.Size() != 16+packet.MaxBurst {
		t.Fatalf("link pool: %v", linkPool)
	}
	def := h.Pools["default"]
	frames := [][]byte{numbered(0, 1500), numbered(1, 60), numbered(2, 200), numbered(3, 60)}
	ins := []uint16{portEth0, portRing0, portEth1, packet.NoPort}
	b := &packet.Burst{}
	var orig []packet.Handle
	for i, f := range frames {
		hd := h.Pkt(f, ins[i])
		hd.P().RxTime = 1234 + int64(i)
		hd.P().Hash = uint32(i)
		b.Push(hd)
		orig = append(orig, hd)
	}
	h.Ctx.Now = h.Clock.Now()
	l.Process(&h.Ctx, b)
	// Before the engine's end of burst: the originals of eth0 and eth1 are
	// queued for freeing, their slots hold the copies.
	if len(h.Env.Freed) != 2 || h.Env.Freed[0] != orig[0] || h.Env.Freed[1] != orig[2] {
		t.Fatalf("Env.Free got %v, want the eth0 and eth1 packets %v", h.Env.Freed, []packet.Handle{orig[0], orig[2]})
	}
	for i := 0; i < b.N; i++ {
		p := b.P(i)
		if p.Verdict() != packet.Consume {
			t.Errorf("slot %d: verdict %v, want consume", i, p.Verdict())
		}
		copied := ins[i] == portEth0 || ins[i] == portEth1
		if (b.H[i] != orig[i]) != copied {
			t.Errorf("slot %d (in port %d): copied %v, want %v", i, ins[i], b.H[i] != orig[i], copied)
		}
		wantPool := def.ID()
		if copied {
			wantPool = linkPool.ID()
		}
		if p.PoolID() != wantPool || !bytes.Equal(p.Data(), frames[i]) || p.InPort != ins[i] || p.RxTime != 1234+int64(i) || p.Hash != uint32(i) {
			t.Errorf("slot %d: pool %d (want %d), in port %d, rx time %d, hash %d, data equal %v", i, p.PoolID(), wantPool,
				p.InPort, p.RxTime, p.Hash, bytes.Equal(p.Data(), frames[i]))
		}
	}
	b.N = 0
	h.Env.Flush()
	if def.InUse() != 2 || linkPool.InUse() != 2 || h.Counter("copied") != 2 || l.Held() != 4 {
		t.Fatalf("in use: default %d, link %d; copied %d, held %d; want 2, 2, 2, 4", def.InUse(), linkPool.InUse(), h.Counter("copied"), l.Held())
	}
	h.Clock.Advance(10 * time.Microsecond)
	out := h.produce(l)
	if out.N != 4 {
		t.Fatalf("%d released, want 4", out.N)
	}
	for i := 0; i < out.N; i++ {
		if !bytes.Equal(out.P(i).Data(), frames[i]) {
			t.Errorf("released packet %d differs from what was sent", i)
		}
	}
	if out.H[1] != orig[1] || out.H[3] != orig[3] {
		t.Errorf("held-as-is packets came out as other buffers")
	}
	packet.Free(out)
}

// TestLinkCopyFailures: an empty link pool drops as no_buffer, a frame larger
// than the link pool's buffers as too_big; nothing leaks.
func TestLinkCopyFailures(t *testing.T) {
	h := newHarness(t)
	h.NewPool("tiny", 2, 64)
	big := h.NewPool("big", 4, 9000)
	l := buildLink(t, h, "delay = \"1ms\"\npool = \"tiny\"")
	b := &packet.Burst{}
	b.Push(h.PktFrom(big, numbered(0, 100), portEth0)) // too big for 64 bytes
	b.Push(h.PktFrom(big, numbered(1, 60), portEth0))
	b.Push(h.PktFrom(big, numbered(2, 60), portEth0))
	b.Push(h.PktFrom(big, numbered(3, 60), portEth0)) // the pool is empty
	o := h.run(b, l)
	if o.Consumed != 2 || o.Dropped["too_big"] != 1 || o.Dropped["no_buffer"] != 1 || h.Counter("no_buffer") != 1 {
		t.Errorf("%v, no_buffer counter %d; want 2 consumed, 1 too_big, 1 no_buffer", o, h.Counter("no_buffer"))
	}
	if big.InUse() != 0 {
		t.Errorf("%d originals not freed", big.InUse())
	}
	l.Stop(&h.Ctx)
}

// TestLinkCopyFailureTakesNoTime: a packet dropped for want of a buffer
// takes no capacity.
func TestLinkCopyFailureTakesNoTime(t *testing.T) {
	h := newHarness(t)
	h.NewPool("one", 1, 2048)
	l := buildLink(t, h, "rate = \"1Gbit\"\npool = \"one\"")
	b := h.Burst(portEth0, numbered(0, 1500), numbered(1, 1500))
	b.Push(h.Pkt(numbered(2, 1500), portRing0))
	o := h.run(b, l)
	if o.Consumed != 2 || o.Dropped["no_buffer"] != 1 {
		t.Fatalf("%v; want 2 consumed, 1 no_buffer", o)
	}
	rel := stepUntil(t, h, l, 8, 2*12192)
	if len(rel) != 2 || rel[0] != (release{0, 12192}) || rel[1] != (release{2, 2 * 12192}) {
		t.Errorf("released %v, want packet 0 at 12192 and packet 2 at 24384", rel)
	}
}

// TestLinkStop: Stop frees everything the link holds, in either delay line.
func TestLinkStop(t *testing.T) {
	for _, keys := range []string{"delay = \"1s\"", "delay = \"1s\"\njitter = \"1ms\"", "delay = \"1s\"\nreorder = 0.5"} {
		h := newHarness(t)
		l := buildLink(t, h, keys+"\nqueue = 300")
		send(t, h, l, portRing0, 0, 100, 60)
		send(t, h, l, portEth0, 100, 100, 60)
		held := 200 - len(drain(t, h, l)) // reorder releases some at once
		if l.Held() != held || h.InUse() != held {
			t.Fatalf("%s: held %d, in use %d, want %d", keys, l.Held(), h.InUse(), held)
		}
		l.Stop(&h.Ctx)
		if l.Held() != 0 || h.InUse() != 0 {
			t.Errorf("%s: after Stop held %d, in use %d", keys, l.Held(), h.InUse())
		}
	}
}

// TestLinkDeterministic: the same seed and packets give the same releases at
// the same times.
func TestLinkDeterministic(t *testing.T) {
	run := func(seed int) []release {
		h := newHarness(t)
		l := buildLink(t, h, fmt.Sprintf("delay = \"100us\"\njitter = \"50us\"\nreorder = 0.1\nloss = 0.1\nrate = \"1Gbit\"\nqueue = 500\nseed = %d", seed))
		for i := 0; i < 300; i += 10 {
			send(t, h, l, portRing0, i, 10, 60+i)
			h.Clock.Advance(3 * time.Microsecond)
		}
		return stepUntil(t, h, l, 500*time.Nanosecond, int64(time.Millisecond))
	}
	a, b, c := run(5), run(5), run(6)
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Error("seed 5 gave two different runs")
	}
	if fmt.Sprint(a) == fmt.Sprint(c) {
		t.Error("seeds 5 and 6 gave the same run")
	}
}

// TestLinkAllocs: Process and Produce allocate nothing, copies included.
func TestLinkAllocs(t *testing.T) {
	for _, keys := range []string{"delay = \"1us\"", "delay = \"10us\"\njitter = \"5us\"\nloss = 0.1", "rate = \"10Gbit\"\nreorder = 0.2"} {
		h := newHarness(t)
		l := buildLink(t, h, keys+"\nqueue = 1024")
		frame := numbered(0, 200)
		b := &packet.Burst{}
		step := func() {
			b.N = 0
			for i := 0; i < 32; i++ {
				in := uint16(portRing0)
				if i%2 == 0 {
					in = portEth0
				}
				hd, _ := h.Pools["default"].AllocOne()
				d, _ := hd.P().Append(len(frame))
				copy(d, frame)
				hd.P().InPort = in
				b.Push(hd)
			}
			h.Ctx.Now = h.Clock.Now()
			l.Process(&h.Ctx, b)
			for i := 0; i < b.N; i++ {
				if b.P(i).Verdict() == packet.Drop {
					packet.FreeOne(b.H[i])
				}
			}
			h.Env.Flush()
			h.Clock.Advance(20 * time.Microsecond)
			b.N = 0
			h.Ctx.Now = h.Clock.Now()
			for {
				l.Produce(&h.Ctx, b)
				if b.N == 0 {
					break
				}
				packet.Free(b)
			}
		}
		step()
		h.Env.Freed = make([]packet.Handle, 0, 64)
		if a := testing.AllocsPerRun(100, step); a != 0 {
			t.Errorf("%s: %.1f allocations per burst, want 0", keys, a)
		}
		l.Stop(&h.Ctx)
	}
}

func TestLinkConfigErrors(t *testing.T) {
	for _, c := range []struct{ keys, want string }{
		{`jitter = "2ms"` + "\n" + `delay = "1ms"`, "jitter 2ms exceeds delay 1ms"},
		{`loss = 1.5`, "loss 1.5 is outside 0..1"},
		{`loss = -0.1`, "loss -0.1 is outside 0..1"},
		{`reorder = 2.0`, "reorder 2 is outside 0..1"},
		{`queue = 0`, "queue 0 is outside 1..4194304"},
		{`loss_pattern = "0102"`, `loss_pattern "0102": use 0 (pass) and 1 (drop)`},
		{"loss_pattern = \"01\"\nloss = 0.1", "set loss or loss_pattern, not both"},
		{"rate = \"1Gbit\"\nburst = 1000", "burst 1000 is below one frame (1518 bytes)"},
		{`delay = "-1ms"`, `link#0.toml:1: delay: duration "-1ms" is negative`},
		{`delay = 5`, "link#0.toml:1: delay"},
		{`rate = "1GB"`, "link#0.toml:1: rate"},
		{"queue = 10\ndelya = \"1ms\"", `link#0.toml:2: delya: unknown key (did you mean "delay"?)`},
	} {
		h := newHarness(t)
		if _, err := h.build("link", c.keys); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want one containing %q", c.keys, err, c.want)
		}
	}
}
