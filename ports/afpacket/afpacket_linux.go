//go:build linux

package afpacket

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/linerate/linerate/appliance/clock"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/ports"
	"github.com/linerate/linerate/ports/internal/netdev"
)

func init() { ports.Register("afpacket", open) }

// Defaults.
const (
	DefaultBlockSize    = 1 << 20
	DefaultBlocks       = 8
	DefaultBlockTimeout = time.Millisecond
	minFrameSize        = 2048
)

// Fanout modes, by config name (PACKET_FANOUT_*).
var fanoutModes = map[string]int{
	"hash":     unix.PACKET_FANOUT_HASH,
	"lb":       unix.PACKET_FANOUT_LB,
	"cpu":      unix.PACKET_FANOUT_CPU,
	"rollover": unix.PACKET_FANOUT_ROLLOVER,
	"rnd":      unix.PACKET_FANOUT_RND,
	"qm":       unix.PACKET_FANOUT_QM,
}

// config is the driver's table in the config file.
type config struct {
	Interface    string        `toml:"interface"`
	BlockSize    int           `toml:"block_size"`
	Blocks       int           `toml:"blocks"`
	FrameSize    int           `toml:"frame_size"`
	BlockTimeout time.Duration `toml:"block_timeout"`
	Fanout       string        `toml:"fanout"`
	Promiscuous  bool          `toml:"promiscuous"`
	QdiscBypass  bool          `toml:"qdisc_bypass"`
	TxRing       bool          `toml:"tx_ring"`
	RxTimestamp  string        `toml:"rx_timestamp"`
}

// Options open an afpacket port without a config file.
type Options struct {
	Name         string
	Interface    string
	Pool         packet.Pool
	RxQueues     int // 1 when zero
	TxQueues     int // 1 when zero
	BlockSize    int // DefaultBlockSize when zero
	Blocks       int // DefaultBlocks when zero
	FrameSize    int // fit the MTU when zero
	BlockTimeout time.Duration
	Fanout       string // "hash" when empty
	Promiscuous  bool
	QdiscBypass  bool
	NoTxRing     bool
	// RxTimestamp is auto (the default), hardware, kernel or engine. Kernel
	// and hardware stamps need Clock, the engine's, to be the host's.
	RxTimestamp string
	Clock       clock.Clock
	// MTU, when not zero, is set on the interface while the port is open, and
	// the interface's own put back at Close; zero keeps the interface's.
	MTU int
}

// DefaultOptions are the config file's defaults.
func DefaultOptions() Options {
	return Options{RxQueues: 1, TxQueues: 1, BlockSize: DefaultBlockSize, Blocks: DefaultBlocks,
		BlockTimeout: DefaultBlockTimeout, Fanout: "hash", Promiscuous: true, QdiscBypass: true,
		RxTimestamp: TimestampAuto}
}

func open(s *ports.Setup) (ports.Port, error) {
	d := DefaultOptions()
	c := config{BlockSize: d.BlockSize, Blocks: d.Blocks, BlockTimeout: d.BlockTimeout, Fanout: d.Fanout,
		Promiscuous: d.Promiscuous, QdiscBypass: d.QdiscBypass, TxRing: true, RxTimestamp: d.RxTimestamp}
	if s.Config != nil {
		if err := s.Config.Decode(&c); err != nil {
			return nil, err
		}
	}
	o := Options{Name: s.Name, Interface: c.Interface, Pool: s.Pool, RxQueues: s.RxQueues, TxQueues: s.TxQueues,
		BlockSize: c.BlockSize, Blocks: c.Blocks, FrameSize: c.FrameSize, BlockTimeout: c.BlockTimeout,
		Fanout: c.Fanout, Promiscuous: c.Promiscuous, QdiscBypass: c.QdiscBypass, NoTxRing: !c.TxRing,
		RxTimestamp: c.RxTimestamp, Clock: s.Clock, MTU: s.MTU}
	if err := o.check(); err != nil {
		return nil, err
	}
	if s.DryRun {
		if !s.Offline {
			if _, err := findInterface(o.Interface); err != nil {
				return nil, err
			}
		}
		return nil, nil
	}
	return New(o)
}

