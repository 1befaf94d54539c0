package stamp

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/appliance/stats"
	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/plugins"
)

func init() {
	plugins.Register(plugins.Kind{Name: "stamp.sender",
		Summary: "STAMP Session-Sender: test packets from per-session templates, IPv6 with an SRH or IPv4, NTP or PTP, authenticated or not",
		New:     newSender})
}

type senderConfig struct {
	Src           config.Addr           `toml:"src"`
	SrcMAC        config.MAC            `toml:"src_mac"`
	DstMAC        config.MAC            `toml:"dst_mac"`
	VLAN          int                   `toml:"vlan"`
	Port          string                `toml:"port"`
	Pool          string                `toml:"pool"`
	SrcPort       int                   `toml:"src_port"`
	ReflectorPort int                   `toml:"reflector_port"`
	Interval      config.Duration       `toml:"interval"`
	HopLimit      int                   `toml:"hop_limit"`
	Timestamp     string                `toml:"timestamp"`
	Synchronized  *bool                 `toml:"synchronized"`
	ClockError    config.Duration       `toml:"clock_error"`
	KeyDir        string                `toml:"key_dir"`
	Records       int                   `toml:"records"`
	Sessions      []senderSessionConfig `toml:"sessions"`
}

// sender is the stamp.sender stage: a Producer that sends the test packets
// of the sessions this lcore owns, on their schedules. What it makes goes
// down the chain (to a link, a forward), or straight to a port with port set.
type sender struct {
	name    string
	reg     *Registry
	pool    packet.Pool
	emit    bool
	port    uint16
	lcore   int
	ee      *errEstSource
	table   *txTable
	epoch   uint64
	mine    []*txSession
	due     dueHeap // the running sessions of mine, by next due time
	again   []dueEntry
	batch   [packet.MaxBurst]dueEntry // the due sessions a poll takes together
	sink    uint64                    // what warmTx read, kept so that its reads stay
	nextDue int64
	finite  bool
	done    atomic.Bool

	cSent, cNoBuf, cLate *stats.Counter
}

// txConfigResult is what the first instance of a sender stage made of its
// config sessions, for the others.
type txConfigResult struct {
	err    error
	finite bool
}

