package lpm

import (
	"fmt"
	"math/bits"
	"sync"
)

// key is an address as 128 bits, most significant first; an IPv4 address is
// its first 32.
type key struct{ hi, lo uint64 }

// bits is the n ≤ 24 bits of k from bit off on. The strides never straddle
// bit 64: the root takes bits 0–23, the groups 8 bits from 24 on.
func (k key) bits(off, n int) uint32 {
	if off < 64 {
		return uint32(k.hi << off >> (64 - n))
	}
	return uint32(k.lo << (off - 64) >> (64 - n))
}

// masked keeps the first d bits of k.
func (k key) masked(d int) key {
	switch {
	case d == 0:
		return key{}
	case d < 64:
		return key{k.hi &^ (1<<(64-d) - 1), 0}
	case d == 64:
		return key{k.hi, 0}
	case d < 128:
		return key{k.hi, k.lo &^ (1<<(128-d) - 1)}
	}
	return k
}

// place names an entry that may point to a group: the group holding it (0
// for tbl24, else group+1) and its index there.
type place uint64

func placeOf(parent uint32, i uint32) place { return place(parent)<<32 | place(i) }

// trie is what Table4 and Table6 share: the entries, the rules they come from,
// and the group pool.
type trie struct {
	tbl24 *[1 << rootBits]uint32
	tbl8  []uint32
	mem   [2]region

	// def is the /0 rule's entry, or 0, for Table6's lookups (read
	// atomically): there, an entry no longer rule covers in a group holds 0,
	// not the default (see defLeaf), and a lookup ending on 0 reads def.
	def uint32
	// emptyIsDefault: such entries hold the default itself (Table4, so that
	// its lookup has no branch for it).
	emptyIsDefault bool

	mu       sync.Mutex // one writer at a time
	maxDepth int
	rules    [129]map[key]uint32 // by depth: masked prefix → next hop
	depths   [3]uint64           // bit d: rules[d] is not empty
	nrules   int

	fresh    uint32           // groups never used: [fresh, len(tbl8)/256); group 0 is the default's
	free     []uint32         // groups reclaimed
	bound    map[place]uint32 // place → the group expanded there
	placeOf  map[uint32]place // group → its place
	detached map[uint32]bool  // groups folded back, still bound
	inUse    int
}

// init makes the trie's regions; the caller frees them with its own cleanup
// (mem), as the trie lives inside a Table.
func (t *trie) init(maxDepth, groups int) error {
	if groups < 1 || groups > MaxGroups {
		return fmt.Errorf("lpm: %d groups: want 1 to %d", groups, MaxGroups)
	}
	t.maxDepth = maxDepth
	t.fresh = 1 // group 0: the default group (see defLeaf)
	t.bound, t.placeOf, t.detached = map[place]uint32{}, map[uint32]place{}, map[uint32]bool{}
	r24, err := newRegion(1 << rootBits)
	if err != nil {
		return err
	}
	r8, err := newRegion((1 + groups) * groupSize)
	if err != nil {
		r24.free()
		return err
	}
	t.mem = [2]region{r24, r8}
	t.tbl24 = (*[1 << rootBits]uint32)(r24.e)
	t.tbl8 = r8.e
	return nil
}

func freeRegions(m [2]region) { m[0].free(); m[1].free() }

func (t *trie) group(g uint32) []uint32 {
	return t.tbl8[g*groupSize : g*groupSize+groupSize : g*groupSize+groupSize]
}

// level's stride: tbl24 at level 0, then 8 bits per level.
func stride(level int) (off, n int) {
	if level == 0 {
		return 0, rootBits
	}
	return rootBits + 8*(level-1), 8
}

func (t *trie) hasDepth(d int) bool { return t.depths[d>>6]&(1<<(d&63)) != 0 }

// cover is the entry of the longest rule shorter than d that holds k, or 0:
// what an entry of the rule k/d falls back to when the rule goes. The /0 rule
// stays out of the entries.
func (t *trie) cover(k key, d int) uint32 {
	for c := d - 1; c >= 1; c-- {
		if !t.hasDepth(c) {
			// Skip to the next shorter depth present.
			w := c >> 6
			m := t.depths[w] & (1<<(c&63) - 1)
			for m == 0 && w > 0 {
				w--
				m = t.depths[w]
			}
			if m == 0 {
				return 0
			}
			c = w<<6 + 63 - bits.LeadingZeros64(m)
			if c == 0 {
				return 0
			}
		}
		if nh, ok := t.rules[c][k.masked(c)]; ok {
			return mkEntry(c, nh)
		}
	}
	return 0
}

