package route

import (
	"encoding/binary"
	"math/bits"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/linerate/linerate/appliance/packet"
)

// State is a neighbour entry's reachability state (RFC 4861 §7.3.2).
type State uint8

const (
	Free State = iota
	// Incomplete: resolution is under way; no link-layer address yet.
	Incomplete
	// Reachable: confirmed within ReachableTime.
	Reachable
	// Stale: an address learnt without confirmation, or confirmed too long
	// ago. Usable; using it starts a probe.
	Stale
	// Probe: a stale entry in use, being confirmed by unicast solicitations:
	// RFC 4861's DELAY and PROBE in one state.
	Probe
	// Static: set by configuration; never resolved, aged or evicted.
	Static
)

func (s State) String() string {
	switch s {
	case Incomplete:
		return "INCOMPLETE"
	case Reachable:
		return "REACHABLE"
	case Stale:
		return "STALE"
	case Probe:
		return "PROBE"
	case Static:
		return "STATIC"
	}
	return "FREE"
}

// HasMAC reports whether an entry in state s can be used to forward.
func (s State) HasMAC() bool { return s >= Reachable }

// Params tune the neighbour cache. Times are in nanoseconds.
type Params struct {
	Capacity           int   // entries; rounded up to whole buckets
	ReachableTime      int64 // REACHABLE lasts this long after a confirmation (RFC 4861 REACHABLE_TIME)
	RetransTime        int64 // between solicitations (RETRANS_TIMER)
	DelayFirstProbe    int64 // from the first use of a STALE entry to its first probe (DELAY_FIRST_PROBE_TIME)
	MaxMulticastProbes int   // solicitations for an INCOMPLETE entry (MAX_MULTICAST_SOLICIT)
	MaxUnicastProbes   int   // probes of an entry in use (MAX_UNICAST_SOLICIT)
	StaleTime          int64 // a STALE entry nobody confirmed for this long is removed
}

// DefaultParams are RFC 4861 §10's constants, and 4096 entries.
var DefaultParams = Params{
	Capacity:           4096,
	ReachableTime:      30e9,
	RetransTime:        1e9,
	DelayFirstProbe:    5e9,
	MaxMulticastProbes: 3,
	MaxUnicastProbes:   3,
	StaleTime:          600e9,
}

// ways is the associativity: an address lives in one of the ways slots of its
// bucket, so a lookup reads one bucket and a full bucket evicts within itself.
// LookupBurst's tag match is written out for 8.
const ways = 8

// Table is the neighbour cache: a fixed array of set-associative buckets, so
// its size is bounded and a flood can only evict within one bucket.
//
// Readers (the lcores, per packet) never lock: each slot is a seqlock over
// atomic fields, and a bucket keeps a tag per slot so a lookup touches only
// slots whose tag matches. Writers (learning, resolution, the control plane)
// serialise on a mutex; lcores only ever TryLock it and skip the update when
// another writer holds it.
type Table struct {
	mu      sync.Mutex
	buckets []bucket
	mask    uint32
	p       Params

	count                             atomic.Int64
	created, removed, evicted, failed atomic.Uint64
	// gen moves whenever an entry gains a link-layer address or fails, so that
	// packets held for resolution are looked at again.
	gen atomic.Uint64

	scanning atomic.Bool
	scanAt   atomic.Int64
	cursor   int // the ageing walk's position (under mu)
	// pending are the slots with timers running (INCOMPLETE, PROBE), so that
	// the scan serves them every time however big the table is. Its size
	// bounds the resolutions under way.
	pending    []int32
	maxPending int
}

type bucket struct {
	tag  [ways]atomic.Uint32 // hash tag of each slot, 0 when free
	_    [64 - 4*ways]byte
	slot [ways]slot
}

// slot is one entry. seq is odd while a writer changes it; the key, word and
// updated are read under it. probes and probeAt belong to writers.
type slot struct {
	seq     atomic.Uint32
	port    atomic.Uint32
	a0, a1  atomic.Uint64
	word    atomic.Uint64 // MAC << 16 | flags << 8 | state
	updated atomic.Int64  // last confirmation or creation, monotonic ns
	probeAt int64
	probes  int32
	pending bool // listed in Table.pending
	_       [3]byte
}

const flagRouter = 1 // the neighbour said it is a router (NA R flag)

func pack(m packet.MAC, st State, flags uint8) uint64 {
	var b [8]byte
	copy(b[:6], m[:])
	return binary.BigEndian.Uint64(b[:]) | uint64(flags)<<8 | uint64(st)
}

