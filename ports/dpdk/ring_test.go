//go:build dpdk

package dpdk

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"github.com/linerate/linerate/appliance/packet"
)

var vdevSeq atomic.Int32

// vdev names a fresh vdev of a driver: tests never reuse one, so a leftover from
// a failed test cannot hide a bug.
func vdev(driver string) string { return fmt.Sprintf("%s%d", driver, 100+vdevSeq.Add(1)) }

func openRing(t *testing.T, o Options) *Port {
	t.Helper()
	if o.Device == "" {
		o.Device = vdev("net_ring")
	}
	if o.Name == "" {
		o.Name = o.Device
	}
	p, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
	return p
}

// frame fills a fresh packet with n bytes.
func frame(t *testing.T, pool packet.Pool, data []byte) packet.Handle {
	t.Helper()
	h, ok := pool.AllocOne()
	if !ok {
		t.Fatal("pool empty")
	}
	d, err := h.P().Append(len(data))
	if err != nil {
		t.Fatalf("append %d: %v", len(data), err)
	}
	copy(d, data)
	return h
}

// TestRingIdenticalBytes: packets sent into a net_ring come out of it with the
// same bytes, in order, with fresh metadata over the mbuf's own window.
func TestRingIdenticalBytes(t *testing.T) {
	requireEAL(t)
	p := openRing(t, Options{})
	pool := p.DPDKPool()
	avail := pool.Available()
	rng := rand.New(rand.NewPCG(1, 2))
	var sent [][]byte
	var b packet.Burst
	for i := 0; i < 200; i++ {
		n := 60 + rng.IntN(pool.DataRoom()-60)
		data := make([]byte, n)
		for j := range data {
			data[j] = byte(rng.Uint32())
		}
		sent = append(sent, data)
		h := frame(t, pool, data)
		hp := h.P()
		if hp.Headroom() != Headroom || hp.PoolID() != pool.ID() || hp.Backend() != uintptr(h)-128 {
			t.Fatalf("fresh packet: headroom %d pool %d backend %#x (handle %#x)", hp.Headroom(), hp.PoolID(), hp.Backend(), uintptr(h))
		}
		// Scribble on state the rx side must reset.
		hp.Forward(3)
		hp.SetFlag(packet.FlagLocal)
		hp.TxTime, hp.Hash, hp.Stage = 7, 9, 2
		b.Push(h)
		if b.N == packet.MaxBurst || i == 199 {
			sentN := p.TxBurst(0, &b)
			if sentN != b.N {
				t.Fatalf("tx took %d of %d", sentN, b.N)
			}
			b.N = 0
		}
	}
	var got [][]byte
	for len(got) < len(sent) {
		b.N = 0
		if p.RxBurst(0, &b) == 0 {
			t.Fatalf("rx dried up after %d of %d", len(got), len(sent))
		}
		for _, h := range b.Handles() {
			q := h.P()
			if q.Verdict() != packet.Continue || q.Flags() != 0 || q.OutPort != packet.NoPort || q.TxTime != 0 ||
				q.Hash != 0 || q.Stage != 0 || q.InPort != packet.NoPort {
				t.Fatalf("rx metadata not reset: verdict %v flags %#x out %d tx %d hash %d stage %d in %d",
					q.Verdict(), q.Flags(), q.OutPort, q.TxTime, q.Hash, q.Stage, q.InPort)
			}
			if q.PoolID() != pool.ID() || q.Headroom() != Headroom {
				t.Fatalf("rx packet pool %d headroom %d", q.PoolID(), q.Headroom())
			}
			got = append(got, append([]byte(nil), q.Data()...))
		}
		pool.Free(&b)
	}
	for i := range sent {
		if !bytes.Equal(sent[i], got[i]) {
			t.Fatalf("packet %d: %d bytes in, %d out, differ", i, len(sent[i]), len(got[i]))
		}
	}
	if b.N = 0; p.RxBurst(0, &b) != 0 {
		t.Fatalf("%d packets more than were sent", b.N)
	}
	if a := pool.Available(); a != avail {
		t.Fatalf("pool has %d mbufs available, %d before", a, avail)
	}
}

