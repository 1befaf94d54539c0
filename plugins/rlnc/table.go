package rlnc

// Fixed-capacity index structures for the session and generation stores:
// nothing here allocates after construction, so the fast path never does.

// mix is MurmurHash3's 64-bit finaliser: a bijection, so a mixed key is as
// exact as the key itself, with every output bit depending on every input bit.
func mix(k uint64) uint64 {
	k ^= k >> 33
	k *= 0xff51afd7ed558ccd
	k ^= k >> 33
	k *= 0xc4ceb9fe1a85ec53
	k ^= k >> 33
	return k
}

// table maps 64-bit keys (already mixed) to int32 values by open addressing
// with linear probing and backward-shift deletion. Equal keys may repeat (the
// session table stores hashes); del removes one (key, value) pair. A key and
// its value share an entry, so a probe that hits costs one cache line: with
// thousands of sessions the table is out of cache, and every packet looks up
// its session.
type table struct {
	e    []entry
	mask int
}

type entry struct {
	key uint64
	val int32 // -1: empty
}

func newTable(n int) table {
	size := 8
	for size < 2*n {
		size <<= 1
	}
	t := table{e: make([]entry, size), mask: size - 1}
	for i := range t.e {
		t.e[i].val = -1
	}
	return t
}

func (t *table) start(k uint64) int { return int(k>>7) & t.mask }
func (t *table) next(i int) int     { return (i + 1) & t.mask }

// get returns the value of the first entry with key k, or -1.
func (t *table) get(k uint64) int32 {
	for i := t.start(k); t.e[i].val >= 0; i = t.next(i) {
		if t.e[i].key == k {
			return t.e[i].val
		}
	}
	return -1
}

// put adds (k, v). The caller keeps the table at most half full.
func (t *table) put(k uint64, v int32) {
	i := t.start(k)
	for t.e[i].val >= 0 {
		i = t.next(i)
	}
	t.e[i] = entry{k, v}
}

// del removes the entry (k, v), if present.
func (t *table) del(k uint64, v int32) {
	i := t.start(k)
	for {
		if t.e[i].val < 0 {
			return
		}
		if t.e[i] == (entry{k, v}) {
			break
		}
		i = t.next(i)
	}
	// Backward shift: move later entries of the cluster into the hole when
	// their home is not between the hole and them.
	for j := t.next(i); t.e[j].val >= 0; j = t.next(j) {
		h := t.start(t.e[j].key)
		if (j > i && (h <= i || h > j)) || (j < i && h <= i && h > j) {
			t.e[i] = t.e[j]
			i = j
		}
	}
	t.e[i].val = -1
}

// links are the prev/next indices of elements that sit on one kind of list.
type links struct{ prev, next []int32 }

func newLinks(n int) links {
	l := links{prev: make([]int32, n), next: make([]int32, n)}
	for i := range l.prev {
		l.prev[i], l.next[i] = -1, -1
	}
	return l
}

// list is a doubly linked list over links: head is the most recently
// pushed, tail the oldest.
type list struct {
	head, tail int32
	n          int
}

func newList() list { return list{head: -1, tail: -1} }

func (q *list) pushFront(l *links, i int32) {
	l.prev[i], l.next[i] = -1, q.head
	if q.head >= 0 {
		l.prev[q.head] = i
	} else {
		q.tail = i
	}
	q.head = i
	q.n++
}

func (q *list) remove(l *links, i int32) {
	p, n := l.prev[i], l.next[i]
	if p >= 0 {
		l.next[p] = n
	} else {
		q.head = n
	}
	if n >= 0 {
		l.prev[n] = p
	} else {
		q.tail = p
	}
	l.prev[i], l.next[i] = -1, -1
	q.n--
}

func (q *list) moveFront(l *links, i int32) {
	if q.head == i {
		return
	}
	q.remove(l, i)
	q.pushFront(l, i)
}

// stack is a free list of indices.
type stack []int32

func newStack(n int) stack {
	s := make(stack, n)
	for i := range s {
		s[i] = int32(n - 1 - i)
	}
	return s
}

func (s *stack) pop() (int32, bool) {
	n := len(*s)
	if n == 0 {
		return -1, false
	}
	v := (*s)[n-1]
	*s = (*s)[:n-1]
	return v, true
}

func (s *stack) push(v int32) { *s = append(*s, v) }
