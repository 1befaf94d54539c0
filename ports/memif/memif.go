//go:build linux

// Package memif is the memif port driver: linerate as a client or a server of
// the shared-memory packet interface that VPP (libmemif) and DPDK (net_memif)
// speak. It is plain memif, with no extension, over appliance/memif's rings.
//
// The client makes the shared memory (one memfd region: its rings, then a
// buffer per ring slot) and the server maps it. Frames are copied between the
// engine's pool and the ring buffers on both sides: a memif peer's buffers are
// its own layout, without linerate's metadata in front of them.
package memif

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/linerate/linerate/appliance/memif"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/ports"
)

func init() { ports.Register("memif", open) }

// DefaultSocket is DPDK's and VPP's default control socket, abstract in DPDK.
const DefaultSocket = "@/run/memif.sock"

type portConfig struct {
	Role       string `toml:"role"`        // "client" (default) or "server"
	Socket     string `toml:"socket"`      // a path, or "@name" for an abstract socket
	ID         uint32 `toml:"id"`          // the interface id both sides name
	Secret     string `toml:"secret"`      // up to 24 bytes; empty: none
	RingSize   int    `toml:"ring_size"`   // slots per ring, a power of two (client)
	BufferSize int    `toml:"buffer_size"` // bytes per ring buffer (client)
}

// Options open a memif port without a config file.
type Options struct {
	Name       string
	Server     bool
	Socket     string
	ID         uint32
	Secret     string
	RingSize   int // 1024 when zero
	BufferSize int // 2048 when zero
	Pool       packet.Pool
	RxQueues   int
	TxQueues   int
	Log        *slog.Logger
}

func open(s *ports.Setup) (ports.Port, error) {
	var c portConfig
	if s.Config != nil {
		if err := s.Config.Decode(&c); err != nil {
			return nil, err
		}
	}
	o := Options{Name: s.Name, Socket: c.Socket, ID: c.ID, Secret: c.Secret, RingSize: c.RingSize,
		BufferSize: c.BufferSize, Pool: s.Pool, RxQueues: s.RxQueues, TxQueues: s.TxQueues, Log: s.Log}
	switch c.Role {
	case "", "client":
	case "server":
		o.Server = true
	default:
		return nil, fmt.Errorf("role %q: must be \"client\" or \"server\"", c.Role)
	}
	if err := o.check(); err != nil {
		return nil, err
	}
	if s.DryRun {
		return nil, nil
	}
	return New(o)
}

func (o *Options) defaults() {
	if o.Socket == "" {
		o.Socket = DefaultSocket
	}
	if o.RingSize == 0 {
		o.RingSize = 1024
	}
	if o.BufferSize == 0 {
		o.BufferSize = 2048
	}
	if o.RxQueues == 0 {
		o.RxQueues = 1
	}
	if o.TxQueues == 0 {
		o.TxQueues = 1
	}
}

func (o *Options) check() error {
	o.defaults()
	switch {
	case len(o.Socket) >= 108:
		return fmt.Errorf("socket %q: longer than 107 bytes", o.Socket)
	case o.Socket == "@":
		return errors.New("socket \"@\": an abstract socket needs a name")
	case o.RingSize < 2 || o.RingSize > 1<<memif.MaxLog2Ring || o.RingSize&(o.RingSize-1) != 0:
		return fmt.Errorf("ring_size %d: must be a power of two in 2..%d", o.RingSize, 1<<memif.MaxLog2Ring)
	case o.BufferSize < 128 || o.BufferSize > 65535:
		return fmt.Errorf("buffer_size %d: outside 128..65535", o.BufferSize)
	case len(o.Secret) > memif.SecretLen:
		return fmt.Errorf("secret: longer than %d bytes", memif.SecretLen)
	case o.RxQueues < 1 || o.TxQueues < 1 || o.RxQueues > 255 || o.TxQueues > 255:
		return fmt.Errorf("queues %d rx, %d tx: outside 1..255", o.RxQueues, o.TxQueues)
	}
	return nil
}

// Port is a memif port.
type Port struct {
	o      Options
	log    *slog.Logger
	conn   atomic.Pointer[memif.Conn]
	rx     []queue
	tx     []queue
	region *memif.Region // the client's shared memory
	ln     *memif.Listener
	stop   chan struct{}
	wg     sync.WaitGroup
	closed atomic.Bool

	connects, disconnects atomic.Uint64
}

