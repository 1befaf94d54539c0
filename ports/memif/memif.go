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
	"math"
	"os"
	"path/filepath"
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

// DefaultSocket is the control socket of a port whose config names none:
// memif.sock in linerate's runtime directory, where the control API's socket
// is: $RUNTIME_DIRECTORY (systemd's RuntimeDirectory=linerate, /run/linerate),
// else /run/linerate for root; another user's is linerate-memif-<uid>.sock in
// $XDG_RUNTIME_DIR (or the temporary directory).
func DefaultSocket() string {
	return defaultSocket(os.Getenv("RUNTIME_DIRECTORY"), os.Geteuid(), os.Getenv("XDG_RUNTIME_DIR"))
}

func defaultSocket(runtimeDir string, uid int, userDir string) string {
	if runtimeDir != "" {
		dir, _, _ := strings.Cut(runtimeDir, ":") // systemd lists several, colon-separated
		return filepath.Join(dir, "memif.sock")
	}
	if uid == 0 {
		return "/run/linerate/memif.sock"
	}
	if userDir == "" {
		userDir = os.TempDir()
	}
	return filepath.Join(userDir, fmt.Sprintf("linerate-memif-%d.sock", uid))
}

type portConfig struct {
	Role       string `toml:"role"`        // "client" (default) or "server"
	Socket     string `toml:"socket"`      // a path, or "@name" for an abstract socket
	ID         uint32 `toml:"id"`          // the interface id both sides name
	Secret     string `toml:"secret"`      // up to 24 bytes; empty: none
	RingSize   int    `toml:"ring_size"`   // slots per ring, a power of two (client)
	BufferSize int    `toml:"buffer_size"` // bytes per ring buffer (client)
	// Who the peer may be besides root and linerate's own uid. Integers, not
	// uint32, so that -1 is this key's error, not the decoder's.
	AllowUIDs []int64 `toml:"allow_uids"`
	AllowGIDs []int64 `toml:"allow_gids"`
}

// Options open a memif port without a config file.
type Options struct {
	Name       string
	Server     bool
	Socket     string // DefaultSocket() when empty
	ID         uint32
	Secret     string
	RingSize   int // 1024 when zero
	BufferSize int // 2048 when zero
	// AllowUIDs and AllowGIDs are the peers allowed besides root and this
	// process's uid, by the credentials of the socket (SO_PEERCRED).
	AllowUIDs, AllowGIDs []uint32
	// HandshakeTimeout bounds a client's handshake with a server port
	// (memif.HandshakeTimeout when zero).
	HandshakeTimeout time.Duration
	Pool             packet.Pool
	RxQueues         int
	TxQueues         int
	// Log names the port already (the engine's does); nil: the default
	// logger, with the port's name.
	Log *slog.Logger
}

// maxHandshakes bounds the handshakes a server port runs at once: a client
// that says nothing holds one until its timeout, not the port.
const maxHandshakes = 8

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
	var err error
	if o.AllowUIDs, err = ids("allow_uids", "uid", c.AllowUIDs); err != nil {
		return nil, err
	}
	if o.AllowGIDs, err = ids("allow_gids", "gid", c.AllowGIDs); err != nil {
		return nil, err
	}
	if err := o.check(); err != nil {
		return nil, err
	}
	if s.DryRun {
		return nil, nil
	}
	return New(o)
}

// ids checks a list of uids or gids: (uid_t)-1 is no one's.
func ids(key, what string, vs []int64) ([]uint32, error) {
	var out []uint32
	for _, v := range vs {
		if v < 0 || v >= math.MaxUint32 {
			return nil, fmt.Errorf("%s: %d is not a %s (0..%d)", key, v, what, uint32(math.MaxUint32-1))
		}
		out = append(out, uint32(v))
	}
	return out, nil
}