// findInterface finds an interface in the calling thread's network
// namespace, with an error that names it.
func findInterface(name string) (*net.Interface, error) {
	ifc, err := net.InterfaceByName(name)
	if err != nil {
		return nil, fmt.Errorf("interface %q: no such network interface here (ip link lists them)", name)
	}
	return ifc, nil
}

func (o *Options) check() error {
	page := os.Getpagesize()
	switch {
	case o.Interface == "":
		return errors.New("interface is required")
	case len(o.Interface) >= unix.IFNAMSIZ:
		return fmt.Errorf("interface name %q is longer than %d bytes", o.Interface, unix.IFNAMSIZ-1)
	case o.BlockSize <= 0 || o.BlockSize%page != 0 || o.BlockSize > 1<<30:
		return fmt.Errorf("block_size %d is not a multiple of the page size (%d) up to 1 GiB", o.BlockSize, page)
	case o.Blocks <= 0 || o.Blocks > 1<<16:
		return fmt.Errorf("blocks %d is outside 1..65536", o.Blocks)
	case o.FrameSize != 0 && (o.FrameSize < minFrameSize || o.FrameSize%unix.TPACKET_ALIGNMENT != 0 || o.FrameSize > o.BlockSize):
		return fmt.Errorf("frame_size %d is not a multiple of %d from %d to block_size", o.FrameSize, unix.TPACKET_ALIGNMENT, minFrameSize)
	case o.BlockTimeout < time.Millisecond || o.BlockTimeout > time.Minute:
		// The kernel counts the block timeout in whole milliseconds.
		return fmt.Errorf("block_timeout %v is outside 1ms..1m", o.BlockTimeout)
	case o.RxQueues < 0 || o.TxQueues < 0 || o.RxQueues > 1024 || o.TxQueues > 1024:
		return fmt.Errorf("queues %d rx, %d tx: outside 0..1024", o.RxQueues, o.TxQueues)
	case o.MTU < 0 || o.MTU > 65535:
		return fmt.Errorf("mtu %d is outside 0..65535", o.MTU)
	}
	if _, ok := fanoutModes[o.Fanout]; !ok {
		return fmt.Errorf("fanout %q is not one of hash, lb, cpu, rollover, rnd, qm", o.Fanout)
	}
	switch o.RxTimestamp {
	case TimestampAuto, TimestampHardware, TimestampKernel, TimestampEngine:
	default:
		return fmt.Errorf("rx_timestamp %q is not auto, hardware, kernel or engine", o.RxTimestamp)
	}
	return nil
}

// Port is an afpacket port.
type Port struct {
	name     string
	ifname   string
	ifindex  int
	mtu      int
	mac      [6]byte
	pool     packet.Pool
	dataRoom int
	rx       []*rxQueue
	tx       []*txQueue
	ts       *timestamps // nil: the engine stamps
	tsSource string
	saved    *netdev.Saved // the interface's MTU before mtu was set

	statsMu sync.Mutex
	kstats  unix.TpacketStatsV3 // summed: the kernel resets its counters on each read
	closed  atomic.Bool
}

var _ ports.Port = (*Port)(nil)