// TestRingWindowWriteBack: a window changed between rx and tx (Prepend, Adj,
// Trim, InsertGap) is what goes out: the C side writes data_off and the lengths
// back at tx.
func TestRingWindowWriteBack(t *testing.T) {
	requireEAL(t)
	p := openRing(t, Options{})
	pool := p.DPDKPool()
	base := bytes.Repeat([]byte("0123456789"), 30)
	var b packet.Burst
	h := frame(t, pool, base)
	hp := h.P()
	head, err := hp.Prepend(4)
	if err != nil {
		t.Fatal(err)
	}
	copy(head, "HEAD")
	if err := hp.Trim(10); err != nil {
		t.Fatal(err)
	}
	gap, err := hp.InsertGap(20, 400) // more than the headroom left: the tail moves
	if err != nil {
		t.Fatal(err)
	}
	for i := range gap {
		gap[i] = 0xAB
	}
	want := append([]byte(nil), hp.Data()...)
	b.Push(h)
	if p.TxBurst(0, &b) != 1 {
		t.Fatal("tx refused")
	}
	b.N = 0
	if p.RxBurst(0, &b) != 1 {
		t.Fatal("nothing received")
	}
	if got := b.P(0).Data(); !bytes.Equal(got, want) {
		t.Fatalf("received %d bytes %q…, want %d bytes %q…", len(got), got[:24], len(want), want[:24])
	}
	if b.P(0).Headroom() != Headroom-4 {
		t.Fatalf("headroom %d after the round trip, want %d", b.P(0).Headroom(), Headroom-4)
	}
	pool.Free(&b)
}

// TestRingSlowPaths: a chained mbuf that fits one buffer is linearised; one that
// does not is dropped and counted; an mbuf of a pool without linerate's private
// area is copied into the port's pool.
func TestRingSlowPaths(t *testing.T) {
	requireEAL(t)
	p := openRing(t, Options{})
	pool := p.DPDKPool()
	avail := pool.Available()
	a, c := bytes.Repeat([]byte{1}, 300), bytes.Repeat([]byte{2}, 200)
	if err := p.txRawChain(0, nil, a, c); err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte{3}, 1500)
	if err := p.txRawChain(0, nil, big, big); err != nil { // 3000 bytes: more than a buffer
		t.Fatal(err)
	}
	fp, err := newForeignPool("lr_foreign_test", 255)
	if err != nil {
		t.Fatal(err)
	}
	defer fp.free()
	favail := fp.available()
	foreign := bytes.Repeat([]byte{4}, 100)
	if err := p.txRawChain(0, fp.mp, foreign); err != nil {
		t.Fatal(err)
	}
	var b packet.Burst
	if n := p.RxBurst(0, &b); n != 2 {
		t.Fatalf("received %d packets, want 2 (the linearised chain and the foreign copy)", n)
	}
	if got := b.P(0).Data(); !bytes.Equal(got, append(append([]byte(nil), a...), c...)) {
		t.Fatalf("linearised packet: %d bytes", len(got))
	}
	if got := b.P(1).Data(); !bytes.Equal(got, foreign) || b.P(1).PoolID() != pool.ID() {
		t.Fatalf("foreign packet: %d bytes, pool %d", len(got), b.P(1).PoolID())
	}
	pool.Free(&b)
	st := p.Stats()
	for k, want := range map[string]uint64{"rx_linearized": 1, "rx_multiseg_dropped": 1, "rx_foreign_copied": 1, "rx_foreign_dropped": 0} {
		if st.Extra[k] != want {
			t.Errorf("%s = %d, want %d", k, st.Extra[k], want)
		}
	}
	if st.RxDropped != 1 {
		t.Errorf("RxDropped = %d, want 1", st.RxDropped)
	}
	if got := pool.Available(); got != avail {
		t.Errorf("pool: %d available, %d before", got, avail)
	}
	if got := fp.available(); got != favail {
		t.Errorf("foreign pool: %d available, %d before", got, favail)
	}
}

