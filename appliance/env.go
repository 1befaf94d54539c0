package appliance

import (
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/plugins"
)

// env is the plugins.Env of one instance.
type env struct{ in *instance }

func (e env) Emit(h packet.Handle, port uint16) bool { return e.in.lc.emit(h, port) }

func (e env) TxDepth(port uint16) int {
	if int(port) >= len(e.in.lc.tx) {
		return 0
	}
	return e.in.lc.tx[port].n
}

func (e env) Owner(key uint64) int { return ownerOf(key, len(e.in.pipe.instances)) }

func (e env) NumInstances() int { return len(e.in.pipe.instances) }

func (e env) Free(h packet.Handle) { e.in.lc.free(h) }

// Drop frees h as a drop by reason r of the running stage, counted as its
// verdict's would be: for a stage whose packets get their verdict outside
// its Process (the external stage takes its plugin's in Produce).
func (e env) Drop(h packet.Handle, r packet.Reason) {
	in := e.in
	if k := in.ctx.Stage; k >= 0 && k < len(in.stages) {
		in.stages[k].countDrop(r)
	} else {
		in.lc.countDrop(r, 1)
	}
	in.lc.free(h)
}

// ForwardBurst moves the whole burst to a port's tx buffer: the packets leave
// the chain with no verdict written and no partition pass.
func (e env) ForwardBurst(b *packet.Burst, port uint16) { e.in.lc.forwardWhole(b, port) }

func (e env) Handoff(h packet.Handle, owner int) bool {
	in := e.in
	if owner == in.idx || owner < 0 || owner >= len(in.pipe.instances) {
		return false
	}
	h.P().HandoffTo(owner, in.ctx.Stage)
	return true
}

// ownerOf maps a session key to an instance: MurmurHash3's 64-bit finaliser
// (keys are often small consecutive numbers; every output bit must depend on
// every input bit), then Lemire's multiply-shift reduction. Every lcore
// computes the same owner.
func ownerOf(key uint64, n int) int {
	if n <= 1 {
		return 0
	}
	key ^= key >> 33
	key *= 0xff51afd7ed558ccd
	key ^= key >> 33
	key *= 0xc4ceb9fe1a85ec53
	key ^= key >> 33
	return int((key >> 32) * uint64(n) >> 32)
}

var (
	_ plugins.Env            = env{}
	_ plugins.BurstForwarder = env{}
)