// groupsNeeded counts the groups an insert of k/d takes from the pool.
func (t *trie) groupsNeeded(k key, d int) int {
	tbl, parent := t.tbl24[:], uint32(0)
	for level := 0; ; level++ {
		off, n := stride(level)
		if d <= off+n {
			return 0
		}
		i := k.bits(off, n)
		e := load(&tbl[i])
		var g uint32
		if e&entExt != 0 {
			g = e & valMask
		} else if b, ok := t.bound[placeOf(parent, i)]; ok {
			g = b
		} else {
			// This level and every one below it until d's.
			need := 0
			for l := level; ; l++ {
				o, m := stride(l)
				if d <= o+m {
					return need
				}
				need++
			}
		}
		tbl, parent = t.group(g), g+1
	}
}

// defLeaf is the /0 rule's entry, or 0. It is not in tbl24, so that a default
// route does not write 16M entries: an empty tbl24 entry (0) reads group 0,
// the default group, whose 256 entries are all defLeaf, with the same
// conditional read that follows a group entry. Inside the other groups, where
// in an IPv4 table no further read follows, an entry no longer rule covers
// holds defLeaf itself, and changing the default rewrites those (setDefault:
// a pass over 20k groups at a full table). An IPv6 table, whose lookup loops
// anyway, leaves them 0 and reads def after its walk: a pass over its groups
// (256k at a full table, 65M entries) took seconds.
func (t *trie) defLeaf() uint32 {
	if nh, ok := t.rules[0][key{}]; ok {
		return mkEntry(0, nh)
	}
	return 0
}

// setDefault puts the /0 rule's new entry (or 0) wherever the old one was:
// group 0, and every entry of the other groups that held the old default or
// nothing. It costs a pass over the groups ever used (256 entries each).
func (t *trie) setDefault(e uint32) {
	for i := range uint32(groupSize) {
		store(&t.tbl8[i], e)
	}
	store(&t.def, e)
	if !t.emptyIsDefault {
		return
	}
	for i := groupSize; i < int(t.fresh)*groupSize; i++ {
		if old := load(&t.tbl8[i]); old == 0 || old&entValid != 0 && entDepth(old) == 0 {
			store(&t.tbl8[i], e)
		}
	}
}

// empty is what an entry of tbl (tbl24 when root) holds where no rule but
// the default covers it.
func (t *trie) empty(root bool) uint32 {
	if root || !t.emptyIsDefault {
		return 0
	}
	return t.defLeaf()
}

func (t *trie) available() int { return len(t.tbl8)/groupSize - int(t.fresh) + len(t.free) }

// attach expands the entry e at p into a group filled with e.
func (t *trie) attach(p place, e uint32) uint32 {
	g, ok := t.bound[p]
	if ok {
		delete(t.detached, g)
	} else {
		if n := len(t.free); n > 0 {
			g, t.free = t.free[n-1], t.free[:n-1]
		} else {
			g = t.fresh
			t.fresh++
		}
		t.bound[p], t.placeOf[g] = g, p
	}
	if e == 0 {
		e = t.empty(false) // under an empty tbl24 entry: see defLeaf
	}
	grp := t.group(g)
	for i := range grp {
		store(&grp[i], e)
	}
	t.inUse++
	return g
}

// insert sets k/d → nh; the caller checked the pool has the groups.
func (t *trie) insert(k key, d int, nh uint32) (replaced bool) {
	if _, replaced = t.rules[d][k]; !replaced {
		if t.rules[d] == nil {
			t.rules[d] = map[key]uint32{}
		}
		t.depths[d>>6] |= 1 << (d & 63)
		t.nrules++
	}
	t.rules[d][k] = nh
	if d == 0 {
		t.setDefault(mkEntry(0, nh))
		return replaced
	}
	e := mkEntry(d, nh)
	tbl, parent := t.tbl24[:], uint32(0)
	for level := 0; ; level++ {
		off, n := stride(level)
		if d <= off+n {
			start := k.bits(off, n)
			for i := start; i < start+1<<(off+n-d); i++ {
				t.fill(tbl, i, d, e)
			}
			return replaced
		}
		i := k.bits(off, n)
		old := load(&tbl[i])
		var g uint32
		if old&entExt != 0 {
			g = old & valMask
		} else {
			g = t.attach(placeOf(parent, i), old)
			store(&tbl[i], entExt|g) // after the group is filled
		}
		tbl, parent = t.group(g), g+1
	}
}

// fill sets tbl[i], and whatever group it points to, to e where it holds a
// rule no longer than d.
func (t *trie) fill(tbl []uint32, i uint32, d int, e uint32) {
	old := load(&tbl[i])
	if old&entExt != 0 {
		grp := t.group(old & valMask)
		for j := range uint32(groupSize) {
			t.fill(grp, j, d, e)
		}
		return
	}
	if old&entValid == 0 || entDepth(old) <= d {
		store(&tbl[i], e)
	}
}

