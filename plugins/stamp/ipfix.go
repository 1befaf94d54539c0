package stamp

import (
	"sync"
	"time"

	"github.com/linerate/linerate/appliance/ipfix"
	"github.com/linerate/linerate/appliance/ring"
	"github.com/linerate/linerate/plugins"
)

// IPFIX export (RFC 7011) of the sender sessions' results: when the config
// has an [ipfix] table, each collector stage sends, every ipfix_interval,
// one record per session it measures with what that interval saw: test
// packets sent, replies received, loss (round trip, and per direction with
// a stateful reflector), and per direction the delays' minimum, mean,
// quantiles and maximum and the mean |IPDV|. The interval's quantiles come
// from the difference of the session's histograms at its two ends, so they
// are within the histograms' 0.8%; its minimum and maximum are the values
// measured, and the quantiles are clamped to them. A value the interval has
// none of is all ones (-1 for the signed ones). The first interval of a
// run starts when the run did.
//
// The collector's lcore computes the records in its Tick, once an interval,
// and offers them to a ring; a control goroutine sends them.

// SessionTemplateID is the STAMP interval template's ID.
const SessionTemplateID = 257

func pen(id uint16, n uint16, name, typ string) ipfix.Field {
	return ipfix.Field{ID: id, Enterprise: ipfix.DocumentationPEN, Len: n, Name: name, Type: typ}
}

// delayFields are the fields of one direction's delays, from base.
func delayFields(base uint16, dir string) []ipfix.Field {
	return []ipfix.Field{
		pen(base, 8, "stamp"+dir+"DelayMinNanoseconds", "signed64"),
		pen(base+1, 8, "stamp"+dir+"DelayMeanNanoseconds", "signed64"),
		pen(base+2, 8, "stamp"+dir+"DelayP50Nanoseconds", "signed64"),
		pen(base+3, 8, "stamp"+dir+"DelayP90Nanoseconds", "signed64"),
		pen(base+4, 8, "stamp"+dir+"DelayP99Nanoseconds", "signed64"),
		pen(base+5, 8, "stamp"+dir+"DelayMaxNanoseconds", "signed64"),
		pen(base+6, 8, "stamp"+dir+"IpdvMeanAbsNanoseconds", "signed64"),
	}
}

// SessionTemplate is the template of the interval records.
var SessionTemplate = &ipfix.Template{ID: SessionTemplateID, Name: "stampInterval", Fields: append(append(append(
	[]ipfix.Field{
		ipfix.FlowStartNanoseconds, // the interval's start
		ipfix.FlowEndNanoseconds,   // and end
		ipfix.SourceIPv6Address,    // the session's source (IPv4 as ::ffff:a.b.c.d)
		ipfix.DestinationIPv6Address,
		pen(20, 2, "stampSessionId", "unsigned16"),
		pen(21, 8, "stampSent", "unsigned64"),
		pen(22, 8, "stampReceived", "unsigned64"),
		pen(23, 8, "stampLostRoundTrip", "unsigned64"),
		pen(24, 8, "stampLostForward", "unsigned64"), // all ones unless the reflector is stateful
		pen(25, 8, "stampLostBackward", "unsigned64"),
	},
	delayFields(30, "RoundTrip")...), delayFields(40, "Forward")...), delayFields(50, "Backward")...)}

const sessionRecordLen = 8 + 8 + 16 + 16 + 2 + 5*8 + 3*7*8

// ipfixRecord is one encoded interval record, as the ring carries it.
type ipfixRecord [sessionRecordLen]byte

// defaultIPFIXInterval is a collector's ipfix_interval when the file has an
// [ipfix] table and the stage sets none.
const defaultIPFIXInterval = 10 * time.Second

// ipfixState is a collector instance's side of the export.
type ipfixState struct {
	every int64 // ns
	next  int64 // monotonic ns of the next interval's end
	ring  *ring.Export[ipfixRecord]
	out   *ipfixRecord
	diff  [3]hist // scratch: one interval's delays
	sh    *ipfixSender
}