// queue is one ring's state on the lcore that polls it.
type queue struct {
	busy atomic.Int32 // the lcore is inside the rings: Close and a disconnect wait
	last uint16       // the next slot this side reads or writes
	gen  uint64       // the connection last seen; a new one restarts last
	done packet.Burst // sent, to free
	pub  queueStats
	_    [64]byte
}

type queueStats struct {
	packets, bytes, noBuffer, tooBig, badDesc atomic.Uint64
}

var _ ports.Port = (*Port)(nil)

// New opens a memif port. A client connects in the background and again after
// each disconnect; a server listens and takes one client at a time. Until
// connected, the port receives nothing and transmits nothing.
func New(o Options) (*Port, error) {
	if err := o.check(); err != nil {
		return nil, fmt.Errorf("port %q: %w", o.Name, err)
	}
	if o.Pool == nil {
		return nil, fmt.Errorf("port %q: no pool", o.Name)
	}
	p := &Port{o: o, log: o.Log, rx: make([]queue, o.RxQueues), tx: make([]queue, o.TxQueues), stop: make(chan struct{})}
	if p.log == nil {
		p.log = slog.Default()
	}
	p.log = p.log.With("port", o.Name, "socket", strings.TrimRight(o.Socket, "\x00"))
	if o.Server {
		ln, err := memif.Listen(o.Socket)
		if err != nil {
			return nil, fmt.Errorf("port %q: %w", o.Name, err)
		}
		p.ln = ln
		p.wg.Add(1)
		go p.serve()
		return p, nil
	}
	r, err := memif.NewRegion("linerate-memif-"+o.Name, p.regionSize())
	if err != nil {
		return nil, fmt.Errorf("port %q: %w", o.Name, err)
	}
	p.region = r
	p.wg.Add(1)
	go p.dial()
	return p, nil
}

func log2(n int) uint8 {
	l := uint8(0)
	for 1<<l < n {
		l++
	}
	return l
}

// Client layout: the tx queues' C2S rings, the rx queues' S2C rings, then one
// buffer per slot of each ring in the same order.
func (p *Port) ringCount() int { return len(p.tx) + len(p.rx) }
func (p *Port) regionSize() int {
	return p.ringCount() * (memif.RingBytes(log2(p.o.RingSize)) + p.o.RingSize*p.o.BufferSize)
}
func (p *Port) ringOffset(i int) int { return i * memif.RingBytes(log2(p.o.RingSize)) }
func (p *Port) bufOffset(ring int, slot uint16) uint32 {
	return uint32(p.ringOffset(p.ringCount()) + (ring*p.o.RingSize+int(slot)&(p.o.RingSize-1))*p.o.BufferSize)
}

