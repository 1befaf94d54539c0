package appliance

import (
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/appliance/stats"
)

// txBuffer is a fixed array and a count: appending writes one handle, never a
// slice header (which would cost a write-barrier check per packet).
type txBuffer struct {
	port  *portEntry
	queue int
	n     int
	buf   []packet.Handle // fixed length: the buffer's capacity
	// What this lcore moved through the port. The engine counts for every driver,
	// in loops it runs anyway, so drivers need no per-packet pass of their own.
	txPackets, txBytes stats.Counter
	rxPackets, rxBytes stats.Counter
}

// setupTx gives the lcore a tx buffer towards every port, on its own tx queue.
func (lc *lcore) setupTx(portsByID []*portEntry, size int) {
	lc.tx = make([]txBuffer, len(portsByID))
	for i, pe := range portsByID {
		lc.tx[i] = txBuffer{port: pe, queue: lc.id % max(pe.info.TxQueues, 1), buf: make([]packet.Handle, size)}
	}
	// Between two quiescent points: a burst, and what a flush of every tx
	// buffer can drop, twice over.
	lc.freed = make([]packet.Handle, 2*(packet.MaxBurst+len(portsByID)*size))
}

// forward appends h to the tx buffer of port, flushing a full buffer first.
func (lc *lcore) forward(h packet.Handle, port uint16) {
	if int(port) >= len(lc.tx) {
		lc.countDrop(packet.ReasonNoPort, 1)
		lc.free(h)
		return
	}
	t := &lc.tx[port]
	if t.n == len(t.buf) {
		lc.txNowSet = false
		lc.flush(t)
	}
	t.buf[t.n] = h
	t.n++
}

// forwardBurst appends every handle of hs to the tx buffer of port, flushing it
// whenever it fills.
func (lc *lcore) forwardBurst(hs []packet.Handle, port uint16) {
	if int(port) >= len(lc.tx) {
		lc.countDrop(packet.ReasonNoPort, uint64(len(hs)))
		for _, h := range hs {
			lc.free(h)
		}
		return
	}
	t := &lc.tx[port]
	for len(hs) > 0 {
		if t.n == len(t.buf) {
			lc.txNowSet = false
			lc.flush(t)
		}
		k := copy(t.buf[t.n:], hs)
		t.n += k
		hs = hs[k:]
	}
}

// forwardWhole is forwardBurst for a whole burst, which it empties. Towards a
// port that reads no clock at transmit (a mem link, the null port) with
// nothing buffered before it, the burst goes to the port at once, from the
// burst itself: the tx buffer would take the same burst of up to MaxBurst at
// the end of the loop, in the same order, after copying it twice (into the
// buffer, then into a tx burst). What the port does not take is buffered.
func (lc *lcore) forwardWhole(b *packet.Burst, port uint16) {
	if int(port) < len(lc.tx) {
		t := &lc.tx[port]
		if pe := t.port; t.n == 0 && b.N > 0 && !pe.stampTx && pe.handleTx == nil && !pe.ownPoolOnly {
			lc.txNowSet = false
			sent := lc.txBurst(t, b)
			lc.forwardBurst(b.H[sent:b.N], port)
			b.N = 0
			return
		}
	}
	lc.forwardBurst(b.H[:b.N], port)
	b.N = 0
}

// emit appends h to the tx buffer of port, dropping it as emit_full when full.
func (lc *lcore) emit(h packet.Handle, port uint16) bool {
	packet.Own(h, packet.OpClaim, uint16(lc.id), lc.at)
	if int(port) >= len(lc.tx) {
		lc.countDrop(packet.ReasonNoPort, 1)
		lc.free(h)
		return false
	}
	t := &lc.tx[port]
	if t.n == len(t.buf) {
		lc.countDrop(packet.ReasonEmitFull, 1)
		lc.free(h)
		return false
	}
	t.buf[t.n] = h
	t.n++
	return true
}

// flush transmits a tx buffer, stamped lc.txNow(). A packet of another pool
// that the port cannot transmit is copied into one of its own (counted). What
// the port does not take is offered once more, then dropped as tx_full.
func (lc *lcore) flush(t *txBuffer) {
	hs := t.buf[:t.n]
	t.n = 0
	retried := false
	for len(hs) > 0 {
		n, foreign := lc.send(t, hs)
		hs = hs[n:]
		switch {
		case len(hs) == 0:
		case foreign:
			hs = lc.copyToPool(hs, t.port)
		case t.port.handleTx == nil && n == packet.MaxBurst:
			// A whole burst went: the next one.
		case !retried:
			retried = true
		default:
			lc.countDrop(packet.ReasonTxFull, uint64(len(hs)))
			for _, h := range hs {
				lc.free(h)
			}
			hs = nil
		}
	}
}

