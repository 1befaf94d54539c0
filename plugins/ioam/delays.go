package ioam

import "encoding/binary"

// tsLayout is where the timestamps sit in a node's data of one trace type:
// the last one seen, since a flow keeps its trace type.
type tsLayout struct {
	traceType uint32
	valid     bool
	size      int // node data bytes; 0 when the nodes vary (opaque snapshots)
	sec, frac int
}

func (l *tsLayout) set(tt uint32) {
	*l = tsLayout{traceType: tt, valid: true, sec: -1, frac: -1}
	if tt&TraceTimestampSeconds == 0 || tt&TraceTimestampFraction == 0 || tt&TraceOpaqueState != 0 {
		return
	}
	o := 0
	if tt&TraceHopLimNodeID != 0 {
		o += 4
	}
	if tt&TraceIfIDs != 0 {
		o += 4
	}
	l.sec, l.frac = o, o+4
	l.size = NodeLen(tt) * 4
}

// delays records the per-hop and end-to-end delays of a trace's filled node
// data. The node list is newest first: node 0 of the path (the encapsulating
// node) is the last one.
func (dc *decap) delays(tt uint32, data []byte, f TimestampFormat) {
	if !dc.ts.valid || dc.ts.traceType != tt {
		dc.ts.set(tt)
	}
	l := &dc.ts
	if l.size == 0 {
		return
	}
	n := len(data) / l.size
	if n < 2 {
		return
	}
	at := func(k int) int64 { // timestamp of path node k (0 = encapsulating node)
		o := (n - 1 - k) * l.size
		sec := binary.BigEndian.Uint32(data[o+l.sec:])
		frac := binary.BigEndian.Uint32(data[o+l.frac:])
		if sec == unavailable32 || frac == unavailable32 {
			return 0
		}
		return TimestampNs(f, sec, frac)
	}
	first := at(0)
	prev := first
	for k := 1; k < n; k++ {
		t := at(k)
		if t != 0 && prev != 0 && t >= prev && k-1 < len(dc.hops) {
			dc.hops[k-1].Record(uint64(t - prev))
		}
		prev = t
	}
	if dc.e2e != nil && first != 0 && prev >= first {
		dc.e2e.Record(uint64(prev - first))
	}
}
