package ipfix

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Exporter sends data records to the collectors of a Config, one transport
// session each. Plugins Register their templates at setup, Start and Stop it
// with their stages (the last Stop flushes and closes), and Add records
// from their control goroutines; it is safe for concurrent use.
//
// Records wait in each session's message until it is full or flushInterval
// has passed. A UDP session sends every template before the first data
// record and again every TemplateRefresh; a TCP session sends them on each
// connection, and reconnects when its collector goes.
type Exporter struct {
	cfg Config
	log *slog.Logger

	mu        sync.Mutex
	templates []*Template
	byID      map[uint16]*Template
	sessions  []*session
	refs      int
	quit      chan struct{}
	done      chan struct{}

	records  atomic.Uint64 // data records added
	messages atomic.Uint64 // messages sent, over every session
	errs     atomic.Uint64 // messages not sent
}

// live are the started exporters, for Collector.
var live sync.Map

// flushInterval is how long a record waits for others to share its message.
const flushInterval = 100 * time.Millisecond

// redialInterval is how often a TCP session that lost its collector tries
// again.
const redialInterval = time.Second

type session struct {
	network, addr string
	sentMsgs      atomic.Uint64 // messages sent
	failed        atomic.Uint64 // messages not sent
	max           int           // largest message
	conn          net.Conn
	lastDial      time.Time

	msg     []byte // the message being filled, header first
	set     int    // offset of the open data set's header, 0 for none
	setID   uint16
	n       uint32 // data records in msg
	seq     uint32 // data records sent before msg
	refresh time.Time
	sent    bool // templates sent on this connection
}

// NewExporter is an exporter for c, which Check has accepted.
func NewExporter(c Config, log *slog.Logger) *Exporter {
	c.defaults()
	e := &Exporter{cfg: c, log: log, byID: map[uint16]*Template{}}
	for _, col := range c.Collectors {
		network, addr, _ := strings.Cut(col, ":")
		max := c.MaxMessage
		if network == "tcp" {
			max = 65535
		}
		e.sessions = append(e.sessions, &session{network: network, addr: addr, max: max})
	}
	return e
}

// Register adds a template; a template of the same ID registered before is
// kept (the stages of one kind share theirs).
func (e *Exporter) Register(t *Template) error {
	if err := t.check(); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if prev, ok := e.byID[t.ID]; ok {
		if prev.Name != t.Name {
			return fmt.Errorf("ipfix: template %d is %s's and %s's", t.ID, prev.Name, t.Name)
		}
		return nil
	}
	c := t.withEnterprise(e.cfg.Enterprise)
	e.templates = append(e.templates, c)
	e.byID[t.ID] = c
	for _, s := range e.sessions {
		s.sent = false // announce it before its first record
	}
	return nil
}

// Start opens the sessions on the first call.
func (e *Exporter) Start() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.refs++
	if e.refs > 1 {
		return
	}
	for _, s := range e.sessions {
		e.dial(s)
	}
	live.Store(e, struct{}{})
	e.quit, e.done = make(chan struct{}), make(chan struct{})
	go e.run(e.quit, e.done)
}

// Stop flushes and closes the sessions on the last call.
func (e *Exporter) Stop() {
	e.mu.Lock()
	e.refs--
	if e.refs != 0 {
		e.mu.Unlock()
		return
	}
	quit, done := e.quit, e.done
	e.mu.Unlock()
	live.Delete(e)
	close(quit)
	<-done
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, s := range e.sessions {
		e.flush(s)
		if s.conn != nil {
			_ = s.conn.Close()
			s.conn = nil
		}
	}
}

func (e *Exporter) run(quit, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(flushInterval)
	defer t.Stop()
	for {
		select {
		case <-quit:
			return
		case <-t.C:
			e.mu.Lock()
			for _, s := range e.sessions {
				e.flush(s)
				if s.network == "udp" && time.Since(s.refresh) >= time.Duration(e.cfg.TemplateRefresh) {
					s.sent = false
					e.flush(s) // the templates alone
				}
			}
			e.mu.Unlock()
		}
	}
}

// Add queues rec, a data record of template id (registered), for every
// collector.
func (e *Exporter) Add(id uint16, rec []byte) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.refs == 0 {
		return
	}
	t := e.byID[id]
	if t == nil || len(rec) != t.Size() {
		e.errs.Add(1)
		return
	}
	e.records.Add(1)
	for _, s := range e.sessions {
		e.add(s, id, rec)
	}
}

// Stats is what the exporter did: data records added, messages sent and
// messages it could not send.
func (e *Exporter) Stats() (records, messages, errors uint64) {
	return e.records.Load(), e.messages.Load(), e.errs.Load()
}

