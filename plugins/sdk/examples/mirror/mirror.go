package main

import (
	"fmt"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/appliance/stats"
	"github.com/linerate/linerate/plugins"
)

// mirror copies every Nth packet. The copies come from the stage's pool:
// in process an ordinary slab pool, out of process the buffers linerate
// lends the plugin.
type mirror struct {
	every  uint64
	n      uint64
	port   uint16
	toPort bool
	pool   packet.Pool
	// queue holds the copies for the next stage until Produce.
	queue []packet.Handle

	mirrored, noBuffer *stats.Counter
}

func newMirror(s *plugins.Setup) (plugins.Stage, error) {
	var c struct {
		Every   uint64 `toml:"every"`   // copy one packet in every (default 1: all)
		Port    string `toml:"port"`    // the mirror port; none: the copies go down the chain
		Buffers int    `toml:"buffers"` // buffers for copies in flight (default 256)
	}
	if err := s.Config.Decode(&c); err != nil {
		return nil, err
	}
	if c.Every == 0 {
		c.Every = 1
	}
	if c.Buffers == 0 {
		c.Buffers = 256
	}
	if c.Buffers < 0 {
		return nil, fmt.Errorf("%s: buffers %d: at least 1", s.Config.Where(), c.Buffers)
	}
	m := &mirror{every: c.Every, queue: make([]packet.Handle, 0, packet.MaxBurst),
		mirrored: s.Counters.New("mirrored", "copies made and sent"),
		noBuffer: s.Counters.New("no_buffer", "packets not copied: no buffer free")}
	if c.Port != "" {
		p, ok := s.Ports.Port(c.Port)
		if !ok {
			return nil, fmt.Errorf("%s: port %q: no such port", s.Config.Where(), c.Port)
		}
		m.port, m.toPort = p.ID, true
	}
	pool, err := s.Pool("mirror", c.Buffers, 2048)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.Config.Where(), err)
	}
	m.pool = pool
	return m, nil
}

// Process copies every Nth packet: to the mirror port at once, or into the
// queue that Produce sends down the chain. The originals continue.
func (m *mirror) Process(ctx *plugins.Context, b *packet.Burst) {
	for i := 0; i < b.N; i++ {
		if m.n++; m.n%m.every != 0 {
			continue
		}
		if !m.toPort && len(m.queue) == cap(m.queue) {
			m.noBuffer.Inc()
			continue
		}
		c, ok := m.pool.AllocOne()
		if !ok {
			m.noBuffer.Inc()
			continue
		}
		src := b.H[i].P()
		if c.P().CopyFrom(src, min(src.Headroom(), c.P().Headroom())) != nil {
			ctx.Env.Free(c)
			m.noBuffer.Inc()
			continue
		}
		m.mirrored.Inc()
		if m.toPort {
			ctx.Emit(c, m.port)
			continue
		}
		ctx.Hold(c)
		m.queue = append(m.queue, c)
	}
}

// Produce sends the queued copies on down the chain.
func (m *mirror) Produce(ctx *plugins.Context, b *packet.Burst) {
	for _, h := range m.queue {
		h.P().Continue()
		b.Push(h)
	}
	m.queue = m.queue[:0]
}

// Held is the copies waiting for Produce.
func (m *mirror) Held() int { return len(m.queue) }

// Stop frees the copies still queued.
func (m *mirror) Stop(ctx *plugins.Context) {
	for _, h := range m.queue {
		ctx.Env.Free(h)
	}
	m.queue = m.queue[:0]
}
