package stamp

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/linerate/linerate/plugins"
)

// MaxSessions bounds the sessions of each role in one engine: the session
// tables, their record FIFOs and their histograms are all bounded by it.
const MaxSessions = 4096

// Errors of the session registry, which the control services map to their
// status codes.
var (
	ErrExists     = errors.New("session exists")
	ErrNotFound   = errors.New("session not found")
	ErrRunning    = errors.New("session is running")
	ErrNotRunning = errors.New("session is not running")
	ErrTooMany    = fmt.Errorf("more than %d sessions", MaxSessions)
	ErrNoStage    = errors.New("no such STAMP stage")
)

// Registry is an engine's STAMP state: the Session-Sender sessions (shared by
// the sender stages that transmit them and the collector stages that take
// their replies) and the Session-Reflector sessions. Lcores read the tables
// through atomic pointers, once per burst; the control plane replaces them
// whole (copy on write) and waits for a quiescent point before it reports a
// session gone.
type Registry struct {
	mu         sync.Mutex // control-plane changes
	tx         atomic.Pointer[txTable]
	rf         atomic.Pointer[rfTable]
	senders    map[string]*senderStageInfo
	reflectors map[string]*reflectorStageInfo
	collectors map[string]bool
	// ctlEpoch moves on every session start and stop, so that senders idle
	// until a far due time notice a session that starts.
	ctlEpoch atomic.Uint64
	// Init state of the seed's southbound API (srv6pm), per role.
	senderInit, reflectorInit *initParams
}

// initParams are what the seed's Init RPC sets for later sessions.
type initParams struct {
	port       uint16
	interfaces []string
	source     string
}

type txTable struct{ m map[uint16]*txSession }
type rfTable struct{ m map[uint16]*rfSession }

func (t *txTable) get(id uint16) *txSession {
	if t == nil {
		return nil
	}
	return t.m[id]
}

func (t *rfTable) get(id uint16) *rfSession {
	if t == nil {
		return nil
	}
	return t.m[id]
}

// senderStageInfo is what a sender stage tells the registry at setup, so
// that sessions created later through the control API get its defaults.
type senderStageInfo struct {
	defaults senderDefaults
}

type reflectorStageInfo struct {
	defaults reflectorDefaults
}

// registryOf returns the engine's registry, making it on first use.
func registryOf(s *plugins.Setup) *Registry {
	mk := func() any { return newRegistry() }
	if s.Global != nil {
		return s.Global("stamp", mk).(*Registry)
	}
	return s.Shared("stamp", mk).(*Registry)
}

func newRegistry() *Registry {
	r := &Registry{senders: map[string]*senderStageInfo{}, reflectors: map[string]*reflectorStageInfo{},
		collectors: map[string]bool{}}
	r.tx.Store(&txTable{m: map[uint16]*txSession{}})
	r.rf.Store(&rfTable{m: map[uint16]*rfSession{}})
	return r
}

// addSender records a sender stage. Instances of one stage on several lcores
// record it once.
func (r *Registry) addSender(name string, d senderDefaults) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.senders[name]; !ok {
		r.senders[name] = &senderStageInfo{defaults: d}
	}
}

func (r *Registry) addReflector(name string, d reflectorDefaults) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.reflectors[name]; !ok {
		r.reflectors[name] = &reflectorStageInfo{defaults: d}
	}
}

func (r *Registry) addCollector(name string) {
	r.mu.Lock()
	r.collectors[name] = true
	r.mu.Unlock()
}

// senderStage resolves a sender stage name; "" is the only one there is.
func (r *Registry) senderStage(name string) (string, *senderStageInfo, error) {
	if name != "" {
		if s, ok := r.senders[name]; ok {
			return name, s, nil
		}
		return "", nil, fmt.Errorf("%w: no stamp.sender stage %q", ErrNoStage, name)
	}
	if len(r.senders) != 1 {
		return "", nil, fmt.Errorf("%w: %d stamp.sender stages: name one (%s)", ErrNoStage, len(r.senders), names(r.senders))
	}
	for n, s := range r.senders {
		return n, s, nil
	}
	panic("unreachable")
}

