// Package packet is linerate's packet model: buffer-resident metadata, pointer-sized
// handles, fixed bursts of handles, pools, and header views.
//
// A packet's metadata lives in front of (or, for DPDK, in the private area of) the
// buffer that holds its bytes, never in a Go object beside it. A Handle is the
// address of that metadata. Handles are plain integers to the garbage collector,
// so bursts and rings of handles are never scanned and storing one runs no write
// barrier.
//
// # The metadata ABI
//
// Packet's bytes are read by code that is not this package: the C half of
// ports/dpdk. Packet is the one description of them. (AF_XDP's UMEM frames,
// ports/xdp, hold packets with their metadata too, but the kernel reads only
// the packet after it; out-of-process plugins, plugins/external, are lent
// packet bytes only, never the metadata: docs/compatibility.md.) go generate runs
// internal/metagen, which writes ports/dpdk/lr_meta.h from what this package
// marks //metagen:c: struct lr_meta with a static assert of each offset, the
// flag, verdict and ownership-state constants, MetaVersion, and C translations
// of reset, TransitDelay and writeTxDelay. make lint fails when the committed
// header is stale, and the DPDK port refuses to start on one that disagrees.
//
// MetaVersion is the layout's name between processes, which cannot check each
// other's source. Bump it when what a peer reads or writes changes meaning:
//
//   - a field of Packet (or of its ownership record) added, removed, moved,
//     resized or retyped, MetaSize included, or a field's meaning changed: its
//     unit, its clock, what zero means;
//   - a flag, verdict or ownership state added, removed or renumbered, or
//     NoPort or NoOwner changed;
//   - what reset gives a fresh packet, or how transmit writes the transit
//     delay.
//
// Renaming a field or changing Go methods over the same bytes does not.
package packet

import (
	"errors"
	"unsafe"
)

//go:generate go run ./internal/metagen -o ../../ports/dpdk/lr_meta.h

// Handle is the address of a packet's metadata. The zero Handle is no packet.
type Handle uintptr

// MetaSize is the size of the metadata block at the head of every buffer.
// DPDK pools are created with priv_size = MetaSize.
//
//metagen:c
const MetaSize = 128

// ScratchSize is the size of the per-packet scratch area where stages leave
// parse results for the next stage (the role of the kernel's skb->cb).
//
//metagen:c
const ScratchSize = 56

// MinHeadroom is the least headroom a Go pool or UMEM frame reserves: IOAM grows a
// packet by up to 264 bytes inline and 304 bytes encapsulated.
const MinHeadroom = 320

// NoPort is the output port of a packet not yet forwarded.
//
//metagen:c
const NoPort = 0xFFFF

// Verdict is what the chain decided for a packet.
type Verdict uint8

//metagen:c
const (
	// Continue: no decision yet; the packet goes on to the next stage.
	Continue Verdict = iota
	// Forward: leave the chain and transmit on OutPort.
	Forward
	// Drop: free the packet and count its Reason.
	Drop
	// Consume: a stage took ownership (queued it, or freed it through its Env).
	Consume
	// Handoff: the engine passes the packet to the lcore in OutPort, which owns
	// its session, after this stage. Set through plugins.Context.Handoff.
	Handoff
)

func (v Verdict) String() string {
	switch v {
	case Continue:
		return "continue"
	case Forward:
		return "forward"
	case Drop:
		return "drop"
	case Consume:
		return "consume"
	case Handoff:
		return "handoff"
	}
	return "invalid"
}

// Packet is the typed view of a buffer's metadata. It lives in off-heap memory
// and holds no Go pointers. Its layout is an ABI (see the package doc): C's
// struct lr_meta is generated from it.
//
//metagen:c lr_meta
type Packet struct {
	base    uintptr // first byte of the buffer (start of headroom)
	backend uintptr // the backend's own handle: mbuf pointer, UMEM address, or 0
	cap     uint32  // bytes from base to the end of the buffer
	off     uint32  // offset of the first data byte from base
	length  uint32  // bytes of data
	pool    uint16  // owning pool's id in the registry
	verdict Verdict
	flags   uint8

	InPort  uint16 // port the packet arrived on, or NoPort for packets made here
	InQueue uint16
	OutPort uint16 // set by Forward
	Reason  Reason // set by Drop

	RxTime int64 // monotonic ns: rx burst time, or creation time for packets made here
	TxTime int64 // monotonic ns: set just before transmit, for ports that read it (pcap); see ports.HandleTx

	Hash uint32 // flow hash, when a port or stage computed one
	// Stage is the chain position a handed-off packet resumes at.
	Stage uint16
	_     uint16

	// Scratch is free for stages to pass parse results down the chain.
	// Its content is undefined on a fresh packet.
	Scratch [ScratchSize]byte

	txDelayAt uint32  // with FlagTxDelay: where transmit writes the transit delay (see SetTxDelay)
	own       ownMeta // who owns the buffer, in checked builds (own.go)
}

