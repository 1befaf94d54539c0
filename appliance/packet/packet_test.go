package packet

import (
	"bytes"
	"fmt"
	"math"
	"testing"
)

// fill gives p the data window [off, off+len(data)) holding data.
func fill(p *Packet, off int, data []byte) {
	p.SetWindow(off, len(data))
	copy(p.Data(), data)
}

func seq(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + 1)
	}
	return b
}

func TestPacketWindowOps(t *testing.T) {
	s := newTestSlab(t, 1)
	h, _ := s.AllocOne()
	defer s.FreeOne(h)
	p := h.P()
	if p.Headroom() != MinHeadroom || p.Len() != 0 || p.Cap() < MinHeadroom+2048 || p.Tailroom() != p.Cap()-MinHeadroom {
		t.Fatalf("fresh packet: headroom %d len %d cap %d tailroom %d", p.Headroom(), p.Len(), p.Cap(), p.Tailroom())
	}
	data := seq(100)
	fill(p, 200, data)

	head, err := p.Prepend(8)
	if err != nil || len(head) != 8 || p.Headroom() != 192 || p.Len() != 108 {
		t.Fatalf("Prepend: %v, headroom %d len %d", err, p.Headroom(), p.Len())
	}
	copy(head, "HEADHEAD")
	if !bytes.Equal(p.Data()[8:], data) || string(p.Data()[:8]) != "HEADHEAD" {
		t.Fatal("Prepend moved data")
	}
	if err := p.Adj(8); err != nil || p.Headroom() != 200 || !bytes.Equal(p.Data(), data) {
		t.Fatalf("Adj: %v", err)
	}
	tail, err := p.Append(4)
	if err != nil || len(tail) != 4 || p.Len() != 104 {
		t.Fatalf("Append: %v", err)
	}
	copy(tail, "TAIL")
	if string(p.Data()[100:]) != "TAIL" || !bytes.Equal(p.Data()[:100], data) {
		t.Fatal("Append")
	}
	if err := p.Trim(4); err != nil || !bytes.Equal(p.Data(), data) {
		t.Fatalf("Trim: %v", err)
	}
	if p.Offset() != 200 || p.Tailroom() != p.Cap()-300 {
		t.Fatalf("offset %d tailroom %d", p.Offset(), p.Tailroom())
	}

	// Out of range, negative, and beyond 32 bits: errors, nothing changed.
	for _, n := range []int{-1, 201, 1 << 32, 1<<32 + 1, math.MaxInt} {
		if _, err := p.Prepend(n); err != ErrNoHeadroom {
			t.Errorf("Prepend(%d) = %v", n, err)
		}
	}
	for _, n := range []int{-1, p.Tailroom() + 1, 1 << 32, 1<<32 + 1, math.MaxInt} {
		if _, err := p.Append(n); err != ErrNoTailroom {
			t.Errorf("Append(%d) = %v", n, err)
		}
	}
	for _, n := range []int{-1, 101, 1 << 32, 1<<32 + 1, math.MaxInt} {
		if err := p.Adj(n); err != ErrTooShort {
			t.Errorf("Adj(%d) = %v", n, err)
		}
		if err := p.Trim(n); err != ErrTooShort {
			t.Errorf("Trim(%d) = %v", n, err)
		}
	}
	if p.Headroom() != 200 || !bytes.Equal(p.Data(), data) {
		t.Fatal("a failed op changed the packet")
	}
	// Exactly all of it.
	if _, err := p.Prepend(200); err != nil || p.Headroom() != 0 {
		t.Fatalf("Prepend(all): %v", err)
	}
	if err := p.Adj(300); err != nil || p.Len() != 0 {
		t.Fatalf("Adj(all): %v", err)
	}
	if _, err := p.Append(p.Tailroom()); err != nil || p.Tailroom() != 0 {
		t.Fatalf("Append(all): %v", err)
	}
}

