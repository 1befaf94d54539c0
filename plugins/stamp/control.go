package stamp

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/linerate/linerate/appliance/control/host"
	"github.com/linerate/linerate/plugins"
)

// The session operations both control services share. They run on control
// goroutines: they change what lcores read only through the registry's
// atomic tables and the sessions' atomic control words.

// createSender adds a sender session made through the control API. keyName
// names a key file in the stage's key_dir.
func (r *Registry) createSender(c SenderSession, keyName string, start bool) (*txSession, error) {
	r.mu.Lock()
	name, info, err := r.senderStage(c.Stage)
	if err == nil && r.senderInit != nil {
		if !c.Src.IsValid() && r.senderInit.source != "" {
			c.Src, err = netip.ParseAddr(r.senderInit.source)
		}
		if c.SrcPort == 0 {
			c.SrcPort = r.senderInit.port
		}
	}
	var d senderDefaults
	if info != nil {
		d = info.defaults
	}
	r.mu.Unlock()
	if err != nil {
		return nil, err
	}
	c.Stage = name
	if keyName != "" {
		if c.Key, err = LoadKeyNamed(d.keyDir, keyName); err != nil {
			return nil, err
		}
	}
	s, err := buildTx(c, &d)
	if err != nil {
		return nil, err
	}
	s.fromAPI = true
	if start {
		_ = s.start()
	}
	if err := r.putTx(s); err != nil {
		return nil, err
	}
	r.ctlEpoch.Add(1)
	return s, nil
}

func (r *Registry) createReflector(c ReflectorSession, keyName string, start bool) (*rfSession, error) {
	r.mu.Lock()
	name, info, err := r.reflectorStage(c.Stage)
	if err == nil && r.reflectorInit != nil && !c.Source.IsValid() && r.reflectorInit.source != "" {
		c.Source, err = netip.ParseAddr(r.reflectorInit.source)
	}
	var d reflectorDefaults
	if info != nil {
		d = info.defaults
	}
	r.mu.Unlock()
	if err != nil {
		return nil, err
	}
	c.Stage = name
	if keyName != "" {
		if c.Key, err = LoadKeyNamed(d.keyDir, keyName); err != nil {
			return nil, err
		}
	}
	s, err := buildRf(c, &d)
	if err != nil {
		return nil, err
	}
	s.fromAPI = true
	s.running.Store(start)
	if err := r.putRf(s); err != nil {
		return nil, err
	}
	return s, nil
}

func (r *Registry) tx1(id uint16) (*txSession, error) {
	if s := r.tx.Load().get(id); s != nil {
		return s, nil
	}
	return nil, fmt.Errorf("SSID %d: %w", id, ErrNotFound)
}

func (r *Registry) rf1(id uint16) (*rfSession, error) {
	if s := r.rf.Load().get(id); s != nil {
		return s, nil
	}
	return nil, fmt.Errorf("SSID %d: %w", id, ErrNotFound)
}

func (r *Registry) startTx(id uint16) (*txSession, error) {
	s, err := r.tx1(id)
	if err == nil {
		err = s.start()
		r.ctlEpoch.Add(1)
	}
	return s, err
}

func (r *Registry) stopTx(id uint16) (*txSession, error) {
	s, err := r.tx1(id)
	if err == nil {
		err = s.stop()
		r.ctlEpoch.Add(1)
	}
	return s, err
}

func (r *Registry) startRf(id uint16) (*rfSession, error) {
	s, err := r.rf1(id)
	if err == nil && !s.running.CompareAndSwap(false, true) {
		err = fmt.Errorf("SSID %d: %w", id, ErrRunning)
	}
	return s, err
}

func (r *Registry) stopRf(id uint16) (*rfSession, error) {
	s, err := r.rf1(id)
	if err == nil && !s.running.CompareAndSwap(true, false) {
		err = fmt.Errorf("SSID %d: %w", id, ErrNotRunning)
	}
	return s, err
}

