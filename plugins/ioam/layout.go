package ioam

import (
	"encoding/binary"

	"github.com/linerate/linerate/appliance/packet"
)

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
