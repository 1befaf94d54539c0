package ioam

import (
	"encoding/binary"

	"github.com/linerate/linerate/appliance/packet"
)

// The moves of the common case: a short link-layer header in front of the
// room a stage opens or closes. Each does what a general routine does
// (InsertGap, RemoveGap, copy) with fewer checks or moves, and leaves
// everything else to that routine.

// maxWordHead is the longest head moveHead moves in words: an Ethernet header
// with up to four VLAN tags.
const maxWordHead = 32

// moveHead moves the n bytes at src to dst in d, where the two may overlap, as
// copy does: all loads before the stores. Up to maxWordHead bytes (8 at
// least) it moves words rather than call memmove.
func moveHead(d []byte, dst, src, n int) {
	if n < 8 || n > maxWordHead {
		copy(d[dst:dst+n], d[src:src+n])
		return
	}
	s := d[src : src+n]
	t := d[dst : dst+n]
	le := binary.LittleEndian
	switch {
	case n <= 16:
		a, b := le.Uint64(s), le.Uint64(s[n-8:])
		le.PutUint64(t, a)
		le.PutUint64(t[n-8:], b)
	case n <= 24:
		a, b, c := le.Uint64(s), le.Uint64(s[8:]), le.Uint64(s[n-8:])
		le.PutUint64(t, a)
		le.PutUint64(t[8:], b)
		le.PutUint64(t[n-8:], c)
	default:
		a, b, c, e := le.Uint64(s), le.Uint64(s[8:]), le.Uint64(s[16:]), le.Uint64(s[n-8:])
		le.PutUint64(t, a)
		le.PutUint64(t[8:], b)
		le.PutUint64(t[16:], c)
		le.PutUint64(t[n-8:], e)
	}
}

// wordHead reports whether n bytes open after the first at bytes of p by
// moving the head in words (Prepend, then moveHead): where InsertGap would
// move the head (the smaller side) into the headroom, for a head of up to
// maxWordHead bytes.
func wordHead(p *packet.Packet, at, n int) bool {
	return at >= 8 && at <= maxWordHead && n >= 0 && n <= p.Headroom() && at <= p.Len()-at
}

// removeGap is Packet.RemoveGap. When RemoveGap would move the head (the
// smaller side), a head of up to maxWordHead bytes moves in words, unless
// words is false (the general path).
func removeGap(p *packet.Packet, at, n int, words bool) error {
	d := p.Data()
	if !words || at < 8 || at > maxWordHead || n < 0 || at+n > len(d) || at > len(d)-at-n {
		return p.RemoveGap(at, n)
	}
	moveHead(d, n, 0, at)
	return p.Adj(n)
}
