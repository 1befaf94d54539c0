package stamp

import (
	"math"
	"math/bits"
	"time"
)

// Record is one measurement: a reflected test packet as the collector took
// it, with the four timestamps in Unix nanoseconds and as they were on the
// wire.
type Record struct {
	SSID         uint16
	SenderTTL    uint8 // the test packet's hop limit (TTL) at the reflector
	HopLimit     uint8 // the reply's hop limit at the collector
	Seq          uint32
	ReflectorSeq uint32
	Flags        uint16
	SenderErr    ErrorEstimate
	ReflectorErr ErrorEstimate
	T1, T2       int64 // Unix ns: sent (sender), received (reflector)
	T3, T4       int64 // sent (reflector), received (collector)
	T1Wire       uint64
	T2Wire       uint64
	T3Wire       uint64
	// From the reflected TLVs, when present (Flags says which).
	DirectMeasurement DirectMeasurement
	CoS               ClassOfService
}

// Record flags.
const (
	RecUnsynchronized    uint16 = 1 << iota // an S bit is 0: one-way delays are only indicative
	RecReordered                            // came after a later sequence number
	RecDuplicate                            // a sequence number seen before
	RecTLVUnrecognized                      // the reflector set U on a TLV
	RecTLVMalformed                         // … M
	RecTLVIntegrity                         // … I: the HMAC TLV failed at the reflector
	RecDirectMeasurement                    // DirectMeasurement holds the counters
	RecCoS                                  // CoS holds the Class of Service result
)

// RTT is the round-trip delay without the reflector's residence time:
// (T4−T1) − (T3−T2).
func (r *Record) RTT() int64 { return (r.T4 - r.T1) - (r.T3 - r.T2) }

// Forward is the one-way delay sender → reflector, T2−T1: meaningful when
// both clocks are synchronised.
func (r *Record) Forward() int64 { return r.T2 - r.T1 }

// Backward is the one-way delay reflector → sender, T4−T3.
func (r *Record) Backward() int64 { return r.T4 - r.T3 }

// Synchronized reports both S bits set.
func (r *Record) Synchronized() bool { return r.Flags&RecUnsynchronized == 0 }

// hist is a log-linear histogram of nanoseconds: 64 linear sub-buckets per
// power of two, so a bucket's midpoint is within 2^-7 (0.8%) of any value in
// it, up to 2^37 ns (137 s; larger values land in the top bucket). Its
// scalars (histHead) and its counts can live apart: a session keeps the
// scalars in its hot record and the counts out of line (collectorState).
// Owned by one lcore.
type hist struct {
	histHead
	c [histBuckets]uint32
}

// histHead is a histogram's count, sum and extremes.
type histHead struct {
	n   uint64
	sum int64
	min int64
	max int64
	neg uint64 // values below zero (unsynchronised clocks), counted apart
}

const (
	histSub     = 6
	histMaxExp  = 37 - histSub
	histBuckets = (histMaxExp + 1) << histSub
)

func histIndex(v uint64) int {
	if v < 1<<histSub {
		return int(v)
	}
	e := bits.Len64(v) - histSub
	if e > histMaxExp {
		return histBuckets - 1
	}
	return e<<histSub | int(v>>uint(e-1)&(1<<histSub-1))
}

// histBounds is the value range [lo, hi) of bucket i.
func histBounds(i int) (lo, hi uint64) {
	e, sub := i>>histSub, uint64(i&(1<<histSub-1))
	if e == 0 {
		return sub, sub + 1
	}
	lo = (1<<histSub | sub) << uint(e-1)
	return lo, lo + 1<<uint(e-1)
}

// note takes v into the scalars.
func (h *histHead) note(v int64) {
	if h.n == 0 || v < h.min {
		h.min = v
	}
	if h.n == 0 || v > h.max {
		h.max = v
	}
	h.n++
	h.sum += v
	if v < 0 {
		h.neg++
	}
}

// bucketOf is the bucket v counts in: values below zero count in the first.
func bucketOf(v int64) int { return histIndex(uint64(max(v, 0))) }

func (h *hist) record(v int64) {
	h.note(v)
	h.c[bucketOf(v)]++
}

