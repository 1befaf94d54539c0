package ioam

import (
	"math/bits"

	"github.com/linerate/linerate/appliance/clock"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/plugins"
)

// TimestampFormat is how a namespace writes timestamps (RFC 9197 §5).
type TimestampFormat uint8

const (
	// TimestampPTP: seconds and nanoseconds on the TAI scale (§5.1), the
	// truncated PTPv2 format.
	TimestampPTP TimestampFormat = iota
	// TimestampNTP: seconds since 1900 and a 32-bit binary fraction (§5.2).
	TimestampNTP
	// TimestampPOSIX: seconds since 1970 (UTC) and microseconds (§5.3), as the
	// Linux kernel writes them.
	TimestampPOSIX
)

func (f TimestampFormat) String() string {
	switch f {
	case TimestampPTP:
		return "ptp"
	case TimestampNTP:
		return "ntp"
	case TimestampPOSIX:
		return "posix"
	}
	return "unknown"
}

// Unavailable values: what a node writes for data it does not have (RFC 9197
// §4.4.2; the kernel's IOAM6_U32_UNAVAILABLE and kin).
const (
	unavailable16 = 0xFFFF
	unavailable32 = 0xFFFFFFFF
	unavailable64 = 0xFFFFFFFFFFFFFFFF
	// DefaultNodeID and DefaultNodeIDWide are the ids of a node that was given
	// none: all ones in the field's width, as the kernel's defaults.
	DefaultNodeID     = 0xFFFFFF
	DefaultNodeIDWide = 1<<56 - 1
)

// Namespace is what a node knows of one IOAM namespace: its own ids and data
// in it, and how it writes timestamps.
type Namespace struct {
	ID         uint16
	NodeID     uint32 // 24 bits
	NodeIDWide uint64 // 56 bits
	Data       uint32
	DataWide   uint64
	Timestamp  TimestampFormat
	// Schema is the opaque state snapshot (trace bit 22): a 24-bit schema id
	// and data of a multiple of 4 bytes. HasSchema false writes an empty
	// snapshot with schema id 0xFFFFFF, as the kernel does.
	HasSchema bool
	SchemaID  uint32
	Schema    []byte
}

// opaqueWords is the size of the opaque state snapshot, in 4-octet units.
func (ns *Namespace) opaqueWords() int {
	if !ns.HasSchema {
		return 1
	}
	return 1 + len(ns.Schema)/4
}

// hopTime is one node time in every timestamp format, computed once per burst.
type hopTime struct {
	mono int64
	sec  [3]uint32
	frac [3]uint32
}

func (t *hopTime) set(c clock.Clock, mono int64) {
	t.mono = mono
	unix := clock.Unix(c, mono)
	tai := unix + int64(c.Sync().TAIOffset)*1e9
	t.sec[TimestampPTP], t.frac[TimestampPTP] = uint32(tai/1e9), uint32(tai%1e9)
	ntp := clock.NTP(unix)
	t.sec[TimestampNTP], t.frac[TimestampNTP] = uint32(ntp>>32), uint32(ntp)
	t.sec[TimestampPOSIX], t.frac[TimestampPOSIX] = uint32(unix/1e9), uint32(unix%1e9/1e3)
}

// TimestampNs turns a node's timestamp fields in format f into nanoseconds on
// that format's own scale (TAI, UTC from 1900, UTC from 1970). Differences of
// two timestamps of one format are durations.
func TimestampNs(f TimestampFormat, sec, frac uint32) int64 {
	switch f {
	case TimestampNTP:
		return int64(sec)*1e9 + int64((uint64(frac)*1e9+(1<<31))>>32)
	case TimestampPOSIX:
		return int64(sec)*1e9 + int64(frac)*1e3
	}
	return int64(sec)*1e9 + int64(frac)
}

// hopValues are the per-packet fields of a node's data.
type hopValues struct {
	hopLimit uint8
	ingress  uint16
	ingressW uint32
	delay    uint32
	queue    uint32
	buffer   uint32
	time     *hopTime
	// pkt is the packet values was computed for: its transit delay field is
	// written again at transmit (Packet.SetTxDelay).
	pkt *packet.Packet
}

