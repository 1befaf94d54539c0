package packet

// MaxBurst is the most handles a Burst holds.
const MaxBurst = 64

// Burst is a fixed array of up to MaxBurst packet handles: the vector a stage
// processes in one call.
type Burst struct {
	N int
	H [MaxBurst]Handle
}

// Len is the number of packets in the burst.
func (b *Burst) Len() int { return b.N }

// Room is how many more packets the burst takes.
func (b *Burst) Room() int { return MaxBurst - b.N }

// P returns packet i.
func (b *Burst) P(i int) *Packet { return b.H[i].P() }

// Push appends h, reporting false when the burst is full.
func (b *Burst) Push(h Handle) bool {
	if b.N == MaxBurst {
		return false
	}
	b.H[b.N] = h
	b.N++
	return true
}

// Handles is the live part of the array.
func (b *Burst) Handles() []Handle { return b.H[:b.N] }

// Reset empties the burst without freeing anything.
func (b *Burst) Reset() { b.N = 0 }

// Freer takes back a packet once nothing refers to it any more: the engine's
// plugins.Env, which returns it to its pool at the lcore's next quiescent point.
type Freer interface {
	Free(h Handle)
}

// InsertGap opens n bytes after the first at bytes of packet i. When neither side
// of the packet fits its buffer, it copies the packet into a fresh buffer from the
// same pool with the gap already open, replaces handle i, gives the old buffer to
// f and counts the copy on the pool. The caller may still read the old packet
// until its burst is done; with a nil f the old buffer goes back at once.
func (b *Burst) InsertGap(i, at, n int, f Freer) ([]byte, error) {
	p := b.H[i].P()
	gap, err := p.InsertGap(at, n)
	if err != ErrNoRoom {
		return gap, err
	}
	pool := PoolOf(p)
	if pool == nil {
		return nil, ErrNoRoom
	}
	q, ok := pool.AllocOne()
	if !ok {
		return nil, ErrNoRoom
	}
	qp := q.P()
	need := p.Len() + n
	if at > p.Len() || n < 0 || need > qp.Cap() {
		pool.FreeOne(q)
		return nil, ErrNoRoom
	}
	// Lay the copy out afresh: the pool's headroom when the result fits after
	// it, otherwise as far forward as it must go. InsertGap then has the room.
	head := min(qp.Headroom(), qp.Cap()-need)
	if err := qp.CopyFrom(p, head); err != nil {
		pool.FreeOne(q)
		return nil, err
	}
	if gap, err = qp.InsertGap(at, n); err != nil {
		pool.FreeOne(q)
		return nil, err
	}
	countCopyFor(qp.pool)
	if f != nil {
		f.Free(b.H[i])
	} else {
		FreeOne(b.H[i])
	}
	b.H[i] = q
	return gap, nil
}
