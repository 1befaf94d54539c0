package stamp

import (
	"encoding/binary"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/linerate/linerate/appliance/packet"
)

// warmFrames makes a test packet as it reaches the reflector and its reply
// as it reaches the collector (stateful, 3 segments each way), and frees
// SSID 7 for the test's own sessions.
func warmFrames(t *testing.T, h *harness) (test, reply []byte) {
	t.Helper()
	sk, rk := benchKeys(false, "")
	snd := h.MustBuildNamed("stamp.sender", "tx", sk)
	rfl := h.MustBuildNamed("stamp.reflector", "refl", rk)
	test = arrive(t, h.produce(snd)[0])
	rr := h.run(test, 0, rfl)
	if rr.dropped != "" {
		t.Fatal(rr.dropped)
	}
	reply = arrive(t, rr.data)
	reg := h.registry()
	if _, err := reg.dropTx(7); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.dropRf(7); err != nil {
		t.Fatal(err)
	}
	return test, reply
}

// TestWarmedCollector takes replies of more sessions than the collector
// warms from (warmTxSessions), in bursts of 64 that mix them: every reply
// becomes its own session's record, in its session's FIFO, in order, as
// without warming; the FIFOs' puts at the burst's end lose nothing.
func TestWarmedCollector(t *testing.T) {
	h := newHarness(t)
	_, reply := warmFrames(t, h)
	coll := h.MustBuildNamed("stamp.collector", "coll", "")
	reg := h.registry()
	const n = 3 * warmTxSessions
	d := reg.senders["tx"].defaults
	ss := make([]*txSession, n)
	for id := 1; id <= n; id++ {
		c := SenderSession{SSID: uint16(id), Stage: "tx", Reflector: addrR, Stateful: true,
			Segments: []netip.Addr{netip.MustParseAddr("2001:db8:e::1"), netip.MustParseAddr("2001:db8:e::2")},
			Interval: time.Millisecond, Records: 16}
		s, err := buildTx(c, &d)
		if err != nil {
			t.Fatal(err)
		}
		ss[id-1] = s
	}
	if _, err := reg.putTxs(ss); err != nil {
		t.Fatal(err)
	}
	pay, _ := payloadOf(t, reply)
	ssidOff := len(reply) - len(pay) + 14
	seqOff := len(reply) - len(pay) + 24
	seqs := make([]uint32, n+1)
	k := 0
	const rounds = 12 // n·12/64 = 72 bursts: each session's 12 replies, fewer than its 16 records
	for range rounds * n / packet.MaxBurst {
		b := &packet.Burst{}
		for range packet.MaxBurst {
			id := uint16(k%n + 1)
			k += 7 // 7 and 3·128 are coprime: every session, mixed
			f := append([]byte(nil), reply...)
			binary.BigEndian.PutUint16(f[ssidOff:], id)
			binary.BigEndian.PutUint32(f[seqOff:], seqs[id])
			seqs[id]++
			b.Push(h.Pkt(f, 0))
		}
		for i, r := range h.runBurst(b, coll) {
			if r.dropped != "consumed" {
				t.Fatalf("reply %d: %q", i, r.dropped)
			}
		}
	}
	if got := h.StageCounter("coll", "records"); got != rounds*n {
		t.Fatalf("%d records, want %d", got, rounds*n)
	}
	if lost := h.StageCounter("coll", "records_lost"); lost != 0 {
		t.Fatalf("%d records lost", lost)
	}
	for _, s := range ss {
		recs := drain(s)
		if len(recs) != rounds {
			t.Fatalf("SSID %d: %d records, want %d", s.id, len(recs), rounds)
		}
		for i, r := range recs {
			if r.SSID != s.id || r.Seq != uint32(i) || r.Flags&(RecDuplicate|RecReordered) != 0 {
				t.Fatalf("SSID %d: record %d is %+v", s.id, i, r)
			}
		}
		if m := metricsOf(s); m.Received != rounds || m.Duplicates != 0 {
			t.Fatalf("SSID %d: %+v", s.id, m)
		}
	}
}