// TestTxDelay: a transit delay a stage asked for (Packet.SetTxDelay) is
// written at transmit by the C tx loop, TxTime − RxTime where asked and
// nowhere else; a change of the window in between cancels it.
func TestTxDelay(t *testing.T) {
	requireEAL(t)
	p := openRing(t, Options{})
	pool := p.DPDKPool()
	base := bytes.Repeat([]byte{0x55}, 100)
	var b packet.Burst
	asked, cancelled := frame(t, pool, base), frame(t, pool, base)
	for _, h := range []packet.Handle{asked, cancelled} {
		h.P().RxTime = 1_000_000
		h.P().SetTxDelay(h.P().Data()[40:44])
	}
	if err := cancelled.P().Trim(1); err != nil {
		t.Fatal(err)
	}
	const now = 1_000_000 + 123_456
	n, foreign := p.TxHandles(0, []packet.Handle{asked, cancelled}, now)
	if n != 2 || foreign {
		t.Fatalf("TxHandles took %d (foreign %v)", n, foreign)
	}
	if p.RxBurst(0, &b) != 2 {
		t.Fatal("not received")
	}
	want := append([]byte(nil), base...)
	copy(want[40:], []byte{0x00, 0x01, 0xE2, 0x40}) // 123456
	if got := b.P(0).Data(); !bytes.Equal(got, want) {
		t.Errorf("asked: % x", got[36:48])
	}
	if got := b.P(1).Data(); !bytes.Equal(got, base[:99]) {
		t.Errorf("cancelled by a window change, yet: % x", got[36:48])
	}
	pool.Free(&b)
}

