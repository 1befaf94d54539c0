package rlnc

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"time"

	"github.com/linerate/linerate/appliance/stats"
	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/gf"
)

// The store is CODED IP's memory management (§III.C) for one lcore: sessions
// keyed by (source, destination, Session ID); per session its generations, at
// most a per-session limit of them (the paper's ses_max_gen), each with its
// last-update time; a global limit on generations and on the bytes of the
// blocks they hold. When a limit is reached the generation with the oldest
// update goes; a session without an update for its timeout goes whole.
// Everything is sized at setup, so whatever arrives, memory stays bounded and
// the fast path allocates nothing (except a gf.Echelon the first time a
// generation size is seen, kept for reuse).

// maxLinks bounds the output links of a coding stage.
const maxLinks = 8

// maxHdr bounds the headers a generation keeps as its template: Ethernet with
// VLAN tags, IPv6 and an extension header chain.
const maxHdr = 256

type sessionKey struct {
	src, dst [16]byte
	id       uint8
}

// equal is k == o, compared field by field: Go compares a 33-byte struct
// with a call to memequal, and every packet compares one or two keys.
func (k *sessionKey) equal(o *sessionKey) bool {
	return k.id == o.id && k.src == o.src && k.dst == o.dst
}

// hash is the key's 64-bit hash with a per-stage seed. Every lcore of a stage
// uses the same seed, so it also picks the session's owner lcore. The four
// words are multiplied independently, then mixed once: a short dependency
// chain, since every packet pays for it.
func (k *sessionKey) hash(seed uint64) uint64 {
	a := binary.LittleEndian.Uint64(k.src[0:]) * 0x9E3779B97F4A7C15
	b := binary.LittleEndian.Uint64(k.src[8:]) * 0xC2B2AE3D27D4EB4F
	c := binary.LittleEndian.Uint64(k.dst[0:]) * 0x165667B19E3779F9
	d := binary.LittleEndian.Uint64(k.dst[8:]) * 0xD6E8FEB86659FD93
	return mix(seed ^ a ^ bits.RotateLeft64(b, 17) ^ bits.RotateLeft64(c, 31) ^ bits.RotateLeft64(d, 47) ^ uint64(k.id)<<56)
}

type session struct {
	key     sessionKey
	hash    uint64
	live    bool
	nextHdr uint8
	sessLen uint16
	newest  uint16 // newest generation seen (receivers) or opened (encoder)
	seen    bool
	done    doneBits
	gens    list // the session's generations, newest first
	last    int64
	created int64
	// Totals for the control API.
	packets, finished uint64
	// Encoder: the generation being filled, or -1.
	open int32
}

type generation struct {
	sess  int32
	id    uint16
	live  bool
	epoch uint32 // bumped when the slot is freed: references that kept (index, epoch) see it
	k, kk int    // K and k′
	n     int    // N
	first int64
	last  int64
	ech   *gf.Echelon
	rows  []int32 // arena slots held, in arrival order
	// Decoder: augmented columns used, and for each the index in rows of the
	// packet kept for it (-1: not kept, it was not innovative).
	ins  int
	col  [MaxK + spareCols]int16
	rank int // decoder: independent coefficient vectors held
	// Delivered source blocks (decoder) or blocks sent systematically.
	delivered [4]uint64
	// Template: the headers of the packet that opened the generation, up to
	// the CODED IP header (hdrLen bytes); nhOff is where its Next Header 253
	// (or, at an encoder, the upper-layer protocol) is.
	hdr    [maxHdr]byte
	hdrLen int
	l3     int
	nhOff  int
	// Per output link: packets still owed (credits) and sent. A recoder
	// grants a generation its whole remaining budget once (granted) at full
	// rank, when the session moves on to a newer generation, or when it has
	// been idle for the flush time.
	credits [maxLinks]uint16
	sent    [maxLinks]uint16
	told    uint8 // recoder: links that carried a packet with the k′ learned
	spent   bool  // recoder: every link's budget is spent, but k′ may still come
	granted bool
	fresh   bool // just opened: the recoder has not yet looked at it
	done    bool // decoded (decoder) or spent (recoder) when freed
}

func bitHas(b *[4]uint64, i int) bool { return b[i>>6]&(1<<(i&63)) != 0 }
func bitSet(b *[4]uint64, i int)      { b[i>>6] |= 1 << (i & 63) }

// storeConfig are the memory keys every coding stage has.
type storeConfig struct {
	MaxSessions           int             `toml:"max_sessions"`
	MaxGenerations        int             `toml:"max_generations"`
	MaxSessionGenerations int             `toml:"max_session_generations"`
	Window                int             `toml:"window"`
	SessionTimeout        config.Duration `toml:"session_timeout"`
	Memory                config.ByteSize `toml:"memory"`
	MaxBlock              int             `toml:"max_block"`
}