// New opens a port on o.Interface. The caller's thread must be in the
// interface's network namespace; the sockets stay there afterwards.
func New(o Options) (*Port, error) {
	d := DefaultOptions()
	if o.RxQueues == 0 {
		o.RxQueues = 1
	}
	if o.TxQueues == 0 {
		o.TxQueues = 1
	}
	if o.BlockSize == 0 {
		o.BlockSize = d.BlockSize
	}
	if o.Blocks == 0 {
		o.Blocks = d.Blocks
	}
	if o.BlockTimeout == 0 {
		o.BlockTimeout = d.BlockTimeout
	}
	if o.Fanout == "" {
		o.Fanout = d.Fanout
	}
	if o.RxTimestamp == "" {
		o.RxTimestamp = d.RxTimestamp
	}
	if err := o.check(); err != nil {
		return nil, fmt.Errorf("port %q: %w", o.Name, err)
	}
	if o.Pool == nil {
		return nil, fmt.Errorf("port %q: no pool", o.Name)
	}
	ifc, err := findInterface(o.Interface)
	if err != nil {
		return nil, fmt.Errorf("port %q: %w", o.Name, err)
	}
	p := &Port{name: o.Name, ifname: o.Interface, ifindex: ifc.Index, mtu: ifc.MTU, pool: o.Pool,
		dataRoom: o.Pool.DataRoom()}
	copy(p.mac[:], ifc.HardwareAddr)
	if p.ts, p.tsSource, err = setupTimestamps(o.RxTimestamp, o.Interface, o.Clock); err != nil {
		p.Close()
		return nil, fmt.Errorf("port %q: %w", o.Name, err)
	}
	if o.MTU > 0 && o.MTU != ifc.MTU {
		// The kernel then holds the link to it both ways: it refuses larger
		// frames from the tx ring, and drops larger ones a peer delivers.
		if p.saved, err = netdev.Keep(o.Interface); err == nil {
			err = p.saved.Set(o.MTU)
		}
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("port %q: mtu %d: %w", o.Name, o.MTU, err)
		}
		p.mtu = o.MTU
	}
	if o.FrameSize == 0 {
		o.FrameSize = frameSizeFor(p.mtu, o.BlockSize)
	}
	fanout := -1
	if o.RxQueues > 1 {
		fanout = fanoutModes[o.Fanout]
	}
	groupID := -1
	for i := 0; i < o.RxQueues; i++ {
		q, id, err := openRx(p.ifindex, &o, o.Pool.Headroom(), fanout, groupID, p.ts)
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("port %q: %s rx queue %d: %w", o.Name, o.Interface, i, err)
		}
		groupID = id
		p.rx = append(p.rx, q)
	}
	for i := 0; i < o.TxQueues; i++ {
		q, err := openTx(p.ifindex, p.mtu, &o)
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("port %q: %s tx queue %d: %w", o.Name, o.Interface, i, err)
		}
		p.tx = append(p.tx, q)
	}
	return p, nil
}

// frameSizeFor is the smallest power of two that holds a tx frame header and an
// MTU-sized frame with a VLAN tag, at least minFrameSize and at most block.
func frameSizeFor(mtu, block int) int {
	need := txDataOffset + 14 + 4 + mtu
	fs := minFrameSize
	for fs < need && fs < block {
		fs <<= 1
	}
	return fs
}

func (p *Port) Name() string      { return p.name }
func (p *Port) Pool() packet.Pool { return p.pool }

// Info describes the port. LinkUp is read from the interface now.
func (p *Port) Info() ports.Info {
	detail := map[string]string{TimestampHardware: detailHardware, TimestampKernel: detailKernel,
		TimestampEngine: detailEngine}[p.tsSource]
	return ports.Info{Driver: "afpacket", RxQueues: len(p.rx), TxQueues: len(p.tx), MTU: p.mtu, MAC: p.mac,
		TimestampSource: p.tsSource, TimestampDetail: detail, LinkUp: p.linkUp(), Ifindex: p.ifindex}
}

func (p *Port) linkUp() bool {
	fd := -1
	switch {
	case p.closed.Load():
		return false
	case len(p.rx) > 0:
		fd = p.rx[0].fd
	case len(p.tx) > 0:
		fd = p.tx[0].fd
	}
	ifr, err := unix.NewIfreq(p.ifname)
	if err != nil || fd < 0 {
		return false
	}
	// The ioctl goes through one of the port's sockets, so it asks the port's
	// network namespace whatever thread calls it.
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return false
	}
	f := ifr.Uint16()
	return f&unix.IFF_UP != 0 && f&unix.IFF_RUNNING != 0
}

