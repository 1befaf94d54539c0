package lpm

import (
	"encoding/binary"
	"runtime"
	"sync/atomic"
)

// NoNextHop is what a burst lookup writes for an address no prefix holds.
const NoNextHop = ^uint32(0)

// Table4 is an IPv4 DIR-24-8 table. Lookups may run on any goroutine while one
// Insert or Delete runs; updates serialise on the table's mutex.
type Table4 struct{ t trie }

// New4 makes an IPv4 table with a pool of groups groups of 256 entries (1 KiB
// each, written only when used): one for each /24 that holds a longer prefix.
func New4(groups int) (*Table4, error) {
	x := &Table4{}
	x.t.emptyIsDefault = true
	if err := x.t.init(32, groups); err != nil {
		return nil, err
	}
	runtime.AddCleanup(x, freeRegions, x.t.mem)
	return x, nil
}

func key4(a uint32) key { return key{hi: uint64(a) << 32} }

// Insert sets the prefix addr/bits (host bits are ignored) to nh, and says
// whether it replaced another next hop for it.
func (x *Table4) Insert(addr uint32, bits int, nh uint32) (replaced bool, err error) {
	x.t.mu.Lock()
	defer x.t.mu.Unlock()
	return x.t.update(key4(addr), bits, nh)
}

// Delete removes the prefix addr/bits.
func (x *Table4) Delete(addr uint32, bits int) error {
	x.t.mu.Lock()
	defer x.t.mu.Unlock()
	return x.t.delete(key4(addr), bits)
}

// Get is the next hop of exactly the prefix addr/bits.
func (x *Table4) Get(addr uint32, bits int) (uint32, bool) {
	x.t.mu.Lock()
	defer x.t.mu.Unlock()
	return x.t.get(key4(addr), bits)
}

// Lookup is the next hop of the longest prefix holding a: one entry of tbl24,
// and one of a group when a prefix longer than /24 shares a's /24 or a's /24
// holds no prefix (then the default group, see New4).
func (x *Table4) Lookup(a uint32) (uint32, bool) {
	if nh := x.NextHop(a); nh != NoNextHop {
		return nh, true
	}
	return 0, false
}

// NextHop is Lookup's next hop, NoNextHop for none: one value and one
// branch, so that a caller's own lookup (route.FIB.Lookup4) stays within the
// compiler's inlining budget with it (TestInlined checks it).
func (x *Table4) NextHop(a uint32) uint32 {
	e := atomic.LoadUint32(&x.t.tbl24[a>>8])
	if e&entValid == 0 { // a group (entExt|group: <<8 drops the flag), or 0
		e = atomic.LoadUint32(&x.t.tbl8[e<<8|a&0xff])
	}
	return e&valMask - 1 // nextHop(e), cheaper for the inliner
}

// Reader4 is a table's lookup state, loaded once for a run of lookups: the
// base of tbl24, and the table for the group pool's, which only a lookup
// that reads a group needs. The regions never move (they are mapped once,
// when the table is made), so a Reader4 stays valid for the table's life and
// sees every later change, as Table4's own lookups do. It is two words, so
// that a caller's local one (and a struct holding it with two more words,
// as route.Reader) stays in registers across a run of lookups: a lookup
// through the *Table4 loads the bases again after each entry load, as an
// atomic load orders every memory access around it for the compiler.
type Reader4 struct {
	tbl24 *[1 << rootBits]uint32
	t     *trie
}

// Reader is the table's Reader4.
func (x *Table4) Reader() Reader4 { return Reader4{x.t.tbl24, &x.t} }

// NextHop is Table4.NextHop.
func (r Reader4) NextHop(a uint32) uint32 { return r.Slot(a) - 1 }

// Slot is NextHop plus one, so 0 for none and at most MaxNextHop+1: the leaf's
// own value (see mkEntry). A caller whose next hops sit in a table at their
// id plus one, slot 0 standing for none, indexes it with Slot directly: one
// test for none (the mask's own flags), no subtraction, and no bounds check
// on a table of MaxNextHop+2 (the compiler knows the mask). It is small
// enough to inline into a caller's own inlinable lookup (route's
// Reader.Lookup4; TestLookupInlined there).
func (r Reader4) Slot(a uint32) uint32 {
	e := atomic.LoadUint32(&r.tbl24[a>>8])
	if e&entValid == 0 {
		e = atomic.LoadUint32(&r.t.tbl8[e<<8|a&0xff])
	}
	return e & valMask
}

