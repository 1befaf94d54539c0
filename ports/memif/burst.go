//go:build linux

package memif

import (
	"github.com/linerate/linerate/appliance/memif"
	"github.com/linerate/linerate/appliance/packet"
)

// RxBurst takes what the peer wrote: a client reads its S2C ring and gives the
// slots back, a server reads the client's C2S ring.
func (p *Port) RxBurst(queue int, b *packet.Burst) int {
	q := &p.rx[queue]
	s := p.enter(q)
	if s == nil {
		return 0
	}
	defer q.busy.Store(0)
	if p.o.Server {
		if queue >= len(s.c.C2S) {
			return 0
		}
		return p.serverRx(q, s, s.c.C2S[queue], b)
	}
	return p.clientRx(q, s, queue, b)
}

// TxBurst copies frames into the ring: a client into its own C2S buffers, a
// server into the buffers the client gave on its S2C ring. It takes every
// frame it could place, and frees them; a frame larger than a ring buffer is
// taken and counted (tx_too_big).
func (p *Port) TxBurst(queue int, b *packet.Burst) int {
	q := &p.tx[queue]
	s := p.enter(q)
	if s == nil {
		return 0
	}
	defer q.busy.Store(0)
	var n int
	if p.o.Server {
		if queue >= len(s.c.S2C) {
			return 0
		}
		n = p.serverTx(q, s, s.c.S2C[queue], b)
	} else {
		n = p.clientTx(q, s, s.c.C2S[queue], queue, b)
	}
	q.done.N = 0
	copy(q.done.H[:n], b.H[:n])
	q.done.N = n
	packet.Free(&q.done)
	return n
}

// chain is how many slots the packet at cur spans, within the avail the peer
// published, and whether it ends there. A chain that runs past what the peer
// published is malformed, as DPDK takes it: a sender publishes whole packets.
// Only the flags are read here; gather reads each descriptor again, once, for
// the rest.
func chain(r *memif.Ring, cur, avail uint16) (uint16, bool) {
	for n := uint16(0); n < avail; {
		f := r.D(cur + n).Flags
		n++
		if f&memif.DescFlagNext == 0 {
			return n, true
		}
	}
	return avail, false
}

// gather copies a packet, which may span descriptors, from slot cur on into a
// fresh buffer. It returns the slots it consumed: a packet with a bad
// descriptor, a chain that does not end within what the peer published, or a
// packet too big for the buffer is consumed and counted once (rx_bad_desc,
// rx_too_big); 0 stops the burst (no buffer).
func (p *Port) gather(q *queue, s *session, r *memif.Ring, ring int, cur, avail uint16, b *packet.Burst) uint16 {
	n, whole := chain(r, cur, avail)
	if !whole {
		q.pub.badDesc.Add(1)
		return n
	}
	if p.o.Pool.Alloc(b, 1) == 0 {
		q.pub.noBuffer.Add(1)
		return 0
	}
	h := b.H[b.N-1]
	pk := h.P()
	for i := range n {
		d := r.Load(cur + i)
		data, good := p.source(s, ring, d, cur+i)
		if !good {
			q.pub.badDesc.Add(1)
			b.N--
			packet.FreeOne(h)
			return n
		}
		dst, err := pk.Append(len(data))
		if err != nil {
			q.pub.tooBig.Add(1)
			b.N--
			packet.FreeOne(h)
			return n
		}
		copy(dst, data)
	}
	q.pub.packets.Add(1)
	q.pub.bytes.Add(uint64(pk.Len()))
	return n
}

// source is the bytes a received descriptor names. A client reads its own
// buffer for the slot, whatever the descriptor says (the server writes only the
// length, which is bounded); a server reads the client's regions through
// memif.Buf's bounds check.
func (p *Port) source(s *session, ring int, d memif.Desc, slot uint16) ([]byte, bool) {
	if ring < 0 {
		return memif.Buf(s.c.Regions, d)
	}
	if d.Length > uint32(p.o.BufferSize) {
		return nil, false
	}
	off := p.bufOffset(ring, slot)
	return s.region.Mem[off : off+d.Length], true
}