func defaultStoreConfig() storeConfig {
	return storeConfig{MaxSessions: 1024, MaxGenerations: 1024, MaxSessionGenerations: 150, Window: 256,
		SessionTimeout: config.Duration(3 * time.Minute), Memory: 64 << 20, MaxBlock: 2048}
}

func (c *storeConfig) check() error {
	switch {
	case c.MaxSessions < 1 || c.MaxSessions > 1<<20:
		return fmt.Errorf("max_sessions %d is outside 1..%d", c.MaxSessions, 1<<20)
	case c.MaxGenerations < 1 || c.MaxGenerations > 1<<20:
		return fmt.Errorf("max_generations %d is outside 1..%d", c.MaxGenerations, 1<<20)
	case c.MaxSessionGenerations < 1:
		return fmt.Errorf("max_session_generations %d must be at least 1", c.MaxSessionGenerations)
	case c.Window < 1 || c.Window > MaxWindow:
		return fmt.Errorf("window %d is outside 1..%d", c.Window, MaxWindow)
	case c.SessionTimeout <= 0:
		return fmt.Errorf("session_timeout must be positive")
	case c.MaxBlock < 16 || c.MaxBlock > 65535:
		return fmt.Errorf("max_block %d is outside 16..65535", c.MaxBlock)
	}
	return nil
}

// storeCounters are what the store counts; the stage registers them.
type storeCounters struct {
	sessions, sessionEvicted, sessionTimeout   *stats.Counter
	gens, genEvicted, genWindow, genUnfinished *stats.Counter
	echelonAlloc                               *stats.Counter
}

func newStoreCounters(s *stats.Set) storeCounters {
	return storeCounters{
		sessions:       s.New("sessions_opened", "sessions created"),
		sessionEvicted: s.New("sessions_evicted", "sessions dropped to make room for a new one (max_sessions)"),
		sessionTimeout: s.New("sessions_timed_out", "sessions flushed after session_timeout without an update"),
		gens:           s.New("generations_opened", "generations created"),
		genEvicted:     s.New("generations_evicted", "generations dropped for room: max_generations, max_session_generations or memory, oldest update first"),
		genWindow:      s.New("generations_left_window", "generations dropped as the window moved past them"),
		genUnfinished:  s.New("generations_unfinished", "generations dropped before they were finished"),
		echelonAlloc:   s.New("echelon_allocs", "elimination matrices allocated (once per generation size, then reused)"),
	}
}

type store struct {
	cfg     storeConfig
	seed    uint64
	timeout int64
	window  int
	// width is the column count of a generation's Echelon for size K:
	// K for coefficients alone (recoder), more for a decoder's augmented
	// rows; nil for none (encoder).
	width    func(k int) int
	receiver bool // count generations freed before they were finished
	c        storeCounters

	sess     []session
	sessFree stack
	stab     table
	sessLRU  list
	sl       links

	gens    []generation
	genFree stack
	gtab    table
	genLRU  list
	gl      links // LRU order
	gs      links // per-session lists

	arena    []byte
	stride   int
	slotFree stack

	echelons [MaxK + 1][]*gf.Echelon
	cached   int

	// The session of the last packet: a burst is mostly one session.
	lastKey  sessionKey
	lastHash uint64
	lastSess int32

	// onFree is told of a generation about to be freed, for the stage's own
	// accounting (decoder: deliver nothing more; recoder: drop credits).
	onFree func(gi int32)
}

func newStore(cfg storeConfig, seed uint64, width func(k int) int, c storeCounters) (*store, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	stride := (cfg.MaxBlock + MaxK + 63) &^ 63
	slots := int(int64(cfg.Memory) / int64(stride))
	if slots < 1 {
		return nil, fmt.Errorf("memory %v holds no block of max_block %d", cfg.Memory, cfg.MaxBlock)
	}
	if slots > 1<<24 {
		return nil, fmt.Errorf("memory %v is too large (at most %d blocks)", cfg.Memory, 1<<24)
	}
	st := &store{cfg: cfg, seed: seed, timeout: int64(time.Duration(cfg.SessionTimeout)), window: cfg.Window,
		width: width, c: c, lastSess: -1,
		sess: make([]session, cfg.MaxSessions), sessFree: newStack(cfg.MaxSessions), stab: newTable(cfg.MaxSessions),
		sessLRU: newList(), sl: newLinks(cfg.MaxSessions),
		gens: make([]generation, cfg.MaxGenerations), genFree: newStack(cfg.MaxGenerations), gtab: newTable(cfg.MaxGenerations),
		genLRU: newList(), gl: newLinks(cfg.MaxGenerations), gs: newLinks(cfg.MaxGenerations),
		arena: make([]byte, slots*stride), stride: stride, slotFree: newStack(slots)}
	for i := range st.sess {
		st.sess[i].gens = newList()
		st.sess[i].open = -1
	}
	return st, nil
}

