// Package pcap is the file datapath: it replays a pcap or pcapng file as received
// traffic and writes transmitted packets to a pcap file. It is pure Go: the
// readers and the writer are here, not in libpcap.
//
// Driver "pcap" keys:
//
//	rx_file = "in.pcapng" # pcap (µs or ns, either byte order) or pcapng; "" = no rx
//	loop    = false       # replay again from the start when the file ends
//	timing  = "flat"      # "flat": as fast as the engine polls; "file": at the file's pace
//	tx_file = "out.pcap"  # classic pcap, ns timestamps, Ethernet; "" = no tx
//	snaplen = 262144      # bytes of each transmitted packet that are written
//
// The port's mtu ([[ports]] key) bounds the frames it reads and writes, as a
// link's would: a frame whose IP packet (past the Ethernet header and up to
// two VLAN tags) is longer is dropped and counted, rx_too_big or tx_too_big.
//
// A file is one stream, so the port has one rx queue. It may have any number of
// tx queues; their writers share the file under a lock (see TxBurst).
package pcap

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/linerate/linerate/appliance/clock"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/ports"
)

func init() { ports.Register("pcap", open) }

// Timing is how a replayed file is paced.
type Timing string

const (
	// TimingFlat releases records as fast as the engine polls.
	TimingFlat Timing = "flat"
	// TimingFile releases each record when the engine clock reaches the start
	// time plus the record's offset from the first record of the file.
	TimingFile Timing = "file"
)

// config is the driver's table in the config file.
type config struct {
	RxFile  string `toml:"rx_file"`
	TxFile  string `toml:"tx_file"`
	Loop    bool   `toml:"loop"`
	Timing  string `toml:"timing"`
	Snaplen int    `toml:"snaplen"`
}

// Options open a pcap port without a config file (tests, benchmarks, tools).
type Options struct {
	Name     string
	RxFile   string
	TxFile   string
	Loop     bool
	Timing   Timing // TimingFlat when empty
	Snaplen  int    // DefaultSnaplen when zero
	MTU      int    // largest IP packet read or written; 0: any
	Pool     packet.Pool
	TxQueues int // 1 when zero
	Clock    clock.Clock
	Log      *slog.Logger
}

// chunkFile bounds each allocation in file timing, where most polls release
// few records, so a poll does not take and give back a whole burst of buffers.
const chunkFile = 8

// Port is a pcap port.
type Port struct {
	name     string
	pool     packet.Pool
	dataRoom int
	log      *slog.Logger
	txQueues int
	snaplen  int
	mtu      int
	timing   Timing

	clk      atomic.Pointer[clockBox] // set at open or by Start
	startAt  atomic.Int64             // engine time of Start
	startSet atomic.Bool

	// Receive side: touched only by the lcore that polls queue 0.
	rxFile        *os.File
	rd            *reader
	loop          bool
	rec           record // read but not yet delivered (not due, or no buffer)
	hasRec        bool
	started       bool
	startMono     int64
	firstTs       int64 // first record's timestamp in the file
	haveFirst     bool
	lastTs        int64
	passCount     int64 // records read in this pass
	passDelivered int64 // records of this pass handed to the engine
	passOffset    int64 // file timing: how far later than the first pass this one runs
	spare         packet.Burst
	done          atomic.Bool

	// Transmit side: a file is one stream, but several lcores may each own a tx
	// queue of this port, so their writes are serialised here. The lock is taken
	// once per burst, not per packet.
	txMu      sync.Mutex
	txFile    *os.File
	w         *writer
	txErr     error
	txScratch packet.Burst

	rxPackets, rxBytes, rxDropped, rxErrors atomic.Uint64
	rxTooBig, rxNotEther, rxPasses          atomic.Uint64
	txPackets, txBytes, txDropped           atomic.Uint64
	txNoFile, txWriteErr, txTooBig          atomic.Uint64
	closed                                  bool
}

type clockBox struct{ c clock.Clock }

var (
	_ ports.Port    = (*Port)(nil)
	_ ports.Finite  = (*Port)(nil)
	_ ports.Starter = (*Port)(nil)
)