func (h *hist) quantile(q float64) int64 { return h.histHead.quantile(&h.c, q) }

// quantile is the midpoint of the bucket of c holding the q-th value,
// clamped to the observed range.
func (h *histHead) quantile(c *[histBuckets]uint32, q float64) int64 {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	if rank == 0 {
		rank = 1
	}
	var seen uint64 = h.neg
	if seen >= rank {
		return h.min
	}
	for i, n := range c {
		if i == 0 {
			n -= uint32(h.neg) // the values below zero, counted first
		}
		seen += uint64(n)
		if seen >= rank {
			lo, hi := histBounds(i)
			v := int64(lo + (hi-lo-1)/2)
			return min(max(v, h.min), h.max)
		}
	}
	return h.max
}

// DelayStats summarise one delay of a session, in nanoseconds.
type DelayStats struct {
	N              uint64
	Min, Max, Mean int64
	P50, P90, P99  int64
	Negative       uint64 // one-way delays below zero: the clocks disagree
	Unsynchronized bool   // some record had an S bit of 0
}

func (h *hist) stats() DelayStats { return h.histHead.stats(&h.c) }

func (h *histHead) stats(c *[histBuckets]uint32) DelayStats {
	if h.n == 0 {
		return DelayStats{}
	}
	return DelayStats{N: h.n, Min: h.min, Max: h.max, Mean: h.sum / int64(h.n), P50: h.quantile(c, 0.5),
		P90: h.quantile(c, 0.9), P99: h.quantile(c, 0.99), Negative: h.neg}
}

// jitter tracks one delay's variation: IPDV as RFC 5481 §1.1 and RFC 3393
// define it, the delay of sequence number s minus that of s−1, whatever
// order the two arrived in; and the interarrival jitter of RFC 3550
// §6.4.1, J += (|D| − J)/16, with D the difference of the delays of
// consecutive arrivals.
type jitter struct {
	n      uint64
	sumAbs int64
	maxAbs int64
	last   int64
	j16    int64 // the smoothed jitter × 16, so the update is integer
}

