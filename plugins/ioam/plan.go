package ioam

import (
	"encoding/binary"
	"math/bits"
)

// nodePlan is a node's data for one namespace and trace type, built once: the
// fields that never change are in image, and the offsets say where the
// per-packet ones go (-1: absent). Writing a node's data is a copy and a few
// stores.
type nodePlan struct {
	traceType uint32
	valid     bool
	size      int // bytes, opaque snapshot included
	words     int // NodeLen + opaque words: what RemainingLen loses
	format    TimestampFormat
	hop, hopW int16
	in, inW   int16
	sec, frac int16
	delay     int16
	queue     int16
	buffer    int16
	// ops are the per-packet fields in order: a short loop instead of a
	// branch per field the trace type might name.
	ops   [9]patch
	nops  int
	image [MaxTraceData]byte

	// perPacket: fields that take more than the hop limit (delay, queue,
	// buffer), which writeNode leaves to values and write.
	perPacket bool
	// cur is image with this burst's time and the input port's ids, for
	// port curPort in burst curGen (see node.writeNode).
	curGen  uint64
	curPort uint16
	cur     [curSize]byte
}

// curSize is the most node data writeNode writes from a per-burst image.
const curSize = 64

// patch is one per-packet field of a node's data: what and where.
type patch struct {
	kind uint8
	off  uint8
}

const (
	patchHop = iota
	patchIn
	patchInWide
	patchSec
	patchFrac
	patchDelay
	patchQueue
	patchBuffer
)

// build makes the plan of ns for traceType. It reports false when the node
// data would not fit a trace option.
func (pl *nodePlan) build(ns *Namespace, traceType uint32, eg egressIDs) bool {
	*pl = nodePlan{traceType: traceType, format: ns.Timestamp, hop: -1, hopW: -1, in: -1, inW: -1,
		sec: -1, frac: -1, delay: -1, queue: -1, buffer: -1}
	words := NodeLen(traceType)
	if traceType&TraceOpaqueState != 0 {
		words += ns.opaqueWords()
	}
	if words*4 > MaxTraceData {
		return false
	}
	b := pl.image[:]
	o := 0
	put32 := func(v uint32) { binary.BigEndian.PutUint32(b[o:], v); o += 4 }
	put64 := func(v uint64) { binary.BigEndian.PutUint64(b[o:], v); o += 8 }
	if traceType&TraceHopLimNodeID != 0 {
		pl.hop = int16(o)
		put32(ns.NodeID & 0xFFFFFF)
	}
	if traceType&TraceIfIDs != 0 {
		pl.in = int16(o)
		put32(unavailable16<<16 | uint32(eg.short))
	}
	if traceType&TraceTimestampSeconds != 0 {
		pl.sec = int16(o)
		put32(unavailable32)
	}
	if traceType&TraceTimestampFraction != 0 {
		pl.frac = int16(o)
		put32(unavailable32)
	}
	if traceType&TraceTransitDelay != 0 {
		pl.delay = int16(o)
		put32(unavailable32)
	}
	if traceType&TraceNamespaceData != 0 {
		put32(ns.Data)
	}
	if traceType&TraceQueueDepth != 0 {
		pl.queue = int16(o)
		put32(unavailable32)
	}
	if traceType&TraceChecksumComplement != 0 {
		// IPv6 has no checksum over option data: nothing to complement.
		put32(unavailable32)
	}
	if traceType&TraceHopLimNodeIDWide != 0 {
		pl.hopW = int16(o)
		put64(ns.NodeIDWide & (1<<56 - 1))
	}
	if traceType&TraceIfIDsWide != 0 {
		pl.inW = int16(o)
		put32(unavailable32)
		put32(eg.wide)
	}
	if traceType&TraceNamespaceDataWide != 0 {
		put64(ns.DataWide)
	}
	if traceType&TraceBufferOccupancy != 0 {
		pl.buffer = int16(o)
		put32(unavailable32)
	}
	for i := bits.OnesCount32(traceType & TraceUndefined); i > 0; i-- {
		put32(unavailable32)
	}
	if traceType&TraceOpaqueState != 0 {
		if !ns.HasSchema {
			put32(0x00FFFFFF) // no schema: length 0, schema id all ones
		} else {
			put32(uint32(len(ns.Schema)/4)<<24 | ns.SchemaID&0xFFFFFF)
			o += copy(b[o:], ns.Schema)
		}
	}
	pl.size, pl.words, pl.valid = o, words, true
	pl.perPacket = pl.delay >= 0 || pl.queue >= 0 || pl.buffer >= 0
	for _, f := range []struct {
		off  int16
		kind uint8
	}{{pl.hop, patchHop}, {pl.in, patchIn}, {pl.sec, patchSec}, {pl.frac, patchFrac}, {pl.delay, patchDelay},
		{pl.queue, patchQueue}, {pl.hopW, patchHop}, {pl.inW, patchInWide}, {pl.buffer, patchBuffer}} {
		if f.off >= 0 {
			pl.ops[pl.nops] = patch{kind: f.kind, off: uint8(f.off)}
			pl.nops++
		}
	}
	return true
}