// planCacheSize is how many trace types a namespace remembers plans for.
const planCacheSize = 4

// nodeIDs are a node's interface ids for its egress port.
type egressIDs struct {
	short uint16
	wide  uint32
}

// nsState is a namespace on one lcore: its config and a small cache of node
// plans by trace type, filled on first use (no allocation: the plans are
// arrays).
type nsState struct {
	Namespace
	last  *nodePlan
	plans [planCacheSize]nodePlan
	next  int
}

// plan returns the node plan for traceType, or nil when its data cannot fit
// a trace option.
func (s *nsState) plan(traceType uint32, eg egressIDs) *nodePlan {
	if p := s.last; p != nil && p.traceType == traceType {
		return p
	}
	for i := range s.plans {
		if p := &s.plans[i]; p.valid && p.traceType == traceType {
			s.last = p
			return p
		}
	}
	p := &s.plans[s.next]
	s.next = (s.next + 1) % planCacheSize
	s.last = nil
	if !p.build(&s.Namespace, traceType, eg) {
		return nil
	}
	s.last = p
	return p
}

// nsTable is the namespaces a node knows. Up to linearMax of them, a linear
// scan of ids in one cache line beats any index; beyond, an idIndex finds one
// in about one probe, however many there are.
type nsTable struct {
	ids []uint16
	ns  []*nsState
	idx idIndex
}

func (t *nsTable) add(ns Namespace) {
	t.ids = append(t.ids, ns.ID)
	t.ns = append(t.ns, &nsState{Namespace: ns})
	t.idx.add(t.ids)
}

func (t *nsTable) lookup(id uint16) *nsState {
	if i := t.idx.find(t.ids, id); i >= 0 {
		return t.ns[i]
	}
	return nil
}

// linearMax is how many ids a linear scan looks through (32 bytes).
const linearMax = 16

// idIndex finds the position of a 16-bit id (a namespace) in a list of
// them, the first one where the list repeats an id: a linear scan up to
// linearMax ids, beyond that an open-addressed hash table of positions,
// at most half full, built as the list grows. Lookups never allocate.
type idIndex struct {
	slots []uint32 // position + 1, 0 when empty; a power of two long
	shift uint8    // 32 − log2(len(slots))
}

func idHash(id uint16, shift uint8) uint32 { return (uint32(id) * 0x9E3779B1) >> shift }

// add indexes the last id of ids, which has just been appended.
func (x *idIndex) add(ids []uint16) {
	n := len(ids)
	if n <= linearMax {
		return
	}
	if 2*n > len(x.slots) {
		size := 64
		for size < 4*n {
			size <<= 1
		}
		x.slots = make([]uint32, size)
		x.shift = uint8(32 - bits.TrailingZeros(uint(size)))
		for i := range ids[:n-1] {
			x.insert(ids, i)
		}
	}
	x.insert(ids, n-1)
}

func (x *idIndex) insert(ids []uint16, pos int) {
	mask := uint32(len(x.slots) - 1)
	for h := idHash(ids[pos], x.shift); ; h = (h + 1) & mask {
		v := x.slots[h]
		if v == 0 {
			x.slots[h] = uint32(pos + 1)
			return
		}
		if ids[v-1] == ids[pos] {
			return // a repeat: the first one stands
		}
	}
}

// find is the position of id in ids, or -1.
func (x *idIndex) find(ids []uint16, id uint16) int {
	if len(ids) <= linearMax {
		for i, v := range ids {
			if v == id {
				return i
			}
		}
		return -1
	}
	mask := uint32(len(x.slots) - 1)
	for h := idHash(id, x.shift); ; h = (h + 1) & mask {
		v := x.slots[h]
		if v == 0 {
			return -1
		}
		if ids[v-1] == id {
			return int(v - 1)
		}
	}
}

// node is a node's identity on one lcore: namespaces, interface ids by port,
// the egress port, and the node time of the current burst.
type node struct {
	ns        nsTable
	ingress   []egressIDs // by input port id
	egress    uint16      // packet.NoPort when not configured
	eg        egressIDs
	time      hopTime
	timeValid bool
	clockNow  int64  // the clock read once per burst for transit delays
	gen       uint64 // the burst, from 1: nodePlan.cur is valid for one
	vals      hopValues
	// general is a test hook: every packet takes the general path, none the
	// fast ones (remembered layouts, images, word moves), so that tests can
	// hold the two to the same results.
	general bool
}