// send gives the port the front of hs, and reports how many it took, and
// whether it stopped before a packet of another pool it cannot transmit.
// A port that takes handles straight from the tx buffer (ports.HandleTx)
// gets them all and does the per-packet tx work itself; any other gets a
// burst, stamped and measured here (the length read now: once the port has a
// packet it may free it).
func (lc *lcore) send(t *txBuffer, hs []packet.Handle) (n int, foreign bool) {
	id := uint16(lc.id)
	pe := t.port
	if tx := pe.handleTx; tx != nil {
		packet.OwnBurst(hs, packet.OpTx, id, -1)
		n, foreign = tx.TxHandles(t.queue, hs, lc.txNow())
		packet.OwnBurst(hs[n:], packet.OpBack, id, -1)
		t.txPackets.Add(uint64(n))
		return n, foreign
	}
	hs = hs[:min(len(hs), packet.MaxBurst)]
	if pe.ownPoolOnly {
		pool := pe.poolID
		for i, h := range hs {
			if h.P().PoolID() != pool {
				foreign = true
				hs = hs[:i]
				break
			}
		}
	}
	if len(hs) == 0 {
		return 0, foreign
	}
	b := &lc.txb
	b.N = copy(b.H[:], hs)
	if sent := lc.txBurst(t, b); sent < b.N {
		return sent, false
	}
	return b.N, foreign
}

// txBurst stamps and measures b's packets and gives them to t's port; it
// returns how many the port took. The bytes are summed before: once the port
// has a packet it may free it. What it did not take is still the lcore's
// (ports.Port), so a partial send subtracts the rest's lengths afterwards
// instead of keeping every packet's.
func (lc *lcore) txBurst(t *txBuffer, b *packet.Burst) int {
	// The port's options in locals: stores into the packets could alias lc
	// and pe, so the loop would reload them per packet.
	pe := t.port
	hs := b.H[:b.N]
	bytes := 0
	if pe.stampTx {
		now := lc.txNow()
		for _, h := range hs {
			p := h.P()
			p.StampTx(now)
			bytes += p.Len()
		}
	} else {
		for _, h := range hs {
			p := h.P()
			if p.Flags()&packet.FlagTxDelay != 0 {
				p.StampTx(lc.txNow())
			}
			bytes += p.Len()
		}
	}
	id := uint16(lc.id)
	packet.OwnBurst(hs, packet.OpTx, id, -1)
	sent := pe.port.TxBurst(t.queue, b)
	if sent < len(hs) {
		packet.OwnBurst(hs[sent:], packet.OpBack, id, -1)
		for _, h := range hs[sent:] {
			bytes -= h.P().Len()
		}
	}
	t.txPackets.Add(uint64(sent))
	t.txBytes.Add(uint64(bytes))
	return sent
}

// copyToPool copies the packets at the front of hs that come from the first
// one's pool (up to a burst of them) into buffers of the port's own pool, for
// ports that can transmit nothing else, and returns hs with the copies in
// their place. The run's buffers come in one allocation: a packet at a time,
// each copy cost a call into the pool and, through a port like DPDK's that
// stops at each foreign packet, a transmit call of its own. A packet that gets
// no buffer is dropped as no_buffer, one too big for it as too_big.
func (lc *lcore) copyToPool(hs []packet.Handle, pe *portEntry) []packet.Handle {
	from := hs[0].P().PoolID()
	n := 1
	for n < len(hs) && n < packet.MaxBurst && hs[n].P().PoolID() == from {
		n++
	}
	b := &lc.copyb
	b.N = 0
	got := pe.pool.Alloc(b, n)
	kept := 0
	for i, h := range hs[:n] {
		if i >= got {
			lc.countDrop(packet.ReasonNoBuffer, 1)
			lc.free(h)
			continue
		}
		q := b.H[i]
		if err := q.P().CopyFrom(h.P(), pe.pool.Headroom()); err != nil {
			pe.pool.FreeOne(q)
			lc.countDrop(packet.ReasonTooBig, 1)
			lc.free(h)
			continue
		}
		lc.copies.Inc()
		lc.free(h)
		hs[kept] = q
		kept++
	}
	if kept == n {
		return hs
	}
	return append(hs[:kept], hs[n:]...)
}

// flushAll transmits every tx buffer, with one tx timestamp, read at its first
// use: a loop that transmits only to ports that do not read it reads no clock.
func (lc *lcore) flushAll() {
	lc.txNowSet = false
	for i := range lc.tx {
		if lc.tx[i].n > 0 {
			lc.flush(&lc.tx[i])
		}
	}
}

// txNow is the flush's tx timestamp: the clock, read once a flush.
func (lc *lcore) txNow() int64 {
	if !lc.txNowSet {
		lc.txNowAt, lc.txNowSet = lc.e.clock.Now(), true
	}
	return lc.txNowAt
}

func (lc *lcore) txBuffered() int {
	n := 0
	for i := range lc.tx {
		n += lc.tx[i].n
	}
	return n
}
