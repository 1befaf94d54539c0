//go:build dpdk

package dpdk

/*
#cgo noescape lr_rx_burst
#cgo nocallback lr_rx_burst
#cgo noescape lr_tx_burst
#cgo nocallback lr_tx_burst
#cgo noescape lr_tx_handles
#cgo nocallback lr_tx_handles
#include <stdlib.h>
#include "lr.h"
#include <rte_bus_vdev.h>
#include <rte_dev.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf_dyn.h>
*/
import "C"

import (
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/linerate/linerate/appliance/clock"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/ports"
	"github.com/linerate/linerate/ports/internal/devclock"
	"github.com/linerate/linerate/ports/internal/netdev"
)

func init() { ports.Register("dpdk", open) }

// Defaults of the driver keys.
const (
	DefaultRxDesc = 1024
	DefaultTxDesc = 1024
)

// Timestamp sources, as Info.TimestampSource names them.
const (
	TimestampAuto     = "auto"
	TimestampHardware = "hardware"
	TimestampEngine   = "engine"
)

// What Info says of each source: where the stamp is taken, and how far from
// the wire it can be.
const (
	detailHardware = "the PMD's rx timestamp (RTE_ETH_RX_OFFLOAD_TIMESTAMP), its device clock mapped " +
		"onto the engine clock every second: at the NIC, nanoseconds from the wire, plus the mapping's " +
		"error (half a rte_eth_read_clock bracket)"
	detailEngine = "the engine clock (CLOCK_MONOTONIC) read once per rx burst in the driver's C pass: " +
		"as late as one poll of the lcore after the PMD had the frame"
)

// portConfig is the driver's table in a [[ports]] entry.
type portConfig struct {
	Device      string   `toml:"device"`
	RxDesc      int      `toml:"rx_desc"`
	TxDesc      int      `toml:"tx_desc"`
	Promiscuous *bool    `toml:"promiscuous"`
	RSS         []string `toml:"rss"`
	RxTimestamp string   `toml:"rx_timestamp"`
}

// Options open a port without a config file (tests, benchmarks). The EAL must be
// running (Start).
type Options struct {
	Name        string
	Device      string // PCI address or vdev string with its arguments
	RxQueues    int    // 1 when zero
	TxQueues    int    // 1 when zero
	RxDesc      int    // DefaultRxDesc when zero
	TxDesc      int    // DefaultTxDesc when zero
	MTU         int    // 0: leave the device's
	NoPromisc   bool
	RSS         []string // hash types for rx_queues > 1; ip, udp, tcp when nil
	RxTimestamp string   // auto (default), hardware or engine
	// Pool sizes; zero takes the EAL config's.
	PoolSize, PoolCache, DataRoom int
	Clock                         clock.Clock // maps hardware timestamps; the host clock when nil
	Log                           *slog.Logger
}