func unpack(w uint64) (packet.MAC, State, uint8) {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], w)
	return packet.MAC(b[:6]), State(w), uint8(w >> 8)
}

// NewTable makes a cache of p.Capacity entries (at least one bucket).
func NewTable(p Params) *Table {
	n := 1
	for n*ways < p.Capacity {
		n <<= 1
	}
	return &Table{buckets: make([]bucket, n), mask: uint32(n - 1), p: p, maxPending: min(n*ways, 4096)}
}

// watch lists slot i of b for the scan's timers; false when too many are.
func (t *Table) watch(b *bucket, i int) bool {
	s := &b.slot[i]
	if s.pending {
		return true
	}
	if len(t.pending) >= t.maxPending {
		return false
	}
	s.pending = true
	t.pending = append(t.pending, int32((t.index(b))*ways+i))
	return true
}

func (t *Table) index(b *bucket) int {
	return int((uintptr(unsafe.Pointer(b)) - uintptr(unsafe.Pointer(&t.buckets[0]))) / unsafe.Sizeof(bucket{}))
}

// Capacity is the number of entries the table holds at most.
func (t *Table) Capacity() int { return len(t.buckets) * ways }

// Len is the number of entries.
func (t *Table) Len() int { return int(t.count.Load()) }

// Params are the table's parameters.
func (t *Table) Params() Params { return t.p }

// Gen moves whenever an entry gains a link-layer address or fails.
func (t *Table) Gen() uint64 { return t.gen.Load() }

// TableStats are the cache's lifetime counters.
type TableStats struct {
	Created, Removed, Evicted, Failed uint64
}

// Stats reads the counters.
func (t *Table) Stats() TableStats {
	return TableStats{Created: t.created.Load(), Removed: t.removed.Load(), Evicted: t.evicted.Load(), Failed: t.failed.Load()}
}

func hashKey(port uint16, a [16]byte) uint64 {
	k := binary.LittleEndian.Uint64(a[:8])*0x9e3779b97f4a7c15 ^ binary.LittleEndian.Uint64(a[8:]) ^ uint64(port)<<48
	k ^= k >> 33
	k *= 0xff51afd7ed558ccd
	k ^= k >> 33
	k *= 0xc4ceb9fe1a85ec53
	k ^= k >> 33
	return k
}

func (t *Table) locate(port uint16, a [16]byte) (*bucket, uint32) {
	h := hashKey(port, a)
	return &t.buckets[uint32(h)&t.mask], uint32(h>>32) | 1
}

// read is a consistent copy of slot s, or ok false when a writer kept it busy.
func (s *slot) read() (port uint16, a0, a1, w uint64, updated int64, ok bool) {
	for range 4 {
		q := s.seq.Load()
		if q&1 != 0 {
			continue
		}
		port, a0, a1 = uint16(s.port.Load()), s.a0.Load(), s.a1.Load()
		w, updated = s.word.Load(), s.updated.Load()
		if s.seq.Load() == q {
			return port, a0, a1, w, updated, true
		}
	}
	return 0, 0, 0, 0, 0, false
}

// effective is the state a reader acts on: REACHABLE turns STALE once
// ReachableTime has passed, without anyone writing.
func (t *Table) effective(st State, updated, now int64) State {
	if st == Reachable && now-updated > t.p.ReachableTime {
		return Stale
	}
	return st
}

// Lookup finds the entry for addr on port. IPv4 addresses are IPv4-mapped.
// It never locks and never allocates.
func (t *Table) Lookup(port uint16, addr [16]byte, now int64) (packet.MAC, State, bool) {
	b, tag := t.locate(port, addr)
	a0, a1 := binary.BigEndian.Uint64(addr[:8]), binary.BigEndian.Uint64(addr[8:])
	for i := range ways {
		if b.tag[i].Load() != tag {
			continue
		}
		p, s0, s1, w, up, ok := b.slot[i].read()
		if !ok || s0 != a0 || s1 != a1 || p != port {
			continue
		}
		m, st, _ := unpack(w)
		if st == Free {
			continue
		}
		return m, t.effective(st, up, now), true
	}
	return packet.MAC{}, Free, false
}

// Key names a neighbour: an address (IPv4 mapped) on a port.
type Key struct {
	Port uint16
	Addr [16]byte
}