// nextHop is a leaf's next hop, or NoNextHop for an empty entry (0), without
// a branch: a leaf holds its next hop plus one (mkEntry).
func nextHop(e uint32) uint32 { return e&valMask - 1 }

// LookupBurst looks up every address of dst, writing the next hops (or
// NoNextHop) to nh, which must be as long. It reads every tbl24 entry before
// any group entry, so that a burst's cache misses overlap.
func (x *Table4) LookupBurst(dst []uint32, nh []uint32) {
	nh = nh[:len(dst)]
	tbl24 := x.t.tbl24[:] // a slice: its nil check once, not one a lookup
	for i, a := range dst {
		nh[i] = atomic.LoadUint32(&tbl24[a>>8])
	}
	tbl8 := x.t.tbl8
	for i, a := range dst {
		e := nh[i]
		if e&entValid == 0 {
			e = atomic.LoadUint32(&tbl8[e<<8|a&0xff])
		}
		nh[i] = nextHop(e)
	}
}

// Len is the number of prefixes.
func (x *Table4) Len() int {
	x.t.mu.Lock()
	defer x.t.mu.Unlock()
	return x.t.nrules
}

// Stats say what the table holds and costs.
func (x *Table4) Stats() Stats {
	x.t.mu.Lock()
	defer x.t.mu.Unlock()
	return x.t.stats()
}

// Reclaim makes the groups that were folded back free for any prefix. sync
// must return only once every reader that may have started a lookup before
// the call has finished it (a grace period, as the engine's Synchronize
// gives). It returns how many it freed.
func (x *Table4) Reclaim(sync func()) int {
	x.t.mu.Lock()
	defer x.t.mu.Unlock()
	return x.t.reclaim(sync)
}

// Table6 is an IPv6 multibit trie: tbl24 for the first 24 bits, then groups
// of 256 entries per 8 bits. Its concurrency is Table4's.
type Table6 struct{ t trie }

// New6 makes an IPv6 table with a pool of groups groups (1 KiB each, written
// only when used). A prefix of length l past /24 needs up to ⌈(l−24)/8⌉ of
// them, shared with the prefixes around it.
func New6(groups int) (*Table6, error) {
	x := &Table6{}
	if err := x.t.init(128, groups); err != nil {
		return nil, err
	}
	runtime.AddCleanup(x, freeRegions, x.t.mem)
	return x, nil
}

func key6(a [16]byte) key {
	return key{binary.BigEndian.Uint64(a[:8]), binary.BigEndian.Uint64(a[8:])}
}

// Insert sets the prefix addr/bits (host bits are ignored) to nh, and says
// whether it replaced another next hop for it.
func (x *Table6) Insert(addr [16]byte, bits int, nh uint32) (replaced bool, err error) {
	x.t.mu.Lock()
	defer x.t.mu.Unlock()
	return x.t.update(key6(addr), bits, nh)
}

// Delete removes the prefix addr/bits.
func (x *Table6) Delete(addr [16]byte, bits int) error {
	x.t.mu.Lock()
	defer x.t.mu.Unlock()
	return x.t.delete(key6(addr), bits)
}

// Get is the next hop of exactly the prefix addr/bits.
func (x *Table6) Get(addr [16]byte, bits int) (uint32, bool) {
	x.t.mu.Lock()
	defer x.t.mu.Unlock()
	return x.t.get(key6(addr), bits)
}

// Lookup is the next hop of the longest prefix holding a: one entry of tbl24,
// then one group entry per further byte the longest match needs (one of the
// default group where the first 24 bits hold no prefix).
func (x *Table6) Lookup(a [16]byte) (uint32, bool) {
	if nh := x.NextHop(&a); nh != NoNextHop {
		return nh, true
	}
	return 0, false
}

// NextHop is Lookup's next hop, NoNextHop for none.
func (x *Table6) NextHop(a *[16]byte) uint32 {
	e := atomic.LoadUint32(&x.t.tbl24[uint32(a[0])<<16|uint32(a[1])<<8|uint32(a[2])])
	if e&entValid == 0 {
		tbl8 := x.t.tbl8
		e = atomic.LoadUint32(&tbl8[e<<8|uint32(a[3])])
		for i := 4; e&entExt != 0 && i < 16; i++ {
			e = atomic.LoadUint32(&tbl8[e<<8|uint32(a[i])])
		}
		if e == 0 { // no rule under the path: the default (see defLeaf)
			e = atomic.LoadUint32(&x.t.def)
		}
	}
	return nextHop(e)
}