func (o *Options) defaults() {
	if o.RxQueues == 0 {
		o.RxQueues = 1
	}
	if o.TxQueues == 0 {
		o.TxQueues = 1
	}
	if o.RxDesc == 0 {
		o.RxDesc = DefaultRxDesc
	}
	if o.TxDesc == 0 {
		o.TxDesc = DefaultTxDesc
	}
	if o.RSS == nil {
		o.RSS = []string{"ip", "udp", "tcp"}
	}
	if o.RxTimestamp == "" {
		o.RxTimestamp = TimestampAuto
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
}

var rssTypes = []string{"ip", "udp", "tcp", "sctp"}

func (o *Options) check() error {
	switch {
	case o.Device == "":
		return errors.New("device is required (a PCI address or a vdev such as net_null0)")
	case o.RxQueues < 1 || o.RxQueues > 1024 || o.TxQueues < 1 || o.TxQueues > 1024:
		return fmt.Errorf("queues %d rx, %d tx: outside 1..1024", o.RxQueues, o.TxQueues)
	case o.RxDesc < 32 || o.RxDesc > 1<<15 || o.TxDesc < 32 || o.TxDesc > 1<<15:
		return fmt.Errorf("descriptors %d rx, %d tx: outside 32..32768", o.RxDesc, o.TxDesc)
	case o.MTU < 0 || o.MTU > 65535:
		return fmt.Errorf("mtu %d is outside 0..65535", o.MTU)
	}
	for _, t := range o.RSS {
		if !slices.Contains(rssTypes, t) {
			return fmt.Errorf("rss hash type %q is not one of %s", t, strings.Join(rssTypes, ", "))
		}
	}
	switch o.RxTimestamp {
	case TimestampAuto, TimestampHardware, TimestampEngine:
	default:
		return fmt.Errorf("rx_timestamp %q is not auto, hardware or engine", o.RxTimestamp)
	}
	return nil
}

var pciAddr = regexp.MustCompile(`^([0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$`)

// IsPCI reports whether a device string names a PCI device rather than a vdev.
func IsPCI(device string) bool {
	name, _, _ := strings.Cut(device, ",")
	return pciAddr.MatchString(name)
}

func open(s *ports.Setup) (ports.Port, error) {
	var c portConfig
	if s.Config != nil {
		if err := s.Config.Decode(&c); err != nil {
			return nil, err
		}
	}
	var e EAL
	if s.Section != nil {
		var err error
		if e, err = decodeEAL(s.Section("dpdk")); err != nil {
			return nil, err
		}
	}
	o := Options{Name: s.Name, Device: c.Device, RxQueues: s.RxQueues, TxQueues: s.TxQueues, RxDesc: c.RxDesc,
		TxDesc: c.TxDesc, MTU: s.MTU, RSS: c.RSS, RxTimestamp: c.RxTimestamp, PoolSize: e.PoolSize,
		PoolCache: e.PoolCache, DataRoom: e.DataRoom, Clock: s.Clock, Log: s.Log}
	o.NoPromisc = c.Promiscuous != nil && !*c.Promiscuous
	o.defaults()
	if err := o.check(); err != nil {
		return nil, err
	}
	warn := s.Warn
	if warn == nil {
		warn = func(m string) { o.Log.Warn(m) }
	}
	for _, w := range hostWarnings(e, o.Device, s.Lcores) {
		warn(w)
	}
	if s.DryRun {
		return nil, nil
	}
	if err := startFromSetup(e, s.Lcores, o.Log); err != nil {
		return nil, err
	}
	registerHook()
	return Open(o)
}

// Port is a DPDK ethdev.
type Port struct {
	name    string
	device  string // without arguments
	id      uint16
	pool    *Pool
	rxq     []*C.struct_lr_rxq
	rxqAddr []C.uintptr_t // the same as integers (C memory): a *C.struct_lr_rxq would cost a cgo pointer check a burst
	ntx     int
	created bool          // a vdev this port made, removed again at Close
	saved   *netdev.Saved // the kernel interface's MTU before the port opened
	info    ports.Info
	clk     clock.Clock
	log     *slog.Logger
	devMap  *devclock.Map // the device clock's mapping, when the PMD stamps

	statsMu    sync.Mutex
	xnames     []string
	xvals      *C.struct_rte_eth_xstat
	xn         int
	stopCalib  chan struct{}
	calibDone  chan struct{}
	closeOnce  sync.Once
	closeError error
	closed     bool        // under statsMu: Stats and Info stop asking DPDK
	final      ports.Stats // the counters when the port closed
}

var _ ports.Port = (*Port)(nil)

// opened is every open port by ethdev id: an ethdev has one owner.
var opened = struct {
	mu    sync.Mutex
	ports map[uint16]*Port
}{ports: map[uint16]*Port{}}

func openPorts() []*Port {
	opened.mu.Lock()
	defer opened.mu.Unlock()
	out := make([]*Port, 0, len(opened.ports))
	for _, p := range opened.ports {
		out = append(out, p)
	}
	return out
}

// Open opens and starts a port. A vdev that does not exist yet is created
// (rte_vdev_init) and removed again at Close; a PCI device is probed if the EAL
// has not probed it already.
func Open(o Options) (*Port, error) {
	o.defaults()
	if err := o.check(); err != nil {
		return nil, fmt.Errorf("port %q: %w", o.Name, err)
	}
	if !Running() {
		return nil, fmt.Errorf("port %q: the DPDK EAL is not running", o.Name)
	}
	if o.Clock == nil {
		o.Clock = hostClock{}
	}
	p := &Port{name: o.Name, clk: o.Clock, log: o.Log}
	if err := p.open(&o); err != nil {
		p.release()
		return nil, fmt.Errorf("port %q (%s): %w", o.Name, o.Device, err)
	}
	return p, nil
}

// hostClock is the monotonic clock, for ports opened without an engine.
type hostClock struct{}

func (hostClock) Now() int64            { return clock.Mono() }
func (hostClock) UnixOffset() int64     { return 0 }
func (hostClock) Sync() clock.SyncState { return clock.SyncState{} }

func (p *Port) open(o *Options) error {
	name, args, _ := strings.Cut(o.Device, ",")
	p.device = name
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var id C.uint16_t
	if C.rte_eth_dev_get_port_by_name(cname, &id) != 0 {
		if IsPCI(name) {
			cdev := C.CString(o.Device)
			rc := C.rte_dev_probe(cdev)
			C.free(unsafe.Pointer(cdev))
			if rc != 0 {
				return errnoErr("rte_dev_probe", rc)
			}
		} else {
			cargs := C.CString(args)
			rc := C.rte_vdev_init(cname, cargs)
			C.free(unsafe.Pointer(cargs))
			if rc != 0 {
				return errnoErr("rte_vdev_init", rc)
			}
			p.created = true
		}
		if C.rte_eth_dev_get_port_by_name(cname, &id) != 0 {
			return errors.New("no ethdev after probing the device")
		}
	} else if args != "" {
		o.Log.Warn("dpdk: device exists already; its arguments in the config are not applied", "device", o.Device)
	}
	p.id = uint16(id)
	opened.mu.Lock()
	if other := opened.ports[p.id]; other != nil {
		opened.mu.Unlock()
		p.created = false // not ours to remove
		return fmt.Errorf("ethdev %d is open already as port %q", p.id, other.name)
	}
	opened.ports[p.id] = p
	opened.mu.Unlock()

	var di C.struct_lr_devinfo
	if rc := C.lr_dev_info(id, &di); rc != 0 {
		return errnoErr("rte_eth_dev_info_get", rc)
	}
	// A PMD over a kernel interface (net_af_packet, net_tap, a bifurcated
	// NIC) changes that interface's MTU with the port's: Close puts it back.
	if di.if_index != 0 {
		if s, err := netdev.KeepIndex(int(di.if_index)); err == nil {
			p.saved = s
		} else if o.MTU > 0 {
			o.Log.Warn("dpdk: the kernel interface's MTU cannot be read, and will not be put back at close", "port", o.Name, "err", err)
		}
	}
	driver := C.GoString(&di.driver[0])
	if o.RxQueues > int(di.max_rxq) || o.TxQueues > int(di.max_txq) {
		return fmt.Errorf("%s offers %d rx and %d tx queues; asked for %d and %d", driver, di.max_rxq, di.max_txq,
			o.RxQueues, o.TxQueues)
	}
	socket := int(di.socket)
	if socket < 0 || socket >= C.RTE_MAX_NUMA_NODES { // SOCKET_ID_ANY: a vdev; the main lcore's socket
		socket = int(C.rte_lcore_to_socket_id(C.rte_get_main_lcore()))
		if socket >= C.RTE_MAX_NUMA_NODES {
			socket = 0
		}
	}
	pool, err := PoolFor(socket, o.PoolSize, o.PoolCache, o.DataRoom)
	if err != nil {
		return err
	}
	p.pool = pool
	// A frame of the MTU (Ethernet header, one VLAN tag, FCS) must fit one
	// buffer: multi-segment rx would only be linearised or dropped.
	if frame := o.MTU + 22; o.MTU > 0 && frame > pool.DataRoom() {
		return fmt.Errorf("mtu %d makes %d-byte frames; the pool's data_room is %d ([dpdk] data_room)", o.MTU, frame, pool.DataRoom())
	}

	var rssHF C.uint64_t
	if o.RxQueues > 1 && len(o.RSS) > 0 {
		rssHF = C.lr_rss_hf(cbool(slices.Contains(o.RSS, "ip")), cbool(slices.Contains(o.RSS, "udp")),
			cbool(slices.Contains(o.RSS, "tcp")), cbool(slices.Contains(o.RSS, "sctp"))) & di.rss_capa
		if rssHF == 0 {
			return fmt.Errorf("%s cannot hash %v across %d rx queues (its RSS types: %#x)", driver, o.RSS, o.RxQueues, uint64(di.rss_capa))
		}
	}
	tsCapa := di.rx_capa&C.lr_rx_offload_timestamp() != 0
	var rxOffloads C.uint64_t
	wantTS := o.RxTimestamp == TimestampHardware || (o.RxTimestamp == TimestampAuto && tsCapa)
	if wantTS {
		if !tsCapa {
			return fmt.Errorf("rx_timestamp = %q, but %s does not offer RTE_ETH_RX_OFFLOAD_TIMESTAMP", o.RxTimestamp, driver)
		}
		rxOffloads |= C.lr_rx_offload_timestamp()
	}
	// Chains at tx (a window reaching into the private area's headroom) where
	// the port takes them; copies otherwise.
	txOffloads := di.tx_capa & C.lr_tx_offload_multiseg()
	if rc := C.lr_port_configure(id, C.uint16_t(o.RxQueues), C.uint16_t(o.TxQueues), rssHF, rxOffloads, txOffloads); rc != 0 {
		return errnoErr("rte_eth_dev_configure", rc)
	}
	C.lr_tx_setup(id, txOffloads)
	if o.MTU > 0 {
		if rc := C.rte_eth_dev_set_mtu(id, C.uint16_t(o.MTU)); rc != 0 && rc != -C.ENOTSUP {
			return errnoErr(fmt.Sprintf("rte_eth_dev_set_mtu %d", o.MTU), rc)
		}
	}
	rxd, txd := C.uint16_t(o.RxDesc), C.uint16_t(o.TxDesc)
	if rc := C.rte_eth_dev_adjust_nb_rx_tx_desc(id, &rxd, &txd); rc != 0 {
		return errnoErr("rte_eth_dev_adjust_nb_rx_tx_desc", rc)
	}
	for q := 0; q < o.RxQueues; q++ {
		if rc := C.rte_eth_rx_queue_setup(id, C.uint16_t(q), rxd, C.uint(socket), nil, pool.mp); rc != 0 {
			return errnoErr(fmt.Sprintf("rte_eth_rx_queue_setup %d", q), rc)
		}
	}
	for q := 0; q < o.TxQueues; q++ {
		if rc := C.rte_eth_tx_queue_setup(id, C.uint16_t(q), txd, C.uint(socket), nil); rc != 0 {
			return errnoErr(fmt.Sprintf("rte_eth_tx_queue_setup %d", q), rc)
		}
	}
	var tsOff C.int = -1
	var tsFlag C.uint64_t
	if wantTS {
		if rc := C.rte_mbuf_dyn_rx_timestamp_register(&tsOff, &tsFlag); rc != 0 {
			return errnoErr("rte_mbuf_dyn_rx_timestamp_register", C.lr_errno())
		}
	}
	for q := 0; q < o.RxQueues; q++ {
		rq := (*C.struct_lr_rxq)(C.calloc(1, C.size_t(unsafe.Sizeof(C.struct_lr_rxq{}))))
		rq.port, rq.queue, rq.pool_id, rq.mp = id, C.uint16_t(q), C.uint16_t(pool.id), pool.mp
		rq.ts_off, rq.ts_flag = tsOff, tsFlag
		p.rxq = append(p.rxq, rq)
		p.rxqAddr = append(p.rxqAddr, C.uintptr_t(uintptr(unsafe.Pointer(rq))))
	}
	p.ntx = o.TxQueues
	if rc := C.rte_eth_dev_start(id); rc != 0 {
		return errnoErr("rte_eth_dev_start", rc)
	}
	if !o.NoPromisc {
		if rc := C.rte_eth_promiscuous_enable(id); rc != 0 && rc != -C.ENOTSUP {
			o.Log.Warn("dpdk: promiscuous mode", "port", o.Name, "err", strerror(-rc))
		}
	}
	var mac C.struct_rte_ether_addr
	C.rte_eth_macaddr_get(id, &mac)
	var mtu C.uint16_t
	if C.rte_eth_dev_get_mtu(id, &mtu) != 0 {
		mtu = C.uint16_t(o.MTU)
	}
	p.info = ports.Info{Driver: "dpdk/" + driver, RxQueues: o.RxQueues, TxQueues: o.TxQueues, MTU: int(mtu),
		TimestampSource: TimestampEngine, TimestampDetail: detailEngine, OwnPoolOnly: true}
	for i := range p.info.MAC {
		p.info.MAC[i] = byte(mac.addr_bytes[i])
	}
	if wantTS {
		if err := p.calibrate(); err != nil {
			if o.RxTimestamp == TimestampHardware {
				return fmt.Errorf("rx_timestamp = hardware: %w", err)
			}
			o.Log.Info("dpdk: the device clock cannot be read; rx timestamps come from the engine clock", "port", o.Name, "err", err)
		} else {
			for _, rq := range p.rxq {
				rq.ts_on = 1
			}
			p.info.TimestampSource, p.info.TimestampDetail = TimestampHardware, detailHardware
			p.stopCalib, p.calibDone = make(chan struct{}), make(chan struct{})
			go p.recalibrate()
		}
	}
	p.loadXstatNames()
	return nil
}

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// calibrate maps the device clock onto the engine clock. The first time it
// takes two readings 10 ms apart; then each call adds one, and the rate is
// measured over the last devclock.Baseline of them, so that the jitter of
// one reading weighs less and less.
func (p *Port) calibrate() error {
	read := func() (devclock.Point, error) {
		return devclock.Read(func() (int64, error) {
			var c C.uint64_t
			if rc := C.lr_read_clock(C.uint16_t(p.id), &c); rc != 0 {
				return 0, errnoErr("rte_eth_read_clock", rc)
			}
			return int64(c), nil
		}, p.clk.Now)
	}
	m := p.devMap
	if m == nil {
		p0, err := read()
		if err != nil {
			return err
		}
		time.Sleep(10 * time.Millisecond)
		p1, err := read()
		if err != nil {
			return err
		}
		if p1.Dev <= p0.Dev || p1.Mono <= p0.Mono {
			return errors.New("the device clock does not advance")
		}
		m = devclock.Next(devclock.Next(nil, p0, 1), p1, 1)
	} else {
		pt, err := read()
		if err != nil {
			return err
		}
		m = devclock.Next(m, pt, m.Rate)
	}
	mul := uint64(m.Rate * (1 << 32))
	for _, rq := range p.rxq {
		C.lr_rxq_set_conv(rq, C.uint64_t(m.Dev0), C.int64_t(m.Mono0), C.uint64_t(mul))
	}
	p.devMap = m
	return nil
}

// recalibrate follows the device clock's drift against the engine clock.
func (p *Port) recalibrate() {
	defer close(p.calibDone)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-p.stopCalib:
			return
		case <-t.C:
			if err := p.calibrate(); err != nil {
				p.log.Warn("dpdk: recalibrating rx timestamps", "port", p.name, "err", err)
			}
		}
	}
}