// Found is what Lookup returns for one Key of LookupBurst.
type Found struct {
	MAC   packet.MAC
	State State
	OK    bool
}

// LookupBurst is Lookup for each of keys, into found[i] for keys[i]; found
// must be at least as long. Each group of up to packet.MaxBurst keys is done
// in stages, as DPDK's rte_hash_lookup_bulk does: hash every key, load every
// key's line of tags, match the tags, load every first matching slot, then
// read each key's matching slots as Lookup does. A lookup in a table larger
// than the caches is a chain of dependent misses (the tags, then the slot);
// one key after another, those chains queue, while here the misses of a
// stage overlap, and the next stage finds its lines in the cache. The loads
// into the sink are hints; the match is Lookup's scan of the tags, and each
// matching slot is read under its seqlock and its key compared, so
// LookupBurst's answers are Lookup's, and like Lookup it never locks and
// never allocates.
func (t *Table) LookupBurst(keys []Key, found []Found, now int64) {
	found = found[:len(keys)]
	for len(keys) > 0 {
		n := min(len(keys), packet.MaxBurst)
		t.lookupBurst(keys[:n], found[:n], now)
		keys, found = keys[n:], found[n:]
	}
}

func (t *Table) lookupBurst(keys []Key, found []Found, now int64) {
	var bs [packet.MaxBurst]*bucket
	var tags [packet.MaxBurst]uint32
	var match [packet.MaxBurst]uint8
	keys, found = keys[:len(found)], found[:len(keys)]
	// Hashing first keeps the loading loop short, so that more of its
	// misses fit in the core's window at once.
	for k := range keys {
		bs[k], tags[k] = t.locate(keys[k].Port, keys[k].Addr)
	}
	var sink uint32
	for _, b := range bs[:len(keys)] {
		sink += b.tag[0].Load()
	}
	// The ways whose tag matches, without a branch on which: the way is
	// random, and a mispredicted branch a key costs more than the match.
	for k, b := range bs[:len(keys)] {
		g, tg := &b.tag, tags[k]
		match[k] = eq(g[0].Load(), tg) | eq(g[1].Load(), tg)<<1 | eq(g[2].Load(), tg)<<2 |
			eq(g[3].Load(), tg)<<3 | eq(g[4].Load(), tg)<<4 | eq(g[5].Load(), tg)<<5 |
			eq(g[6].Load(), tg)<<6 | eq(g[7].Load(), tg)<<7
	}
	// The first matching slot's first line, and the line of its last field
	// read (half the slots straddle two lines); a loop of its own, short, as
	// the tags' is.
	for k, b := range bs[:len(keys)] {
		s := &b.slot[bits.TrailingZeros8(match[k])&(ways-1)]
		sink += s.seq.Load() + uint32(s.updated.Load())
	}
	// Each key as Lookup reads it: the slots its tag matched (as Lookup's
	// scan of the tags found them), each under its seqlock.
	for k, b := range bs[:len(keys)] {
		f := &found[k]
		*f = Found{}
		a0, a1 := binary.BigEndian.Uint64(keys[k].Addr[:8]), binary.BigEndian.Uint64(keys[k].Addr[8:])
		for m := match[k]; m != 0; m &= m - 1 {
			p, s0, s1, w, up, ok := b.slot[bits.TrailingZeros8(m)].read()
			if !ok || s0 != a0 || s1 != a1 || p != keys[k].Port {
				continue
			}
			mac, st, _ := unpack(w)
			if st == Free {
				continue
			}
			f.MAC, f.State, f.OK = mac, t.effective(st, up, now), true
			break
		}
	}
	burstSink(sink)
}

// eq is 1 when a == b, else 0, without a branch.
func eq(a, b uint32) uint8 {
	var r uint8
	if a == b {
		r = 1
	}
	return r
}

// burstSink keeps LookupBurst's early loads from being compiled away.
//
//go:noinline
func burstSink(uint32) {}

// find is Lookup for writers: the slot index in b, or -1.
func (t *Table) find(b *bucket, tag uint32, port uint16, addr [16]byte) int {
	a0, a1 := binary.BigEndian.Uint64(addr[:8]), binary.BigEndian.Uint64(addr[8:])
	for i := range ways {
		s := &b.slot[i]
		if b.tag[i].Load() == tag && s.a0.Load() == a0 && s.a1.Load() == a1 && uint16(s.port.Load()) == port {
			return i
		}
	}
	return -1
}