// TestInsertGap checks every (at, n) on packets with room on one side, both or
// neither: the bytes around the gap, which side moved, and the errors.
func TestInsertGap(t *testing.T) {
	s := newTestSlab(t, 1)
	h, _ := s.AllocOne()
	defer s.FreeOne(h)
	p := h.P()
	const length = 64
	data := seq(length)
	for _, room := range []struct{ head, tail int }{{40, 40}, {40, 0}, {0, 40}, {10, 30}, {30, 10}, {0, 0}} {
		for at := -1; at <= length+1; at++ {
			for _, n := range []int{-1, 0, 1, 7, 10, 11, 29, 30, 31, 40, 41} {
				name := fmt.Sprintf("room=%v/at=%d/n=%d", room, at, n)
				off := room.head
				p.SetWindow(0, 0)
				fill(p, off, data)
				// Leave exactly room.tail of tailroom by shrinking the capacity
				// seen: the window ends room.tail bytes before a fake end.
				capEnd := off + length + room.tail
				p.cap = uint32(capEnd)
				gap, err := p.InsertGap(at, n)
				tail := length - at
				switch {
				case at < 0 || at > length:
					if err != ErrBadOffset {
						t.Fatalf("%s: err %v, want ErrBadOffset", name, err)
					}
					continue
				case n < 0 || n > room.head && n > room.tail:
					if err != ErrNoRoom {
						t.Fatalf("%s: err %v, want ErrNoRoom", name, err)
					}
					if p.Headroom() != off || !bytes.Equal(p.Data(), data) {
						t.Fatalf("%s: failed InsertGap changed the packet", name)
					}
					continue
				}
				if err != nil || len(gap) != n {
					t.Fatalf("%s: err %v, gap %d", name, err, len(gap))
				}
				d := p.Data()
				if len(d) != length+n || !bytes.Equal(d[:at], data[:at]) || !bytes.Equal(d[at+n:], data[at:]) {
					t.Fatalf("%s: data %x", name, d)
				}
				if n > 0 && &gap[0] != &d[at] {
					t.Fatalf("%s: gap is not at %d", name, at)
				}
				// The smaller side moves: the head when it fits and is no
				// longer than the tail (or the tail does not fit).
				headMoved := n <= room.head && (at <= tail || n > room.tail)
				if headMoved && p.Headroom() != off-n || !headMoved && p.Headroom() != off {
					t.Fatalf("%s: headroom %d from %d, head moved = %v", name, p.Headroom(), off, headMoved)
				}
			}
		}
	}
	p.cap = uint32(s.bufSize - MetaSize)
}

func TestRemoveGap(t *testing.T) {
	s := newTestSlab(t, 1)
	h, _ := s.AllocOne()
	defer s.FreeOne(h)
	p := h.P()
	const length = 50
	data := seq(length)
	for at := -1; at <= length+1; at++ {
		for _, n := range []int{-1, 0, 1, 2, 9, 25, 49, 50, 51, math.MaxInt} {
			name := fmt.Sprintf("at=%d/n=%d", at, n)
			fill(p, 100, data)
			err := p.RemoveGap(at, n)
			if at < 0 || n < 0 || at > length || n > length-at {
				if err != ErrBadOffset {
					t.Fatalf("%s: err %v, want ErrBadOffset", name, err)
				}
				if !bytes.Equal(p.Data(), data) || p.Headroom() != 100 {
					t.Fatalf("%s: failed RemoveGap changed the packet", name)
				}
				continue
			}
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			want := append(append([]byte{}, data[:at]...), data[at+n:]...)
			if !bytes.Equal(p.Data(), want) {
				t.Fatalf("%s: data %x\nwant %x", name, p.Data(), want)
			}
			headMoved := at <= length-at-n
			if headMoved && p.Headroom() != 100+n || !headMoved && p.Headroom() != 100 {
				t.Fatalf("%s: headroom %d, head moved = %v", name, p.Headroom(), headMoved)
			}
		}
	}
}

