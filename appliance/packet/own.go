package packet

import (
	"fmt"
	"runtime"
	"strings"
	"unsafe"
)

// Ownership. Exactly one party owns a buffer at any time, and only the owner
// reads or writes it:
//
//   - its pool, while it is free;
//   - an lcore, while the buffer is in one of its bursts, its tx buffers, or the
//     hands of one of its stages during a call;
//   - a port, from the moment the lcore gives it to TxBurst (or a driver takes
//     it from the pool to receive into) until an lcore claims it from RxBurst;
//   - the kernel, while it sits in an AF_XDP socket's fill or rx ring;
//   - a plugin process, while an external stage has lent it;
//   - a handoff ring, between the lcore that put it there and the one that owns
//     its session;
//   - a stage that keeps it beyond the burst (delay lines, RLNC generations),
//     on its lcore;
//   - nobody, while it is freeing: an lcore freed it, and it goes back to its
//     pool at the lcore's next quiescent point, when no burst and no stage can
//     refer to it any more.
//
// docs/architecture.md walks a packet through these owners, verdict by verdict.
//
// Packet memory is off the Go heap, so the race detector cannot see a buffer
// used after it was freed. A checked build (go build -tags lrcheck) records
// the owner in the metadata, checks every hand-over against the table below,
// poisons freed data with PoisonByte, makes Handle.P refuse a free buffer and
// Packet.Data and DataTail one whose bytes the kernel or a plugin has. A
// violation panics with an *OwnershipError naming the buffer, its last owner,
// who broke the rule and the line that did. In an ordinary build every check
// is a constant-false branch the compiler removes.

// Checked reports a checked build (-tags lrcheck).
const Checked = checked

// MetaVersion is the version of the metadata layout: the Packet fields and the
// ownership states. Code outside Go that reads the metadata (ports/dpdk's C
// side) must agree on it; the kernel's AF_XDP and out-of-process plugins see
// packet bytes only.
// Adding a state or moving a field bumps it (the package doc lists what does).
//
//metagen:c
const MetaVersion = 3

// State is who owns a buffer. States are part of the metadata layout: add new
// ones before numStates, give them a name and rules, and bump MetaVersion.
type State uint8

//metagen:c
const (
	// StateFree: in its pool. For DPDK, also in a per-lcore mempool cache,
	// which Go cannot tell apart.
	StateFree State = iota
	// StateLcore: an lcore's (Owner), or freshly allocated and not yet claimed
	// by one (Owner is NoOwner).
	StateLcore
	// StatePort: a port's, in its rings or its driver's hands. A DPDK mbuf a
	// PMD freed after transmit stays in this state in its mempool. Owner is
	// the lcore that gave it to the port, for the record.
	StatePort
	// StateRing: in a handoff ring towards lcore Owner.
	StateRing
	// StateHeld: kept beyond the burst by a stage of lcore Owner.
	StateHeld
	// StateFreeing: freed by lcore Owner, back to its pool at its next
	// quiescent point.
	StateFreeing
	// StateKernel: in an AF_XDP socket's fill or rx ring: the kernel's to
	// write into, until the port takes it from the rx ring (OpRecv). Owner is
	// NoOwner.
	StateKernel
	// StateLent: lent to an out-of-process plugin by lcore Owner's external
	// stage; only that stage claims it back (the plugin's verdict, or the
	// plugin's death once its process is reaped).
	StateLent
	numStates
)

var stateNames = [numStates]string{"free", "lcore", "port", "ring", "held", "freeing", "kernel", "lent"}

