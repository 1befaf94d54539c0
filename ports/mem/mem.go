// Package mem is the in-memory datapath: links between pipelines, rings between
// lcores, and a null port. Packets cross a mem link as handles, never copied.
//
// Driver "mem" keys:
//
//	peer      = "m1"   # what is sent on this port is received on m1; "" = itself
//	ring_size = 4096   # slots per tx queue
//
// The common mtu key is the port's MTU as the stages see it (routed mode's
// Packet Too Big, IOAM's room); there is no device to set it on.
//
// Each tx queue owns one single-producer/single-consumer ring; rx queue r of the
// peer drains the rings of tx queues q with q mod rx_queues == r, so every ring
// keeps exactly one producer and one consumer.
//
// Driver "null" discards what it is given and receives nothing.
package mem

import (
	"fmt"
	"sync/atomic"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/appliance/ring"
	"github.com/linerate/linerate/ports"
)

func init() {
	ports.Register("mem", open)
	ports.Register("null", openNull)
}

type config struct {
	Peer     *string `toml:"peer"`
	RingSize int     `toml:"ring_size"`
}

// Port is a mem port.
type Port struct {
	name     string
	peerName string
	pool     packet.Pool
	mtu      int
	tx       []*ring.Handles   // one per tx queue
	rx       [][]*ring.Handles // per rx queue: the rings it drains, set by Join
	joined   bool
	rxq      []queueStats
	txq      []queueStats
}

// queueStats are written by the queue's one owner and read by anyone.
type queueStats struct {
	packets atomic.Uint64
	_       [56]byte
}

// Options open a mem port without a config file (tests, benchmarks, simulations).
type Options struct {
	Name     string
	Peer     string // "" = itself
	Pool     packet.Pool
	RxQueues int
	TxQueues int
	RingSize int
	MTU      int // 0: the engine's default
}

// New opens a mem port. Join it (or call Connect) before use.
func New(o Options) (*Port, error) {
	if o.RxQueues <= 0 {
		o.RxQueues = 1
	}
	if o.TxQueues <= 0 {
		o.TxQueues = 1
	}
	if o.RingSize == 0 {
		o.RingSize = 4096
	}
	if o.RingSize < packet.MaxBurst || o.RingSize > 1<<20 {
		return nil, fmt.Errorf("port %q: ring_size %d is outside %d..%d", o.Name, o.RingSize, packet.MaxBurst, 1<<20)
	}
	p := &Port{name: o.Name, peerName: o.Peer, pool: o.Pool, mtu: o.MTU,
		rx: make([][]*ring.Handles, o.RxQueues), rxq: make([]queueStats, o.RxQueues), txq: make([]queueStats, o.TxQueues)}
	if p.peerName == "" {
		p.peerName = o.Name
	}
	for i := 0; i < o.TxQueues; i++ {
		p.tx = append(p.tx, ring.NewHandles(o.RingSize))
	}
	return p, nil
}

func open(s *ports.Setup) (ports.Port, error) {
	var c config
	if s.Config != nil {
		if err := s.Config.Decode(&c); err != nil {
			return nil, err
		}
	}
	o := Options{Name: s.Name, Pool: s.Pool, RxQueues: s.RxQueues, TxQueues: s.TxQueues, RingSize: c.RingSize, MTU: s.MTU}
	if c.Peer != nil {
		o.Peer = *c.Peer
	}
	return New(o)
}

// Join attaches this port's tx rings to its peer's rx queues.
func (p *Port) Join(lookup func(name string) ports.Port) error {
	peer, ok := lookup(p.peerName).(*Port)
	if !ok || peer == nil {
		return fmt.Errorf("port %q: peer %q is not a mem port", p.name, p.peerName)
	}
	Connect(p, peer)
	return nil
}

// Connect makes what a sends arrive on b.
func Connect(a, b *Port) {
	a.peerName = b.name
	for q, r := range a.tx {
		rq := q % len(b.rx)
		b.rx[rq] = append(b.rx[rq], r)
	}
	a.joined = true
}