// Stats sums the queues' counters and the kernel's PACKET_STATISTICS.
func (p *Port) Stats() ports.Stats {
	var s ports.Stats
	var tooBig, trunc, csum uint64
	for _, q := range p.rx {
		s.RxPackets += q.pub.packets.Load()
		s.RxBytes += q.pub.bytes.Load()
		tooBig += q.pub.tooBig.Load()
		trunc += q.pub.truncated.Load()
		csum += q.pub.csumNotReady.Load()
	}
	var txTooBig, kick, wrong uint64
	for _, q := range p.tx {
		s.TxPackets += q.pub.packets.Load()
		s.TxBytes += q.pub.bytes.Load()
		txTooBig += q.pub.tooBig.Load()
		kick += q.pub.kickErrors.Load()
		wrong += q.pub.wrongFormat.Load()
	}
	p.statsMu.Lock()
	if !p.closed.Load() {
		for _, q := range p.rx {
			if ks, err := unix.GetsockoptTpacketStatsV3(q.fd, unix.SOL_PACKET, unix.PACKET_STATISTICS); err == nil {
				p.kstats.Packets += ks.Packets
				p.kstats.Drops += ks.Drops
				p.kstats.Freeze_q_cnt += ks.Freeze_q_cnt
			}
		}
	}
	ks := p.kstats
	p.statsMu.Unlock()
	s.RxDropped = tooBig + trunc + uint64(ks.Drops)
	s.TxDropped = txTooBig + wrong
	s.Extra = map[string]uint64{
		"tp_packets":        uint64(ks.Packets),
		"tp_drops":          uint64(ks.Drops),
		"tp_freeze_q_cnt":   uint64(ks.Freeze_q_cnt),
		"rx_too_big":        tooBig,
		"rx_truncated":      trunc,
		"rx_csum_not_ready": csum,
		"tx_too_big":        txTooBig,
		"tx_kick_error":     kick,
		"tx_wrong_format":   wrong,
	}
	return s
}

// ParallelClose says Close may run beside other ports' (ports.ParallelCloser).
func (p *Port) ParallelClose() {}

// Close unmaps the rings and closes the sockets. No queue may be polled during
// or after Close.
func (p *Port) Close() error {
	if p.closed.Swap(true) {
		return nil
	}
	errs := []error{p.ts.close()}
	// The kernel waits for an RCU grace period to release each packet
	// socket (packet_release's synchronize_net): 25–50 ms apiece on a busy
	// host. The queues close at once, so that a restart's gap is one wait,
	// not one a socket.
	closers := make([]func() error, 0, len(p.rx)+len(p.tx))
	for _, q := range p.rx {
		closers = append(closers, q.close)
	}
	for _, q := range p.tx {
		closers = append(closers, q.close)
	}
	qerrs := make([]error, len(closers))
	var wg sync.WaitGroup
	for i, c := range closers {
		wg.Go(func() { qerrs[i] = c() })
	}
	wg.Wait()
	errs = append(errs, qerrs...)
	errs = append(errs, p.saved.Restore())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("port %q: close: %w", p.name, err)
	}
	return nil
}

// RxBurst copies up to b.Room() frames from queue's ring into fresh buffers.
func (p *Port) RxBurst(queue int, b *packet.Burst) int {
	return p.rx[queue].burst(p.pool, p.dataRoom, queue, b)
}

// TxBurst copies packets into queue's tx ring and asks the kernel to send them
// with one sendto. It takes packets until the ring is full; those stay with the
// caller. A packet too big for a ring slot is taken and dropped.
func (p *Port) TxBurst(queue int, b *packet.Burst) int {
	return p.tx[queue].burst(b)
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }
