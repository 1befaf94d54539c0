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
	c := p.enter(q)
	if c == nil {
		return 0
	}
	defer q.busy.Store(0)
	if p.o.Server {
		if queue >= len(c.C2S) {
			return 0
		}
		return p.serverRx(q, c, c.C2S[queue], b)
	}
	return p.clientRx(q, c, queue, b)
}

// TxBurst copies frames into the ring: a client into its own C2S buffers, a
// server into the buffers the client gave on its S2C ring. It takes every
// frame it could place, and frees them; a frame larger than a ring buffer is
// taken and counted (tx_too_big).
func (p *Port) TxBurst(queue int, b *packet.Burst) int {
	q := &p.tx[queue]
	c := p.enter(q)
	if c == nil {
		return 0
	}
	defer q.busy.Store(0)
	var n int
	if p.o.Server {
		if queue >= len(c.S2C) {
			return 0
		}
		n = p.serverTx(q, c, c.S2C[queue], b)
	} else {
		n = p.clientTx(q, c.C2S[queue], queue, b)
	}
	q.done.N = 0
	copy(q.done.H[:n], b.H[:n])
	q.done.N = n
	packet.Free(&q.done)
	return n
}

// gather copies a packet, which may span descriptors, from slot cur on into a
// fresh buffer. It returns the slots it read (a bad descriptor or a packet too
// big for the buffer is read, counted and dropped), or 0 to stop: no buffer,
// or a chain the peer has not finished publishing.
func (p *Port) gather(q *queue, c *memif.Conn, r *memif.Ring, ring int, cur, avail uint16, b *packet.Burst) uint16 {
	if p.o.Pool.Alloc(b, 1) == 0 {
		q.pub.noBuffer.Add(1)
		return 0
	}
	h := b.H[b.N-1]
	pk := h.P()
	used := uint16(0)
	ok := true
	for {
		if used == avail {
			// The chain runs past what the peer published: wait for the rest.
			b.N--
			packet.FreeOne(h)
			return 0
		}
		d := r.Load(cur + used)
		used++
		data, good := p.source(c, ring, d, cur+used-1)
		if !good {
			q.pub.badDesc.Add(1)
			ok = false
		} else if ok {
			dst, err := pk.Append(len(data))
			if err != nil {
				q.pub.tooBig.Add(1)
				ok = false
			} else {
				copy(dst, data)
			}
		}
		if d.Flags&memif.DescFlagNext == 0 {
			break
		}
	}
	if !ok {
		b.N--
		packet.FreeOne(h)
		return used
	}
	q.pub.packets.Add(1)
	q.pub.bytes.Add(uint64(pk.Len()))
	return used
}

// source is the bytes a received descriptor names. A client reads its own
// buffer for the slot, whatever the descriptor says (the server writes only the
// length, which is bounded); a server reads the client's regions through
// memif.Buf's bounds check.
func (p *Port) source(c *memif.Conn, ring int, d memif.Desc, slot uint16) ([]byte, bool) {
	if ring < 0 {
		return memif.Buf(c.Regions, d)
	}
	if d.Length > uint32(p.o.BufferSize) {
		return nil, false
	}
	off := p.bufOffset(ring, slot)
	return p.region.Mem[off : off+d.Length], true
}

func (p *Port) clientRx(q *queue, c *memif.Conn, queue int, b *packet.Burst) int {
	r := c.S2C[queue]
	ring := len(p.tx) + queue
	start := b.N
	tail := r.Tail()
	avail := min(tail-q.last, r.Size())
	for avail > 0 && b.N < packet.MaxBurst {
		used := p.gather(q, c, r, ring, q.last, avail, b)
		if used == 0 {
			break
		}
		q.last += used
		avail -= used
	}
	// Give the slots back, each with its own buffer.
	head := r.Head()
	for end := q.last + r.Size(); head != end; head++ {
		*r.D(head) = memif.Desc{Offset: p.bufOffset(ring, head), Length: uint32(p.o.BufferSize)}
	}
	r.SetHead(head)
	return b.N - start
}

func (p *Port) serverRx(q *queue, c *memif.Conn, r *memif.Ring, b *packet.Burst) int {
	start := b.N
	avail := min(r.Head()-q.last, r.Size())
	for avail > 0 && b.N < packet.MaxBurst {
		used := p.gather(q, c, r, -1, q.last, avail, b)
		if used == 0 {
			break
		}
		q.last += used
		avail -= used
	}
	r.SetTail(q.last)
	return b.N - start
}

func (p *Port) clientTx(q *queue, r *memif.Ring, ring int, b *packet.Burst) int {
	head := q.last
	free := r.Size() - min(head-r.Tail(), r.Size())
	mem := p.region.Mem
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

func (p *Port) serverTx(q *queue, c *memif.Conn, r *memif.Ring, b *packet.Burst) int {
	tail := q.last
	free := min(r.Head()-tail, r.Size())
	n, bytes, sent := 0, 0, 0
	for ; n < b.N && free > 0; n++ {
		data := b.H[n].P().Data()
		d := r.Load(tail)
		buf, ok := memif.Buf(c.Regions, memif.Desc{Region: d.Region, Offset: d.Offset, Length: d.Length})
		switch {
		case !ok:
			q.pub.badDesc.Add(1)
		case len(data) > len(buf):
			q.pub.tooBig.Add(1)
		default:
			copy(buf, data)
			dp := r.D(tail)
			dp.Flags, dp.Length = 0, uint32(len(data))
			tail++
			free--
			sent++
			bytes += len(data)
		}
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