// write changes slot i of b under its seqlock. The caller holds mu.
func (b *bucket) write(i int, tag uint32, port uint16, addr [16]byte, w uint64, updated int64) {
	s := &b.slot[i]
	s.seq.Add(1)
	s.port.Store(uint32(port))
	s.a0.Store(binary.BigEndian.Uint64(addr[:8]))
	s.a1.Store(binary.BigEndian.Uint64(addr[8:]))
	s.word.Store(w)
	s.updated.Store(updated)
	b.tag[i].Store(tag)
	s.seq.Add(1)
}

// setWord changes an entry's MAC, state and flags, and its confirmation time
// when updated is not 0.
func (b *bucket) setWord(i int, w uint64, updated int64) {
	s := &b.slot[i]
	s.seq.Add(1)
	s.word.Store(w)
	if updated != 0 {
		s.updated.Store(updated)
	}
	s.seq.Add(1)
}

func (t *Table) free(b *bucket, i int) {
	s := &b.slot[i]
	s.seq.Add(1)
	b.tag[i].Store(0)
	s.word.Store(0)
	s.seq.Add(1)
	s.probes, s.probeAt = 0, 0
	t.count.Add(-1)
	t.removed.Add(1)
}

// rank orders eviction victims: lower goes first. Static entries never go.
func rank(st State) int {
	switch st {
	case Stale:
		return 1
	case Incomplete:
		return 2
	case Probe:
		return 3
	case Reachable:
		return 4
	}
	return 99
}

// claim finds a slot for a new entry in b: a free one, or the victim of lowest
// rank up to maxRank, the least recently confirmed among equals. -1 when none.
func (t *Table) claim(b *bucket, maxRank int, now int64) int {
	best, bestRank, bestAge := -1, maxRank+1, int64(-1)
	for i := range ways {
		if b.tag[i].Load() == 0 {
			return i
		}
		s := &b.slot[i]
		_, st, _ := unpack(s.word.Load())
		up := s.updated.Load()
		r := rank(t.effective(st, up, now))
		if r < bestRank || r == bestRank && now-up > bestAge {
			best, bestRank, bestAge = i, r, now-up
		}
	}
	if best >= 0 {
		b.tag[best].Store(0)
		t.count.Add(-1)
		t.evicted.Add(1)
		t.removed.Add(1)
	}
	return best
}

func (t *Table) insert(b *bucket, tag uint32, port uint16, addr [16]byte, w uint64, maxRank int, now int64) int {
	i := t.claim(b, maxRank, now)
	if i < 0 {
		return -1
	}
	b.write(i, tag, port, addr, w, now)
	s := &b.slot[i]
	s.probes, s.probeAt = 0, 0
	t.count.Add(1)
	t.created.Add(1)
	return i
}

// lock takes the writers' mutex; an lcore (try) skips the update rather than
// wait for the control plane.
func (t *Table) lock(try bool) bool {
	if try {
		return t.mu.TryLock()
	}
	t.mu.Lock()
	return true
}

// Resolve starts resolution of addr on port: when there is no entry it makes an
// INCOMPLETE one, evicting the least valuable entry of its bucket if it must,
// and reports probe true: the caller sends the first solicitation now. The
// scanner sends the retries.
func (t *Table) Resolve(port uint16, addr [16]byte, now int64) (probe bool) {
	if !t.lock(true) {
		return false
	}
	defer t.mu.Unlock()
	b, tag := t.locate(port, addr)
	if t.find(b, tag, port, addr) >= 0 {
		return false
	}
	if len(t.pending) >= t.maxPending {
		return false // enough resolutions under way
	}
	i := t.insert(b, tag, port, addr, pack(packet.MAC{}, Incomplete, 0), rank(Reachable), now)
	if i < 0 {
		return false
	}
	s := &b.slot[i]
	s.probes, s.probeAt = 1, now+t.p.RetransTime
	t.watch(b, i)
	return true
}

// Use tells the table a STALE entry is forwarding traffic: it moves to PROBE, to
// be confirmed after DelayFirstProbe (RFC 4861 §7.3.3).
func (t *Table) Use(port uint16, addr [16]byte, now int64) {
	if !t.lock(true) {
		return
	}
	defer t.mu.Unlock()
	b, tag := t.locate(port, addr)
	i := t.find(b, tag, port, addr)
	if i < 0 {
		return
	}
	s := &b.slot[i]
	m, st, fl := unpack(s.word.Load())
	if t.effective(st, s.updated.Load(), now) != Stale || !t.watch(b, i) {
		return
	}
	b.setWord(i, pack(m, Probe, fl), 0)
	s.probes, s.probeAt = 0, now+t.p.DelayFirstProbe
}