// ipfixPrev is a session's state at the end of the last interval, owned by
// its collector's lcore.
type ipfixPrev struct {
	gen                      uint64
	start                    int64 // Unix ns
	sent, received           uint64
	lostRT, lostFwd, lostBwd int64
	hist                     [3]hist
	jitN                     [3]uint64
	jitSum                   [3]int64
}

// ipfixSender drains the rings of a collector stage's instances into the
// exporter.
type ipfixSender struct {
	x     *ipfix.Exporter
	mu    sync.Mutex
	rings []*ring.Export[ipfixRecord]
	refs  int
	quit  chan struct{}
	done  chan struct{}
}

// setupIPFIX is a collector instance's export, or nil when the file has no
// [ipfix] table.
func setupIPFIX(s *plugins.Setup, every time.Duration) (*ipfixState, error) {
	x, err := ipfix.Shared(s.Section(ipfix.SectionName), s.Global, s.Log)
	if err != nil || x == nil {
		return nil, err
	}
	if err := x.Register(SessionTemplate); err != nil {
		return nil, err
	}
	if every == 0 {
		every = defaultIPFIXInterval
	}
	sh := s.Shared("stamp.collector/ipfix/"+s.Name, func() any { return &ipfixSender{x: x} }).(*ipfixSender)
	st := &ipfixState{every: int64(every), ring: ring.NewExport[ipfixRecord](256, 1), out: new(ipfixRecord), sh: sh}
	sh.mu.Lock()
	sh.rings = append(sh.rings, st.ring)
	sh.mu.Unlock()
	return st, nil
}

func (sh *ipfixSender) start() {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.refs++
	if sh.refs > 1 {
		return
	}
	sh.x.Start()
	sh.quit, sh.done = make(chan struct{}), make(chan struct{})
	go sh.run(sh.quit, sh.done)
}

func (sh *ipfixSender) stop() {
	sh.mu.Lock()
	sh.refs--
	last := sh.refs == 0
	quit, done := sh.quit, sh.done
	sh.mu.Unlock()
	if last {
		close(quit)
		<-done
		sh.x.Stop()
	}
}

func (sh *ipfixSender) run(quit, done chan struct{}) {
	defer close(done)
	buf := make([]ipfixRecord, 64)
	drain := func() {
		for _, r := range sh.rings {
			for n := r.Drain(buf); n > 0; n = r.Drain(buf) {
				for i := range buf[:n] {
					sh.x.Add(SessionTemplateID, buf[i][:])
				}
			}
		}
	}
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			drain()
		case <-quit:
			drain()
			return
		}
	}
}

// ipfixTick exports an interval's records once one has passed: on the
// collector's lcore, for the sessions it measures.
func (c *collector) ipfixTick(ctx *plugins.Context) {
	x := c.ipfix
	if x.next == 0 {
		x.next = ctx.Now + x.every
		return
	}
	if ctx.Now < x.next {
		return
	}
	x.next += x.every
	if x.next <= ctx.Now {
		x.next = ctx.Now + x.every
	}
	c.ipfixAll(ctx)
}

// ipfixAll exports every session's interval up to now: from Tick, and from
// Stop for the last, shorter one.
func (c *collector) ipfixAll(ctx *plugins.Context) {
	uoff := ctx.Clock.UnixOffset()
	now := ctx.Now + uoff
	tab := c.reg.tx.Load()
	if tab == nil {
		return
	}
	// The table's map, not txSessions: sorting would allocate on the lcore.
	for _, s := range tab.m {
		if s.col.Load() == c {
			c.ipfixSession(s, now, uoff)
		}
	}
}

const unset64 = ^uint64(0)