func (e *Exporter) add(s *session, id uint16, rec []byte) {
	need := len(rec)
	if s.set == 0 || s.setID != id {
		need += setHeaderLen
	}
	if !s.sent {
		need += e.templateSetLen()
	}
	if len(s.msg) > 0 && len(s.msg)+need > s.max {
		e.flush(s)
	}
	if len(s.msg) == 0 {
		s.msg = append(s.msg[:0], make([]byte, messageHeaderLen)...)
	}
	if !s.sent {
		e.closeSet(s)
		s.msg = e.appendTemplates(s.msg)
		s.sent = true
		s.refresh = time.Now()
	}
	if s.set == 0 || s.setID != id {
		e.closeSet(s)
		s.set, s.setID = len(s.msg), id
		s.msg = binary.BigEndian.AppendUint16(s.msg, id)
		s.msg = binary.BigEndian.AppendUint16(s.msg, 0)
	}
	s.msg = append(s.msg, rec...)
	s.n++
}

func (e *Exporter) templateSetLen() int {
	n := setHeaderLen
	for _, t := range e.templates {
		n += len(t.appendRecord(nil))
	}
	return n
}

// appendTemplates appends a template set of every template.
func (e *Exporter) appendTemplates(b []byte) []byte {
	start := len(b)
	b = binary.BigEndian.AppendUint16(b, TemplateSetID)
	b = binary.BigEndian.AppendUint16(b, 0)
	for _, t := range e.templates {
		b = t.appendRecord(b)
	}
	binary.BigEndian.PutUint16(b[start+2:], uint16(len(b)-start))
	return b
}

func (e *Exporter) closeSet(s *session) {
	if s.set != 0 {
		binary.BigEndian.PutUint16(s.msg[s.set+2:], uint16(len(s.msg)-s.set))
		s.set = 0
	}
}

// flush sends the message being filled, with the templates first when the
// session has not sent them; a message of templates alone when that is all
// there is to send.
func (e *Exporter) flush(s *session) {
	if len(s.msg) == 0 && (s.sent || len(e.templates) == 0) {
		return
	}
	if len(s.msg) == 0 {
		s.msg = append(s.msg[:0], make([]byte, messageHeaderLen)...)
		s.msg = e.appendTemplates(s.msg)
		s.sent, s.refresh = true, time.Now()
	}
	e.closeSet(s)
	h := s.msg[:messageHeaderLen]
	binary.BigEndian.PutUint16(h[0:], Version)
	binary.BigEndian.PutUint16(h[2:], uint16(len(s.msg)))
	binary.BigEndian.PutUint32(h[4:], uint32(time.Now().Unix()))
	binary.BigEndian.PutUint32(h[8:], s.seq)
	binary.BigEndian.PutUint32(h[12:], e.cfg.ObservationDomain)
	if err := e.send(s, s.msg); err != nil {
		s.failed.Add(1)
		if e.errs.Add(1) == 1 || e.errs.Load()%1000 == 0 {
			e.log.Warn("ipfix: message not sent", "collector", s.network+":"+s.addr, "err", err, "unsent", e.errs.Load())
		}
	} else {
		s.sentMsgs.Add(1)
		e.messages.Add(1)
	}
	// The sequence counts the records exported, sent or not (RFC 7011:
	// a collector sees the gap as loss).
	s.seq += s.n
	s.msg, s.n = s.msg[:0], 0
}

func (e *Exporter) send(s *session, b []byte) error {
	if s.conn == nil {
		if s.network != "tcp" || time.Since(s.lastDial) < redialInterval {
			return errors.New("not connected")
		}
		if !e.dial(s) {
			return errors.New("not connected")
		}
		// A new connection: its templates go first. The message at hand
		// may carry them already; if not, send them alone.
		if !hasTemplates(b) {
			t := e.appendTemplates(make([]byte, messageHeaderLen))
			copy(t, b[:messageHeaderLen])
			binary.BigEndian.PutUint16(t[2:], uint16(len(t)))
			if _, err := s.conn.Write(t); err != nil {
				e.hangUp(s)
				return err
			}
		}
	}
	_ = s.conn.SetWriteDeadline(time.Now().Add(time.Second))
	if _, err := s.conn.Write(b); err != nil {
		if s.network == "tcp" {
			e.hangUp(s)
		}
		return err
	}
	return nil
}

func hasTemplates(msg []byte) bool {
	return len(msg) >= messageHeaderLen+setHeaderLen && binary.BigEndian.Uint16(msg[messageHeaderLen:]) == TemplateSetID
}

func (e *Exporter) hangUp(s *session) {
	_ = s.conn.Close()
	s.conn = nil
	s.sent = false
}

func (e *Exporter) dial(s *session) bool {
	s.lastDial = time.Now()
	c, err := net.DialTimeout(s.network, s.addr, time.Second)
	if err != nil {
		e.log.Warn("ipfix: collector not reached", "collector", s.network+":"+s.addr, "err", err)
		return false
	}
	s.conn, s.sent = c, false
	return true
}
