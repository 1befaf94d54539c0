package packet

import "sync"

// Reason names why a packet was dropped. Reasons are registered once, by name,
// at init time; the engine counts drops per stage and reason.
type Reason uint16

// MaxReasons bounds the registry so per-lcore drop counters are fixed arrays.
const MaxReasons = 256

var reasons = struct {
	sync.Mutex
	names    [MaxReasons]string
	ids      map[string]Reason
	n        int
	expected map[Reason]string
}{ids: map[string]Reason{}, expected: map[Reason]string{}}

// RegisterReason returns the Reason for name, registering it on first use.
// Names follow Prometheus label conventions: lower_snake_case.
func RegisterReason(name string) Reason {
	reasons.Lock()
	defer reasons.Unlock()
	if r, ok := reasons.ids[name]; ok {
		return r
	}
	if reasons.n == MaxReasons {
		panic("packet: too many drop reasons")
	}
	r := Reason(reasons.n)
	reasons.names[r] = name
	reasons.ids[name] = r
	reasons.n++
	return r
}

// Expected registers why r's drops are the normal working of their stage
// (an emulated link's loss, the coded packets a decoder no longer needs),
// so that a summary can say so under its drop table.
func Expected(r Reason, why string) Reason {
	reasons.Lock()
	defer reasons.Unlock()
	reasons.expected[r] = why
	return r
}

// ExpectedWhy is what Expected said of r, or "".
func (r Reason) ExpectedWhy() string {
	reasons.Lock()
	defer reasons.Unlock()
	return reasons.expected[r]
}

// ReasonNamed is the registered reason of that name.
func ReasonNamed(name string) (Reason, bool) {
	reasons.Lock()
	defer reasons.Unlock()
	r, ok := reasons.ids[name]
	return r, ok
}

// String is the reason's registered name.
func (r Reason) String() string {
	reasons.Lock()
	defer reasons.Unlock()
	if int(r) < reasons.n {
		return reasons.names[r]
	}
	return "unknown"
}

// NumReasons is how many reasons are registered.
func NumReasons() int {
	reasons.Lock()
	defer reasons.Unlock()
	return reasons.n
}

// Reasons every datapath shares.
var (
	ReasonUnknown   = RegisterReason("unknown")
	ReasonUnclaimed = RegisterReason("unclaimed") // no stage gave a verdict
	ReasonTxFull    = RegisterReason("tx_full")   // the port did not take it, twice
	ReasonEmitFull  = RegisterReason("emit_full") // emitted into a full tx buffer
	ReasonNoPort    = RegisterReason("no_port")   // forwarded to a port that does not exist
	ReasonMalformed = RegisterReason("malformed")
	ReasonNoBuffer  = RegisterReason("no_buffer") // a pool was empty
	ReasonTooBig    = RegisterReason("too_big")   // does not fit a buffer or the MTU
	ReasonStopping  = RegisterReason("stopping")  // freed while the engine drained
	ReasonRingFull  = RegisterReason("ring_full") // a handoff ring was full
)

// LookupReason finds a registered reason by name.
func LookupReason(name string) (Reason, bool) {
	reasons.Lock()
	defer reasons.Unlock()
	r, ok := reasons.ids[name]
	return r, ok
}