func (c *collector) ipfixSession(s *txSession, now, uoff int64) {
	x := c.ipfix
	p := s.ipfixPrev
	if p == nil {
		// Once a session: the first interval it is measured in.
		p = &ipfixPrev{gen: ^uint64(0)}
		s.ipfixPrev = p
	}
	m := metricsOf(s)
	if p.gen != s.rx.gen {
		// A new run: counts restart, and its first interval, which counts
		// from the run's start, starts there.
		*p = ipfixPrev{gen: s.rx.gen, start: ipfixRunStart(s, now, uoff)}
	}
	w := x.out
	r := ipfix.NewRecord(w[:])
	r.Nanos(p.start).Nanos(now)
	if s.ipv4 {
		r.Bytes(v4prefix[:]).Bytes(s.src4[:]).Bytes(v4prefix[:]).Bytes(s.replySrc4[:])
	} else {
		r.Bytes(s.src16[:]).Bytes(s.replySrc[:])
	}
	r.U16(s.id).U64(m.Sent - min(p.sent, m.Sent)).U64(m.Received - min(p.received, m.Received))
	r.U64(uint64(max(m.LostRoundTrip-p.lostRT, 0)))
	if m.Split {
		r.U64(uint64(max(m.LostForward-p.lostFwd, 0))).U64(uint64(max(m.LostBackward-p.lostBwd, 0)))
	} else {
		r.U64(unset64).U64(unset64)
	}
	s.rx.flush() // metricsOf did; the counts are whole
	dirs := [3]int{dirRTT, dirFwd, dirBwd}
	for i, k := range dirs {
		h, hc := &s.rx.h[k], s.rx.counts(k)
		d := &x.diff[i]
		h.since(hc, &p.hist[i], d)
		j := &s.rx.jit[k]
		ipdv := int64(-1)
		if n := j.n - p.jitN[i]; n > 0 {
			ipdv = (j.sumAbs - p.jitSum[i]) / int64(n)
		}
		if e := &s.rx.iv[k]; e.n > 0 {
			d.min, d.max = e.min, e.max // the values themselves, not their buckets' bounds
			e.n = 0
		}
		if d.n == 0 {
			r.I64(-1).I64(-1).I64(-1).I64(-1).I64(-1).I64(-1).I64(ipdv)
		} else {
			r.I64(d.min).I64(d.sum / int64(d.n)).I64(d.quantile(0.5)).I64(d.quantile(0.9)).I64(d.quantile(0.99)).I64(d.max).I64(ipdv)
		}
		p.hist[i].histHead, p.hist[i].c = *h, *hc
		p.jitN[i], p.jitSum[i] = j.n, j.sumAbs
	}
	x.ring.Offer(w)
	p.start, p.sent, p.received = now, m.Sent, m.Received
	p.lostRT, p.lostFwd, p.lostBwd = m.LostRoundTrip, m.LostForward, m.LostBackward
}

// ipfixRunStart is the start of the run of s the collector measures, in Unix ns
// (uoff converts the sender's monotonic time): the sender publishes it
// before the run's generation. When the sender has moved on to another run,
// the first reply's arrival stands for it.
func ipfixRunStart(s *txSession, now, uoff int64) int64 {
	if s.sentGen.Load() == s.rx.gen {
		if t := s.runStart.Load(); t != 0 {
			return min(t+uoff, now)
		}
	}
	if s.rx.first != 0 {
		return min(s.rx.first, now)
	}
	return now
}

// v4prefix makes an IPv4 address an IPv4-mapped IPv6 one (RFC 4291).
var v4prefix = [12]byte{10: 0xFF, 11: 0xFF}

// since sets out to the values h (counts c) recorded after prev: bucket by
// bucket, with the minimum and maximum of its lowest and highest bucket,
// within h's own.
func (h *histHead) since(c *[histBuckets]uint32, prev, out *hist) {
	*out = hist{histHead: histHead{n: h.n - prev.n, sum: h.sum - prev.sum, neg: h.neg - prev.neg}}
	lo, hi := -1, -1
	for i := range c {
		out.c[i] = c[i] - prev.c[i]
		if out.c[i] != 0 {
			if lo < 0 {
				lo = i
			}
			hi = i
		}
	}
	if lo < 0 {
		out.min, out.max = h.min, h.max
		return
	}
	l, _ := histBounds(lo)
	_, u := histBounds(hi)
	out.min, out.max = max(int64(l), h.min), min(int64(u-1), h.max)
	if out.neg > 0 {
		out.min = h.min
	}
}

// since is histHead.since for a histogram that holds its counts.
func (h *hist) since(prev, out *hist) { h.histHead.since(&h.c, prev, out) }