// begin forgets the per-burst readings: Process calls it first.
func (n *node) begin() { n.timeValid, n.clockNow, n.gen = false, 0, n.gen+1 }

// writeNode writes this node's data of plan pl for p, with hop limit hl,
// into dst. A plan whose only per-packet field is the hop limit writes from
// cur: its data with this burst's time and p's input port ids, built once per
// burst and port. The others go through values and write.
func (n *node) writeNode(ctx *plugins.Context, p *packet.Packet, pl *nodePlan, dst []byte, hl uint8) {
	if pl.perPacket || pl.size > curSize || n.general {
		n.values(ctx, p, hl, pl.traceType)
		pl.write(dst, &n.vals)
		return
	}
	if !pl.cached(n.gen, p.InPort) {
		n.values(ctx, p, hl, pl.traceType)
		pl.write(pl.cur[:], &n.vals)
		pl.curGen, pl.curPort = n.gen, p.InPort
	}
	pl.writeCur(dst, hl)
}

// fillPrealloc writes this node's data of plan pl for p, with hop limit hl,
// into the pre-allocated trace tr, and reports whether the trace had room
// (claimPrealloc).
func (n *node) fillPrealloc(ctx *plugins.Context, p *packet.Packet, tr Trace, pl *nodePlan, hl uint8) bool {
	off, ok := claimPrealloc(tr, pl.words)
	if ok {
		n.writeNode(ctx, p, pl, tr[off:], hl)
	}
	return ok
}

// planOf is the plan of namespace ns for trace tr. Without one (the node's
// data would not fit a trace) it sets the trace's O flag.
func (n *node) planOf(ns *nsState, tr Trace) *nodePlan {
	pl := ns.plan(tr.TraceType(), n.eg)
	if pl == nil {
		tr.SetOverflow()
	}
	return pl
}

// now sets the node time of this burst, once.
func (n *node) now(ctx *plugins.Context) *hopTime {
	if !n.timeValid {
		n.time.set(ctx.Clock, ctx.Now)
		n.timeValid = true
	}
	return &n.time
}

// ingressIDs are the interface ids of port.
func (n *node) ingressIDs(port uint16) egressIDs {
	if int(port) < len(n.ingress) {
		return n.ingress[port]
	}
	return egressIDs{short: unavailable16, wide: unavailable32}
}

// values fills vals, the per-packet fields of the node data for p.
func (n *node) values(ctx *plugins.Context, p *packet.Packet, hopLimit uint8, types uint32) {
	v := &n.vals
	ids := n.ingressIDs(p.InPort)
	v.hopLimit, v.ingress, v.ingressW = hopLimit, ids.short, ids.wide
	if types&(TraceTimestampSeconds|TraceTimestampFraction|TraceTransitDelay) != 0 {
		v.time = n.now(ctx)
	}
	v.pkt = p
	if types&TraceTransitDelay != 0 {
		// The delay so far, from rx to now: transmit writes it again up to
		// the tx time (see nodePlan.write).
		if n.clockNow == 0 {
			n.clockNow = ctx.Clock.Now()
		}
		v.delay = packet.TransitDelay(p.RxTime, n.clockNow)
	}
	if types&TraceQueueDepth != 0 {
		v.queue = unavailable32
		if n.egress != packet.NoPort {
			v.queue = uint32(ctx.Env.TxDepth(n.egress))
		}
	}
	if types&TraceBufferOccupancy != 0 {
		v.buffer = unavailable32
		if pool := packet.PoolOf(p); pool != nil {
			v.buffer = uint32(inUse(pool))
		}
	}
}

// inUse is the number of pool's buffers in use. A Go pool says it without its
// Stats, whose copy, made for every packet, costs more than the rest of the
// node data together.
func inUse(pool packet.Pool) int {
	if s, ok := pool.(*packet.Slab); ok {
		return s.InUse()
	}
	return pool.Stats().InUse
}