func (s State) String() string {
	if s < numStates {
		return stateNames[s]
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// NoOwner is the Owner of a buffer no lcore has claimed.
//
//metagen:c
const NoOwner = 0xFFFF

// noStage is the stage recorded by a hand-over outside any stage.
const noStage = 0xFF

// Op is a hand-over of a buffer.
type Op uint8

const (
	// OpAlloc: a pool hands the buffer out, to no lcore yet.
	OpAlloc Op = iota
	// OpRelease: the buffer goes back into its pool.
	OpRelease
	// OpRecv: a driver hands out a buffer whose last hand-overs happened in
	// C, out of Go's sight (a PMD's rx refill; an mbuf a PMD freed after
	// transmit and its mempool gave out again). It may be free, a port's, or
	// an lcore's that none claimed (a test that drives a port directly).
	// AF_XDP's hand-overs are all in Go's sight: its port uses OpRx.
	OpRecv
	// OpClaim: an lcore takes the buffer from a port, a ring, a producer, or a
	// stage that held it.
	OpClaim
	// OpFree: an lcore frees the buffer; its pool gets it back at the lcore's
	// next quiescent point.
	OpFree
	// OpTx: an lcore gives the buffer to a port.
	OpTx
	// OpBack: the port or ring it was given to did not take it; the lcore has
	// it again.
	OpBack
	// OpHandoff: an lcore puts it in a ring towards another lcore (OwnTo).
	OpHandoff
	// OpHold: a stage keeps it beyond the burst.
	OpHold
	// OpVerdict: the engine applies the verdict of a packet a stage left in
	// the burst, which must still be the lcore's.
	OpVerdict
	// OpUse: any access through Handle.P. The metadata stays linerate's
	// while the kernel or a plugin has the buffer's bytes (it lies outside
	// what they map), so only a free buffer refuses it.
	OpUse
	// OpFill: a port gives a fresh buffer to the kernel to receive into
	// (AF_XDP's fill ring).
	OpFill
	// OpLend: an lcore's external stage lends it to a plugin process. Like
	// OpHold, the stage does not know its lcore's index: the owner stays.
	OpLend
	// OpReturn: the stage that lent it has it back: the plugin's verdict or
	// emit named it, or the plugin is dead (its cgroup empty, itself reaped).
	// Nothing else ends a loan: freeing, claiming or releasing a lent buffer
	// aborts. The owner stays, as with OpLend.
	OpReturn
	// OpRx: the xdp port takes a frame from an AF_XDP rx ring. Only a frame
	// it gave the kernel (OpFill) comes back that way: one free in its pool,
	// or taken already, aborts.
	OpRx
	// OpAccess: Go reads or writes the buffer's bytes: Packet.Data and
	// DataTail, and every accessor built on them. Not while the kernel or a
	// plugin has them.
	OpAccess
	numOps
)

var opNames = [numOps]string{"alloc", "release", "recv", "claim", "free", "tx", "back", "handoff", "hold", "verdict",
	"use", "fill", "lend", "return", "rx", "access"}

func (o Op) String() string {
	if o < numOps {
		return opNames[o]
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

type stateSet uint16

// owned are the states whose Owner is the only lcore that may hand the buffer
// on. A port's and a pool's buffers keep their last owner for the record.
const owned = 1<<StateLcore | 1<<StateRing | 1<<StateHeld | 1<<StateFreeing | 1<<StateLent

func set(ss ...State) stateSet {
	var m stateSet
	for _, s := range ss {
		m |= 1 << s
	}
	return m
}

// rule is what an Op may start from and where it leaves the buffer. mine: the
// acting lcore must be the owner, or nobody yet.
type rule struct {
	from      stateSet
	to        State
	keep      bool // the state does not change (OpUse)
	keepOwner bool // the owner does not change (OpHold: a stage does not know its lcore's index)
	mine      bool
}

var rules = [numOps]rule{
	OpAlloc: {from: set(StateFree, StatePort), to: StateLcore},
	// A frame the kernel has goes back to its pool when its port closes.
	OpRelease: {from: ^set(StateFree, StateLent), to: StateFree},
	OpRecv:    {from: set(StateFree, StatePort, StateLcore), to: StateLcore, mine: true},
	OpClaim:   {from: set(StateLcore, StatePort, StateRing, StateHeld), to: StateLcore, mine: true},
	OpFree:    {from: set(StateLcore, StateHeld), to: StateFreeing, mine: true},
	OpTx:      {from: set(StateLcore), to: StatePort, mine: true},
	OpBack:    {from: set(StatePort, StateRing), to: StateLcore},
	OpHandoff: {from: set(StateLcore), to: StateRing, mine: true},
	OpHold:    {from: set(StateLcore, StateHeld), to: StateHeld, keepOwner: true},
	OpVerdict: {from: set(StateLcore, StateHeld), keep: true, mine: true},
	OpUse:     {from: ^set(StateFree), keep: true},
	OpFill:    {from: set(StateLcore), to: StateKernel},
	OpLend:    {from: set(StateLcore), to: StateLent, keepOwner: true},
	OpReturn:  {from: set(StateLent), to: StateLcore, keepOwner: true},
	OpRx:      {from: set(StateKernel), to: StateLcore},
	// A free buffer's bytes show the poison, and Handle.P refuses it.
	OpAccess: {from: ^noAccess, keep: true},
}

// ownMeta is the ownership record in the metadata (checked builds).
type ownMeta struct {
	state State
	stage uint8  // chain position of the stage behind the last hand-over, or noStage
	owner uint16 // lcore index, or NoOwner
}

// PoisonByte fills the buffer of a freed packet in a checked build.
const PoisonByte = 0x6b

// OwnershipError is the panic value of a broken ownership rule in a checked
// build.
type OwnershipError struct {
	Op       Op
	Handle   Handle
	Pool     uint16
	PoolName string
	State    State  // the buffer's state when it happened
	Owner    uint16 // its last owner (an lcore index, or NoOwner)
	Stage    int    // the stage behind its last hand-over, or -1
	By       uint16 // the lcore that broke the rule, or NoOwner
	ByAt     int    // the stage that broke it, or -1
	// Where names the lcore and stage that broke the rule, when the engine
	// knows them.
	Where string
	// At is the file:line that broke it: the first caller outside this
	// package and the hand-over helpers that act for their caller
	// (Env.Free, Context.Emit, ...); Via is the helper, if any.
	At, Via string
}

func (e *OwnershipError) Error() string {
	what := fmt.Sprintf("%s of a %s buffer", e.Op, e.State)
	switch {
	case e.Op == OpRelease && e.State == StateFree, e.Op == OpFree && e.State == StateFreeing:
		what = "double free"
	case e.Op == OpFree && e.State == StateFree, e.Op == OpUse:
		what = "use after free"
	case e.Op == OpAccess && e.State == StateKernel:
		what = "access to a buffer the kernel has (an AF_XDP fill or rx ring)"
	case e.Op == OpAccess:
		what = "access to a buffer lent to a plugin"
	case e.State == StateLent:
		what = fmt.Sprintf("%s of a buffer lent to a plugin", e.Op)
	case e.Op == OpVerdict && e.State == StateFreeing:
		what = "a stage freed a packet and left it in the burst"
	case rules[e.Op].mine && e.Owner != e.By && e.Owner != NoOwner && rules[e.Op].from&(1<<e.State) != 0 &&
		owned&(1<<e.State) != 0:
		what = fmt.Sprintf("%s of a buffer owned by lcore %d", e.Op, e.Owner)
	}
	pool := fmt.Sprintf("pool %d", e.Pool)
	if e.PoolName != "" {
		pool = fmt.Sprintf("pool %q", e.PoolName)
	}
	msg := fmt.Sprintf("packet: %s: buffer %#x of %s is %s", what, uintptr(e.Handle), pool, e.State)
	if e.Owner != NoOwner {
		msg += fmt.Sprintf(", last owned by lcore %d", e.Owner)
	}
	if e.Stage >= 0 {
		msg += fmt.Sprintf(" at stage %d", e.Stage)
	}
	switch {
	case e.Where != "":
		msg += "; by " + e.Where
	case e.By != NoOwner:
		msg += fmt.Sprintf("; by lcore %d", e.By)
		if e.ByAt >= 0 {
			msg += fmt.Sprintf(" at stage %d", e.ByAt)
		}
	}
	if e.At != "" {
		msg += "; at " + e.At
		if e.Via != "" {
			msg += " via " + e.Via
		}
	}
	return msg
}

func (h Handle) meta() *Packet { return *(**Packet)(unsafe.Pointer(&h)) }

// Own records the hand-over op of h by lcore by (NoOwner outside an lcore)
// within stage (-1 outside one), checking it in a checked build.
func Own(h Handle, op Op, by uint16, stage int) {
	if Checked {
		own(h, op, by, by, stage)
	}
}

// OwnTo records a hand-over that gives h to another owner: OpHandoff to the
// ring towards lcore to.
func OwnTo(h Handle, op Op, by, to uint16, stage int) {
	if Checked {
		own(h, op, by, to, stage)
	}
}

// OwnBurst is Own for every packet of hs.
func OwnBurst(hs []Handle, op Op, by uint16, stage int) {
	if Checked {
		for _, h := range hs {
			own(h, op, by, by, stage)
		}
	}
}

// Released checks and records h's return to the pool with id pool, and
// poisons its buffer: what a Pool implementation calls for each buffer it
// takes back.
func Released(h Handle, pool uint16) {
	if Checked {
		released(h, pool)
	}
}

// OwnerOf is h's recorded state and owner; meaningful in a checked build.
func OwnerOf(h Handle) (State, uint16) {
	o := &h.meta().own
	return o.state, o.owner
}

func own(h Handle, op Op, by, to uint16, stage int) {
	if h == 0 {
		return
	}
	o := &h.meta().own
	r := &rules[op]
	if r.from&(1<<o.state) == 0 || (r.mine && owned&(1<<o.state) != 0 && o.owner != by && o.owner != NoOwner) {
		fail(h, op, by, stage)
	}
	switch {
	case r.keep:
	case r.to == StateFree:
		// Owner and stage stay: who freed it, for a use after free.
		o.state = StateFree
	case op == OpAlloc, op == OpRecv:
		o.state, o.owner, o.stage = StateLcore, NoOwner, noStage
	case op == OpFill:
		o.state, o.owner, o.stage = StateKernel, NoOwner, noStage
	default:
		if !r.keepOwner {
			o.owner = to
		}
		o.state, o.stage = r.to, noStage
		if stage >= 0 && stage < noStage {
			o.stage = uint8(stage)
		}
	}
}

// noAccess are the states whose bytes someone outside Go has.
const noAccess stateSet = 1<<StateKernel | 1<<StateLent

// access checks that Go may touch p's bytes (OpAccess): in a checked build,
// Data and DataTail call it.
func (p *Packet) access() {
	if noAccess&(1<<p.own.state) != 0 {
		fail(p.Handle(), OpAccess, NoOwner, -1)
	}
}

func fail(h Handle, op Op, by uint16, stage int) {
	m := h.meta()
	e := &OwnershipError{Op: op, Handle: h, Pool: m.pool, State: m.own.state, Owner: m.own.owner,
		Stage: -1, By: by, ByAt: stage}
	e.At, e.Via = caller()
	if m.own.stage != noStage {
		e.Stage = int(m.own.stage)
	}
	if p := PoolByID(m.pool); p != nil {
		e.PoolName = p.Name()
	}
	panic(e)
}

func released(h Handle, pool uint16) {
	m := h.meta()
	if m.pool != pool {
		panic(fmt.Errorf("packet: buffer %#x of pool %d freed into pool %d", uintptr(h), m.pool, pool))
	}
	own(h, OpRelease, NoOwner, NoOwner, -1)
	b := unsafe.Slice((*byte)(addr(m.base)), m.cap)
	for i := range b {
		b[i] = PoisonByte
	}
}

const module = "github.com/linerate/linerate/"

// relays are the hand-over helpers that act for their caller: a report names
// the line that called them.
var relays = []string{
	module + "appliance.env.",
	module + "appliance.(*lcore).free",
	module + "appliance.(*lcore).emit",
	module + "plugins.(*Context).",
	module + "plugins/stagetest.(*Env).",
}

// caller finds where a rule was broken (OwnershipError.At and Via). It runs
// only on the way to a panic.
func caller() (at, via string) {
	var pcs [32]uintptr
	frames := runtime.CallersFrames(pcs[:runtime.Callers(3, pcs[:])])
	for {
		f, more := frames.Next()
		fn := f.Function
		switch {
		case strings.HasPrefix(fn, module+"appliance/packet.") && !strings.HasSuffix(f.File, "_test.go"):
		case isRelay(fn):
			if via == "" {
				via = fileLine(f)
			}
		case strings.HasPrefix(fn, "runtime.") || fn == "":
			return via, "" // a relay called by the runtime: itself
		default:
			return fileLine(f), via
		}
		if !more {
			return via, ""
		}
	}
}

func isRelay(fn string) bool {
	for _, r := range relays {
		if strings.HasPrefix(fn, r) {
			return true
		}
	}
	return false
}

// fileLine is f's file, from the module's root where it is in the module, and
// line.
func fileLine(f runtime.Frame) string {
	file := f.File
	_, self, _, _ := runtime.Caller(0)
	if root, ok := strings.CutSuffix(self, "appliance/packet/own.go"); ok {
		file = strings.TrimPrefix(file, root)
	}
	return fmt.Sprintf("%s:%d", file, f.Line)
}