func newSender(s *plugins.Setup) (plugins.Stage, error) {
	c := senderConfig{Pool: "default", SrcPort: DefaultPort, ReflectorPort: DefaultPort, Interval: config.Duration(time.Second),
		HopLimit: 64}
	if err := s.Config.Decode(&c); err != nil {
		return nil, err
	}
	where := s.Config.Where()
	if c.VLAN < 0 || c.VLAN > 4094 {
		return nil, fmt.Errorf("stamp.sender: vlan %d is outside 0..4094", c.VLAN)
	}
	if c.SrcPort < 1 || c.SrcPort > 65535 || c.ReflectorPort < 1 || c.ReflectorPort > 65535 {
		return nil, fmt.Errorf("stamp.sender: UDP ports are 1..65535")
	}
	if c.HopLimit < 1 || c.HopLimit > 255 {
		return nil, fmt.Errorf("stamp.sender: hop_limit %d is outside 1..255", c.HopLimit)
	}
	if c.Interval <= 0 {
		return nil, fmt.Errorf("stamp.sender: interval must be positive")
	}
	format, err := parseFormat(c.Timestamp)
	if err != nil {
		return nil, fmt.Errorf("stamp.sender: %w", err)
	}
	if c.Records < 0 || c.Records > maxRecords {
		return nil, fmt.Errorf("stamp.sender: records %d is outside 1..%d", c.Records, maxRecords)
	}
	pool, err := s.Pool(c.Pool, 0, 0)
	if err != nil {
		return nil, fmt.Errorf("stamp.sender: pool %q: %w", c.Pool, err)
	}
	st := &sender{name: s.Name, reg: registryOf(s), pool: pool, lcore: s.Instance,
		ee:     newErrEstSource(s.Clock, clockConfig{Synchronized: c.Synchronized, ClockError: c.ClockError}),
		mine:   make([]*txSession, 0, 64),
		cSent:  s.Counters.New("sent", "test packets sent"),
		cNoBuf: s.Counters.New("no_buffer", "test packets not sent: the pool was empty"),
		cLate:  s.Counters.New("late", "schedule slips: the lcore was late by more than 100 intervals and skipped ahead")}
	d := senderDefaults{stage: s.Name, src: c.Src.Addr, srcPort: uint16(c.SrcPort), reflectorPort: uint16(c.ReflectorPort),
		interval: time.Duration(c.Interval), hopLimit: uint8(c.HopLimit), srcMAC: c.SrcMAC, dstMAC: c.DstMAC,
		vlan: uint16(c.VLAN), ptp: format == formatPTP, records: c.Records, keyDir: c.KeyDir}
	if c.Port != "" {
		pi, ok := s.Ports.Port(c.Port)
		if !ok {
			return nil, fmt.Errorf("stamp.sender: no port %q", c.Port)
		}
		st.emit, st.port = true, pi.ID
		if d.srcMAC == ([6]byte{}) {
			d.srcMAC = pi.MAC
		}
		if !d.src.IsValid() {
			for _, a := range pi.Addrs {
				d.src = a.Addr()
				break
			}
		}
	}
	st.reg.addSender(s.Name, d)
	// The stage's instances on several lcores share one set of config
	// sessions: the first instance makes them.
	res := s.Shared("stamp.sender/config", func() any {
		r := &txConfigResult{finite: len(c.Sessions) > 0}
		// Built first and added in one table swap (putTxs).
		tss := make([]*txSession, 0, len(c.Sessions))
		for i := range c.Sessions {
			sc, err := c.Sessions[i].toSession()
			if err == nil {
				if !sc.PTP && c.Sessions[i].Timestamp == "" {
					sc.PTP = d.ptp
				}
				var ts *txSession
				if ts, err = buildTx(sc, &d); err == nil {
					if sc.Start {
						_ = ts.start()
					}
					tss = append(tss, ts)
				}
			}
			if err != nil {
				r.err = fmt.Errorf("%s: sessions[%d]: %w", where, i, err)
				return r
			}
			if sc.Count == 0 && sc.Duration == 0 {
				r.finite = false
			}
		}
		if i, err := st.reg.putTxs(tss); err != nil {
			r.err = fmt.Errorf("%s: sessions[%d]: %w", where, i, err)
		}
		return r
	}).(*txConfigResult)
	if res.err != nil {
		return nil, res.err
	}
	st.finite = res.finite
	return st, nil
}

// Process lets every packet pass: the sender only makes packets.
func (st *sender) Process(ctx *plugins.Context, b *packet.Burst) {}

// rebuild lists the sessions of this stage that this lcore owns.
func (st *sender) rebuild(ctx *plugins.Context, t *txTable) {
	st.table = t
	st.mine = st.mine[:0]
	for _, s := range t.m {
		if s.stage == st.name && ctx.Mine(sessionKey(s.id)) {
			st.mine = append(st.mine, s)
		}
	}
	if cap(st.due) < len(st.mine) {
		st.due = make(dueHeap, 0, len(st.mine))
		st.again = make([]dueEntry, 0, len(st.mine))
	}
	st.nextDue = 0
}