func (p *Port) loadXstatNames() {
	n := int(C.rte_eth_xstats_get_names(C.uint16_t(p.id), nil, 0))
	if n <= 0 {
		return
	}
	names := (*C.struct_rte_eth_xstat_name)(C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof(C.struct_rte_eth_xstat_name{}))))
	defer C.free(unsafe.Pointer(names))
	got := int(C.rte_eth_xstats_get_names(C.uint16_t(p.id), names, C.uint(n)))
	if got <= 0 || got > n {
		return
	}
	for _, xn := range unsafe.Slice(names, got) {
		p.xnames = append(p.xnames, C.GoString(&xn.name[0]))
	}
	p.xn = got
	p.xvals = (*C.struct_rte_eth_xstat)(C.calloc(C.size_t(got), C.size_t(unsafe.Sizeof(C.struct_rte_eth_xstat{}))))
}

func (p *Port) Name() string      { return p.name }
func (p *Port) Pool() packet.Pool { return p.pool }

// DPDKPool is the port's mbuf pool with its DPDK-specific accessors.
func (p *Port) DPDKPool() *Pool { return p.pool }

// PortID is the DPDK ethdev port id.
func (p *Port) PortID() uint16 { return p.id }

// Info describes the port; LinkUp is read now.
func (p *Port) Info() ports.Info {
	p.statsMu.Lock()
	defer p.statsMu.Unlock()
	in := p.info
	if !p.closed {
		var speed C.uint32_t
		in.LinkUp = C.lr_link(C.uint16_t(p.id), &speed) == 1
	}
	return in
}