// slot returns arena slot s: room for a coding vector and a block.
func (st *store) slot(s int32) []byte {
	o := int(s) * st.stride
	return st.arena[o : o+st.stride : o+st.stride]
}

// keyHash returns key's hash and, when the last packet's session had the same
// key and is still there, that session (else -1).
func (st *store) keyHash(key *sessionKey) (uint64, int32) {
	if st.lastSess >= 0 && key.equal(&st.lastKey) {
		if s := &st.sess[st.lastSess]; s.live && s.key.equal(key) {
			return st.lastHash, st.lastSess
		}
	}
	h := key.hash(st.seed)
	st.lastKey, st.lastHash, st.lastSess = *key, h, -1
	return h, -1
}

// lookup finds a session.
func (st *store) lookup(key *sessionKey, h uint64) int32 {
	t := &st.stab
	for i := t.start(h); t.e[i].val >= 0; i = t.next(i) {
		if e := t.e[i]; e.key == h && st.sess[e.val].key.equal(key) {
			return e.val
		}
	}
	return -1
}

// session finds or makes the session of key; a full table gives up its
// least recently updated session.
func (st *store) session(key *sessionKey, h uint64, now int64) int32 {
	if si := st.lookup(key, h); si >= 0 {
		st.lastSess = si
		return si
	}
	si, ok := st.sessFree.pop()
	if !ok {
		si = st.sessLRU.tail
		st.c.sessionEvicted.Inc()
		st.freeSession(si)
		si, _ = st.sessFree.pop()
	}
	s := &st.sess[si]
	*s = session{key: *key, hash: h, live: true, gens: newList(), last: now, created: now, open: -1}
	st.stab.put(h, si)
	st.sessLRU.pushFront(&st.sl, si)
	st.c.sessions.Inc()
	st.lastKey, st.lastHash, st.lastSess = *key, h, si
	return si
}

// touchSession records an update of session si.
func (st *store) touchSession(si int32, now int64) {
	st.sess[si].last = now
	st.sessLRU.moveFront(&st.sl, si)
}

// freeSession drops a session and every generation it holds.
func (st *store) freeSession(si int32) {
	s := &st.sess[si]
	if !s.live {
		return
	}
	for s.gens.head >= 0 {
		st.freeGen(s.gens.head)
	}
	st.stab.del(s.hash, si)
	st.sessLRU.remove(&st.sl, si)
	s.live = false
	st.sessFree.push(si)
}

// admit applies the generation window to generation g of session si: it
// reports false for a stale generation, and moves the window forward for a
// newer one, dropping the generations it leaves behind.
func (st *store) admit(si int32, g uint16) bool {
	s := &st.sess[si]
	if !s.seen {
		s.seen, s.newest = true, g
		return true
	}
	d := serialDiff(s.newest, g)
	if d <= -st.window {
		return false
	}
	if d > 0 {
		s.done.advance(s.newest, g)
		s.newest = g
		// The session's list is newest first: old generations are at its end.
		for gi := s.gens.tail; gi >= 0; {
			prev := st.gs.prev[gi]
			if serialDiff(st.gens[gi].id, g) >= st.window {
				st.c.genWindow.Inc()
				st.freeGen(gi)
			}
			gi = prev
		}
	}
	return true
}

func genKey(si int32, g uint16) uint64 { return mix(uint64(si)<<16 | uint64(g)) }

// gen finds generation g of session si, or -1. The session's newest
// generation is checked first: most packets are of it, and its slot is read
// next anyway, which saves the table's line when the table is out of cache.
func (st *store) gen(si int32, g uint16) int32 {
	if gi := st.sess[si].gens.head; gi >= 0 && st.gens[gi].id == g {
		return gi
	}
	return st.gtab.get(genKey(si, g))
}

