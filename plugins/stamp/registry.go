package stamp

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/linerate/linerate/plugins"
)

// MaxSessions bounds the sessions of each role in one engine: the session
// tables, their record FIFOs and their histograms are all bounded by it. It
// is every SSID there is (RFC 8972 §3: 16 bits, never zero), since a
// session is found by its SSID alone. A sender session holds about 29 KiB
// of statistics (a 740-byte hot record, 28 KiB of histogram counts and IPDV
// window, written when the session is made) besides its record FIFO, so
// memory, not this bound, is what limits a collector (README: Figures).
const MaxSessions = 65535

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

// table is a session table by SSID. Lcores read it through an atomic
// pointer; the control plane replaces it whole. Lookups index pages, 256
// SSIDs a page: two dependent loads and no hash, whatever the count (the map
// is for iterating). A change copies the map, the page directory (2 KiB)
// and the one page it touches.
type table[S any] struct {
	m     map[uint16]*S
	pages [256]*[256]*S
}

type (
	txTable = table[txSession]
	rfTable = table[rfSession]
)

func (t *table[S]) get(id uint16) *S {
	if t == nil {
		return nil
	}
	if p := t.pages[id>>8]; p != nil {
		return p[id&255]
	}
	return nil
}

// with returns a copy of t's pages with id mapped to s (nil: unmapped).
func (t *table[S]) with(id uint16, s *S) [256]*[256]*S {
	pages := t.pages
	pg := new([256]*S)
	if old := pages[id>>8]; old != nil {
		*pg = *old
	}
	pg[id&255] = s
	pages[id>>8] = pg
	return pages
}

// sorted lists the sessions by SSID.
func (t *table[S]) sorted() []*S {
	out := make([]*S, 0, len(t.m))
	for _, id := range slices.Sorted(maps.Keys(t.m)) {
		out = append(out, t.m[id])
	}
	return out
}

// putSession stores a copy of the table behind p with s added as id. The
// caller holds Registry.mu.
func putSession[S any](p *atomic.Pointer[table[S]], id uint16, s *S) error {
	old := p.Load()
	if _, dup := old.m[id]; dup {
		return fmt.Errorf("SSID %d: %w", id, ErrExists)
	}
	if len(old.m) >= MaxSessions {
		return ErrTooMany
	}
	m := make(map[uint16]*S, len(old.m)+1)
	maps.Copy(m, old.m)
	m[id] = s
	p.Store(&table[S]{m: m, pages: old.with(id, s)})
	return nil
}

// putSessions stores a copy of the table behind p with every session of ss
// added, keyed by id(s), in one swap: a config file's sessions load in
// O(n), not the O(n²) of one copy each. On a duplicate SSID or one session
// too many it stores nothing and returns the index of the session at fault.
// The caller holds Registry.mu.
func putSessions[S any](p *atomic.Pointer[table[S]], ss []*S, id func(*S) uint16) (int, error) {
	old := p.Load()
	m := make(map[uint16]*S, len(old.m)+len(ss))
	maps.Copy(m, old.m)
	t := &table[S]{m: m, pages: old.pages}
	var fresh [256]bool // pages of t already copied
	for i, s := range ss {
		k := id(s)
		if _, dup := m[k]; dup {
			return i, fmt.Errorf("SSID %d: %w", k, ErrExists)
		}
		if len(m) >= MaxSessions {
			return i, ErrTooMany
		}
		m[k] = s
		if !fresh[k>>8] {
			pg := new([256]*S)
			if o := t.pages[k>>8]; o != nil {
				*pg = *o
			}
			t.pages[k>>8], fresh[k>>8] = pg, true
		}
		t.pages[k>>8][k&255] = s
	}
	p.Store(t)
	return 0, nil
}

// dropSession stores a copy of the table behind p without session id and
// returns that session. The caller holds Registry.mu.
func dropSession[S any](p *atomic.Pointer[table[S]], id uint16) (*S, error) {
	old := p.Load()
	s, ok := old.m[id]
	if !ok {
		return nil, fmt.Errorf("SSID %d: %w", id, ErrNotFound)
	}
	m := maps.Clone(old.m)
	delete(m, id)
	p.Store(&table[S]{m: m, pages: old.with(id, nil)})
	return s, nil
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
	return putSession(&r.tx, s.id, s)
}

// dropTx removes a sender session and returns it. The caller synchronises
// with the lcores before it treats the session as gone.
func (r *Registry) dropTx(id uint16) (*txSession, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return dropSession(&r.tx, id)
}

// putTxs adds sender sessions in one table swap; see putSessions.
func (r *Registry) putTxs(ss []*txSession) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return putSessions(&r.tx, ss, func(s *txSession) uint16 { return s.id })
}

// putRfs adds reflector sessions in one table swap; see putSessions.
func (r *Registry) putRfs(ss []*rfSession) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return putSessions(&r.rf, ss, func(s *rfSession) uint16 { return s.id })
}

func (r *Registry) putRf(s *rfSession) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return putSession(&r.rf, s.id, s)
}

func (r *Registry) dropRf(id uint16) (*rfSession, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return dropSession(&r.rf, id)
}

// txSessions lists the sender sessions, by SSID.
func (r *Registry) txSessions() []*txSession { return r.tx.Load().sorted() }

func (r *Registry) rfSessions() []*rfSession { return r.rf.Load().sorted() }

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
