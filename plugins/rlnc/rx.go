package rlnc

import (
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/appliance/stats"
	"github.com/linerate/linerate/plugins"
)

// receiver is what the recoder and the decoder share: the store, and the
// logical flow of CODED IP's receiving side (Fig. 2): session, generation
// window, generation, innovativeness.
type receiver struct {
	st *store

	// sink keeps warm's reads from being optimised away.
	sink uint64

	cPackets, cInnovative, cPassed *stats.Counter
}

func newReceiver(s *plugins.Setup, st *store) receiver {
	st.receiver = true
	cs := s.Counters
	return receiver{st: st,
		cPackets:    cs.New("coded_received", "CODED IP packets received"),
		cInnovative: cs.New("innovative", "innovative packets kept"),
		cPassed:     cs.New("passed", "packets that are not CODED IP, passed on untouched"),
	}
}

// generation finds or opens the generation of a coded packet, applying the
// session's window and done marks and the packet's k′. It returns the
// generation, or a drop reason; handed is true when the packet went to its
// owner lcore.
func (r *receiver) generation(ctx *plugins.Context, h packet.Handle, l *packet.Layers, hd Header) (gi int32, drop packet.Reason, handed bool) {
	st := r.st
	d := h.P().Data()
	ip := packet.IPv6(d[l.L3:])
	key := sessionKey{src: ip.Src(), dst: ip.Dst(), id: hd.SessionID()}
	hs, si := st.keyHash(&key)
	if !ctx.Mine(hs) {
		ctx.Handoff(h, ctx.Owner(hs))
		return -1, 0, true
	}
	r.cPackets.Inc()
	k, n := hd.K(), hd.BlockLen()
	if n > st.cfg.MaxBlock || int(l.L4)+FixedLen > maxHdr {
		return -1, reasonTooBig, false
	}
	now := ctx.Now
	if si < 0 {
		si = st.session(&key, hs, now)
	}
	s := &st.sess[si]
	if s.packets == 0 {
		s.nextHdr, s.sessLen = hd.NextHeader(), hd.SessionLength()
	} else if s.nextHdr != hd.NextHeader() {
		return -1, reasonMismatch, false
	}
	s.packets++
	g := hd.GenerationID()
	if !st.admit(si, g) {
		return -1, reasonStale, false
	}
	if s.done.has(g) {
		return -1, reasonLate, false
	}
	gi = st.gen(si, g)
	if gi < 0 {
		var err error
		gi, err = st.newGen(si, g, k, n, now)
		if err != nil {
			return -1, reasonNoMemory, false
		}
		ge := &st.gens[gi]
		ge.fresh = true
		setTemplate(ge, d, l)
		// The template goes on to the fixed CODED IP header, which every
		// packet of the generation shares but for flags and k′.
		copy(ge.hdr[ge.hdrLen:], d[l.L4:int(l.L4)+FixedLen])
	}
	ge := &st.gens[gi]
	if ge.k != k || ge.n != n {
		return -1, reasonMismatch, false
	}
	if !st.blocksUsed(ge, hd) {
		return -1, reasonMismatch, false
	}
	return gi, 0, false
}

// blocksUsed applies a packet's k′ to its generation (docs/rlnc-wire.md,
// "Blocks Used"). A packet that left before its generation closed says 0
// (K); the first packet that says k′ < K sets the generation's k′, once. It
// reports false for a packet that contradicts the generation: a second,
// different k′, a coefficient at or beyond the k′ learned, or a k′ below a
// coefficient of a packet held. Only a short generation pays for the checks.
func (st *store) blocksUsed(ge *generation, hd Header) bool {
	kk := hd.BlocksUsed()
	switch {
	case kk == ge.kk:
		return true
	case kk > ge.kk: // k′ is known, and this packet says K
		return hd[offBlocksUsed] == 0 && zeroFrom(hd.Vector(), ge.kk)
	case ge.kk < ge.k: // a second k′
		return false
	}
	for _, s := range ge.rows {
		if !zeroFrom(st.slot(s)[:ge.k], kk) {
			return false
		}
	}
	ge.kk = kk
	return true
}