// RxBurst receives into the free slots of b: one cgo call, which also writes each
// mbuf's window into its metadata.
func (p *Port) RxBurst(q int, b *packet.Burst) int {
	room := packet.MaxBurst - b.N
	if room <= 0 {
		return 0
	}
	n := int(C.lr_rx_burst(p.rxqAddr[q], handles(&b.H[b.N]), C.uint16_t(room)))
	// The PMD took these from the mempool in C.
	packet.OwnBurst(b.H[b.N:b.N+n], packet.OpRecv, packet.NoOwner, -1)
	b.N += n
	return n
}

// StampRx lets rx queue q stamp its packets in the C rx pass: InPort, InQueue
// and RxTime from CLOCK_MONOTONIC, which is the engine's clock (the Go
// runtime's nanotime reads the same clock). A hardware timestamp, where the PMD
// gives one, still wins. Call it before the queue's first burst.
func (p *Port) StampRx(q int, port uint16) bool {
	if q < 0 || q >= len(p.rxq) {
		return false
	}
	p.rxq[q].engine_port = C.uint16_t(port)
	p.rxq[q].stamp = 1
	return true
}

// TxBurst transmits from the front of b: one cgo call, which writes each
// packet's window back into its mbuf. The packets must be of a DPDK pool
// (Info.OwnPoolOnly makes the engine copy others).
func (p *Port) TxBurst(q int, b *packet.Burst) int {
	if b.N == 0 {
		return 0
	}
	return int(C.lr_tx_burst(C.uint16_t(p.id), C.uint16_t(q), handles(&b.H[0]), C.uint16_t(b.N)))
}