func (p *Port) Name() string      { return p.name }
func (p *Port) Pool() packet.Pool { return p.pool }
func (p *Port) Close() error      { return nil }
func (p *Port) SetMTU(mtu int)    { p.mtu = mtu }
func (p *Port) Peer() string      { return p.peerName }
func (p *Port) TxQueues() int     { return len(p.tx) }
func (p *Port) RxQueues() int     { return len(p.rx) }

// Info describes the port.
func (p *Port) Info() ports.Info {
	return ports.Info{Driver: "mem", RxQueues: len(p.rx), TxQueues: len(p.tx), MTU: p.mtu,
		TimestampSource: "engine", LinkUp: p.joined,
		TimestampDetail: "the engine clock when the receiving lcore takes the burst from the link's ring: " +
			"its next poll after the sending lcore's transmit; no wire"}
}

// RxBurst drains the rings that feed rx queue q.
func (p *Port) RxBurst(q int, b *packet.Burst) int {
	start := b.N
	for _, r := range p.rx[q] {
		if b.N == packet.MaxBurst {
			break
		}
		ring.DequeueBurst(r, b)
	}
	n := b.N - start
	if n > 0 {
		st := &p.rxq[q]
		st.packets.Store(st.packets.Load() + uint64(n))
	}
	return n
}

// TxBurst enqueues b's packets on tx queue q's ring.
func (p *Port) TxBurst(q int, b *packet.Burst) int {
	n := p.tx[q].Enqueue(b.H[:b.N])
	if n > 0 {
		st := &p.txq[q]
		st.packets.Store(st.packets.Load() + uint64(n))
	}
	return n
}

// InFlight is the number of packets in this port's tx rings.
func (p *Port) InFlight() int {
	n := 0
	for _, r := range p.tx {
		n += r.Len()
	}
	return n
}

// Stats sums the per-queue packet counters (the engine counts bytes).
func (p *Port) Stats() ports.Stats {
	var s ports.Stats
	for i := range p.rxq {
		s.RxPackets += p.rxq[i].packets.Load()
	}
	for i := range p.txq {
		s.TxPackets += p.txq[i].packets.Load()
	}
	return s
}

// Drain frees every packet still in this port's tx rings. Only when no lcore runs.
func (p *Port) Drain() int {
	var b packet.Burst
	n := 0
	for _, r := range p.tx {
		for {
			b.N = 0
			if ring.DequeueBurst(r, &b) == 0 {
				break
			}
			n += b.N
			packet.Free(&b)
		}
	}
	return n
}

// Null discards everything.
type Null struct {
	name string
	pool packet.Pool
	tx   []queueStats
}

func openNull(s *ports.Setup) (ports.Port, error) {
	if s.Config != nil {
		var none struct{}
		if err := s.Config.Decode(&none); err != nil {
			return nil, err
		}
	}
	n := s.TxQueues
	if n <= 0 {
		n = 1
	}
	return &Null{name: s.Name, pool: s.Pool, tx: make([]queueStats, n)}, nil
}

func (n *Null) Name() string                   { return n.name }
func (n *Null) Pool() packet.Pool              { return n.pool }
func (n *Null) Close() error                   { return nil }
func (n *Null) RxBurst(int, *packet.Burst) int { return 0 }
func (n *Null) Info() ports.Info {
	return ports.Info{Driver: "null", RxQueues: 1, TxQueues: len(n.tx), TimestampSource: "engine", LinkUp: true,
		TimestampDetail: "none: a null port receives nothing"}
}

// TxBurst frees the whole burst.
func (n *Null) TxBurst(q int, b *packet.Burst) int {
	st := &n.tx[q]
	st.packets.Store(st.packets.Load() + uint64(b.N))
	packet.FreeHandles(b.H[:b.N])
	return b.N
}

// Stats counts what was discarded as transmitted.
func (n *Null) Stats() ports.Stats {
	var s ports.Stats
	for i := range n.tx {
		s.TxPackets += n.tx[i].packets.Load()
	}
	return s
}