// zeroFrom reports whether v[i:] is all zero.
func zeroFrom(v []byte, i int) bool {
	for _, c := range v[i:] {
		if c != 0 {
			return false
		}
	}
	return true
}

// keep copies the vector and block of an innovative packet into a slot the
// caller took before the insert.
func (r *receiver) keep(gi, slot int32, hd Header) {
	st := r.st
	ge := &st.gens[gi]
	copy(st.slot(slot), hd[FixedLen:FixedLen+ge.k+ge.n])
	ge.rows = append(ge.rows, slot)
	r.cInnovative.Inc()
}

// finish marks generation gi done in its session and frees it.
func (r *receiver) finish(gi int32) {
	st := r.st
	ge := &st.gens[gi]
	s := &st.sess[ge.sess]
	s.done.set(ge.id)
	s.finished++
	ge.done = true
	st.freeGen(gi)
}

// warmGens is the number of generations held from which a receiver warms
// each burst before taking its packets. Below it, everything a packet reads
// stays in cache between its generation's packets and warming would only
// cost its own time.
const warmGens = 64

// warm reads, ahead of taking the packets of b, one word of every cache line
// taking them will start with: per packet its session's table entry, the
// session, the session's newest generation and that generation's Echelon
// rows. Each is a chain of dependent loads, which, with thousands of
// generations open, miss the cache one after the other: hundreds of
// nanoseconds a packet (BenchmarkScale). Here the chains of the burst's
// packets advance a link at a time, side by side, so their misses overlap,
// as VPP's graph nodes prefetch a few packets ahead. Read-only: a guess
// that is wrong (a hash shared by two sessions, a packet of an older
// generation) costs a wasted read, never a wrong result.
func (r *receiver) warm(b *packet.Burst) {
	st := r.st
	if st.liveGens() < warmGens || b.N < 2 {
		return
	}
	var at [packet.MaxBurst]int32 // per packet: the table slot, session, generation; -1 none
	var x uint64
	t := &st.stab
	for i := 0; i < b.N; i++ {
		at[i] = -1
		p := b.H[i].P()
		l, hd, ok, err := coded(p)
		if !ok || err != nil {
			continue
		}
		ip := packet.IPv6(p.Data()[l.L3:])
		key := sessionKey{src: ip.Src(), dst: ip.Dst(), id: hd.SessionID()}
		j := t.start(key.hash(st.seed))
		at[i] = int32(j)
		x += uint64(t.e[j].key)
	}
	for i := 0; i < b.N; i++ {
		if j := at[i]; j >= 0 {
			// The entry's session, or -1 for an empty entry: the first probe
			// is right but for a collision.
			si := t.e[j].val
			at[i] = si
			if si >= 0 {
				s := &st.sess[si]
				x += uint64(s.key.id) + uint64(s.gens.head)
			}
		}
	}
	for i := 0; i < b.N; i++ {
		if si := at[i]; si >= 0 {
			gi := st.sess[si].gens.head
			at[i] = gi
			if gi >= 0 {
				ge := &st.gens[gi]
				x += uint64(ge.id) + uint64(ge.rank)
			}
		}
	}
	for i := 0; i < b.N; i++ {
		if gi := at[i]; gi >= 0 {
			if e := st.gens[gi].ech; e != nil {
				x += uint64(e.Rank())
			}
		}
	}
	for i := 0; i < b.N; i++ {
		if gi := at[i]; gi >= 0 {
			if e := st.gens[gi].ech; e != nil {
				x += e.Touch()
			}
		}
	}
	// A generation one block short of its k′ is likely to be decoded (or
	// recoded from) by this packet: the blocks it holds, written long ago
	// when many generations are open, are read all at once.
	for i := 0; i < b.N; i++ {
		if gi := at[i]; gi >= 0 {
			if ge := &st.gens[gi]; len(ge.rows) == ge.kk-1 {
				for _, sl := range ge.rows {
					blk := st.slot(sl)[:ge.k+ge.n]
					for o := 0; o < len(blk); o += 64 {
						x += uint64(blk[o])
					}
				}
			}
		}
	}
	r.sink += x
}
