package ioam

import (
	"encoding/binary"

	"github.com/linerate/linerate/appliance/packet"
)

// The per-packet helpers of the common case: the kernel/linerate layout, a
// short link-layer header, small node data. Each does what a general routine
// does (fastTrace, InsertGap, RemoveGap, copy) with fewer checks or moves,
// and leaves everything else to that routine.

// traceLayout is the last layout fastTrace accepted on this stage. A flow
// keeps its layout, so a packet whose Hop-by-Hop header and trace header
// agree with it, but for RemainingLen and the O flag, needs only its own
// lengths and padding checked: the rest of what fastTrace checks is the same.
type traceLayout struct {
	hbh    uint64 // the HbH header's first 8 bytes, little-endian
	trh    uint64 // the trace header, masked by layoutMask
	hl     int    // HbH header length; 0: nothing remembered
	optEnd int    // one past the trace option, from the HbH header
	rest   int    // padding bytes after it
	pad    uint16 // the padding's first two bytes (rest ≥ 2), or its Pad1 (rest 1)
	data   int    // the trace's data bytes
	tt     uint32 // its trace type

	// The namespace and node plan of the layout's trace, once a stage found
	// them for the layout of key.
	ns  *nsState
	pl  *nodePlan
	key uint64
}

// layoutMask keeps the trace header but for the O flag and RemainingLen (the
// fields nodes change), read little-endian.
const layoutMask = 0xFFFFFFFF_80FBFFFF

// find is fastTrace, remembering the layout it accepts.
func (m *traceLayout) find(d []byte, l3 int) (opt, hl int) {
	if m.hl != 0 && m.match(d, l3) {
		return l3 + packet.IPv6Len + OptionHeaderLen, m.hl
	}
	opt, hl = fastTrace(d, l3)
	if opt != 0 {
		m.set(d, l3, hl)
	}
	return opt, hl
}

// set remembers the layout of d, which fastTrace accepted.
func (m *traceLayout) set(d []byte, l3, hl int) {
	hbh := l3 + packet.IPv6Len
	m.hbh = binary.LittleEndian.Uint64(d[hbh:])
	m.trh = binary.LittleEndian.Uint64(d[hbh+8:]) & layoutMask
	m.hl, m.optEnd = hl, 6+int(d[hbh+5])
	m.rest, m.pad = hl-m.optEnd, 0
	switch {
	case m.rest == 1:
		m.pad = uint16(d[hbh+m.optEnd])
	case m.rest >= 2:
		m.pad = binary.LittleEndian.Uint16(d[hbh+m.optEnd:])
	}
	m.data = m.optEnd - 8 - TraceHeaderLen
	m.tt = uint32(d[hbh+12])<<16 | uint32(d[hbh+13])<<8 | uint32(d[hbh+14])
}

// remember keeps ns and its plan pl as those of the current layout.
func (m *traceLayout) remember(ns *nsState, pl *nodePlan) { m.ns, m.pl, m.key = ns, pl, m.trh }

// known returns the namespace and plan remembered for the current layout, or
// nil. The plan is checked, for the namespace's cache may have reused it.
func (m *traceLayout) known() (*nsState, *nodePlan) {
	if pl := m.pl; pl != nil && m.key == m.trh && pl.valid && pl.traceType == m.tt {
		return m.ns, pl
	}
	return nil, nil
}

// match reports whether fastTrace would accept d, which shares the
// remembered layout's headers.
func (m *traceLayout) match(d []byte, l3 int) bool {
	hbh := l3 + packet.IPv6Len
	if l3 < 0 || hbh+16 > len(d) {
		return false
	}
	ip := (*[packet.IPv6Len]byte)(d[l3:])
	h := (*[16]byte)(d[hbh:])
	if ip[6] != packet.ProtocolHopByHop || binary.LittleEndian.Uint64(h[:8]) != m.hbh ||
		binary.LittleEndian.Uint64(h[8:])&layoutMask != m.trh || int(h[11]&0x7F)*4 > m.data {
		return false
	}
	end := hbh + (int(ip[4])<<8 | int(ip[5]))
	if hbh+m.hl > end || end > len(d) {
		return false
	}
	switch {
	case m.rest == 1:
		return uint16(d[hbh+m.optEnd]) == m.pad
	case m.rest >= 2:
		return binary.LittleEndian.Uint16(d[hbh+m.optEnd:]) == m.pad
	}
	return true
}

// ipv6At14 is ipv6At for the untagged Ethernet frame without a parse record,
// the usual case, in one check; anything else goes to ipv6At.
func ipv6At14(p *packet.Packet, d []byte) int {
	if len(d) >= 14+packet.IPv6Len && d[12] == 0x86 && d[13] == 0xDD && d[14]>>4 == 6 && !p.LayersValid() {
		return 14
	}
	return ipv6At(p, d)
}

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