func abs64(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

func (j *jitter) ipdv(v int64) {
	a := abs64(v)
	j.n++
	j.sumAbs += a
	if a > j.maxAbs {
		j.maxAbs = a
	}
	j.last = v
}

// smooth takes D of two consecutive arrivals: 16J += |D| − J.
func (j *jitter) smooth(d int64) { j.j16 += abs64(d) - (j.j16+8)>>4 }

// JitterStats summarise one direction's delay variation, in nanoseconds.
type JitterStats struct {
	N        uint64  // IPDV samples: pairs of consecutive sequence numbers, both received
	MeanAbs  int64   // mean |IPDV|
	MaxAbs   int64   // largest |IPDV|
	Last     int64   // the last IPDV computed, signed
	Smoothed float64 // RFC 3550 §6.4.1, over consecutive arrivals
}

func (j *jitter) stats() JitterStats {
	s := JitterStats{N: j.n, MaxAbs: j.maxAbs, Last: j.last, Smoothed: float64(j.j16) / 16}
	if j.n > 0 {
		s.MeanAbs = j.sumAbs / int64(j.n)
	}
	return s
}

// collectorState is a session's measurement state, owned by the collector
// lcore that takes its replies. It is the session's hot record: what a reply
// reads and writes every time (counters, sequence state, the loss window,
// the histograms' scalars, IPDV and extremes; about 740 bytes, allocated
// with the session, so that a collector's sessions are dense). What is big
// (the histograms' counts, the IPDV window: 28 KiB) is out of line, in cold,
// and a reply does not touch it: its delays wait in the pending batch, and
// enter cold histPend replies at a time, when the batch is full or before
// anything reads the counts (flush). A reply then costs the same few hot
// lines whatever the number of sessions, and cold's lines and pages once a
// batch.
type collectorState struct {
	// Every reply.
	gen      uint64
	received uint64 // distinct sequence numbers
	have     bool
	haveR    bool
	prevOK   bool
	npend    uint8 // replies in the pending batch
	pwin     uint8 // bit i: pending reply i goes into the IPDV window
	firstSeq uint32
	maxSeq   uint32
	firstR   uint32
	firstRS  uint32 // the sender sequence that came with firstR
	maxR     uint32
	sAtMaxR  uint32
	first    int64
	lastT4   int64
	prev     [3]int64 // forward, backward, rtt of the previous arrival
	h        [3]histHead
	jit      [3]jitter
	// iv are each direction's extremes since the last IPFIX interval: its
	// exact minimum and maximum, which the histograms' difference cannot
	// give (ipfix.go).
	iv [3]extremes
	// The pending batch: sequence numbers and forward and backward delays
	// (the round trip is their sum) of the last replies, not yet in cold.
	pseq [histPend]uint32
	pdel [histPend][2]int64
	// Some replies.
	window   [16]uint64 // bit s mod 1024: sequence s was received, for s in maxSeq−1023..maxSeq
	dups     uint64
	reorder  uint64
	unsync   uint64
	fifoLost uint64
	mac      *mac
	cold     *collectorCold
}

// collectorCold is the out-of-line part of a session's statistics.
type collectorCold struct {
	c [3][histBuckets]uint32 // the histograms' counts, by direction
	// The delays (forward, backward) of the last ipdvSpan sequence numbers,
	// at s mod ipdvSpan: the IPDV of a pair is computed when its second
	// packet arrives, in whichever order they come. Valid for a received s
	// within ipdvSpan of maxSeq that is not in the pending batch.
	delays [ipdvSpan][2]int64
}

// newCollectorCold allocates a session's cold part and writes it whole, on
// the control plane: fresh memory is mapped at its first write, and that
// page fault (some µs) would otherwise come on the lcore, with a reply.
func newCollectorCold() *collectorCold {
	c := new(collectorCold)
	// new leaves fresh memory unwritten, and the compiler drops a zeroing
	// store after it: write a word a page.
	for i := 0; i < len(c.delays); i += 4096 / len(c.delays[0]) / 8 {
		c.delays[i][0] = 0
	}
	for k := range c.c {
		for i := 0; i < histBuckets; i += 4096 / 4 {
			c.c[k][i] = 0
		}
	}
	return c
}

// histPend is how many replies wait in the hot record before their delays
// go into the histograms' counts and the IPDV window (all but the last).
const histPend = 8

// noCounts are the counts of a state that never had a reply.
var noCounts [histBuckets]uint32

// counts are direction k's histogram counts, the pending batch included
// once flushed.
func (c *collectorState) counts(k int) *[histBuckets]uint32 {
	if c.cold == nil {
		return &noCounts
	}
	return &c.cold.c[k]
}

// flush takes the pending batch into the histograms' counts and the IPDV
// window, in arrival order. It runs on the owner lcore: from add, and
// before the counts are read (metrics, the IPFIX export).
func (c *collectorState) flush() { c.flushTo(0) }

// flushTo takes the pending batch but its last keep replies (0 or 1) into
// the counts and the window. A full batch keeps its last: the next reply in
// sequence finds its neighbour in the hot record, not in cold.
func (c *collectorState) flushTo(keep uint8) {
	if c.npend <= keep {
		return
	}
	cold := c.cold
	n := c.npend - keep
	for i := range int(n) {
		f, b := c.pdel[i][0], c.pdel[i][1]
		cold.c[dirFwd][bucketOf(f)]++
		cold.c[dirBwd][bucketOf(b)]++
		cold.c[dirRTT][bucketOf(f+b)]++
		if c.pwin&(1<<i) != 0 {
			cold.delays[c.pseq[i]%ipdvSpan] = c.pdel[i]
		}
	}
	if keep > 0 {
		c.pseq[0], c.pdel[0] = c.pseq[n], c.pdel[n]
	}
	c.npend, c.pwin = keep, c.pwin>>n
}

// delays are the forward, backward and round-trip delays of kept sequence
// s: from the pending batch, or else the IPDV window.
// The pending batch is looked at first: the cold part is not even
// addressed (its nil check reads its first line, a miss with thousands of
// sessions) unless the delays are there.
func (c *collectorState) delays(s uint32) [3]int64 {
	for i := int(c.npend) - 1; i >= 0; i-- {
		if c.pseq[i] == s && c.pwin&(1<<i) != 0 {
			d := &c.pdel[i]
			return [3]int64{d[0], d[1], d[0] + d[1]}
		}
	}
	d := &c.cold.delays[s%ipdvSpan]
	return [3]int64{d[0], d[1], d[0] + d[1]}
}

// extremes are the least and the greatest of some values.
type extremes struct {
	n        uint64
	min, max int64
}

func (e *extremes) record(v int64) {
	if e.n == 0 || v < e.min {
		e.min = v
	}
	if e.n == 0 || v > e.max {
		e.max = v
	}
	e.n++
}

// Directions for h, jit, iv, prev and cold.c.
const (
	dirFwd = iota
	dirBwd
	dirRTT
)

func (c *collectorState) reset() {
	mac, cold := c.mac, c.cold
	*c = collectorState{mac: mac, cold: cold}
	if cold != nil {
		*cold = collectorCold{}
	}
}

// windowLen is how far back duplicates are told from reordered packets.
const windowLen = 16 * 64

// ipdvSpan is how far apart in sequence a packet and its neighbour can
// arrive and still make an IPDV pair (256 sequence numbers).
const ipdvSpan = 256

// kept reports whether sequence s arrived and its delays are still kept.
func (c *collectorState) kept(s uint32) bool {
	return c.maxSeq-s < ipdvSpan && c.window[s%windowLen/64]&(1<<(s%64)) != 0
}

// seen marks seq and reports whether it was already marked; it also keeps
// maxSeq and classifies reordering. The window is a ring of bits indexed by
// the sequence number: moving it forward clears only the bits it passes.
func (c *collectorState) seen(seq uint32) (dup, reordered bool) {
	bit := func(s uint32) (int, uint64) { return int(s % windowLen / 64), 1 << (s % 64) }
	if !c.have {
		c.have, c.firstSeq, c.maxSeq = true, seq, seq
		w, m := bit(seq)
		c.window[w] |= m
		return false, false
	}
	d := int64(seq) - int64(c.maxSeq)
	switch {
	case d > 0:
		if d >= windowLen {
			c.window = [16]uint64{}
		} else {
			for s := c.maxSeq + 1; s != seq; s++ {
				w, m := bit(s)
				c.window[w] &^= m
			}
		}
		c.maxSeq = seq
		w, m := bit(seq)
		c.window[w] |= m
		return false, false
	case -d >= windowLen:
		return false, true // too far back to tell: count it as reordered
	default:
		w, m := bit(seq)
		if c.window[w]&m != 0 {
			return true, false
		}
		c.window[w] |= m
		return false, d < 0
	}
}

// add takes one record into the session's metrics. It reports the record's
// duplicate and reordering flags.
func (c *collectorState) add(r *Record, stateful bool) uint16 {
	dup, re := c.seen(r.Seq)
	if dup {
		c.dups++
		return RecDuplicate
	}
	var flags uint16
	if re {
		c.reorder++
		flags |= RecReordered
	}
	c.received++
	if c.first == 0 {
		c.first = r.T4
	}
	c.lastT4 = r.T4
	if r.Flags&RecUnsynchronized != 0 {
		c.unsync++
	}
	if c.cold == nil {
		c.cold = new(collectorCold) // a state made bare (tests); sessions come with theirs
	}
	// The round trip is the sum of the one-way delays, (T2−T1) + (T4−T3),
	// exactly, wrapping included.
	fwd, bwd := r.Forward(), r.Backward()
	d := [3]int64{fwd, bwd, fwd + bwd}
	for k := range c.h {
		c.h[k].note(d[k])
		c.iv[k].record(d[k])
	}
	if c.prevOK {
		for k := range c.jit {
			c.jit[k].smooth(d[k] - c.prev[k])
		}
	}
	c.prevOK, c.prev = true, d
	i := c.npend
	c.pseq[i], c.pdel[i] = r.Seq, [2]int64{fwd, bwd}
	c.npend++
	// IPDV by sequence number (RFC 5481): the pairs (s−1, s) and (s, s+1),
	// whichever of them waited for this packet.
	if s := r.Seq; c.maxSeq-s < ipdvSpan {
		c.pwin |= 1 << i
		if c.kept(s - 1) {
			p := c.delays(s - 1)
			for k := range c.jit {
				c.jit[k].ipdv(d[k] - p[k])
			}
		}
		if c.kept(s + 1) {
			n := c.delays(s + 1)
			for k := range c.jit {
				c.jit[k].ipdv(n[k] - d[k])
			}
		}
	}
	if c.npend == histPend {
		c.flushTo(1)
	}
	if stateful {
		switch {
		case !c.haveR:
			c.haveR, c.firstR, c.firstRS, c.maxR, c.sAtMaxR = true, r.ReflectorSeq, r.Seq, r.ReflectorSeq, r.Seq
		case r.ReflectorSeq < c.firstR:
			// The reflector restarted its session: start the split over.
			c.firstR, c.firstRS, c.maxR, c.sAtMaxR = r.ReflectorSeq, r.Seq, r.ReflectorSeq, r.Seq
		case r.ReflectorSeq > c.maxR:
			c.maxR, c.sAtMaxR = r.ReflectorSeq, r.Seq
		}
	}
	return flags
}

// Metrics is a session's measurement summary.
type Metrics struct {
	SSID           uint16
	Running        bool
	Sent           uint64 // test packets sent in this run
	Answered       uint64 // test packets up to the highest sequence number answered: Received + LostRoundTrip
	Received       uint64 // distinct replies
	Duplicates     uint64
	Reordered      uint64
	Unsynchronized uint64 // records with an S bit of 0
	RecordsLost    uint64 // records the FIFO had no room for
	// Loss. RoundTrip counts sequence numbers up to the highest one answered
	// that got no answer. With a stateful reflector the loss splits by
	// direction (Split): the reflector's own sequence shows what it got.
	LostRoundTrip int64
	LostForward   int64
	LostBackward  int64
	Split         bool
	InFlight      int64 // sent after the highest sequence answered
	RTT           DelayStats
	Forward       DelayStats
	Backward      DelayStats
	JitterForward JitterStats
	JitterBack    JitterStats
	JitterRTT     JitterStats
	Elapsed       time.Duration // first to last reply
}

// metrics summarises the state; sent is the sender's count for this run.
func (c *collectorState) metrics(sent uint64, stateful bool) Metrics {
	c.flush()
	m := Metrics{Sent: sent, Received: c.received, Duplicates: c.dups, Reordered: c.reorder, Unsynchronized: c.unsync,
		JitterForward: c.jit[dirFwd].stats(), JitterBack: c.jit[dirBwd].stats(), JitterRTT: c.jit[dirRTT].stats(),
		RecordsLost: c.fifoLost}
	m.RTT = c.h[dirRTT].stats(c.counts(dirRTT))
	m.Forward = c.h[dirFwd].stats(c.counts(dirFwd))
	m.Backward = c.h[dirBwd].stats(c.counts(dirBwd))
	if c.unsync > 0 {
		m.Forward.Unsynchronized, m.Backward.Unsynchronized = true, true
	}
	if c.have {
		answered := uint64(c.maxSeq) + 1
		m.Answered = answered
		m.LostRoundTrip = int64(answered) - int64(c.received)
		if sent > answered {
			m.InFlight = int64(sent - answered)
		}
	}
	if stateful && c.haveR {
		m.Split = true
		if c.firstR <= c.firstRS {
			// The reflector's sequence started with this run (it cannot
			// have got more packets than were sent): of the sender's
			// 0..sAtMaxR it got maxR+1, and the collector got received.
			m.LostForward = int64(c.sAtMaxR) - int64(c.maxR)
			m.LostBackward = int64(c.maxR) + 1 - int64(c.received)
		} else {
			// It counts from an earlier run: split from the first reply on;
			// losses before it stay in the round trip only.
			m.LostForward = int64(c.sAtMaxR-c.firstRS) - int64(c.maxR-c.firstR)
			m.LostBackward = int64(c.maxR-c.firstR+1) - int64(c.received)
		}
		m.LostForward = max(m.LostForward, 0)
		m.LostBackward = max(m.LostBackward, 0)
	}
	if c.lastT4 > c.first {
		m.Elapsed = time.Duration(c.lastT4 - c.first)
	}
	return m
}