// write writes the node data into dst, which holds pl.size bytes.
func (pl *nodePlan) write(dst []byte, v *hopValues) {
	dst = dst[:pl.size]
	if n := pl.size; n <= 32 {
		copyNode(dst, pl.image[:], n)
	} else {
		copy(dst, pl.image[:pl.size])
	}
	for _, op := range pl.ops[:pl.nops] {
		o := int(op.off)
		switch op.kind {
		case patchHop:
			dst[o] = v.hopLimit
		case patchIn:
			binary.BigEndian.PutUint16(dst[o:], v.ingress)
		case patchInWide:
			binary.BigEndian.PutUint32(dst[o:], v.ingressW)
		case patchSec:
			binary.BigEndian.PutUint32(dst[o:], v.time.sec[pl.format])
		case patchFrac:
			binary.BigEndian.PutUint32(dst[o:], v.time.frac[pl.format])
		case patchDelay:
			binary.BigEndian.PutUint32(dst[o:], v.delay)
			if v.pkt != nil {
				// The delay up to now; transmit writes the delay up to
				// itself. Ignored for a dst outside the packet (a record).
				v.pkt.SetTxDelay(dst[o : o+4])
			}
		case patchQueue:
			binary.BigEndian.PutUint32(dst[o:], v.queue)
		case patchBuffer:
			binary.BigEndian.PutUint32(dst[o:], v.buffer)
		}
	}
}

// copyNode copies a node's data of n bytes, a multiple of 4, in word moves: a
// call to memmove costs more than the copy.
func copyNode(dst, src []byte, n int) {
	dst, src = dst[:n], src[:n]
	for len(src) >= 8 {
		binary.NativeEndian.PutUint64(dst, binary.NativeEndian.Uint64(src))
		dst, src = dst[8:], src[8:]
	}
	if len(src) >= 4 {
		binary.NativeEndian.PutUint32(dst, binary.NativeEndian.Uint32(src))
	}
}

// preallocRoom reports whether a pre-allocated trace has room for a node's
// words (RFC 9197 §4.4): the O flag is clear and RemainingLen is at least
// words. Without room it sets the O flag.
func preallocRoom(tr Trace, words int) bool {
	_ = tr[TraceHeaderLen-1] // one bounds check for the header's fields
	if tr.Overflow() {
		return false
	}
	if rem := tr.RemainingLen(); rem == 0 || rem < words {
		tr.SetOverflow()
		return false
	}
	return true
}

// claimPrealloc takes a node's words of a pre-allocated trace, when it has
// room for them (preallocRoom): the words that end at RemainingLen, which it
// lowers by them. It returns where the words start in tr, and whether the
// node has them.
func claimPrealloc(tr Trace, words int) (int, bool) {
	if !preallocRoom(tr, words) {
		return 0, false
	}
	tr[3] -= uint8(words) // RemainingLen, at least words: the bit above it stays
	return TraceHeaderLen + tr.RemainingLen()*4, true
}

// cached reports whether cur holds the plan's data for input port port in
// burst gen (see node.writeNode).
func (pl *nodePlan) cached(gen uint64, port uint16) bool {
	return pl.curGen == gen && gen != 0 && pl.curPort == port
}

// writeCur writes cur into dst, with hop limit hl.
func (pl *nodePlan) writeCur(dst []byte, hl uint8) {
	copyNode(dst, pl.cur[:], pl.size)
	if pl.hop >= 0 {
		dst[pl.hop] = hl
	}
	if pl.hopW >= 0 {
		dst[pl.hopW] = hl
	}
}