func (r *Registry) reflectorStage(name string) (string, *reflectorStageInfo, error) {
	if name != "" {
		if s, ok := r.reflectors[name]; ok {
			return name, s, nil
		}
		return "", nil, fmt.Errorf("%w: no stamp.reflector stage %q", ErrNoStage, name)
	}
	if len(r.reflectors) != 1 {
		return "", nil, fmt.Errorf("%w: %d stamp.reflector stages: name one (%s)", ErrNoStage, len(r.reflectors), names(r.reflectors))
	}
	for n, s := range r.reflectors {
		return n, s, nil
	}
	panic("unreachable")
}

func names[V any](m map[string]V) string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	if len(out) == 0 {
		return "none"
	}
	return fmt.Sprint(out)
}

// putTx adds a sender session. Setup-time sessions from the config and
// control-plane creations both come here.
func (r *Registry) putTx(s *txSession) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.tx.Load()
	if _, dup := old.m[s.id]; dup {
		return fmt.Errorf("SSID %d: %w", s.id, ErrExists)
	}
	if len(old.m) >= MaxSessions {
		return ErrTooMany
	}
	m := make(map[uint16]*txSession, len(old.m)+1)
	for k, v := range old.m {
		m[k] = v
	}
	m[s.id] = s
	r.tx.Store(&txTable{m: m})
	return nil
}

// dropTx removes a sender session and returns it. The caller synchronises
// with the lcores before it treats the session as gone.
func (r *Registry) dropTx(id uint16) (*txSession, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.tx.Load()
	s, ok := old.m[id]
	if !ok {
		return nil, fmt.Errorf("SSID %d: %w", id, ErrNotFound)
	}
	m := make(map[uint16]*txSession, len(old.m))
	for k, v := range old.m {
		if k != id {
			m[k] = v
		}
	}
	r.tx.Store(&txTable{m: m})
	return s, nil
}

func (r *Registry) putRf(s *rfSession) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.rf.Load()
	if _, dup := old.m[s.id]; dup {
		return fmt.Errorf("SSID %d: %w", s.id, ErrExists)
	}
	if len(old.m) >= MaxSessions {
		return ErrTooMany
	}
	m := make(map[uint16]*rfSession, len(old.m)+1)
	for k, v := range old.m {
		m[k] = v
	}
	m[s.id] = s
	r.rf.Store(&rfTable{m: m})
	return nil
}

func (r *Registry) dropRf(id uint16) (*rfSession, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.rf.Load()
	s, ok := old.m[id]
	if !ok {
		return nil, fmt.Errorf("SSID %d: %w", id, ErrNotFound)
	}
	m := make(map[uint16]*rfSession, len(old.m))
	for k, v := range old.m {
		if k != id {
			m[k] = v
		}
	}
	r.rf.Store(&rfTable{m: m})
	return s, nil
}

// TxSessions lists the sender sessions, by SSID.
func (r *Registry) txSessions() []*txSession {
	t := r.tx.Load()
	out := make([]*txSession, 0, len(t.m))
	for _, s := range t.m {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

func (r *Registry) rfSessions() []*rfSession {
	t := r.rf.Load()
	out := make([]*rfSession, 0, len(t.m))
	for _, s := range t.m {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// sessionCache is a stage instance's direct-mapped cache of its last
// session lookups: most bursts hold packets of few sessions, and an array
// probe is cheaper than a map's hash. The owner clears it when the table
// changes.
type sessionCache[S any] struct {
	ids [64]uint16
	ss  [64]*S
}

func (c *sessionCache[S]) clear() { *c = sessionCache[S]{} }

func (c *sessionCache[S]) lookup(id uint16) *S {
	if i := id & 63; c.ids[i] == id {
		return c.ss[i]
	}
	return nil
}

func (c *sessionCache[S]) put(id uint16, s *S) {
	if s != nil {
		c.ids[id&63], c.ss[id&63] = id, s
	}
}

// sessionKey is the owner key of a session: every lcore computes the same
// owner for it (plugins.Context.Owner).
func sessionKey(ssid uint16) uint64 { return uint64(ssid) | 0x57A3<<16 }