// TxHandles transmits straight from the engine's tx buffer in one cgo call per
// 64 handles; the C pass writes back moved windows and the transit delays
// stages asked for. It stops before a packet that is not one of our mbufs and
// reports foreign.
func (p *Port) TxHandles(q int, hs []packet.Handle, now int64) (int, bool) {
	sent := 0
	for len(hs) > 0 {
		n := min(len(hs), packet.MaxBurst)
		var foreign C.uint8_t
		k := int(C.lr_tx_handles(C.uint16_t(p.id), C.uint16_t(q), handles(&hs[0]), C.uint16_t(n), C.int64_t(now), &foreign))
		sent += k
		if k < n {
			return sent, foreign != 0
		}
		hs = hs[k:]
	}
	return sent, false
}

// Stats reads rte_eth_stats and every xstat.
func (p *Port) Stats() ports.Stats {
	p.statsMu.Lock()
	defer p.statsMu.Unlock()
	if p.closed {
		return p.final
	}
	return p.readStats()
}

func (p *Port) readStats() ports.Stats {
	var st C.struct_rte_eth_stats
	C.rte_eth_stats_get(C.uint16_t(p.id), &st)
	var slow [4]C.uint64_t
	extra := map[string]uint64{}
	var lin, msDrop, fCopy, fDrop uint64
	for _, rq := range p.rxq {
		C.lr_rxq_counters(rq, &slow[0])
		lin += uint64(slow[0])
		msDrop += uint64(slow[1])
		fCopy += uint64(slow[2])
		fDrop += uint64(slow[3])
	}
	var tx [3]C.uint64_t
	C.lr_tx_counters(C.uint16_t(p.id), &tx[0])
	extra["tx_chained"], extra["tx_copied"], extra["tx_slow_dropped"] = uint64(tx[0]), uint64(tx[1]), uint64(tx[2])
	extra["rx_linearized"] = lin
	extra["rx_multiseg_dropped"] = msDrop
	extra["rx_foreign_copied"] = fCopy
	extra["rx_foreign_dropped"] = fDrop
	if p.xn > 0 {
		got := int(C.rte_eth_xstats_get(C.uint16_t(p.id), p.xvals, C.uint(p.xn)))
		if got > 0 && got <= p.xn {
			for _, x := range unsafe.Slice(p.xvals, got) {
				if int(x.id) < len(p.xnames) {
					extra[p.xnames[x.id]] = uint64(x.value)
				}
			}
		}
	}
	return ports.Stats{
		RxPackets: uint64(st.ipackets), RxBytes: uint64(st.ibytes),
		TxPackets: uint64(st.opackets), TxBytes: uint64(st.obytes),
		RxDropped: uint64(st.imissed) + uint64(st.rx_nombuf) + msDrop + fDrop,
		TxDropped: uint64(st.oerrors) + uint64(tx[2]),
		RxErrors:  uint64(st.ierrors),
		Extra:     extra,
	}
}