// TestWarmedReflector reflects test packets of more stateful sessions than
// the reflector warms from (warmRfSessions), mixed in bursts of 64: every
// reply carries its own session's next sequence number, as without
// warming.
func TestWarmedReflector(t *testing.T) {
	h := newHarness(t)
	test, _ := warmFrames(t, h)
	rfl := h.MustBuildNamed("stamp.reflector", "refl2", "rate_limit = \"0\"\n")
	reg := h.registry()
	const n = warmRfSessions + 100
	ret := []netip.Addr{netip.MustParseAddr("2001:db8:e::2"), netip.MustParseAddr("2001:db8:e::1")}
	d := reg.reflectors["refl2"].defaults
	rss := make([]*rfSession, n)
	for id := 1; id <= n; id++ {
		s, err := buildRf(ReflectorSession{SSID: uint16(id), Stage: "refl2", Stateful: true, ReturnPath: ret}, &d)
		if err != nil {
			t.Fatal(err)
		}
		s.running.Store(true)
		rss[id-1] = s
	}
	if _, err := reg.putRfs(rss); err != nil {
		t.Fatal(err)
	}
	pay, _ := payloadOf(t, test)
	ssidOff := len(test) - len(pay) + 14
	next := make([]uint32, n+1)
	k := 0
	for range 3 * n / packet.MaxBurst {
		b := &packet.Burst{}
		ids := make([]uint16, 0, packet.MaxBurst)
		for range packet.MaxBurst {
			id := uint16(k%n + 1)
			k += 11
			f := append([]byte(nil), test...)
			binary.BigEndian.PutUint16(f[ssidOff:], id)
			b.Push(h.Pkt(f, 0))
			ids = append(ids, id)
		}
		for i, r := range h.runBurst(b, rfl) {
			if r.dropped != "" {
				t.Fatalf("packet %d: %q", i, r.dropped)
			}
			rp, _ := payloadOf(t, r.data)
			if got := binary.BigEndian.Uint32(rp); got != next[ids[i]] {
				t.Fatalf("SSID %d: reflector sequence %d, want %d", ids[i], got, next[ids[i]])
			}
			next[ids[i]]++
		}
	}
}

// TestRecFIFO: records come out in order, a full FIFO refuses, and warm
// does not read the slot of a full one (the consumer's).
func TestRecFIFO(t *testing.T) {
	f := newRecFIFO(5)
	if f.Cap() != 8 {
		t.Fatalf("cap %d", f.Cap())
	}
	var out [3]Record
	seq := uint32(0)
	want := uint32(0)
	for round := 0; round < 10; round++ {
		for f.Len() < f.Cap() {
			if !f.Put(&Record{Seq: seq, SSID: 1}) {
				t.Fatalf("round %d: refused at %d of %d", round, f.Len(), f.Cap())
			}
			seq++
		}
		if f.Put(&Record{Seq: seq}) {
			t.Fatal("a full FIFO took a record")
		}
		if f.warm() != 0 {
			t.Fatal("warm read a full FIFO's next slot")
		}
		for f.Len() > 0 {
			got := f.Dequeue(out[:1+round%3])
			for _, r := range out[:got] {
				if r.Seq != want {
					t.Fatalf("record %d, want %d", r.Seq, want)
				}
				want++
			}
		}
		if _, ok := f.Get(); ok {
			t.Fatal("an empty FIFO gave a record")
		}
	}
}

// TestRecFIFOConcurrent runs a producer and a consumer at once (under
// -race: the one-line layout and warm share nothing unsynchronised).
func TestRecFIFOConcurrent(t *testing.T) {
	f := newRecFIFO(16)
	const total = 20000
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for s := uint32(0); s < total; {
			_ = f.warm()
			if f.Put(&Record{Seq: s}) {
				s++
			}
		}
	}()
	want := uint32(0)
	var out [5]Record
	for want < total {
		n := f.Dequeue(out[:])
		for _, r := range out[:n] {
			if r.Seq != want {
				t.Fatalf("record %d, want %d", r.Seq, want)
			}
			want++
		}
	}
	wg.Wait()
}

// TestDelaysPendingFirst: a reply whose neighbour waits in the pending
// batch finds its delays there without addressing the cold part (before,
// delays took the cold slot's address first, and its nil check read the
// cold part's first line: a cache miss a reply with thousands of sessions;
// here, with no cold part, a panic).
func TestDelaysPendingFirst(t *testing.T) {
	c := &collectorState{}
	c.pseq[0], c.pdel[0], c.npend, c.pwin = 41, [2]int64{100, 30}, 1, 1
	if got := c.delays(41); got != [3]int64{100, 30, 130} {
		t.Fatalf("delays %v", got)
	}
}

// TestDueHeapRandom checks the 4-ary heap against a sorted order, with
// pushes between pops.
func TestDueHeapRandom(t *testing.T) {
	var h dueHeap
	var s txSession
	x := uint64(12345)
	rnd := func() int64 { x ^= x << 13; x ^= x >> 7; x ^= x << 17; return int64(x % 1000) }
	for range 300 {
		h = append(h, dueEntry{next: rnd(), s: &s})
	}
	h.init()
	prev := int64(-1)
	for i := 0; len(h) > 0; i++ {
		if h[0].next < prev {
			t.Fatalf("pop %d: %d after %d", i, h[0].next, prev)
		}
		prev = h[0].next
		h.pop0()
		if i%3 == 0 && i < 600 {
			h.push(dueEntry{next: prev + rnd(), s: &s}) // never before what was popped
		}
	}
}