func open(s *ports.Setup) (ports.Port, error) {
	var c config
	if s.Config != nil {
		if err := s.Config.Decode(&c); err != nil {
			return nil, err
		}
	}
	if s.Config != nil {
	}
	switch Timing(c.Timing) {
	case "", TimingFlat, TimingFile:
	default:
		return nil, fmt.Errorf("timing %q is not \"flat\" or \"file\"", c.Timing)
	}
	if c.Snaplen < 0 || c.Snaplen > MaxRecord {
		return nil, fmt.Errorf("snaplen %d is outside 1..%d", c.Snaplen, MaxRecord)
	}
	if c.RxFile == "" && (c.Loop || c.Timing != "") {
		return nil, errors.New("loop and timing need an rx_file")
	}
	if s.RxQueues > 1 {
		return nil, fmt.Errorf("a file is one stream: rx_queues must be 1, not %d", s.RxQueues)
	}
	if s.DryRun {
		if c.RxFile != "" && !s.Offline {
			if _, err := os.Stat(c.RxFile); err != nil {
				return nil, fmt.Errorf("rx_file: %w", err)
			}
		}
		return nil, nil
	}
	p, err := New(Options{Name: s.Name, RxFile: c.RxFile, TxFile: c.TxFile, Loop: c.Loop, Timing: Timing(c.Timing),
		Snaplen: c.Snaplen, MTU: s.MTU, Pool: s.Pool, TxQueues: s.TxQueues, Clock: s.Clock, Log: s.Log})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// New opens a pcap port.
func New(o Options) (*Port, error) {
	if o.Timing == "" {
		o.Timing = TimingFlat
	}
	if o.Timing != TimingFlat && o.Timing != TimingFile {
		return nil, fmt.Errorf("port %q: timing %q is not \"flat\" or \"file\"", o.Name, o.Timing)
	}
	if o.Snaplen == 0 {
		o.Snaplen = DefaultSnaplen
	}
	if o.Snaplen < 0 || o.Snaplen > MaxRecord {
		return nil, fmt.Errorf("port %q: snaplen %d is outside 1..%d", o.Name, o.Snaplen, MaxRecord)
	}
	if o.TxQueues <= 0 {
		o.TxQueues = 1
	}
	if o.MTU < 0 {
		return nil, fmt.Errorf("port %q: mtu %d is negative", o.Name, o.MTU)
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.RxFile != "" && o.Pool == nil {
		return nil, fmt.Errorf("port %q: rx_file needs a pool", o.Name)
	}
	p := &Port{name: o.Name, pool: o.Pool, log: o.Log, txQueues: o.TxQueues, snaplen: o.Snaplen, mtu: o.MTU,
		timing: o.Timing, loop: o.Loop}
	if o.Pool != nil {
		p.dataRoom = o.Pool.DataRoom()
	}
	if o.Clock != nil {
		p.clk.Store(&clockBox{o.Clock})
	}
	if o.RxFile == "" {
		p.done.Store(true)
	} else {
		f, err := os.Open(o.RxFile)
		if err != nil {
			return nil, fmt.Errorf("port %q: %w", o.Name, err)
		}
		rd, err := newReader(f)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("port %q: %s: %w", o.Name, o.RxFile, err)
		}
		if !rd.ng && rd.linkType != linkTypeEther {
			f.Close()
			return nil, fmt.Errorf("port %q: %s: link type %d is not Ethernet", o.Name, o.RxFile, rd.linkType)
		}
		p.rxFile, p.rd = f, rd
	}
	if o.TxFile != "" {
		f, err := os.Create(o.TxFile)
		if err != nil {
			p.closeRx()
			return nil, fmt.Errorf("port %q: %w", o.Name, err)
		}
		w, err := newWriter(f, o.Snaplen)
		if err != nil {
			f.Close()
			p.closeRx()
			return nil, fmt.Errorf("port %q: %s: %w", o.Name, o.TxFile, err)
		}
		p.txFile, p.w = f, w
	}
	return p, nil
}

func (p *Port) Name() string      { return p.name }
func (p *Port) Pool() packet.Pool { return p.pool }

// Info describes the port. Its MTU is the mtu it was given (0: the engine's
// config default).
func (p *Port) Info() ports.Info {
	rxq := 0
	if p.rd != nil {
		rxq = 1
	}
	src, detail := "engine", "the engine clock when the lcore reads the records, not the capture's times"
	if p.timing == TimingFile {
		src, detail = "file", "the capture's record times, replayed on the engine clock: as far from the "+
			"wire as the capture's own stamps were"
	}
	return ports.Info{Driver: "pcap", RxQueues: rxq, TxQueues: p.txQueues, MTU: p.mtu,
		TimestampSource: src, TimestampDetail: detail, LinkUp: true}
}

// Start takes the engine clock. In file timing the first record is due at the
// moment of Start (or at the first poll, for a port never started).
func (p *Port) Start(c clock.Clock) error {
	if c == nil {
		return fmt.Errorf("port %q: start without a clock", p.name)
	}
	p.clk.Store(&clockBox{c})
	p.startAt.Store(c.Now())
	p.startSet.Store(true)
	return nil
}

// Done reports that the rx file is exhausted and will not loop, or that there is
// no rx file.
func (p *Port) Done() bool { return p.done.Load() }

// RxBurst copies the next records into fresh buffers. In file timing it
// releases only the records that are due and stamps each with its due time on
// the engine clock; otherwise it leaves RxTime for the engine.
func (p *Port) RxBurst(queue int, b *packet.Burst) int {
	room := b.Room()
	if p.rd == nil || queue != 0 || room == 0 || p.done.Load() {
		return 0
	}
	file := p.timing == TimingFile
	var now int64
	if file {
		now = p.clock().Now()
		if !p.started {
			p.started, p.startMono = true, now
			if p.startSet.Load() {
				p.startMono = p.startAt.Load()
			}
		}
	}
	start, got, n := b.N, 0, 0
	var bytes, tooBig, notEther uint64
	rewound := false
	for n < room {
		if !p.hasRec && !p.advance(&rewound) {
			break
		}
		var due int64
		if file {
			due = p.startMono + p.passOffset + (p.rec.ts - p.firstTs)
			if now < due {
				break
			}
		}
		if p.rec.linkType != linkTypeEther {
			p.hasRec = false
			notEther++
			continue
		}
		if len(p.rec.data) > p.dataRoom || p.overMTU(p.rec.data) {
			p.hasRec = false
			tooBig++
			continue
		}
		if n == got {
			want := room - got
			if file && want > chunkFile {
				want = chunkFile
			}
			k := p.pool.Alloc(b, want)
			if k == 0 {
				break // the record waits for buffers
			}
			got += k
		}
		pk := b.H[start+n].P()
		pk.SetWindow(pk.Offset(), len(p.rec.data))
		copy(pk.Data(), p.rec.data)
		pk.InQueue = uint16(queue)
		if file {
			pk.RxTime = due
		}
		bytes += uint64(len(p.rec.data))
		p.hasRec = false
		p.passDelivered++
		n++
	}
	if got > n {
		p.spare.N = copy(p.spare.H[:], b.H[start+n:start+got])
		p.pool.Free(&p.spare)
		b.N = start + n
	}
	if n > 0 {
		p.rxPackets.Add(uint64(n))
		p.rxBytes.Add(bytes)
	}
	if tooBig+notEther > 0 {
		p.rxDropped.Add(tooBig + notEther)
		p.rxTooBig.Add(tooBig)
		p.rxNotEther.Add(notEther)
	}
	return n
}

// advance reads the next record into p.rec. At the end of the file it rewinds
// when looping; after a pass that delivered nothing (every record dropped) it
// rewinds at most once per burst, so such a file cannot spin inside one call.
func (p *Port) advance(rewound *bool) bool {
	rec, err := p.rd.next()
	if err == io.EOF {
		if !p.loop || p.passCount == 0 {
			p.done.Store(true)
			return false
		}
		if *rewound && p.passDelivered == 0 {
			return false // a pass that delivers nothing: do not spin in one call
		}
		*rewound = true
		if err := p.rewind(); err != nil {
			p.rxErrors.Add(1)
			p.log.Error("pcap rewind failed; input ends", "port", p.name, "err", err)
			p.done.Store(true)
			return false
		}
		rec, err = p.rd.next()
		if err == io.EOF {
			p.done.Store(true)
			return false
		}
	}
	if err != nil {
		p.rxErrors.Add(1)
		p.log.Error("pcap read failed; input ends", "port", p.name, "err", err)
		p.done.Store(true)
		return false
	}
	if !p.haveFirst {
		p.haveFirst, p.firstTs = true, rec.ts
	}
	p.lastTs = rec.ts
	p.passCount++
	p.rec, p.hasRec = rec, true
	return true
}

// rewind starts the next pass. In file timing the pass runs one file duration
// plus one mean gap after the previous one, so a looped file keeps its rate.
func (p *Port) rewind() error {
	if span := p.lastTs - p.firstTs; span > 0 {
		gap := int64(0)
		if p.passCount > 1 {
			gap = span / (p.passCount - 1)
		}
		p.passOffset += span + gap
	}
	p.passCount, p.passDelivered = 0, 0
	p.rxPasses.Add(1)
	if _, err := p.rxFile.Seek(0, io.SeekStart); err != nil {
		return err
	}
	return p.rd.reset(p.rxFile)
}

// clock is the engine clock, or the process's monotonic clock before one is set.
func (p *Port) clock() clock.Clock {
	if b := p.clk.Load(); b != nil {
		return b.c
	}
	return processClock
}

// TxBurst writes every packet of b as a record stamped with its TxTime in Unix
// time, and frees them. It takes the whole burst: a file never pushes back.
// Without a tx_file the packets are taken and counted as dropped.
func (p *Port) TxBurst(queue int, b *packet.Burst) int {
	n := b.N
	if n == 0 {
		return 0
	}
	var bytes uint64
	p.txMu.Lock()
	if p.w == nil || p.closed {
		p.txDropped.Add(uint64(n))
		p.txNoFile.Add(uint64(n))
	} else {
		var c clock.Clock
		if box := p.clk.Load(); box != nil {
			c = box.c
		}
		var wall int64
		if c == nil {
			wall = time.Now().UnixNano()
		}
		written, tooBig := 0, 0
		for i := 0; i < n && p.txErr == nil; i++ {
			pk := b.H[i].P()
			if p.overMTU(pk.Data()) {
				tooBig++
				continue
			}
			ts := wall
			if c != nil {
				mono := pk.TxTime
				if mono == 0 {
					mono = c.Now()
				}
				ts = clock.Unix(c, mono)
			}
			if err := p.w.write(pk.Data(), ts); err != nil {
				p.txErr = err
				p.log.Error("pcap write failed; dropping what follows", "port", p.name, "err", err)
				break
			}
			bytes += uint64(pk.Len())
			written++
		}
		p.txPackets.Add(uint64(written))
		p.txBytes.Add(bytes)
		if tooBig > 0 {
			p.txDropped.Add(uint64(tooBig))
			p.txTooBig.Add(uint64(tooBig))
		}
		if lost := n - written - tooBig; lost > 0 {
			p.txDropped.Add(uint64(lost))
			p.txWriteErr.Add(uint64(lost))
		}
	}
	// b stays as it is (the contract); the taken handles are freed from a copy.
	p.txScratch.N = copy(p.txScratch.H[:], b.H[:n])
	packet.Free(&p.txScratch)
	p.txMu.Unlock()
	return n
}

// overMTU reports whether frame d carries an IP packet longer than the MTU:
// its length past the Ethernet header and up to two VLAN tags, the most the
// pools' data room allows for.
func (p *Port) overMTU(d []byte) bool {
	if p.mtu <= 0 {
		return false
	}
	l2 := 14
	for range 2 {
		if len(d) < l2+4 || (d[l2-2] != 0x81 || d[l2-1] != 0x00) && (d[l2-2] != 0x88 || d[l2-1] != 0xa8) {
			break
		}
		l2 += 4
	}
	return len(d)-l2 > p.mtu
}

// Stats returns the port's counters. Extra names the drop reasons.
func (p *Port) Stats() ports.Stats {
	return ports.Stats{
		RxPackets: p.rxPackets.Load(), RxBytes: p.rxBytes.Load(),
		TxPackets: p.txPackets.Load(), TxBytes: p.txBytes.Load(),
		RxDropped: p.rxDropped.Load(), TxDropped: p.txDropped.Load(),
		RxErrors: p.rxErrors.Load(),
		Extra: map[string]uint64{
			"rx_too_big":      p.rxTooBig.Load(),
			"rx_not_ethernet": p.rxNotEther.Load(),
			"rx_passes":       p.rxPasses.Load(),
			"tx_no_file":      p.txNoFile.Load(),
			"tx_write_error":  p.txWriteErr.Load(),
			"tx_too_big":      p.txTooBig.Load(),
		},
	}
}

// Close flushes and closes the files. A record read but not delivered is lost.
func (p *Port) Close() error {
	var errs []error
	p.txMu.Lock()
	if !p.closed && p.w != nil {
		if err := p.w.flush(); err != nil && p.txErr == nil {
			errs = append(errs, fmt.Errorf("port %q: flush %s: %w", p.name, p.txFile.Name(), err))
		}
		if err := p.txFile.Close(); err != nil {
			errs = append(errs, fmt.Errorf("port %q: close %s: %w", p.name, p.txFile.Name(), err))
		}
	}
	if p.txErr != nil && !p.closed {
		errs = append(errs, fmt.Errorf("port %q: write: %w", p.name, p.txErr))
	}
	p.closed = true
	p.txMu.Unlock()
	p.closeRx()
	return errors.Join(errs...)
}

func (p *Port) closeRx() {
	if p.rxFile != nil {
		p.rxFile.Close()
		p.rxFile = nil
		p.rd = nil
		p.done.Store(true)
	}
}

// monoClock is the process's monotonic clock with the wall offset taken at
// start: used only until an engine clock arrives.
type monoClock struct{ offset int64 }

var processClock clock.Clock = monoClock{offset: clock.WallOffset()}

func (m monoClock) Now() int64            { return clock.Mono() }
func (m monoClock) UnixOffset() int64     { return m.offset }
func (m monoClock) Sync() clock.SyncState { return clock.SyncState{TAIOffset: 37} }