// newGen makes generation g of session si for K = k, N = n, evicting as the
// limits require. It fails only when k's Echelon cannot be made.
func (st *store) newGen(si int32, g uint16, k, n int, now int64) (int32, error) {
	s := &st.sess[si]
	if s.gens.n >= st.cfg.MaxSessionGenerations {
		st.evictSession(si)
	}
	gi, ok := st.genFree.pop()
	if !ok {
		st.evictOldest()
		gi, _ = st.genFree.pop()
	}
	ge := &st.gens[gi]
	ech, err := st.echelon(k)
	if err != nil {
		st.genFree.push(gi)
		return -1, err
	}
	rows := ge.rows[:0]
	if rows == nil {
		rows = make([]int32, 0, MaxK) // once per generation slot, on its first use
	}
	*ge = generation{sess: si, id: g, live: true, epoch: ge.epoch, k: k, kk: k, n: n, first: now, last: now, ech: ech, rows: rows}
	st.gtab.put(genKey(si, g), gi)
	st.genLRU.pushFront(&st.gl, gi)
	s.gens.pushFront(&st.gs, gi)
	st.c.gens.Inc()
	return gi, nil
}

// evictOldest drops the generation with the oldest update of all.
func (st *store) evictOldest() {
	if gi := st.genLRU.tail; gi >= 0 {
		st.c.genEvicted.Inc()
		st.freeGen(gi)
	}
}

// evictSession drops the generation of session si with the oldest update.
func (st *store) evictSession(si int32) {
	gi := int32(-1)
	for x := st.sess[si].gens.tail; x >= 0; x = st.gs.prev[x] {
		if gi < 0 || st.gens[x].last < st.gens[gi].last {
			gi = x
		}
	}
	if gi >= 0 {
		st.c.genEvicted.Inc()
		st.freeGen(gi)
	}
}

// touchGen records an update of generation gi.
func (st *store) touchGen(gi int32, now int64) {
	st.gens[gi].last = now
	st.genLRU.moveFront(&st.gl, gi)
	st.touchSession(st.gens[gi].sess, now)
}

// allocSlot takes an arena slot for generation gi, evicting the generations
// with the oldest update (never gi) while the arena is empty.
func (st *store) allocSlot(gi int32) (int32, bool) {
	for {
		if s, ok := st.slotFree.pop(); ok {
			return s, true
		}
		victim := st.genLRU.tail
		if victim == gi {
			victim = st.gl.prev[gi]
		}
		if victim < 0 {
			return -1, false
		}
		st.c.genEvicted.Inc()
		st.freeGen(victim)
	}
}

// freeGen drops a generation, returning its slots and Echelon.
func (st *store) freeGen(gi int32) {
	ge := &st.gens[gi]
	if !ge.live {
		return
	}
	if st.onFree != nil {
		st.onFree(gi)
	}
	if !ge.done && st.receiver {
		st.c.genUnfinished.Inc()
	}
	for _, s := range ge.rows {
		st.slotFree.push(s)
	}
	ge.rows = ge.rows[:0]
	st.putEchelon(ge.k, ge.ech)
	ge.ech = nil
	s := &st.sess[ge.sess]
	if s.open == gi {
		s.open = -1
	}
	st.gtab.del(genKey(ge.sess, ge.id), gi)
	st.genLRU.remove(&st.gl, gi)
	s.gens.remove(&st.gs, gi)
	ge.live = false
	ge.epoch++
	st.genFree.push(gi)
}

// echelon takes an Echelon for generation size k from the cache, or makes
// one of width(k) columns. A store without width keeps none (encoder).
func (st *store) echelon(k int) (*gf.Echelon, error) {
	if st.width == nil {
		return nil, nil
	}
	if l := st.echelons[k]; len(l) > 0 {
		e := l[len(l)-1]
		st.echelons[k] = l[:len(l)-1]
		st.cached--
		e.Reset()
		return e, nil
	}
	st.c.echelonAlloc.Inc()
	return gf.NewEchelon(st.width(k), 0)
}

// putEchelon keeps the Echelon of a generation of size k for reuse.
func (st *store) putEchelon(k int, e *gf.Echelon) {
	if e == nil || st.cached >= st.cfg.MaxGenerations {
		return
	}
	if st.echelons[k] == nil {
		st.echelons[k] = make([]*gf.Echelon, 0, 16)
	}
	st.echelons[k] = append(st.echelons[k], e)
	st.cached++
}

// expire flushes every session without an update for the timeout.
func (st *store) expire(now int64) {
	for si := st.sessLRU.tail; si >= 0 && now-st.sess[si].last > st.timeout; si = st.sessLRU.tail {
		st.c.sessionTimeout.Inc()
		st.freeSession(si)
	}
}

// liveGens is the number of generations held.
func (st *store) liveGens() int { return st.genLRU.n }

// liveSlots is the number of arena slots in use.
func (st *store) liveSlots() int { return len(st.arena)/st.stride - len(st.slotFree) }