// clientRx reads the S2C ring up to the server's tail, but never past the
// slots the client gave (q.head): a tail beyond them is the server's error,
// and those slots hold nothing of this connection. It gives the slots it read
// back at once, from its own head, which it never reads from the ring.
func (p *Port) clientRx(q *queue, s *session, queue int, b *packet.Burst) int {
	r := s.c.S2C[queue]
	ring := len(p.tx) + queue
	start := b.N
	avail := min(r.Tail()-q.last, q.head-q.last)
	for avail > 0 && b.N < packet.MaxBurst {
		used := p.gather(q, s, r, ring, q.last, avail, b)
		if used == 0 {
			break
		}
		q.last += used
		avail -= used
	}
	// Give the slots back, each with its own buffer.
	if end := q.last + r.Size(); q.head != end {
		for ; q.head != end; q.head++ {
			*r.D(q.head) = memif.Desc{Offset: p.bufOffset(ring, q.head), Length: uint32(p.o.BufferSize)}
		}
		r.SetHead(q.head)
	}
	return b.N - start
}

func (p *Port) serverRx(q *queue, s *session, r *memif.Ring, b *packet.Burst) int {
	start := b.N
	avail := min(r.Head()-q.last, r.Size())
	for avail > 0 && b.N < packet.MaxBurst {
		used := p.gather(q, s, r, -1, q.last, avail, b)
		if used == 0 {
			break
		}
		q.last += used
		avail -= used
	}
	r.SetTail(q.last)
	return b.N - start
}

func (p *Port) clientTx(q *queue, s *session, r *memif.Ring, ring int, b *packet.Burst) int {
	head := q.last
	free := r.Size() - min(head-r.Tail(), r.Size())
	mem := s.region.Mem
	n, bytes, sent := 0, 0, 0
	for ; n < b.N && free > 0; n++ {
		data := b.H[n].P().Data()
		if len(data) > p.o.BufferSize {
			q.pub.tooBig.Add(1)
			continue
		}
		off := p.bufOffset(ring, head)
		copy(mem[off:], data)
		*r.D(head) = memif.Desc{Offset: off, Length: uint32(len(data))}
		head++
		free--
		sent++
		bytes += len(data)
	}
	if head != q.last {
		q.last = head
		r.SetHead(head)
		r.Kick()
	}
	q.pub.packets.Add(uint64(sent))
	q.pub.bytes.Add(uint64(bytes))
	return n
}

// serverTx fills the buffers the client gave on its S2C ring. A slot whose
// descriptor names memory outside the client's regions is skipped: given back
// empty (length 0) and counted (tx_bad_desc), and the frame goes into the next
// slot, so one bad descriptor cannot stop the link.
func (p *Port) serverTx(q *queue, s *session, r *memif.Ring, b *packet.Burst) int {
	tail := q.last
	free := min(r.Head()-tail, r.Size())
	n, bytes, sent := 0, 0, 0
	for n < b.N && free > 0 {
		d := r.Load(tail)
		buf, ok := memif.Buf(s.c.Regions, memif.Desc{Region: d.Region, Offset: d.Offset, Length: d.Length})
		if !ok {
			q.pub.badDesc.Add(1)
			dp := r.D(tail)
			dp.Flags, dp.Length = 0, 0
			tail++
			free--
			continue
		}
		data := b.H[n].P().Data()
		n++
		if len(data) > len(buf) {
			q.pub.tooBig.Add(1)
			continue
		}
		copy(buf, data)
		dp := r.D(tail)
		dp.Flags, dp.Length = 0, uint32(len(data))
		tail++
		free--
		sent++
		bytes += len(data)
	}
	if tail != q.last {
		q.last = tail
		r.SetTail(tail)
		r.Kick()
	}
	q.pub.packets.Add(uint64(sent))
	q.pub.bytes.Add(uint64(bytes))
	return n
}
