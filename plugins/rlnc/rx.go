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
