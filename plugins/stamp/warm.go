package stamp

import (
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/plugins"
)

// Warming a burst's sessions. With thousands of sessions a packet's
// session state is out of the L1 and L2 caches, and reaching it is a chain
// of dependent loads (the table's page, the session, its hot record, its
// return SRH) that, packet after packet, miss one after the other: hundreds
// of nanoseconds a packet (BenchmarkScaleReflector, BenchmarkScaleCollector).
// A stage with many sessions first walks the whole burst a link at a time,
// reading one word of every cache line the packets will touch, so that the
// burst's misses overlap (as VPP's graph nodes prefetch, and as the RLNC
// receiver's warm and the route stage's Lookup4Burst do); then it does the
// work on warm lines. Warming is read-only and reads only fields that the
// lcore owns, that never change after a session is made, or atomics:
// a guess that is wrong (a packet that turns out not to be a reply) costs a
// wasted read, never a wrong result.

// warmRfSessions and warmTxSessions are the table sizes from which the
// reflector and the collector warm their bursts: below them the sessions
// stay in L1 and L2 (1,000 reflector sessions are 344 KiB; a sender session
// is 1.3 KiB and its FIFO's records) and warming would only cost its own
// time.
const (
	warmRfSessions = 1024
	warmTxSessions = 128
)

// burstIDs reads the SSID of every packet of b that may be a STAMP packet
// to port (any port when port is 0), 0 for the others. It parses the
// packets, as the stage will anyway (the parse stays in each packet).
func burstIDs(b *packet.Burst, port uint16, ids *[packet.MaxBurst]uint16) {
	for i := 0; i < b.N; i++ {
		ids[i] = 0
		p := b.H[i].P()
		l, err := p.ParseLayers()
		if err != nil || l.Flags&packet.FlagUDP == 0 {
			continue
		}
		u := packet.UDP(p.Data()[l.L4:l.End])
		if port != 0 && u.DstPort() != port {
			continue
		}
		if n := int(u.Length()); n >= packet.UDPLen+BaseLen && n <= len(u) {
			ids[i], _ = ssidOf(u[packet.UDPLen:n])
		}
	}
}

// sessionsOf looks up every nonzero id: the table's pages, side by side.
func sessionsOf[S any](t *table[S], n int, ids *[packet.MaxBurst]uint16, ss *[packet.MaxBurst]*S) {
	for i := 0; i < n; i++ {
		ss[i] = nil
		if id := ids[i]; id != 0 {
			if pg := t.pages[id>>8]; pg != nil {
				ss[i] = pg[id&255]
			}
		}
	}
}

// warmRf reads the lines a reply reads of each packet's reflector session:
// the session (its 344 bytes: config, return SRHs' headers, state), then
// its return SRHs.
func (r *reflector) warmRf(b *packet.Burst, t *rfTable) {
	if b.N < 2 || len(t.m) < warmRfSessions {
		return
	}
	var ids [packet.MaxBurst]uint16
	var ss [packet.MaxBurst]*rfSession
	burstIDs(b, r.port, &ids)
	sessionsOf(t, b.N, &ids, &ss)
	var x uint64
	for _, s := range ss[:b.N] {
		if s != nil {
			// Offsets 0, 16, 48, 112, 136, 168, 208, 233, 264, 272, 328
			// and 336: no 64 bytes of the session without one of them.
			// Only fields that never change, or atomics: st is its
			// owner lcore's, and this one may not be it.
			x += uint64(s.id) + uint64(len(s.stage))
			if s.cfg.Stateful {
				x++
			}
			x += uint64(len(s.cfg.ReturnPath))
			if s.cfg.Auth {
				x++
			}
			x += uint64(len(s.srh)) + uint64(s.format) + uint64(s.retLast[0])
			x += s.replied.Load()
			if s.kseq.Load() != nil {
				x++
			}
			if s.st.mac != nil || s.fromAPI {
				x++
			}
		}
	}
	for _, s := range ss[:b.N] {
		if s != nil {
			if len(s.srh) > 0 {
				x += uint64(s.srh[0])
			}
			if len(s.srhLast) > 0 {
				x += uint64(s.srhLast[0])
			}
		}
	}
	r.sink += x
}