// Produce sends what is due. Between due times it costs one comparison: the
// earliest due time of the lcore's sessions, and the registry's control epoch
// (bumped by every start and stop) to notice a session that started. A poll
// with something due visits only the sessions due, in the order of a min-heap
// of due times: 10,000 sessions at their own rates cost O(due · log n) a poll,
// not O(n). Control changes (a table or epoch that moved) take one pass over
// all of them, which also rebuilds the heap.
func (st *sender) Produce(ctx *plugins.Context, b *packet.Burst) {
	if t := st.reg.tx.Load(); t != st.table {
		st.rebuild(ctx, t)
	}
	if e := st.reg.ctlEpoch.Load(); e != st.epoch {
		st.epoch, st.nextDue = e, 0
		st.sweep(ctx, b)
		return
	}
	now := ctx.Now
	if now < st.nextDue {
		return
	}
	if st.nextDue == 0 {
		st.sweep(ctx, b)
		return
	}
	// Each due session is visited once a poll, as a pass over all would: one
	// the pool failed, or that ended, waits for the next poll.
	// With many sessions, the due ones are taken from the heap as many at a
	// time as the burst has room for, and warmed together (warmTx) before
	// they send; one that finds no room left goes back as it was, as if
	// never taken. With few, one at a time.
	var t1 int64
	for len(st.due) > 0 && st.due[0].next <= now && b.Room() > 0 {
		k, room := 0, 1
		if len(st.mine) >= warmTxSessions {
			room = b.Room()
		}
		for k < room && len(st.due) > 0 && st.due[0].next <= now {
			st.batch[k] = st.due[0]
			st.due.pop0()
			k++
		}
		if k > 1 {
			st.warmTx(st.batch[:k])
		}
		for _, e := range st.batch[:k] {
			if b.Room() == 0 {
				st.again = append(st.again, e)
				continue
			}
			if t1 == 0 {
				// T1 is the time the link after the sender delays the packets from.
				t1 = ctx.Stamp()
				st.ee.refresh()
			}
			if next, keep, _ := st.visit(ctx, e.s, b, now, t1); keep {
				st.again = append(st.again, dueEntry{next: next, s: e.s})
			}
		}
	}
	for _, e := range st.again {
		st.due.push(e)
	}
	clear(st.again)
	st.again = st.again[:0]
	if st.reg.ctlEpoch.Load() != st.epoch {
		// A session ended here: one pass now, as before, so that Done and
		// the next due time see it in this poll.
		st.epoch = st.reg.ctlEpoch.Load()
		st.sweep(ctx, b)
		return
	}
	st.nextDue = math.MaxInt64
	if len(st.due) > 0 {
		st.nextDue = st.due[0].next
	}
}

// sweep visits every session of the lcore: it sends what is due, notices
// sessions that started, stopped or ended, and rebuilds the heap.
func (st *sender) sweep(ctx *plugins.Context, b *packet.Burst) {
	now := ctx.Now
	t1 := ctx.Stamp()
	st.ee.refresh()
	next := int64(math.MaxInt64)
	allDone := st.finite
	st.due = st.due[:0]
	for _, s := range st.mine {
		n, keep, pending := st.visit(ctx, s, b, now, t1)
		if pending {
			allDone = false
		}
		if !keep {
			continue
		}
		st.due = append(st.due, dueEntry{next: n, s: s})
		if n < next {
			next = n
		}
	}
	st.due.init()
	// Nothing due before next; 0 would mean "sweep again".
	st.nextDue = max(next, 1)
	if allDone && st.finite {
		st.done.Store(true)
	}
}

// visit runs one session at now: a new run resets it, an ended one stops,
// a due one sends (while the burst has room). It returns when the session
// is due next and whether it is running (keep), and whether it is still to
// run or to start (pending: the sender is not done).
func (st *sender) visit(ctx *plugins.Context, s *txSession, b *packet.Burst, now, t1 int64) (next int64, keep, pending bool) {
	c := s.ctl.Load()
	if c&ctlRunning == 0 {
		return 0, false, s.tx.gen == 0 && s.cfg.Start
	}
	if gen := c >> 1; gen != s.tx.gen {
		s.tx.gen, s.tx.seq, s.tx.next, s.tx.started, s.tx.sent = gen, 0, now, now, 0
		s.runStart.Store(now)
		s.sentGen.Store(gen)
		s.sent.Store(0)
	}
	if s.finished(now) {
		s.ctl.CompareAndSwap(c, c&^ctlRunning)
		st.reg.ctlEpoch.Add(1)
		return 0, false, false
	}
	if s.tx.next <= now && now-s.tx.next > 100*s.interval && now-s.tx.next > int64(10*time.Millisecond) {
		st.cLate.Inc()
		s.tx.next = now
	}
	for s.tx.next <= now && b.Room() > 0 && !s.finished(now) {
		if !st.send(ctx, s, b, t1) {
			break
		}
		s.tx.next += s.interval
	}
	s.sent.Store(s.tx.sent)
	if s.finished(now) {
		return now, true, true // stop it on the next round
	}
	return s.tx.next, true, true
}