func (o *Options) defaults() {
	if o.Socket == "" {
		o.Socket = DefaultSocket()
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
	// A descriptor's offset is 32 bits: the client's region must end by 4 GiB,
	// or the last buffers' offsets would wrap onto the ring headers.
	if !o.Server {
		if n := regionBytes(o.RxQueues+o.TxQueues, o.RingSize, o.BufferSize); n > 1<<32 {
			return fmt.Errorf("ring_size %d × buffer_size %d × %d rings: a region of %d bytes, past the 4 GiB a memif offset reaches",
				o.RingSize, o.BufferSize, o.RxQueues+o.TxQueues, n)
		}
	}
	return nil
}

func regionBytes(rings, ringSize, bufSize int) int {
	return rings * (memif.RingBytes(log2(ringSize)) + ringSize*bufSize)
}

// Port is a memif port.
type Port struct {
	o     Options
	log   *slog.Logger
	allow *memif.Allow
	conn  atomic.Pointer[session]
	rx    []queue
	tx    []queue
	ln    *memif.Listener
	stop  chan struct{}
	wg    sync.WaitGroup
	// claimed: a server's client is connected, or about to be; another is
	// refused at its connect.
	claimed atomic.Bool
	closed  atomic.Bool

	pendMu  sync.Mutex
	pending map[*memif.Pending]struct{} // handshakes in flight, closed by Close

	connects, disconnects, refused, failed atomic.Uint64
	failLog, refuseLog                     logLimit
}

// session is one connection and, for a client, the memory it made for it.
// A client makes new memory for each connection: a server's lcore may go on
// writing into the last connection's rings after it ended (DPDK's does not
// stop before it unmaps), and those writes must not reach this one's.
type session struct {
	c      *memif.Conn
	region *memif.Region
}

// queue is one ring's state on the lcore that polls it.
type queue struct {
	busy atomic.Int32 // the lcore is inside the rings: Close and a disconnect wait
	last uint16       // the next slot this side reads or writes
	// head is a client's S2C head: the slots it gave the server. It is kept
	// here, never read back from the ring, which the server can write.
	head uint16
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
// each disconnect; a server listens, runs handshakes side by side (up to
// maxHandshakes) and keeps one client at a time. Until connected, the port
// receives nothing and transmits nothing. Either role takes only a peer whose
// credentials are root's, this process's uid, or allowed by AllowUIDs and
// AllowGIDs.
func New(o Options) (*Port, error) {
	if err := o.check(); err != nil {
		return nil, fmt.Errorf("port %q: %w", o.Name, err)
	}
	if o.Pool == nil {
		return nil, fmt.Errorf("port %q: no pool", o.Name)
	}
	p := &Port{o: o, log: o.Log, rx: make([]queue, o.RxQueues), tx: make([]queue, o.TxQueues), stop: make(chan struct{}),
		pending: map[*memif.Pending]struct{}{}}
	if p.log == nil {
		p.log = slog.Default().With("port", o.Name)
	}
	p.log = p.log.With("socket", o.Socket)
	p.allow = &memif.Allow{UIDs: append([]uint32{0, uint32(os.Geteuid())}, o.AllowUIDs...), GIDs: o.AllowGIDs}
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
// buffer per slot of each ring in the same order. check keeps it within 4 GiB,
// so every offset fits a descriptor's 32 bits.
func (p *Port) ringCount() int { return len(p.tx) + len(p.rx) }
func (p *Port) regionSize() int {
	return regionBytes(p.ringCount(), p.o.RingSize, p.o.BufferSize)
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
		region, err := memif.NewRegion("linerate-memif-"+p.o.Name, p.regionSize())
		var c *memif.Conn
		if err == nil {
			c, err = memif.Dial(memif.ClientConfig{Socket: p.o.Socket, ID: p.o.ID, Secret: p.o.Secret, Allow: p.allow,
				Name: "linerate:" + p.o.Name, Regions: []*memif.Region{region}, Rings: rings})
			if err != nil {
				region.Close()
			}
		}
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
			if !p.up(&session{c: c, region: region}) {
				return
			}
		} else if errors.Is(err, memif.ErrNotAllowed) {
			p.refused.Add(1)
			p.refuseLog.warn(p.log, "memif: the server's credentials are not allowed (allow_uids, allow_gids)", "err", err)
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
	var hs sync.WaitGroup
	defer hs.Wait()
	slots := make(chan struct{}, maxHandshakes)
	for {
		pc, err := p.ln.AcceptPending()
		if err != nil {
			if p.ln.Closed() {
				return
			}
			p.failed.Add(1)
			p.failLog.warn(p.log, "memif: accept failed", "err", err)
			select { // EMFILE and the like: do not spin
			case <-p.stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			continue
		}
		select {
		case slots <- struct{}{}:
		default:
			p.failed.Add(1)
			p.failLog.warn(p.log, "memif: a client failed its handshake", "err", "too many handshakes at once")
			pc.Refuse("Too many connections")
			continue
		}
		if !p.track(pc, true) {
			pc.Refuse("closed")
			<-slots
			return
		}
		hs.Add(1)
		go func() {
			defer hs.Done()
			c, err := p.handshake(pc)
			p.track(pc, false)
			<-slots
			if err != nil {
				return
			}
			p.up(&session{c: c})
		}()
	}
}

// track adds (or removes) a handshake in flight, so that Close can end it; it
// reports false once the port is closing.
func (p *Port) track(pc *memif.Pending, add bool) bool {
	p.pendMu.Lock()
	defer p.pendMu.Unlock()
	if !add {
		delete(p.pending, pc)
		return true
	}
	if p.pending == nil {
		return false
	}
	p.pending[pc] = struct{}{}
	return true
}

// handshake runs a client's handshake; the port takes it only if it has no
// client, at its connect.
func (p *Port) handshake(pc *memif.Pending) (*memif.Conn, error) {
	claimed := false
	cfg := memif.ServerConfig{ID: p.o.ID, Secret: p.o.Secret, Name: "linerate:" + p.o.Name,
		MaxC2S: len(p.rx), MaxS2C: len(p.tx), PollC2S: true, Allow: p.allow, Timeout: p.o.HandshakeTimeout,
		Connect: func() error {
			if !p.claimed.CompareAndSwap(false, true) {
				//lint:ignore ST1005 DPDK's reason, sent to the peer as it is
				return errors.New("Already connected")
			}
			claimed = true
			return nil
		}}
	c, err := pc.Handshake(cfg)
	if err == nil {
		return c, nil
	}
	if claimed {
		p.claimed.Store(false)
	}
	select {
	case <-p.stop:
		return nil, err
	default:
	}
	if errors.Is(err, memif.ErrNotAllowed) {
		p.refused.Add(1)
		p.refuseLog.warn(p.log, "memif: a client's credentials are not allowed (allow_uids, allow_gids)", "err", err)
	} else {
		p.failed.Add(1)
		p.failLog.warn(p.log, "memif: a client failed its handshake", "err", err)
	}
	return nil, err
}

// up publishes s to the lcores until the peer goes or the port closes, then
// takes it back: it waits for every lcore to leave the rings before the
// connection's memory goes. It reports false when the port is closing.
func (p *Port) up(s *session) bool {
	c := s.c
	p.connects.Add(1)
	p.log.Info("memif: connected", "peer", c.Peer)
	p.conn.Store(s)
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
	if s.region != nil {
		s.region.Close()
	}
	p.claimed.Store(false)
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

func (p *Port) enter(q *queue) *session {
	q.busy.Store(1)
	s := p.conn.Load()
	if s == nil {
		q.busy.Store(0)
		return nil
	}
	if g := p.connects.Load(); g != q.gen {
		// A client gave the server every S2C slot at connect.
		q.gen, q.last, q.head = g, 0, uint16(p.o.RingSize)
	}
	return s
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
		"tx_too_big": txBig, "tx_bad_desc": txBad, "connects": p.connects.Load(), "disconnects": p.disconnects.Load(),
		"refused": p.refused.Load(), "handshake_failed": p.failed.Load()}
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
	p.pendMu.Lock()
	for pc := range p.pending {
		pc.Close()
	}
	p.pending = nil
	p.pendMu.Unlock()
	p.wg.Wait()
	return nil
}

// logLimit lets a peer's repeated failures log once, then at most once per
// logEvery with the count of those left out: a peer that reconnects in a loop
// must not flood the log.
type logLimit struct {
	mu         sync.Mutex
	last       time.Time
	suppressed int
}

const logEvery = 10 * time.Second

func (l *logLimit) warn(log *slog.Logger, msg string, args ...any) {
	l.mu.Lock()
	now := time.Now()
	if !l.last.IsZero() && now.Sub(l.last) < logEvery {
		l.suppressed++
		l.mu.Unlock()
		return
	}
	n := l.suppressed
	l.last, l.suppressed = now, 0
	l.mu.Unlock()
	if n > 0 {
		args = append(args, "suppressed", n)
	}
	log.Warn(msg, args...)
}