// destroyTx removes a sender session and waits until no lcore uses it.
func (r *Registry) destroyTx(id uint16, h host.Host) (*txSession, error) {
	s, err := r.dropTx(id)
	if err != nil {
		return nil, err
	}
	r.ctlEpoch.Add(1)
	if h != nil {
		h.Synchronize()
	}
	return s, nil
}

func (r *Registry) destroyRf(id uint16, h host.Host) (*rfSession, error) {
	s, err := r.dropRf(id)
	if err != nil {
		return nil, err
	}
	if h != nil {
		h.Synchronize()
	}
	return s, nil
}

// resetTx destroys the sender sessions made through the API and clears Init.
func (r *Registry) resetTx(h host.Host) int {
	n := 0
	for _, s := range r.txSessions() {
		if s.fromAPI {
			if _, err := r.dropTx(s.id); err == nil {
				n++
			}
		}
	}
	r.mu.Lock()
	r.senderInit = nil
	r.mu.Unlock()
	r.ctlEpoch.Add(1)
	if h != nil && n > 0 {
		h.Synchronize()
	}
	return n
}

func (r *Registry) resetRf(h host.Host) int {
	n := 0
	for _, s := range r.rfSessions() {
		if s.fromAPI {
			if _, err := r.dropRf(s.id); err == nil {
				n++
			}
		}
	}
	r.mu.Lock()
	r.reflectorInit = nil
	r.mu.Unlock()
	if h != nil && n > 0 {
		h.Synchronize()
	}
	return n
}

// Errors of Init.
var (
	ErrInitialized    = errors.New("already initialized")
	ErrNotInitialized = errors.New("not initialized: call Init first")
)

// initTx records the sender role's Init. The seed's API refuses a second
// Init until Reset.
func (r *Registry) initTx(p initParams, once bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, _, err := r.senderStage(""); err != nil {
		return err
	}
	if once && r.senderInit != nil {
		return ErrInitialized
	}
	if p.source != "" {
		if _, err := netip.ParseAddr(p.source); err != nil {
			return fmt.Errorf("source address: %w", err)
		}
	}
	r.senderInit = &p
	return nil
}

func (r *Registry) initRf(p initParams, once bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, info, err := r.reflectorStage("")
	if err != nil {
		return err
	}
	if once && r.reflectorInit != nil {
		return ErrInitialized
	}
	if p.port != 0 && p.port != info.defaults.port {
		return fmt.Errorf("UDP port %d: the reflector stage listens on %d (its config's port)", p.port, info.defaults.port)
	}
	if p.source != "" {
		if _, err := netip.ParseAddr(p.source); err != nil {
			return fmt.Errorf("source address: %w", err)
		}
	}
	r.reflectorInit = &p
	return nil
}

func (r *Registry) txInitialized() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.senderInit != nil
}

func (r *Registry) rfInitialized() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reflectorInit != nil
}

// drain takes up to max records from a session's FIFO.
func (s *txSession) drain(max int) []Record {
	s.fifoMu.Lock()
	defer s.fifoMu.Unlock()
	n := s.fifo.Len()
	if max > 0 && n > max {
		n = max
	}
	out := make([]Record, n)
	got := s.fifo.Dequeue(out)
	return out[:got]
}

// waiting is how many records the FIFO holds.
func (s *txSession) waiting() int { return s.fifo.Len() }

// metricsAt summarises a session on its collector's lcore, through the host;
// a session no reply has reached yet has only its sender's count.
func metricsAt(h host.Host, s *txSession) Metrics {
	col := s.col.Load()
	if col == nil {
		m := Metrics{SSID: s.id, Running: s.running(), Sent: s.sent.Load(), InFlight: int64(s.sent.Load())}
		return m
	}
	if h != nil {
		for _, ref := range h.Instances("stamp.collector") {
			if ref.Stage == plugins.Stage(col) {
				var m Metrics
				if err := h.Do(ref.Lcore, func() { m = metricsOf(s) }); err == nil {
					return m
				}
			}
		}
	}
	return metricsOf(s)
}

// pollInterval is how often a stream drains the FIFOs.
const pollInterval = 5 * time.Millisecond