// Trace calls visit for each entry a lookup of a reads, in order: level 0
// is tbl24, level l > 0 the group read for byte l+2 of a; at is the entry's
// index in tbl24 or in the group pool (4 bytes an entry), so that a caller
// can tell which cache lines a traffic mix touches at each level. It is for
// measurements: it costs what Lookup does, plus the calls.
func (x *Table6) Trace(a [16]byte, visit func(level int, at uint32)) {
	at := uint32(a[0])<<16 | uint32(a[1])<<8 | uint32(a[2])
	visit(0, at)
	e := atomic.LoadUint32(&x.t.tbl24[at])
	for i := 3; e&entValid == 0 && i < 16; i++ {
		if i > 3 && e&entExt == 0 {
			break
		}
		at = e<<8 | uint32(a[i])
		visit(i-2, at)
		e = atomic.LoadUint32(&x.t.tbl8[at])
	}
}

// LookupBurst looks up every address of dst into nh (as long), NoNextHop for
// none, one level at a time: every tbl24 entry, then every address's group
// entry at the next byte, and so on, so that the burst's cache misses at each
// level overlap instead of queueing behind each address's chain.
func (x *Table6) LookupBurst(dst [][16]byte, nh []uint32) {
	nh = nh[:len(dst)]
	tbl24 := x.t.tbl24
	var miss uint32 // an entry is not a leaf yet (its valid bit clear)
	for i := range dst {
		a := &dst[i]
		e := atomic.LoadUint32(&tbl24[uint32(a[0])<<16|uint32(a[1])<<8|uint32(a[2])])
		nh[i] = e
		miss |= ^e
	}
	tbl8 := x.t.tbl8
	if miss&entValid != 0 {
		var ext uint32
		for i := range dst {
			if e := nh[i]; e&entValid == 0 { // a group, or the default group
				e = atomic.LoadUint32(&tbl8[e<<8|uint32(dst[i][3])])
				nh[i] = e
				ext |= e
			}
		}
		for j := 4; ext&entExt != 0 && j < 16; j++ {
			ext = 0
			for i := range dst {
				if e := nh[i]; e&entExt != 0 {
					e = atomic.LoadUint32(&tbl8[e<<8|uint32(dst[i][j])])
					nh[i] = e
					ext |= e
				}
			}
		}
	}
	def := atomic.LoadUint32(&x.t.def)
	for i, e := range nh {
		if e == 0 {
			e = def
		}
		nh[i] = nextHop(e)
	}
}

// Len is the number of prefixes.
func (x *Table6) Len() int {
	x.t.mu.Lock()
	defer x.t.mu.Unlock()
	return x.t.nrules
}

// Stats say what the table holds and costs.
func (x *Table6) Stats() Stats {
	x.t.mu.Lock()
	defer x.t.mu.Unlock()
	return x.t.stats()
}

// Reclaim is Table4.Reclaim.
func (x *Table6) Reclaim(sync func()) int {
	x.t.mu.Lock()
	defer x.t.mu.Unlock()
	return x.t.reclaim(sync)
}

// Walk calls fn for every prefix with its next hop, in no order, until fn
// returns false. Updates wait until it returns.
func (x *Table4) Walk(fn func(addr uint32, bits int, nh uint32) bool) {
	x.t.mu.Lock()
	defer x.t.mu.Unlock()
	x.t.walk(func(k key, d int, nh uint32) bool { return fn(uint32(k.hi>>32), d, nh) })
}

// Walk calls fn for every prefix with its next hop, in no order, until fn
// returns false. Updates wait until it returns.
func (x *Table6) Walk(fn func(addr [16]byte, bits int, nh uint32) bool) {
	x.t.mu.Lock()
	defer x.t.mu.Unlock()
	x.t.walk(func(k key, d int, nh uint32) bool {
		var a [16]byte
		binary.BigEndian.PutUint64(a[:8], k.hi)
		binary.BigEndian.PutUint64(a[8:], k.lo)
		return fn(a, d, nh)
	})
}