// dueEntry is a running session and when it is due next.
type dueEntry struct {
	next int64
	s    *txSession
}

// dueHeap is a 4-ary min-heap of due times (container/heap's interface
// would cost an allocation per call on the lcore): half a binary heap's
// levels, and a node's four children are 64 bytes, one or two cache lines.
// A pop at 10,000 sessions walks 7 levels, not 14, each a few unpredictable
// comparisons.
type dueHeap []dueEntry

// dueArity is the heap's fan-out.
const dueArity = 4

func (h dueHeap) init() {
	for i := (len(h) - 2) / dueArity; i >= 0; i-- {
		h.down(i)
	}
}

// pop0 removes the earliest entry.
func (h *dueHeap) pop0() {
	n := len(*h) - 1
	(*h)[0] = (*h)[n]
	(*h)[n] = dueEntry{}
	*h = (*h)[:n]
	h.down(0)
}

func (h *dueHeap) push(e dueEntry) {
	*h = append(*h, e)
	q := *h
	for i := len(q) - 1; i > 0; {
		p := (i - 1) / dueArity
		if q[p].next <= q[i].next {
			break
		}
		q[p], q[i] = q[i], q[p]
		i = p
	}
}

func (h dueHeap) down(i int) {
	n := len(h)
	for {
		l := dueArity*i + 1
		if l >= n {
			return
		}
		m := l
		for c := l + 1; c < min(l+dueArity, n); c++ {
			if h[c].next < h[m].next {
				m = c
			}
		}
		if h[i].next <= h[m].next {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

func (s *txSession) finished(now int64) bool {
	return (s.cfg.Count > 0 && s.tx.sent >= s.cfg.Count) || (s.cfg.Duration > 0 && now-s.tx.started >= int64(s.cfg.Duration))
}

// send makes one test packet from the session's template: the sequence
// number, T1, the Error Estimate, the Direct Measurement counter, the HMACs
// and the UDP checksum are all that change.
func (st *sender) send(ctx *plugins.Context, s *txSession, b *packet.Burst, t1 int64) bool {
	h, ok := st.pool.AllocOne()
	if !ok {
		st.cNoBuf.Inc()
		return false
	}
	p := h.P()
	d, err := p.Append(len(s.tmpl))
	if err != nil {
		st.pool.FreeOne(h)
		st.cNoBuf.Inc()
		return false
	}
	copy(d, s.tmpl)
	pay := d[s.pay:]
	l := s.lay
	format := formatNTP
	if s.cfg.PTP {
		format = formatPTP
	}
	binary.BigEndian.PutUint32(pay[l.seq:], s.tx.seq)
	binary.BigEndian.PutUint64(pay[l.ts:], st.ee.wire(t1, format))
	binary.BigEndian.PutUint16(pay[l.errEst:], uint16(st.ee.ee[format]))
	if s.dmOff >= 0 {
		binary.BigEndian.PutUint32(pay[s.dmOff:], uint32(s.tx.sent+1))
	}
	if s.hmacTLV >= 0 {
		copy(pay[s.hmacTLV+TLVHeaderLen:], s.tx.mac.sum16(pay[:4], pay[l.base:s.hmacTLV]))
	}
	if s.cfg.Auth {
		copy(pay[HMACCovered:BaseAuthLen], s.tx.mac.sum16(pay[:HMACCovered], nil))
	}
	u := d[s.l4:]
	u[6], u[7] = 0, 0
	sum := ^packet.Checksum(u, s.pseudo)
	if sum == 0 {
		sum = 0xffff
	}
	binary.BigEndian.PutUint16(u[6:], sum)
	p.SetFlag(packet.FlagLocal)
	p.RxTime = t1
	s.tx.seq++
	s.tx.sent++
	st.cSent.Inc()
	if st.emit {
		ctx.Emit(h, st.port)
		return true
	}
	b.Push(h)
	return true
}

// Done reports that every config session of a sender whose sessions all end
// (count or duration) has ended.
func (st *sender) Done() bool { return st.done.Load() }