// Flags.
//
//metagen:c
const (
	// FlagLocal marks packets that linerate itself originated (generator, probes).
	FlagLocal uint8 = 1 << iota
	// FlagHWTimestamp marks an RxTime taken by the NIC.
	FlagHWTimestamp
	// FlagLayers marks Scratch as holding a Layers record of the current data
	// (see ParseLayers). Every change of the data window clears it.
	FlagLayers
	// FlagTxDelay asks transmit to write the packet's transit delay into its
	// data (see SetTxDelay). Every change of the data window clears it too.
	FlagTxDelay
	// FlagMoved marks a data window changed since Reset: a port that keeps
	// its backend's copy of the window (an mbuf's data_off and data_len)
	// writes it back at transmit only then.
	FlagMoved
)

// windowFlags are the flags whose meaning a change of the data window ends.
const windowFlags = FlagLayers | FlagTxDelay

func init() {
	if unsafe.Sizeof(Packet{}) != MetaSize {
		panic("packet: Packet metadata is not MetaSize bytes")
	}
}

// P returns the packet behind h.
func (h Handle) P() *Packet {
	if Checked {
		Own(h, OpUse, NoOwner, -1)
	}
	// Reinterpret the integer as a pointer without a uintptr→unsafe.Pointer
	// conversion: the memory is not Go's, so the GC ignores it.
	return *(**Packet)(unsafe.Pointer(&h))
}

// addr turns a non-Go address into a pointer without a uintptr→unsafe.Pointer
// conversion, which vet rightly distrusts for Go memory.
func addr(u uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&u)) }

// Handle returns p's handle.
func (p *Packet) Handle() Handle { return Handle(uintptr(unsafe.Pointer(p))) }

// Init sets up a packet's metadata over a buffer. Pools call it once per buffer.
func (p *Packet) Init(base uintptr, capacity, headroom int, pool uint16, backend uintptr) {
	// Field by field: zeroing the whole block would also clear Scratch, which a
	// fresh packet leaves undefined.
	p.base, p.backend, p.cap, p.pool = base, backend, uint32(capacity), pool
	p.Reset(headroom)
}

// Reset empties the packet and clears its per-packet state. Pools call it at Alloc.
func (p *Packet) Reset(headroom int) { p.reset(uint32(headroom), 0) }

// reset gives the packet a fresh packet's state over the data window (off,
// length): what Reset gives a Go pool's buffer, and what C gives an mbuf over
// the mbuf's own window at rx and at alloc. base, backend, cap and pool are
// the buffer's and stay; Scratch stays undefined.
//
//metagen:c lr_meta_reset
func (p *Packet) reset(off, length uint32) {
	p.off, p.length = off, length
	p.verdict = Continue
	p.flags = 0
	p.InPort, p.InQueue, p.OutPort = NoPort, 0, NoPort
	p.Reason = 0
	p.RxTime, p.TxTime = 0, 0
	p.Hash = 0
	p.Stage = 0
}

// Data is the packet's bytes. The slice aliases the buffer; it is valid until the
// packet is freed or its data window changes.
func (p *Packet) Data() []byte {
	if Checked {
		p.access()
	}
	return unsafe.Slice((*byte)(unsafe.Add(addr(p.base), p.off)), p.length)
}

// DataTail is Data with the tailroom as spare capacity: a writer may store past
// the end (a fixed-size copy, say) where nothing lives yet.
func (p *Packet) DataTail() []byte {
	if Checked {
		p.access()
	}
	return unsafe.Slice((*byte)(unsafe.Add(addr(p.base), p.off)), p.cap-p.off)[:p.length]
}

// Len is the data length.
func (p *Packet) Len() int { return int(p.length) }

// Headroom is the free space in front of the data.
func (p *Packet) Headroom() int { return int(p.off) }

// Tailroom is the free space after the data.
func (p *Packet) Tailroom() int { return int(p.cap - p.off - p.length) }

// Cap is the buffer size available for headroom, data and tailroom.
func (p *Packet) Cap() int { return int(p.cap) }

// Offset is the data offset from the start of the buffer (DPDK's data_off).
func (p *Packet) Offset() int { return int(p.off) }

// SetWindow sets the data window. Ports use it to sync from their backend.
func (p *Packet) SetWindow(off, length int) {
	p.off, p.length = uint32(off), uint32(length)
	p.flags = p.flags&^windowFlags | FlagMoved
}

// Backend is the backend's own handle for the buffer (mbuf pointer, UMEM address).
func (p *Packet) Backend() uintptr { return p.backend }

// PoolID is the id of the pool that owns the buffer.
func (p *Packet) PoolID() uint16 { return p.pool }

// Flags returns the packet's flags.
func (p *Packet) Flags() uint8 { return p.flags }

// SetFlag sets f.
func (p *Packet) SetFlag(f uint8) { p.flags |= f }

// Verdict is the chain's decision so far.
func (p *Packet) Verdict() Verdict { return p.verdict }

// Forward sends the packet to port: it leaves the chain after this stage.
func (p *Packet) Forward(port uint16) { p.verdict, p.OutPort = Forward, port }

// Drop frees the packet after this stage and counts reason.
func (p *Packet) Drop(r Reason) { p.verdict, p.Reason = Drop, r }

// Consume tells the engine a stage took ownership of the packet.
func (p *Packet) Consume() { p.verdict = Consume }

// HandoffTo marks the packet for the lcore at index owner, to resume at stage.
// The engine moves it once the current stage returns: moving it earlier would
// let the owner touch it while this lcore still does.
func (p *Packet) HandoffTo(owner, stage int) {
	p.verdict, p.OutPort, p.Stage = Handoff, uint16(owner), uint16(stage)
}

// Continue clears a verdict: the packet goes on down the chain.
func (p *Packet) Continue() { p.verdict = Continue }

// Errors of the data-window operations.
var (
	ErrNoHeadroom = errors.New("packet: not enough headroom")
	ErrNoTailroom = errors.New("packet: not enough tailroom")
	ErrNoRoom     = errors.New("packet: not enough room in the buffer")
	ErrTooShort   = errors.New("packet: data shorter than requested")
	ErrBadOffset  = errors.New("packet: offset beyond the data")
)

// Prepend grows the data by n bytes at the front and returns the new head.
func (p *Packet) Prepend(n int) ([]byte, error) {
	if n < 0 || n > int(p.off) {
		return nil, ErrNoHeadroom
	}
	p.off -= uint32(n)
	p.length += uint32(n)
	p.flags = p.flags&^windowFlags | FlagMoved
	return p.Data()[:n], nil
}

// Adj removes n bytes from the front.
func (p *Packet) Adj(n int) error {
	if n < 0 || n > int(p.length) {
		return ErrTooShort
	}
	p.off += uint32(n)
	p.length -= uint32(n)
	p.flags = p.flags&^windowFlags | FlagMoved
	return nil
}

// Append grows the data by n bytes at the end and returns the new tail.
func (p *Packet) Append(n int) ([]byte, error) {
	if n < 0 || n > p.Tailroom() {
		return nil, ErrNoTailroom
	}
	p.length += uint32(n)
	p.flags = p.flags&^windowFlags | FlagMoved
	d := p.Data()
	return d[len(d)-n:], nil
}

// Trim removes n bytes from the end.
func (p *Packet) Trim(n int) error {
	if n < 0 || n > int(p.length) {
		return ErrTooShort
	}
	p.length -= uint32(n)
	p.flags = p.flags&^windowFlags | FlagMoved
	return nil
}