// Close stops and closes the device, and removes a vdev it created. Buffers its
// rx rings held go back to the pool.
func (p *Port) Close() error {
	p.closeOnce.Do(func() { p.closeError = p.release() })
	return p.closeError
}

func (p *Port) release() error {
	if p.stopCalib != nil {
		close(p.stopCalib)
		<-p.calibDone
	}
	var errs []error
	p.statsMu.Lock()
	if !p.closed && len(p.rxq) > 0 {
		p.final = p.readStats()
	}
	p.closed = true
	p.statsMu.Unlock()
	opened.mu.Lock()
	mine := opened.ports[p.id] == p
	if mine {
		delete(opened.ports, p.id)
	}
	opened.mu.Unlock()
	if mine {
		id := C.uint16_t(p.id)
		if rc := C.rte_eth_dev_stop(id); rc != 0 && rc != -C.ENOTSUP {
			errs = append(errs, errnoErr("rte_eth_dev_stop", rc))
		}
		if err := p.saved.Restore(); err != nil {
			errs = append(errs, err)
		}
		p.saved = nil
		if rc := C.rte_eth_dev_close(id); rc != 0 {
			errs = append(errs, errnoErr("rte_eth_dev_close", rc))
		}
	}
	if p.created {
		cname := C.CString(p.device)
		if rc := C.rte_vdev_uninit(cname); rc != 0 {
			errs = append(errs, errnoErr("rte_vdev_uninit "+p.device, rc))
		}
		C.free(unsafe.Pointer(cname))
		p.created = false
	}
	for _, rq := range p.rxq {
		C.free(unsafe.Pointer(rq))
	}
	p.rxq, p.rxqAddr = nil, nil
	if p.xvals != nil {
		C.free(unsafe.Pointer(p.xvals))
		p.xvals = nil
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("port %q: %w", p.name, err)
	}
	return nil
}