// TestRingWriteBackOnlyMoved: tx writes a window back into its mbuf only when
// it moved (packet.FlagMoved): a packet received and sent back unchanged keeps
// the mbuf's own window, and one that CopyFrom filled (the engine's copy of a
// Go pool's packet into the port's pool) carries its new window.
func TestRingWriteBackOnlyMoved(t *testing.T) {
	requireEAL(t)
	p := openRing(t, Options{})
	pool := p.DPDKPool()
	slab, err := packet.NewSlab(packet.SlabConfig{Name: "ring-copy-src", Buffers: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer slab.Close()
	data := bytes.Repeat([]byte("copy"), 40)
	src := frame(t, slab, data)
	defer packet.FreeOne(src)
	q, ok := pool.AllocOne()
	if !ok {
		t.Fatal("pool empty")
	}
	if err := q.P().CopyFrom(src.P(), 250); err != nil {
		t.Fatal(err)
	}
	var b packet.Burst
	b.Push(q)
	if p.TxBurst(0, &b) != 1 {
		t.Fatal("tx refused")
	}
	b.N = 0
	if p.RxBurst(0, &b) != 1 || !bytes.Equal(b.P(0).Data(), data) || b.P(0).Headroom() != 250 {
		t.Fatalf("copied packet came back as %d bytes at headroom %d", b.P(0).Len(), b.P(0).Headroom())
	}
	if b.P(0).Flags()&packet.FlagMoved != 0 {
		t.Fatal("a received packet is marked moved")
	}
	// Back unchanged (nothing to write: the same bytes and window), with a
	// copy of it (an unmoved source: the copy's window moved all the same).
	q2, ok := pool.AllocOne()
	if !ok {
		t.Fatal("pool empty")
	}
	if err := q2.P().CopyFrom(b.P(0), 200); err != nil {
		t.Fatal(err)
	}
	b.Push(q2)
	if p.TxBurst(0, &b) != 2 {
		t.Fatal("tx refused")
	}
	b.N = 0
	if p.RxBurst(0, &b) != 2 {
		t.Fatal("not received")
	}
	for i, room := range []int{250, 200} {
		if !bytes.Equal(b.P(i).Data(), data) || b.P(i).Headroom() != room {
			t.Errorf("packet %d came back as %d bytes at headroom %d, want %d at %d", i, b.P(i).Len(), b.P(i).Headroom(), len(data), room)
		}
	}
	pool.Free(&b)
}

// TestTxFront: a window that starts in front of the mbuf's buffer (in the
// private area's extra headroom) leaves as a chain with a header mbuf holding
// the bytes in front, where the port takes chains (net_ring), and as a copy
// where it does not (net_null). Either way the bytes are the packet's, the
// paths are counted, and every mbuf goes back to the pool.
func TestTxFront(t *testing.T) {
	requireEAL(t)
	data := bytes.Repeat([]byte("payload!"), 100)
	front := bytes.Repeat([]byte{0xF0}, 250) // more than DPDK's 128 of headroom
	build := func(pool packet.Pool) packet.Handle {
		h := frame(t, pool, data)
		d, err := h.P().Prepend(len(front))
		if err != nil {
			t.Fatal(err)
		}
		copy(d, front)
		if h.P().Headroom() >= Headroom-rteHeadroom {
			t.Fatalf("headroom %d: the window does not reach in front of the buffer", h.P().Headroom())
		}
		return h
	}
	want := append(append([]byte(nil), front...), data...)

	ring := openRing(t, Options{})
	pool := ring.DPDKPool()
	avail := pool.Available()
	var b packet.Burst
	b.Push(build(pool))
	if ring.TxBurst(0, &b) != 1 {
		t.Fatal("tx refused")
	}
	b.N = 0
	if ring.RxBurst(0, &b) != 1 || !bytes.Equal(b.P(0).Data(), want) {
		t.Fatalf("received %d bytes, want %d", b.P(0).Len(), len(want))
	}
	x := ring.Stats().Extra
	if x["tx_chained"] != 1 || x["tx_copied"] != 0 || x["rx_linearized"] != 1 {
		t.Errorf("net_ring: chained %d, copied %d, linearized %d; want 1, 0, 1", x["tx_chained"], x["tx_copied"], x["rx_linearized"])
	}
	pool.Free(&b)
	if got := pool.Available(); got != avail {
		t.Errorf("pool: %d available, %d before", got, avail)
	}

	null := openRing(t, Options{Device: vdev("net_null")})
	npool := null.DPDKPool()
	navail := npool.Available()
	b.N = 0
	b.Push(build(npool))
	if null.TxBurst(0, &b) != 1 {
		t.Fatal("tx refused")
	}
	x = null.Stats().Extra
	if x["tx_chained"] != 0 || x["tx_copied"] != 1 {
		t.Errorf("net_null: chained %d, copied %d; want 0, 1", x["tx_chained"], x["tx_copied"])
	}
	if got := npool.Available(); got != navail {
		t.Errorf("pool: %d available, %d before", got, navail)
	}
}

// TestAllocSized: packets from AllocSized hold their length from the start,
// at a fresh packet's offset, unmarked as moved, and leave with it: a
// net_ring gives back exactly the bytes written, the window as allocated. A
// length the data room cannot hold gets no packets.
func TestAllocSized(t *testing.T) {
	requireEAL(t)
	p := openRing(t, Options{})
	pool := p.DPDKPool()
	avail := pool.Available()
	var b packet.Burst
	for _, bad := range []int{-1, pool.DataRoom() + 1} {
		if got := pool.AllocSized(&b, 4, bad); got != 0 || b.N != 0 {
			t.Fatalf("AllocSized of %d bytes gave %d packets", bad, got)
		}
	}
	fresh, ok := pool.AllocOne()
	if !ok {
		t.Fatal("pool empty")
	}
	off := fresh.P().Offset()
	pool.FreeOne(fresh)
	lengths := []int{60, 1, pool.DataRoom()}
	var want [][]byte
	for i, n := range lengths {
		if pool.AllocSized(&b, 1, n) != 1 {
			t.Fatal("pool empty")
		}
		q := b.P(i)
		if q.Len() != n || q.Offset() != off || q.Flags()&packet.FlagMoved != 0 {
			t.Fatalf("%d bytes asked: %d bytes at offset %d (fresh: %d), flags %#x", n, q.Len(), q.Offset(), off, q.Flags())
		}
		d := q.Data()
		for j := range d {
			d[j] = byte(i + j)
		}
		want = append(want, bytes.Clone(d))
	}
	if p.TxBurst(0, &b) != len(lengths) {
		t.Fatal("tx refused")
	}
	b.N = 0
	if p.RxBurst(0, &b) != len(lengths) {
		t.Fatal("not received")
	}
	for i := range lengths {
		if !bytes.Equal(b.P(i).Data(), want[i]) || b.P(i).Offset() != off {
			t.Errorf("packet %d came back as %d bytes at offset %d, want %d at %d", i, b.P(i).Len(), b.P(i).Offset(), lengths[i], off)
		}
	}
	pool.Free(&b)
	if got := pool.Available(); got != avail {
		t.Errorf("pool: %d available, %d before", got, avail)
	}
}