// Learn is what a Neighbor Solicitation, Router Solicitation or Advertisement
// with a source link-layer address, or an ARP request, tells (RFC 4861 §7.2.3,
// §6.2.6; RFC 826): addr is at mac. A new entry is STALE, and made only when
// create grants a token (nil: never); it may evict only STALE entries, so a
// flood of solicitations from made-up sources cannot push out the neighbours
// in use. A known entry whose address changed becomes STALE, and takes no
// token. try makes an lcore skip the update when a writer holds the table.
// A mac no neighbour can have (neighborMAC) changes nothing.
func (t *Table) Learn(port uint16, addr [16]byte, mac packet.MAC, create *Limiter, try bool, now int64) (created bool) {
	if !neighborMAC(mac) || !t.lock(try) {
		return false
	}
	defer t.mu.Unlock()
	b, tag := t.locate(port, addr)
	i := t.find(b, tag, port, addr)
	if i < 0 {
		if create == nil || !create.Allow(now) {
			return false
		}
		return t.insert(b, tag, port, addr, pack(mac, Stale, 0), rank(Stale), now) >= 0
	}
	s := &b.slot[i]
	m, st, fl := unpack(s.word.Load())
	switch {
	case st == Static:
	case st == Incomplete:
		b.setWord(i, pack(mac, Stale, fl), now)
		t.gen.Add(1)
	case m != mac:
		b.setWord(i, pack(mac, Stale, fl), now)
		s.probes = 0
	}
	return false
}

// neighborMAC reports whether m can be a neighbour's own address: not
// multicast or broadcast, which would send routed traffic to every host on
// the link, and not zero. Learn and Advert take no other; static entries
// are checked where they are made.
func neighborMAC(m packet.MAC) bool { return m[0]&1 == 0 && m != (packet.MAC{}) }

// Advert applies a Neighbor Advertisement, or an ARP reply (solicited and
// override), for addr on port (RFC 4861 §7.2.5): hasMAC says it carried a
// target link-layer address. An address with no entry is ignored, and so is
// an advertisement of a mac no neighbour can have (neighborMAC).
func (t *Table) Advert(port uint16, addr [16]byte, mac packet.MAC, hasMAC, solicited, override, router, try bool, now int64) {
	if hasMAC && !neighborMAC(mac) || !t.lock(try) {
		return
	}
	defer t.mu.Unlock()
	b, tag := t.locate(port, addr)
	i := t.find(b, tag, port, addr)
	if i < 0 {
		return
	}
	s := &b.slot[i]
	m, st, fl := unpack(s.word.Load())
	if router {
		fl |= flagRouter
	} else {
		fl &^= flagRouter
	}
	st = t.effective(st, s.updated.Load(), now)
	switch {
	case st == Static:
		return
	case st == Incomplete:
		if !hasMAC {
			return
		}
		ns := Stale
		if solicited {
			ns = Reachable
		}
		b.setWord(i, pack(mac, ns, fl), now)
		s.probes = 0
		t.gen.Add(1)
	case !override && hasMAC && mac != m:
		// Keep the cached address, but doubt it (§7.2.5 first bullet).
		if st == Reachable {
			b.setWord(i, pack(m, Stale, fl), 0)
		}
	default:
		nm, ns := m, st
		if hasMAC {
			nm = mac
		}
		var up int64
		switch {
		case solicited:
			ns, up = Reachable, now
			s.probes = 0
		case hasMAC && mac != m:
			ns = Stale
		}
		b.setWord(i, pack(nm, ns, fl), up)
	}
}

// SetStatic sets a static entry, replacing whatever entry addr had.
func (t *Table) SetStatic(port uint16, addr [16]byte, mac packet.MAC, now int64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	b, tag := t.locate(port, addr)
	if i := t.find(b, tag, port, addr); i >= 0 {
		b.setWord(i, pack(mac, Static, 0), now)
		t.gen.Add(1)
		return true
	}
	if t.insert(b, tag, port, addr, pack(mac, Static, 0), rank(Reachable), now) < 0 {
		return false
	}
	t.gen.Add(1)
	return true
}

