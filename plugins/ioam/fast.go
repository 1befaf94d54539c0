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

// insertHead opens n bytes after the first at bytes of p as InsertGap does
// when it moves the head (the smaller side, into the headroom), with the
// head moved in words. It reports false, touching nothing, for the cases it
// leaves to InsertGap.
func insertHead(p *packet.Packet, at, n int) ([]byte, bool) {
	if at < 8 || at > maxWordHead || n < 0 || n > p.Headroom() || at > p.Len()-at {
		return nil, false
	}
	if _, err := p.Prepend(n); err != nil {
		return nil, false
	}
	d := p.Data()
	moveHead(d, 0, n, at)
	return d[at : at+n], true
}

// removeHead closes n bytes after the first at bytes of p as RemoveGap does
// when it moves the head (the smaller side), with the head moved in words. It
// reports false, touching nothing, for the cases it leaves to RemoveGap.
func removeHead(p *packet.Packet, at, n int) bool {
	d := p.Data()
	if at < 8 || at > maxWordHead || n < 0 || at+n > len(d) || at > len(d)-at-n {
		return false
	}
	moveHead(d, n, 0, at)
	return p.Adj(n) == nil
}