func TestCopyFromAndState(t *testing.T) {
	s := newTestSlab(t, 2)
	var b Burst
	if s.Alloc(&b, 2) != 2 {
		t.Fatal("alloc")
	}
	defer s.Free(&b)
	src, dst := b.P(0), b.P(1)
	fill(src, 300, seq(77))
	src.InPort, src.InQueue, src.RxTime, src.TxTime, src.Hash, src.Stage = 3, 4, 5, 6, 7, 8
	src.Forward(9)
	src.SetFlag(FlagLocal)
	src.Scratch[0], src.Scratch[ScratchSize-1] = 0xaa, 0xbb
	if err := dst.CopyFrom(src, 500); err != nil {
		t.Fatal(err)
	}
	if dst.Headroom() != 500 || !bytes.Equal(dst.Data(), src.Data()) || dst.InPort != 3 || dst.InQueue != 4 ||
		dst.RxTime != 5 || dst.TxTime != 6 || dst.Hash != 7 || dst.Stage != 8 || dst.Verdict() != Forward ||
		dst.OutPort != 9 || dst.Flags() != FlagLocal|FlagMoved || dst.Scratch != src.Scratch || dst.PoolID() != s.ID() {
		t.Fatal("CopyFrom state")
	}
	if err := dst.CopyFrom(src, -1); err != ErrNoRoom {
		t.Errorf("negative headroom: %v", err)
	}
	if err := dst.CopyFrom(src, dst.Cap()-76); err != ErrNoRoom {
		t.Errorf("no room: %v", err)
	}
	// Verdicts.
	dst.Drop(ReasonMalformed)
	if dst.Verdict() != Drop || dst.Reason != ReasonMalformed || dst.Verdict().String() != "drop" {
		t.Error("Drop")
	}
	dst.Consume()
	if dst.Verdict() != Consume || Verdict(9).String() != "invalid" {
		t.Error("Consume")
	}
	dst.Continue()
	if dst.Verdict() != Continue {
		t.Error("Continue")
	}
	if dst.Handle().P() != dst || b.H[1] != dst.Handle() {
		t.Error("Handle round trip")
	}
	dst.Reset(s.Headroom())
	if dst.Len() != 0 || dst.Headroom() != s.Headroom() || dst.InPort != NoPort || dst.OutPort != NoPort ||
		dst.Flags() != 0 || dst.RxTime != 0 || dst.Verdict() != Continue {
		t.Error("Reset")
	}
}

// SetTxDelay: StampTx writes TxTime − RxTime, big-endian, into the field asked
// for (0x80000000 past 2^31−1 ns, all ones without an rx time), once; a field
// outside the data and a change of the window cancel it.
func TestTxDelay(t *testing.T) {
	pool := newTestSlab(t, 4)
	for _, c := range []struct {
		name   string
		rx, tx int64
		field  func(d []byte) []byte
		change func(p *Packet)
		want   []byte // bytes 10..14 after StampTx
	}{
		{"delay", 1000, 1000 + 0x01020304, func(d []byte) []byte { return d[10:14] }, nil, []byte{1, 2, 3, 4}},
		{"overflow", 1, 1 + 1<<31, func(d []byte) []byte { return d[10:14] }, nil, []byte{0x80, 0, 0, 0}},
		{"no rx time", 0, 5, func(d []byte) []byte { return d[10:14] }, nil, []byte{0xFF, 0xFF, 0xFF, 0xFF}},
		{"outside", 1, 2, func(d []byte) []byte { return d[len(d)-2:] }, nil, []byte{0xEE, 0xEE, 0xEE, 0xEE}},
		{"window changed", 1, 2, func(d []byte) []byte { return d[10:14] }, func(p *Packet) { _ = p.Trim(1) }, []byte{0xEE, 0xEE, 0xEE, 0xEE}},
	} {
		h, _ := pool.AllocOne()
		p := h.P()
		d, _ := p.Append(32)
		for i := range d {
			d[i] = 0xEE
		}
		p.RxTime = c.rx
		p.SetTxDelay(c.field(d))
		if c.change != nil {
			c.change(p)
		}
		p.StampTx(c.tx)
		if got := p.Data()[10:14]; !bytes.Equal(got, c.want) {
			t.Errorf("%s: % x, want % x", c.name, got, c.want)
		}
		// Once: a second transmit does not write again.
		p.Data()[10] = 0x77
		p.StampTx(c.tx + 1)
		if p.Data()[10] != 0x77 || p.TxTime != c.tx+1 {
			t.Errorf("%s: written twice", c.name)
		}
		FreeOne(h)
	}
}