func (p *Port) dial() {
	defer p.wg.Done()
	var rings []memif.RingSpec
	for i := range p.tx {
		rings = append(rings, memif.RingSpec{Kind: memif.C2S, Index: uint16(i), Offset: uint32(p.ringOffset(i)), Log2: log2(p.o.RingSize)})
	}
	for i := range p.rx {
		rings = append(rings, memif.RingSpec{Kind: memif.S2C, Index: uint16(i), Offset: uint32(p.ringOffset(len(p.tx) + i)), Log2: log2(p.o.RingSize)})
	}
	backoff := 50 * time.Millisecond
	var lastErr string
	for {
		c, err := memif.Dial(memif.ClientConfig{Socket: p.o.Socket, ID: p.o.ID, Secret: p.o.Secret,
			Name: "linerate:" + p.o.Name, Regions: []*memif.Region{p.region}, Rings: rings})
		if err == nil {
			backoff = 50 * time.Millisecond
			lastErr = ""
			// Our receive rings: polled, each slot's buffer fixed, and all
			// given to the server now, before anything is sent (the server
			// drops what it has no slot for).
			for i, r := range c.S2C {
				r.SetFlags(memif.RingFlagMaskInt)
				for s := 0; s < p.o.RingSize; s++ {
					*r.D(uint16(s)) = memif.Desc{Offset: p.bufOffset(len(p.tx)+i, uint16(s)), Length: uint32(p.o.BufferSize)}
				}
				r.SetHead(uint16(p.o.RingSize))
			}
			for i, r := range c.C2S {
				for s := 0; s < p.o.RingSize; s++ {
					*r.D(uint16(s)) = memif.Desc{Offset: p.bufOffset(i, uint16(s))}
				}
			}
			if !p.up(c) {
				return
			}
		} else if err.Error() != lastErr {
			lastErr = err.Error()
			p.log.Debug("memif: connect", "err", err)
		}
		select {
		case <-p.stop:
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

func (p *Port) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept(memif.ServerConfig{ID: p.o.ID, Secret: p.o.Secret, Name: "linerate:" + p.o.Name,
			MaxC2S: len(p.rx), MaxS2C: len(p.tx), PollC2S: true})
		if err != nil {
			select {
			case <-p.stop:
				return
			default:
			}
			p.log.Warn("memif: a client failed to connect", "err", err)
			continue
		}
		if !p.up(c) {
			return
		}
	}
}

// up publishes c to the lcores until the peer goes or the port closes, then
// takes it back: it waits for every lcore to leave the rings before the
// connection's memory goes. It reports false when the port is closing.
func (p *Port) up(c *memif.Conn) bool {
	p.connects.Add(1)
	p.log.Info("memif: connected", "peer", c.Peer)
	p.conn.Store(c)
	closing := false
	select {
	case <-c.Done():
		p.log.Info("memif: disconnected", "reason", c.Reason())
		p.disconnects.Add(1)
	case <-p.stop:
		closing = true
	}
	p.conn.Store(nil)
	p.quiesce()
	c.Close()
	return !closing
}

// quiesce waits until no lcore is inside the rings: each enters by raising
// busy before it loads the connection, so after the store of nil above an lcore
// either sees nil or is seen busy here.
func (p *Port) quiesce() {
	for _, qs := range [][]queue{p.rx, p.tx} {
		for i := range qs {
			for qs[i].busy.Load() != 0 {
				runtime.Gosched()
			}
		}
	}
}

func (p *Port) enter(q *queue) *memif.Conn {
	q.busy.Store(1)
	c := p.conn.Load()
	if c == nil {
		q.busy.Store(0)
		return nil
	}
	if g := p.connects.Load(); g != q.gen {
		q.gen, q.last = g, 0
	}
	return c
}

func (p *Port) Name() string      { return p.o.Name }
func (p *Port) Pool() packet.Pool { return p.o.Pool }

// Info describes the port; the link is up while a peer is connected.
func (p *Port) Info() ports.Info {
	mtu := min(p.o.BufferSize, p.o.Pool.DataRoom()) - 14
	return ports.Info{Driver: "memif", RxQueues: len(p.rx), TxQueues: len(p.tx), MTU: mtu,
		TimestampSource: "engine", LinkUp: p.conn.Load() != nil,
		TimestampDetail: "the engine clock when the lcore takes the frame from the memif ring, up to one poll " +
			"after the peer wrote it"}
}

// Stats sums the queues' counters.
func (p *Port) Stats() ports.Stats {
	var s ports.Stats
	var noBuf, rxBig, rxBad, txBig, txBad uint64
	for i := range p.rx {
		q := &p.rx[i].pub
		s.RxPackets += q.packets.Load()
		s.RxBytes += q.bytes.Load()
		noBuf += q.noBuffer.Load()
		rxBig += q.tooBig.Load()
		rxBad += q.badDesc.Load()
	}
	for i := range p.tx {
		q := &p.tx[i].pub
		s.TxPackets += q.packets.Load()
		s.TxBytes += q.bytes.Load()
		txBig += q.tooBig.Load()
		txBad += q.badDesc.Load()
	}
	s.RxDropped = noBuf + rxBig + rxBad
	s.RxErrors = rxBad
	s.TxDropped = txBig + txBad
	s.Extra = map[string]uint64{"rx_no_buffer": noBuf, "rx_too_big": rxBig, "rx_bad_desc": rxBad,
		"tx_too_big": txBig, "tx_bad_desc": txBad, "connects": p.connects.Load(), "disconnects": p.disconnects.Load()}
	return s
}

// Close disconnects, stops the background goroutine and frees what the port
// holds. No queue may be polled during or after Close.
func (p *Port) Close() error {
	if p.closed.Swap(true) {
		return nil
	}
	close(p.stop)
	if p.ln != nil {
		p.ln.Close()
	}
	p.wg.Wait()
	if p.region != nil {
		return p.region.Close()
	}
	return nil
}