// unfill gives the entries of the rule of depth d under tbl[i] to repl, or
// where repl is 0 (no rule but the default), to what an empty entry holds
// there (empty).
func (t *trie) unfill(tbl []uint32, root bool, i uint32, d int, repl uint32) {
	old := load(&tbl[i])
	if old&entExt != 0 {
		grp := t.group(old & valMask)
		for j := range uint32(groupSize) {
			t.unfill(grp, false, j, d, repl)
		}
		return
	}
	if old&entValid != 0 && entDepth(old) == d {
		if repl == 0 {
			repl = t.empty(root)
		}
		store(&tbl[i], repl)
	}
}

// remove deletes k/d.
func (t *trie) remove(k key, d int) bool {
	if _, ok := t.rules[d][k]; !ok {
		return false
	}
	delete(t.rules[d], k)
	if len(t.rules[d]) == 0 {
		t.depths[d>>6] &^= 1 << (d & 63)
	}
	t.nrules--
	if d == 0 {
		t.setDefault(0)
		return true
	}
	repl := t.cover(k, d)
	type step struct {
		tbl []uint32
		i   uint32
	}
	var path [16]step
	levels := 0
	tbl := t.tbl24[:]
	for level := 0; ; level++ {
		off, n := stride(level)
		if d <= off+n {
			start := k.bits(off, n)
			for i := start; i < start+1<<(off+n-d); i++ {
				t.unfill(tbl, level == 0, i, d, repl)
			}
			break
		}
		// The rule's entries are deeper than this level, so the entry here
		// points to a group (see fold).
		i := k.bits(off, n)
		path[level] = step{tbl, i}
		levels++
		tbl = t.group(load(&tbl[i]) & valMask)
	}
	// Fold from the deepest group up.
	for level := levels - 1; level >= 0; level-- {
		t.fold(path[level].tbl, level == 0, path[level].i, rootBits+8*level)
	}
	return true
}

// fold puts the group under tbl[i] back into tbl[i] when all its entries are
// one rule no longer than off, the parent's end: then no longer rule lives
// there, and whatever a later delete looks for is above it.
func (t *trie) fold(tbl []uint32, root bool, i uint32, off int) {
	e := load(&tbl[i])
	if e&entExt == 0 {
		return
	}
	g := e & valMask
	grp := t.group(g)
	v := load(&grp[0])
	if v&entExt != 0 || v&entValid != 0 && entDepth(v) > off {
		return
	}
	for j := 1; j < groupSize; j++ {
		if load(&grp[j]) != v {
			return
		}
	}
	if v&entValid != 0 && entDepth(v) == 0 {
		v = t.empty(root) // the default: tbl24 holds it as 0
	}
	store(&tbl[i], v)
	t.detached[g] = true
	t.inUse--
}

// reclaim frees the folded groups for any place; sync must return only once
// no reader can still hold a pointer to one.
func (t *trie) reclaim(sync func()) int {
	if len(t.detached) == 0 {
		return 0
	}
	sync()
	n := 0
	for g := range t.detached {
		delete(t.bound, t.placeOf[g])
		delete(t.placeOf, g)
		t.free = append(t.free, g)
		n++
	}
	clear(t.detached)
	return n
}

func (t *trie) stats() Stats {
	return Stats{Rules: t.nrules, Groups: t.inUse, GroupsBound: len(t.detached), GroupsMax: len(t.tbl8)/groupSize - 1,
		Resident: t.mem[0].resident() + t.mem[1].resident()}
}

// update checks and applies one insert.
func (t *trie) update(k key, d int, nh uint32) (bool, error) {
	if d < 0 || d > t.maxDepth {
		return false, ErrLength
	}
	if nh > MaxNextHop {
		return false, ErrNextHop
	}
	k = k.masked(d)
	if need := t.groupsNeeded(k, d); need > t.available() {
		return false, fmt.Errorf("%w (%d groups in use, %d bound)", ErrFull, t.inUse, len(t.detached))
	}
	return t.insert(k, d, nh), nil
}

func (t *trie) delete(k key, d int) error {
	if d < 0 || d > t.maxDepth {
		return ErrLength
	}
	if !t.remove(k.masked(d), d) {
		return ErrNotFound
	}
	return nil
}

func (t *trie) get(k key, d int) (uint32, bool) {
	if d < 0 || d > t.maxDepth {
		return 0, false
	}
	nh, ok := t.rules[d][k.masked(d)]
	return nh, ok
}

func (t *trie) walk(fn func(k key, d int, nh uint32) bool) {
	for d := range t.rules {
		for k, nh := range t.rules[d] {
			if !fn(k, d, nh) {
				return
			}
		}
	}
}