// InsertGap opens n bytes after the first at bytes and returns the gap. It moves
// the smaller side: the head into the headroom when it fits, otherwise the tail
// into the tailroom. It never allocates; when neither side fits it returns
// ErrNoRoom and the caller falls back to a copy (see Burst.InsertGap).
func (p *Packet) InsertGap(at, n int) ([]byte, error) {
	if at < 0 || at > int(p.length) {
		return nil, ErrBadOffset
	}
	if n < 0 {
		return nil, ErrNoRoom
	}
	tail := int(p.length) - at
	headFits := n <= int(p.off)
	tailFits := n <= p.Tailroom()
	switch {
	case headFits && (at <= tail || !tailFits):
		old := p.Data()
		p.off -= uint32(n)
		p.length += uint32(n)
		p.flags = p.flags&^windowFlags | FlagMoved
		d := p.Data()
		copy(d[:at], old[:at])
		return d[at : at+n], nil
	case tailFits:
		p.length += uint32(n)
		p.flags = p.flags&^windowFlags | FlagMoved
		d := p.Data()
		copy(d[at+n:], d[at:at+tail])
		return d[at : at+n], nil
	}
	return nil, ErrNoRoom
}

// RemoveGap closes n bytes after the first at bytes, moving the smaller side.
func (p *Packet) RemoveGap(at, n int) error {
	if at < 0 || n < 0 || at > int(p.length) || n > int(p.length)-at {
		return ErrBadOffset
	}
	d := p.Data()
	tail := len(d) - at - n
	if at <= tail {
		copy(d[n:n+at], d[:at])
		p.off += uint32(n)
	} else {
		copy(d[at:], d[at+n:])
	}
	p.length -= uint32(n)
	p.flags = p.flags&^windowFlags | FlagMoved
	return nil
}

// CopyFrom makes p a copy of src's data and per-packet state, at p's headroom.
// It returns ErrNoRoom when p's buffer is too small.
func (p *Packet) CopyFrom(src *Packet, headroom int) error {
	if headroom < 0 || headroom+src.Len() > p.Cap() {
		return ErrNoRoom
	}
	p.off = uint32(headroom)
	p.length = uint32(src.Len())
	copy(p.Data(), src.Data())
	p.verdict, p.flags = src.verdict, src.flags|FlagMoved
	p.InPort, p.InQueue, p.OutPort, p.Reason = src.InPort, src.InQueue, src.OutPort, src.Reason
	p.RxTime, p.TxTime, p.Hash, p.Stage = src.RxTime, src.TxTime, src.Hash, src.Stage
	p.Scratch = src.Scratch
	p.txDelayAt = src.txDelayAt
	return nil
}

// SetTxDelay asks transmit to write the packet's transit delay, TxTime −
// RxTime in ns, into field: 4 bytes of the packet's data, big-endian, as RFC
// 9197's transit delay (0x80000000 past 2^31−1 ns). A stage that writes node
// data before the packet leaves knows the delay only up to its own time; this
// gives the delay up to transmit. A change of the data window before transmit
// cancels it (the field's bytes may move), as does a field outside the data.
func (p *Packet) SetTxDelay(field []byte) {
	if len(field) < 4 || p.length < 4 {
		return
	}
	at := uintptr(unsafe.Pointer(unsafe.SliceData(field))) - (p.base + uintptr(p.off))
	if at > uintptr(p.length-4) {
		return
	}
	p.txDelayAt = uint32(at)
	p.flags |= FlagTxDelay
}

// StampTx sets TxTime, at transmit, and writes a transit delay SetTxDelay asked
// for.
func (p *Packet) StampTx(now int64) {
	p.TxTime = now
	if p.flags&FlagTxDelay != 0 {
		p.writeTxDelay(now)
	}
}

// TransitDelay is RFC 9197's 4-octet transit delay of a packet received at rx
// and leaving at tx (monotonic ns): tx − rx, 0x80000000 past 2^31−1 ns, and
// 0xFFFFFFFF (unknown) without an rx time or for clocks that disagree.
//
//metagen:c lr_transit_delay
func TransitDelay(rx, tx int64) uint32 {
	switch dt := tx - rx; {
	case rx == 0 || dt < 0:
		return 0xFFFFFFFF
	case dt > 1<<31-1:
		return 0x80000000
	default:
		return uint32(dt)
	}
}

// writeTxDelay writes the transit delay of a packet leaving at now where
// SetTxDelay asked, big-endian, once. C's tx path runs it too, without storing
// TxTime: nothing reads an mbuf's metadata once the driver has the mbuf.
//
//metagen:c lr_meta_write_tx_delay
func (p *Packet) writeTxDelay(now int64) {
	d := TransitDelay(p.RxTime, now)
	f := p.Data()
	at := p.txDelayAt
	f[at], f[at+1], f[at+2], f[at+3] = byte(d>>24), byte(d>>16), byte(d>>8), byte(d)
	p.flags &^= FlagTxDelay
}