// warmCo reads the lines a reply reads of each packet's sender session
// (584 bytes: the checks' addresses and ports, its layouts, the pointers to
// its hot record and its FIFO), then of the session's hot record (736
// bytes: a reply reads or writes nearly all of it) where this lcore owns
// the session, then the FIFO's ring, and says whether it did. The FIFO's
// slots are then written at the burst's end, all together (putRecs), where
// their misses overlap; with few sessions each record goes in as it comes,
// not copied twice.
func (c *collector) warmCo(ctx *plugins.Context, b *packet.Burst, t *txTable, multi bool) bool {
	if b.N < 2 || len(t.m) < warmTxSessions {
		return false
	}
	var ids [packet.MaxBurst]uint16
	var ss [packet.MaxBurst]*txSession
	port := uint16(0)
	if c.port > 0 {
		port = uint16(c.port)
	}
	burstIDs(b, port, &ids)
	sessionsOf(t, b.N, &ids, &ss)
	var x uint64
	for i, s := range ss[:b.N] {
		if s == nil {
			continue
		}
		if multi && !ctx.Mine(sessionKey(ids[i])) {
			ss[i] = nil // its owner's: handed over, not measured here
			continue
		}
		// Offsets 0, 56 (cfg.Src), 120 (cfg.SrcPort), 176 (cfg.Interval),
		// 232 (cfg.Start), 264, 320, 384, 432 (tx), 488, 504, 528 and 576.
		x += uint64(s.id) + uint64(s.cfg.SrcPort) + uint64(s.cfg.Interval) + uint64(len(s.tmpl))
		if s.cfg.Src.IsValid() {
			x++
		}
		if s.cfg.Start || s.fromAPI {
			x++
		}
		x += uint64(s.hmacTLV) + uint64(s.replySrc[0]) + s.sentGen.Load()
		if s.rlay != nil && s.rx != nil && s.fifo != nil {
			x++
		}
	}
	for _, s := range ss[:b.N] {
		if s == nil || s.rx == nil {
			continue
		}
		// The hot record: offsets 0, 64, 128, 208, 248, 288, 328, 352,
		// 400, 448, 512, 560, 624, 688 and 728.
		h := s.rx
		x += h.gen + uint64(h.prev[0]) + h.h[1].n + h.jit[0].n + h.jit[1].n + h.jit[2].n
		x += h.iv[0].n + h.iv[1].n + uint64(h.pseq[0]) + uint64(h.pdel[1][0]) + uint64(h.pdel[5][0])
		x += h.window[0] + h.window[8] + h.dups
		if h.cold != nil {
			x++
		}
		if s.fifo != nil {
			x += s.fifo.tail.Load() + s.fifo.mask
		}
	}
	for _, s := range ss[:b.N] {
		if s != nil && s.fifo != nil {
			x += s.fifo.warm()
		}
	}
	c.sink += x
	return true
}

// pendingRec is a record waiting for the burst's end to enter its
// session's FIFO.
type pendingRec struct {
	s *txSession
	r Record
}

// keep puts r into its session's FIFO; during Process, at the burst's end.
func (c *collector) keep(s *txSession, r *Record) {
	if c.batching {
		e := &c.recs[c.nrec]
		e.s, e.r = s, *r
		c.nrec++
		return
	}
	c.put(s, r)
}

func (c *collector) put(s *txSession, r *Record) {
	if !s.fifo.Put(r) {
		s.rx.fifoLost++
		s.fifoLost.Add(1)
		c.cLost.Inc()
	}
}

// putRecs puts the burst's records into their FIFOs, in arrival order.
func (c *collector) putRecs() {
	for i := 0; i < c.nrec; i++ {
		e := &c.recs[i]
		c.put(e.s, &e.r)
	}
	c.nrec = 0
}

func (c *collector) endBatch() {
	c.putRecs()
	c.batching = false
}

// warmTx reads the lines a test packet reads of each due session of a
// poll: the session (584 bytes: its config's count, duration and format,
// its template's header and offsets, its run state), then its template
// (the frame the packet is copied from). The sender owns its sessions' tx
// state.
func (st *sender) warmTx(due []dueEntry) {
	if len(due) < 2 {
		return
	}
	var x uint64
	for _, e := range due {
		s := e.s
		// Offsets 0, 48 (cfg.Reflector), 120 (cfg.SrcPort), 176
		// (cfg.Interval), 232 (cfg.Start), 264, 320, 384, 432 (tx), 488 and
		// 576.
		x += uint64(s.id) + uint64(s.cfg.SrcPort) + uint64(s.cfg.Interval) + uint64(len(s.tmpl))
		if s.cfg.Reflector.IsValid() {
			x++
		}
		if s.cfg.Start || s.fromAPI {
			x++
		}
		x += uint64(s.dmOff) + uint64(s.replySrc[0]) + s.ctl.Load() + s.tx.gen + s.sentGen.Load()
	}
	for _, e := range due {
		t := e.s.tmpl
		for o := 0; o < len(t); o += 64 {
			x += uint64(t[o])
		}
		if len(t) > 0 {
			x += uint64(t[len(t)-1])
		}
	}
	st.sink += x
}