// Delete removes the entry for addr on port, static or not.
func (t *Table) Delete(port uint16, addr [16]byte) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	b, tag := t.locate(port, addr)
	i := t.find(b, tag, port, addr)
	if i < 0 {
		return false
	}
	t.free(b, i)
	t.gen.Add(1)
	return true
}

// Entry is one neighbour, as the control plane sees it.
type Entry struct {
	Port    uint16
	Addr    [16]byte
	MAC     packet.MAC
	State   State
	Router  bool
	Updated int64 // monotonic ns of the last confirmation
	Probes  int
}

// Entries lists the cache.
func (t *Table) Entries(now int64) []Entry {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []Entry
	for bi := range t.buckets {
		b := &t.buckets[bi]
		for i := range ways {
			if b.tag[i].Load() == 0 {
				continue
			}
			s := &b.slot[i]
			m, st, fl := unpack(s.word.Load())
			e := Entry{Port: uint16(s.port.Load()), MAC: m, Router: fl&flagRouter != 0, Updated: s.updated.Load(), Probes: int(s.probes)}
			binary.BigEndian.PutUint64(e.Addr[:8], s.a0.Load())
			binary.BigEndian.PutUint64(e.Addr[8:], s.a1.Load())
			e.State = t.effective(st, e.Updated, now)
			out = append(out, e)
		}
	}
	return out
}

// Solicit is a solicitation the scanner wants sent: multicast (MAC zero) to
// resolve an INCOMPLETE entry, unicast to MAC to confirm one in use.
type Solicit struct {
	Port uint16
	Addr [16]byte
	MAC  packet.MAC
}

// ScanInterval is how often one lcore runs the table's timers.
const ScanInterval = 1e6 // ns

// scanSlots is how many slots one scan walks looking for aged entries.
const scanSlots = 64 * ways

// Scan runs the table's timers when their time has come and no other lcore is
// running them: it appends the solicitations due to out (up to its capacity),
// fails entries out of probes, and walks the next scanSlots slots for STALE
// entries nobody confirmed for StaleTime, which it removes. It returns out.
func (t *Table) Scan(now int64, out []Solicit) []Solicit {
	if now < t.scanAt.Load() || !t.scanning.CompareAndSwap(false, true) {
		return out
	}
	defer t.scanning.Store(false)
	t.scanAt.Store(now + ScanInterval)
	if !t.mu.TryLock() {
		return out
	}
	defer t.mu.Unlock()
	j := 0
	for k, x := range t.pending {
		b, i := &t.buckets[x/ways], int(x%ways)
		if len(out) == cap(out) {
			j += copy(t.pending[j:], t.pending[k:])
			break
		}
		if t.timer(b, i, now, &out) {
			t.pending[j] = x
			j++
		} else {
			b.slot[i].pending = false
		}
	}
	t.pending = t.pending[:j]
	n := len(t.buckets) * ways
	for range min(scanSlots, n) {
		t.cursor = (t.cursor + 1) % n
		b, i := &t.buckets[t.cursor/ways], t.cursor%ways
		if b.tag[i].Load() == 0 {
			continue
		}
		s := &b.slot[i]
		_, st, _ := unpack(s.word.Load())
		if t.effective(st, s.updated.Load(), now) == Stale && now-s.updated.Load() > t.p.StaleTime {
			t.free(b, i)
		}
	}
	return out
}

// timer serves slot i of b, a pending one: it appends a due solicitation to
// out, or fails the entry. It reports whether the slot still has a timer.
func (t *Table) timer(b *bucket, i int, now int64, out *[]Solicit) bool {
	if b.tag[i].Load() == 0 {
		return false
	}
	s := &b.slot[i]
	m, st, _ := unpack(s.word.Load())
	if st != Incomplete && st != Probe {
		return false
	}
	if now < s.probeAt {
		return true
	}
	limit := t.p.MaxMulticastProbes
	if st == Probe {
		limit = t.p.MaxUnicastProbes
	}
	if int(s.probes) >= limit {
		t.free(b, i)
		t.failed.Add(1)
		t.gen.Add(1)
		return false
	}
	s.probes++
	s.probeAt = now + t.p.RetransTime
	p := Solicit{Port: uint16(s.port.Load())}
	binary.BigEndian.PutUint64(p.Addr[:8], s.a0.Load())
	binary.BigEndian.PutUint64(p.Addr[8:], s.a1.Load())
	if st == Probe {
		p.MAC = m
	}
	*out = append(*out, p)
	return true
}
