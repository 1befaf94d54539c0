//go:build linux

package xdp

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/linerate/linerate/appliance/clock"
	"github.com/linerate/linerate/appliance/kernel"
	"github.com/linerate/linerate/appliance/offload"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/ports"
	"github.com/linerate/linerate/ports/internal/netdev"
)

func init() {
	ports.Register("xdp", open)
	offload.RegisterHostDriver("xdp")
}

// Defaults.
const (
	DefaultRingSize  = 2048
	DefaultFrameSize = 4096
)

// config is the driver's table in the config file.
type config struct {
	Interface      string       `toml:"interface"`
	Attach         string       `toml:"attach"`
	Bind           string       `toml:"bind"`
	Replace        bool         `toml:"replace"`
	TakeAll        bool         `toml:"take_all"`
	Match          []ruleConfig `toml:"match"`
	RingSize       int          `toml:"ring_size"`
	FrameSize      int          `toml:"frame_size"`
	Frames         int          `toml:"frames"`
	BusyPoll       bool         `toml:"busy_poll"`
	BusyPollBudget int          `toml:"busy_poll_budget"`
	RxTimestamp    string       `toml:"rx_timestamp"`
}

type ruleConfig struct {
	NextHeader *int   `toml:"next_header"`
	UDPDstPort *int   `toml:"udp_dst_port"`
	UDPSrcPort *int   `toml:"udp_src_port"`
	DstPrefix  string `toml:"dst_prefix"`
	HopByHop   *bool  `toml:"hop_by_hop"`
	SRH        *bool  `toml:"srh"`
	IOAM       *bool  `toml:"ioam"`
}

func (c ruleConfig) rule() (Rule, error) {
	r := Rule{NextHeader: c.NextHeader, UDPDstPort: c.UDPDstPort, UDPSrcPort: c.UDPSrcPort, HopByHop: c.HopByHop,
		SRH: c.SRH, IOAM: c.IOAM}
	if c.DstPrefix != "" {
		p, err := netip.ParsePrefix(c.DstPrefix)
		if err != nil {
			return r, fmt.Errorf("dst_prefix %q: %w", c.DstPrefix, err)
		}
		r.DstPrefix = p
	}
	return r, r.check()
}

// Options open an xdp port without a config file.
type Options struct {
	Name      string
	Interface string
	RxQueues  int // 1 when zero
	TxQueues  int // 1 when zero
	// Attach is the XDP mode: "auto" (native, else generic), "native" or
	// "generic".
	Attach string
	// Bind is the AF_XDP mode: "auto" (zero-copy, else copy), "zerocopy" or
	// "copy".
	Bind string
	// Replace lets the port take the place of an XDP program someone else
	// attached with netlink (ip link, a program that exited without its link).
	Replace bool
	// Rules are what the dispatcher takes; TakeAll takes every packet
	// instead, the host's own traffic (SSH) included.
	Rules   []Rule
	TakeAll bool
	// RingSize is each ring's entries, a power of two; FrameSize 2048 or
	// 4096; Frames the UMEM's frames (enough for every ring by default).
	RingSize  int
	FrameSize int
	Frames    int
	// BusyPoll sets SO_PREFER_BUSY_POLL with BusyPollBudget.
	BusyPoll       bool
	BusyPollBudget int
	// RxTimestamp is "auto" (the best this host gives, said in one log
	// line), "hardware" (the NIC's), "kernel" (the dispatcher's
	// bpf_ktime_get_ns) or "engine"; hardware and kernel are an error
	// where the host cannot give them.
	RxTimestamp string
	Clock       clock.Clock
	Log         *slog.Logger

	// forceVia (tests) hands the stamp up this way, not the probes' way.
	forceVia *stampVia
	// logNamed: Log already says port= (the engine's logger).
	logNamed bool
}

func (o *Options) defaults() {
	if o.RxQueues == 0 {
		o.RxQueues = 1
	}
	if o.TxQueues == 0 {
		o.TxQueues = 1
	}
	if o.Attach == "" {
		o.Attach = "auto"
	}
	if o.Bind == "" {
		o.Bind = "auto"
	}
	if o.RingSize == 0 {
		o.RingSize = DefaultRingSize
	}
	if o.FrameSize == 0 {
		o.FrameSize = DefaultFrameSize
	}
	if o.Frames == 0 {
		// Each socket's fill and tx rings full, and as much again for the
		// engine's bursts, tx buffers and what stages emit.
		o.Frames = 4 * o.RingSize * max(o.RxQueues, o.TxQueues)
	}
	if o.BusyPollBudget == 0 {
		o.BusyPollBudget = 64
	}
	if o.RxTimestamp == "" {
		o.RxTimestamp = "auto"
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
}

func (o *Options) check() error {
	switch {
	case o.Interface == "":
		return errors.New("interface is required")
	case len(o.Interface) >= unix.IFNAMSIZ:
		return fmt.Errorf("interface name %q is longer than %d bytes", o.Interface, unix.IFNAMSIZ-1)
	case o.Attach != "auto" && o.Attach != "native" && o.Attach != "generic":
		return fmt.Errorf("attach %q is not auto, native or generic", o.Attach)
	case o.Bind != "auto" && o.Bind != "zerocopy" && o.Bind != "copy":
		return fmt.Errorf("bind %q is not auto, zerocopy or copy", o.Bind)
	case o.RingSize < 64 || o.RingSize > 1<<16 || o.RingSize&(o.RingSize-1) != 0:
		return fmt.Errorf("ring_size %d is not a power of two from 64 to 65536", o.RingSize)
	case o.FrameSize != 2048 && o.FrameSize != 4096:
		return fmt.Errorf("frame_size %d is not 2048 or 4096", o.FrameSize)
	case o.Frames < 2*o.RingSize*max(o.RxQueues, o.TxQueues) || o.Frames > 1<<22:
		return fmt.Errorf("frames %d: at least %d (twice ring_size per queue), at most %d", o.Frames,
			2*o.RingSize*max(o.RxQueues, o.TxQueues), 1<<22)
	case o.RxQueues < 0 || o.TxQueues < 0 || o.RxQueues > maxQueues || o.TxQueues > maxQueues:
		return fmt.Errorf("queues %d rx, %d tx: outside 1..%d", o.RxQueues, o.TxQueues, maxQueues)
	case o.BusyPollBudget < 1 || o.BusyPollBudget > 1024:
		return fmt.Errorf("busy_poll_budget %d is outside 1..1024", o.BusyPollBudget)
	case o.RxTimestamp != TimestampAuto && o.RxTimestamp != TimestampHardware && o.RxTimestamp != TimestampKernel &&
		o.RxTimestamp != TimestampEngine:
		return fmt.Errorf("rx_timestamp %q is not auto, hardware, kernel or engine", o.RxTimestamp)
	case len(o.Rules) > MaxRules:
		return fmt.Errorf("%d match rules: at most %d", len(o.Rules), MaxRules)
	case len(o.Rules) == 0 && !o.TakeAll:
		return errors.New("no match rules: the port would take every packet of the interface, the host's own " +
			"(SSH) included; add [[ports.match]] rules for what the pipelines process, or take_all = true " +
			"to take everything")
	case len(o.Rules) > 0 && o.TakeAll:
		return errors.New("take_all = true takes every packet: leave out the match rules, or take_all")
	}
	for i, r := range o.Rules {
		if err := r.check(); err != nil {
			return fmt.Errorf("match[%d]: %w", i, err)
		}
	}
	return nil
}

func decode(s *ports.Setup) (Options, error) {
	var c config
	if s.Config != nil {
		if err := s.Config.Decode(&c); err != nil {
			return Options{}, err
		}
	}
	o := Options{Name: s.Name, Interface: c.Interface, RxQueues: s.RxQueues, TxQueues: s.TxQueues, Attach: c.Attach,
		Bind: c.Bind, Replace: c.Replace, TakeAll: c.TakeAll, RingSize: c.RingSize, FrameSize: c.FrameSize,
		Frames: c.Frames, BusyPoll: c.BusyPoll, BusyPollBudget: c.BusyPollBudget, RxTimestamp: c.RxTimestamp,
		Clock: s.Clock, Log: s.Log, logNamed: s.Log != nil}
	for i, rc := range c.Match {
		r, err := rc.rule()
		if err != nil {
			return o, fmt.Errorf("match[%d]: %w", i, err)
		}
		o.Rules = append(o.Rules, r)
	}
	o.defaults()
	return o, o.check()
}

func open(s *ports.Setup) (ports.Port, error) {
	o, err := decode(s)
	if err != nil {
		return nil, err
	}
	if s.DryRun {
		if !s.Offline {
			ifc, err := net.InterfaceByName(o.Interface)
			if err != nil {
				return nil, fmt.Errorf("interface %q: no such network interface here (ip link lists them)", o.Interface)
			}
			// What cannot work here fails validate too, after doctor has
			// heard every finding.
			var fail error
			for _, f := range plan(o, ifc.Index) {
				if s.Plan != nil {
					s.Plan(f)
				}
				if f.Outcome == ports.Fails && fail == nil {
					fail = fmt.Errorf("%s: %s", f.Need, f.Detail)
				}
			}
			if fail != nil {
				return nil, fail
			}
		}
		return nil, nil
	}
	if err := mtuFits(s.MTU, o.FrameSize, 0); err != nil {
		return nil, err
	}
	p, err := New(o)
	if err != nil {
		return nil, err
	}
	// The headroom variant's stamp is part of the frame the kernel copies.
	if err := mtuFits(s.MTU, o.FrameSize, p.via.strip()); err != nil {
		p.Close()
		return nil, fmt.Errorf("port %q: %w", o.Name, err)
	}
	return p, nil
}

// mtuFits checks that a frame of mtu, and stamp bytes in front, fits a
// UMEM frame of frameSize.
func mtuFits(mtu, frameSize, stamp int) error {
	room := func(fs int) int { return fs - packet.MetaSize - packet.MinHeadroom - 18 - stamp }
	if mtu > 0 && mtu > room(frameSize) {
		why := ""
		if stamp > 0 {
			why = fmt.Sprintf(", with the %d bytes of the rx stamp in front", stamp)
		}
		return fmt.Errorf("mtu %d does not fit a frame of %d bytes%s (frame_size 4096 holds up to %d)", mtu,
			frameSize, why, room(4096))
	}
	return nil
}

// queue is one AF_XDP socket and its lcores' state: the rx side belongs to
// the lcore that polls rx queue i, the tx side to the one that owns tx queue
// i.
type queue struct {
	s *xsk

	// rx side
	fillLen uint32 // frames given to the kernel, in the fill or rx ring
	refill  [packet.MaxBurst]packet.Handle
	rxPkts  atomic.Uint64
	rxBytes atomic.Uint64
	_       [40]byte

	// tx side
	txOut   uint32 // frames in the tx or completion ring
	done    [packet.MaxBurst]packet.Handle
	txPkts  atomic.Uint64
	txBytes atomic.Uint64
	kickErr atomic.Uint64
	_       [40]byte
}

// Port is an xdp port.
type Port struct {
	name     string
	ifname   string
	ifindex  int
	mtu      int
	mac      [6]byte
	u        *umem
	q        []*queue
	rxq, txq int
	d        *dispatcher
	opt      Options
	log      *slog.Logger     // says port= once
	mode     string           // XDP mode attached: "native" or "generic"
	devBound bool             // the dispatcher is device-bound
	rx       rxPlan           // where RxTime comes from
	via      stampVia         // how the dispatcher's stamp comes up; viaNone: no stamp
	strip    int              // bytes in front of each frame the socket gets: the headroom variant's stamp
	phc      *devClock        // the NIC's PTP hardware clock, for its rx stamps; nil: none
	stamping *netdev.Stamping // the NIC's rx stamping before the port switched it on
	hwStamps atomic.Uint64
	busy     bool
	veth     *vethTx // veth's XDP_TX losses; nil on other drivers

	statsMu sync.Mutex
	closed  atomic.Bool
}

var (
	_ ports.Port   = (*Port)(nil)
	_ offload.Host = (*Port)(nil)
)

// New opens a port on o.Interface: the UMEM, one socket per queue, and the
// dispatcher attached with a bpf_link of the process's own (never pinned:
// the kernel detaches it when the process ends, however it ends). The
// caller's thread must be in the interface's network namespace.
func New(o Options) (*Port, error) {
	o.defaults()
	if err := o.check(); err != nil {
		return nil, fmt.Errorf("port %q: %w", o.Name, err)
	}
	ifc, err := net.InterfaceByName(o.Interface)
	if err != nil {
		return nil, fmt.Errorf("port %q: interface %q: no such network interface here (ip link lists them)", o.Name, o.Interface)
	}
	log := o.Log
	if !o.logNamed {
		log = log.With("port", o.Name)
	}
	p := &Port{name: o.Name, ifname: o.Interface, ifindex: ifc.Index, mtu: ifc.MTU, opt: o, rxq: o.RxQueues,
		txq: o.TxQueues, busy: o.BusyPoll, log: log}
	copy(p.mac[:], ifc.HardwareAddr)
	fail := func(err error) (*Port, error) {
		p.Close()
		return nil, fmt.Errorf("port %q: %s: %w", o.Name, o.Interface, err)
	}
	if err := requireKernel(); err != nil {
		return fail(err)
	}
	_, host := o.Clock.(*clock.System)
	host = host || o.Clock == nil
	if p.rx, err = planRx(o.RxTimestamp, ifaceOf(o.Interface, p.ifindex), host, o.forceVia); err != nil {
		return fail(err)
	}
	if p.rx.source == TimestampHardware {
		if err := p.openPHC(); err != nil {
			if o.RxTimestamp == TimestampHardware {
				return fail(fmt.Errorf(`rx_timestamp = "hardware": %w`, err))
			}
			p.hardwareRefused(fmt.Sprintf("the NIC's stamps: %v", flat(err.Error())))
		}
	}
	if p.u, err = newUmem(o.Name+"/umem", o.Frames, o.FrameSize); err != nil {
		return fail(err)
	}
	if err := p.attachDispatcher(nil); err != nil {
		return fail(err)
	}
	p.via, p.strip = p.d.via, p.d.via.strip()
	p.log.Info(p.rx.line(), "interface", p.ifname)
	p.veth = watchVeth(p.ifname, p.ifindex)
	shared := -1
	for i := range max(o.RxQueues, o.TxQueues) {
		s, err := openXsk(xskOptions{ifindex: p.ifindex, queue: i, ringSize: uint32(o.RingSize), u: p.u, sharedFD: shared,
			copyMode: o.Bind})
		if err != nil {
			return fail(err)
		}
		if shared < 0 {
			shared = s.fd
		}
		q := &queue{s: s}
		p.q = append(p.q, q)
		if o.BusyPoll {
			if err := s.busyPoll(o.BusyPollBudget); err != nil {
				p.log.Warn("busy polling not available", "interface", p.ifname, "err", err)
				p.busy = false
			}
		}
		if i < o.RxQueues {
			p.fill(q)
			if err := p.d.setSocket(i, s.fd); err != nil {
				return fail(err)
			}
		}
	}
	return p, nil
}

// requireKernel is nil unless the kernel lacks what every xdp port needs:
// AF_XDP sockets and bpf_loop (the dispatcher's rule walk). A probe that
// cannot tell lets the load speak.
func requireKernel() error {
	for _, f := range []kernel.Feature{kernel.XSKMap, kernel.Loop} {
		if r := kernel.Probe(f); r.State == kernel.Missing {
			return r.Err()
		}
	}
	return nil
}

// openPHC follows the NIC's PTP hardware clock, whose time its rx stamps
// are, and turns its stamping of every frame on: most drivers stamp frames
// only once asked to stamp them all.
func (p *Port) openPHC() error {
	c, err := openPHC(p.ifname)
	if err != nil {
		return err
	}
	if c == nil {
		return fmt.Errorf("%s has no PTP hardware clock", p.ifname)
	}
	p.phc = c
	if p.stamping, err = netdev.StampAll(p.ifname); err != nil {
		p.dropPHC()
		return err
	}
	return nil
}

// hardwareRefused falls back from the NIC's stamps to the kernel's clock
// (auto only): why goes into the plan's one log line.
func (p *Port) hardwareRefused(why string) {
	if p.phc != nil {
		p.dropPHC()
	}
	p.rx.source, p.rx.dev = TimestampKernel, false
	p.rx.kernelLacks = append([]string{why}, p.rx.kernelLacks...)
}

// attachDispatcher loads the dispatcher with reqs in its slots, fills its
// maps, and attaches it, or puts it in place of the one attached. It loads
// once for all the modes it tries: the variant is chosen already.
func (p *Port) attachDispatcher(reqs []*offload.Request) error {
	if p.d != nil {
		return p.replaceDispatcher(reqs)
	}
	if id, mode, ok := xdpAttached(p.ifindex); ok {
		if !p.opt.Replace {
			return fmt.Errorf("interface %s already has an XDP program (id %d, %s mode) that this port did not "+
				"attach: stop what attached it, or set replace = true to take its place", p.ifname, id, mode)
		}
		if err := xdpDetach(p.ifindex); err != nil {
			return fmt.Errorf("replace the XDP program (id %d) on %s: %s (a bpf_link of another process "+
				"cannot be replaced; stop that process)", id, p.ifname, flat(err.Error()))
		}
		p.log.Warn("replaced an XDP program", "interface", p.ifname, "id", id)
	}
	// The NIC's stamps need a device-bound program, which attaches in
	// native mode only.
	if p.rx.dev && p.opt.Attach != "generic" {
		d, err := p.load(true, reqs)
		if err == nil {
			if err = p.attach(d, link.XDPDriverMode); err == nil {
				return nil
			}
			d.close()
			err = fmt.Errorf("attach the device-bound XDP dispatcher in native mode: %s", flat(err.Error()))
		}
		if p.opt.RxTimestamp == TimestampHardware {
			return fmt.Errorf(`rx_timestamp = "hardware": %w`, err)
		}
		p.hardwareRefused(err.Error())
	} else if p.rx.dev {
		if p.opt.RxTimestamp == TimestampHardware {
			return errors.New(`rx_timestamp = "hardware" needs attach = "native" or "auto" (a device-bound ` +
				`program attaches in native mode only)`)
		}
		p.hardwareRefused(`attach = "generic" (the NIC's stamps need native mode)`)
	}
	d, err := p.load(false, reqs)
	if err != nil {
		return err
	}
	modes := map[string][]link.XDPAttachFlags{"auto": {link.XDPDriverMode, link.XDPGenericMode},
		"native": {link.XDPDriverMode}, "generic": {link.XDPGenericMode}}[p.opt.Attach]
	var errs []string
	for _, m := range modes {
		err := p.attach(d, m)
		if err == nil {
			if len(errs) > 0 {
				p.log.Info("XDP in generic mode: native mode refused", "interface", p.ifname, "err", errs[0])
			}
			return nil
		}
		errs = append(errs, fmt.Sprintf("%s mode: %s", modeName[m], flat(err.Error())))
	}
	d.close()
	return fmt.Errorf("attach XDP to %s: %s", p.ifname, strings.Join(errs, "; "))
}

var modeName = map[link.XDPAttachFlags]string{link.XDPDriverMode: "native", link.XDPGenericMode: "generic"}

// attach attaches d in mode and makes it the port's.
func (p *Port) attach(d *dispatcher, mode link.XDPAttachFlags) error {
	l, err := link.AttachXDP(link.XDPOptions{Program: d.prog, Interface: p.ifindex, Flags: mode})
	if err != nil {
		return err
	}
	d.link = l
	p.d, p.devBound, p.mode = d, d.devBound, modeName[mode]
	return nil
}

// load loads a dispatcher with the port's match table and rx stamp variant.
func (p *Port) load(dev bool, reqs []*offload.Request) (*dispatcher, error) {
	c := dispatcherConfig{via: p.rx.via, hw: dev && p.phc != nil, log: p.log, name: p.name}
	if dev {
		c.ifindex = p.ifindex
	}
	d, err := loadDispatcher(c, reqs)
	if err != nil {
		return nil, err
	}
	if err := d.setRules(p.opt.Rules, p.opt.TakeAll); err != nil {
		d.close()
		return nil, err
	}
	return d, nil
}

// replaceDispatcher puts a new dispatcher with reqs in place of the running
// one, in one update of the link: no packet meets no program.
func (p *Port) replaceDispatcher(reqs []*offload.Request) error {
	d, err := p.load(p.devBound, reqs)
	if err != nil {
		return err
	}
	for i, q := range p.q {
		if i < p.rxq {
			if err := d.setSocket(i, q.s.fd); err != nil {
				d.close()
				return err
			}
		}
	}
	if err := p.d.link.Update(d.prog); err != nil {
		d.close()
		return fmt.Errorf("replace the dispatcher: %s", flat(err.Error()))
	}
	d.link, p.d.link = p.d.link, nil
	old := p.d
	p.d = d
	return old.close()
}

// Compose runs the stages' offloads in the dispatcher: it loads one with
// them in its slots and puts it in place of the running one.
func (p *Port) Compose(reqs []*offload.Request) error {
	if len(reqs) == 0 {
		return nil
	}
	if err := p.attachDispatcher(reqs); err != nil {
		var first error
		for _, r := range reqs {
			if derr := r.Decline(err.Error()); derr != nil && first == nil {
				first = derr
			}
		}
		return first
	}
	for _, r := range reqs {
		r.Attached(p.name)
	}
	return nil
}

// SetRules changes the match table while the port runs: linerate reload.
func (p *Port) SetRules(rs []Rule, takeAll bool) error {
	if len(rs) == 0 && !takeAll {
		return errors.New("no match rules and take_all = false: the port would take nothing; say take_all = true to take everything")
	}
	if err := p.d.setRules(rs, takeAll); err != nil {
		return err
	}
	p.opt.Rules, p.opt.TakeAll = rs, takeAll
	return nil
}

// CheckReload says whether Reload(c) would be taken: only the match rules
// and take_all may change. It changes nothing.
func (p *Port) CheckReload(c ports.Config) error {
	_, err := p.reloadOptions(c)
	return err
}

// Reload takes the port's new table (linerate reload): the dispatcher
// switches to the new match table without detaching. On an error the port
// keeps its old table.
func (p *Port) Reload(c ports.Config) error {
	o, err := p.reloadOptions(c)
	if err != nil {
		return err
	}
	return p.SetRules(o.Rules, o.TakeAll)
}

// reloadOptions decodes and checks a new table against the running one.
func (p *Port) reloadOptions(c ports.Config) (Options, error) {
	s := &ports.Setup{Name: p.name, Config: c, RxQueues: p.rxq, TxQueues: p.txq}
	o, err := decode(s)
	if err != nil {
		return Options{}, err
	}
	// decode checked the rules as open does.
	n, c0 := o, p.opt
	n.Rules, n.TakeAll, n.Clock, n.Log, n.forceVia, n.logNamed = nil, false, nil, nil, nil, false
	c0.Rules, c0.TakeAll, c0.Clock, c0.Log, c0.forceVia, c0.logNamed = nil, false, nil, nil, nil, false
	if fmt.Sprint(n) != fmt.Sprint(c0) {
		return Options{}, errors.New("only match and take_all change with a reload; the port's other keys need a restart")
	}
	return o, nil
}

// fill gives the kernel fresh frames, up to a full fill ring.
func (p *Port) fill(q *queue) {
	s := q.s
	for {
		want := int(s.fill.size - q.fillLen)
		if want < 16 && q.fillLen > 0 {
			return
		}
		want = min(want, len(q.refill))
		n := p.u.take(q.refill[:want])
		if n == 0 {
			return
		}
		prod := *s.fill.prod
		for i, h := range q.refill[:n] {
			p.u.init(h)
			packet.Own(h, packet.OpAlloc, packet.NoOwner, -1)
			packet.Own(h, packet.OpFill, packet.NoOwner, -1)
			*s.fill.addr(prod + uint32(i)) = p.u.frameOf(h)
		}
		p.u.inUse.Add(int64(n))
		atomic.StoreUint32(s.fill.prod, prod+uint32(n))
		q.fillLen += uint32(n)
		if n < want {
			return
		}
	}
}

func (p *Port) Name() string      { return p.name }
func (p *Port) Pool() packet.Pool { return p.u }

// RxBurst takes up to b.Room() frames from queue's rx ring: no copy, the
// frames are the packets. It refills the fill ring with as many.
func (p *Port) RxBurst(queue int, b *packet.Burst) int {
	q := p.q[queue]
	s := q.s
	cons := *s.rx.cons
	n := min(atomic.LoadUint32(s.rx.prod)-cons, uint32(b.Room()))
	if n == 0 {
		if p.busy || s.fill.needWakeup() {
			// Busy polling runs the driver's NAPI loop in this call; with
			// need_wakeup the kernel asks for a kick to refill.
			_, _, _ = unix.Syscall6(unix.SYS_RECVFROM, uintptr(s.fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
		}
		return 0
	}
	bytes := 0
	for i := range n {
		d := s.rx.desc(cons + i)
		h := p.u.handleAt(d.Addr)
		packet.Own(h, packet.OpRx, packet.NoOwner, -1)
		pk := h.P()
		// The headroom variant's descriptor starts at the stamp: every
		// frame of the socket has one (the dispatcher makes sure).
		off := int(d.Addr-p.u.frameOf(h)) - packet.MetaSize + p.strip
		n := max(int(d.Len)-p.strip, 0)
		pk.Reset(off)
		pk.SetWindow(off, n)
		// Either variant leaves the stamp right in front of the data.
		if p.via != viaNone && off >= lrMetaSize {
			m := (*lrMeta)(unsafe.Add(unsafe.Pointer(&p.u.mem[0]), uintptr(d.Addr)+uintptr(p.strip)-lrMetaSize))
			if m.magic == lrMetaMagic && m.source == lrRxKtime {
				pk.RxTime = int64(m.rxNs)
			} else if m.magic == lrMetaMagic && m.source == lrRxHW {
				// Asked for only with a PHC to follow.
				pk.RxTime = p.phc.mono(m.rxNs)
				p.hwStamps.Add(1)
			}
		}
		bytes += n
		b.H[b.N] = h
		b.N++
	}
	atomic.StoreUint32(s.rx.cons, cons+n)
	q.fillLen -= n
	q.rxPkts.Add(uint64(n))
	q.rxBytes.Add(uint64(bytes))
	p.fill(q)
	return int(n)
}

// TxBurst puts packets of the port's own UMEM on queue's tx ring, as they
// are, and kicks the kernel. It takes what fits; the rest stays with the
// caller.
func (p *Port) TxBurst(queue int, b *packet.Burst) int {
	q := p.q[queue]
	s := q.s
	p.complete(q)
	prod := *s.tx.prod
	free := s.tx.size - (prod - atomic.LoadUint32(s.tx.cons))
	n := min(uint32(b.N), free)
	bytes := 0
	for i := range n {
		h := b.H[i]
		pk := h.P()
		d := s.tx.desc(prod + i)
		d.Addr = p.u.frameOf(h) + packet.MetaSize + uint64(pk.Offset())
		d.Len = uint32(pk.Len())
		d.Options = 0
		bytes += pk.Len()
	}
	if n == 0 {
		return 0
	}
	atomic.StoreUint32(s.tx.prod, prod+n)
	q.txOut += n
	q.txPkts.Add(uint64(n))
	q.txBytes.Add(uint64(bytes))
	if !s.zeroCopy {
		// Copy mode sends in the sendto call, at most 32 frames each
		// (the kernel's TX_BATCH_SIZE): kick until the ring is drained, or
		// the kernel stops taking (a full qdisc), so that nothing waits for
		// the next burst.
		for tries := 0; atomic.LoadUint32(s.tx.cons) != prod+n && tries < int(n/32)+4; tries++ {
			if !p.kick(q) {
				break
			}
		}
	} else if s.tx.needWakeup() || p.busy {
		p.kick(q)
	}
	return int(n)
}

// kick asks the kernel to send what the tx ring holds; false when it could
// not take more now.
func (p *Port) kick(q *queue) bool {
	_, _, e := unix.Syscall6(unix.SYS_SENDTO, uintptr(q.s.fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
	switch e {
	case 0, unix.EAGAIN: // EAGAIN: a batch went, more to go
		return true
	case unix.EBUSY, unix.ENOBUFS, unix.ENETDOWN:
		return false
	}
	q.kickErr.Add(1)
	return false
}

// complete gives the frames the kernel sent back to the UMEM.
func (p *Port) complete(q *queue) {
	s := q.s
	cons := *s.comp.cons
	n := min(atomic.LoadUint32(s.comp.prod)-cons, uint32(len(q.done)))
	if n == 0 {
		return
	}
	for i := range n {
		q.done[i] = p.u.handleAt(*s.comp.addr(cons + i))
	}
	atomic.StoreUint32(s.comp.cons, cons+n)
	q.txOut -= n
	p.u.FreeHandles(q.done[:n])
}

// dropPHC stops following the NIC's clock and gives the NIC its stamping
// config back.
func (p *Port) dropPHC() error {
	p.phc.close()
	p.phc = nil
	err := p.stamping.Restore()
	p.stamping = nil
	return err
}

// Info describes the port.
func (p *Port) Info() ports.Info {
	var detail string
	carried := map[stampVia]string{viaMeta: "carried to the port in the XDP metadata area",
		viaHead: "carried to the port in the frame's headroom, which it strips"}[p.via]
	switch p.rx.source {
	case TimestampHardware:
		detail = "the NIC's receive stamp (bpf_xdp_metadata_rx_timestamp in the device-bound XDP dispatcher), its " +
			"PHC " + p.phc.name + " mapped onto the engine clock every 100 ms; frames the driver gives no stamp " +
			"get bpf_ktime_get_ns (CLOCK_MONOTONIC) in the dispatcher instead (xdp_rx_hw_stamps counts the NIC's); " +
			carried
	case TimestampKernel:
		detail = "bpf_ktime_get_ns (CLOCK_MONOTONIC) in the XDP dispatcher, as the driver hands it the frame, " +
			"before any stage or the AF_XDP socket; " + carried
	default:
		detail = "the lcore's clock when it takes the burst"
	}
	if w := p.rx.why(); w != "" {
		detail += " (" + w + ")"
	}
	zc := len(p.q) > 0 && p.q[0].s.zeroCopy
	mode := "copy"
	if zc {
		mode = "zero-copy"
	}
	detail += fmt.Sprintf("; XDP %s mode, AF_XDP %s", p.mode, mode)
	return ports.Info{Driver: "xdp", RxQueues: p.rxq, TxQueues: p.txq, MTU: p.mtu, MAC: p.mac,
		TimestampSource: p.rx.source, TimestampDetail: detail, OwnPoolOnly: true, LinkUp: p.linkUp(),
		Ifindex: p.ifindex}
}

func (p *Port) linkUp() bool {
	ifc, err := net.InterfaceByIndex(p.ifindex)
	return err == nil && ifc.Flags&net.FlagRunning != 0
}

// Stats sums the queues' counters, the sockets' XDP_STATISTICS and the
// dispatcher's.
func (p *Port) Stats() ports.Stats {
	var s ports.Stats
	var kick uint64
	for _, q := range p.q {
		s.RxPackets += q.rxPkts.Load()
		s.RxBytes += q.rxBytes.Load()
		s.TxPackets += q.txPkts.Load()
		s.TxBytes += q.txBytes.Load()
		kick += q.kickErr.Load()
	}
	extra := map[string]uint64{"tx_kick_error": kick, "xdp_rx_hw_stamps": p.hwStamps.Load()}
	p.statsMu.Lock()
	if !p.closed.Load() {
		var sum unix.XDPStatistics
		for _, q := range p.q {
			if st, err := q.s.stats(); err == nil {
				sum.Rx_dropped += st.Rx_dropped
				sum.Rx_invalid_descs += st.Rx_invalid_descs
				sum.Tx_invalid_descs += st.Tx_invalid_descs
				sum.Rx_ring_full += st.Rx_ring_full
				sum.Rx_fill_ring_empty_descs += st.Rx_fill_ring_empty_descs
				sum.Tx_ring_empty_descs += st.Tx_ring_empty_descs
			}
		}
		extra["xsk_rx_dropped"] = sum.Rx_dropped
		extra["xsk_rx_invalid_descs"] = sum.Rx_invalid_descs
		extra["xsk_tx_invalid_descs"] = sum.Tx_invalid_descs
		extra["xsk_rx_ring_full"] = sum.Rx_ring_full
		extra["xsk_fill_ring_empty"] = sum.Rx_fill_ring_empty_descs
		extra["xsk_tx_ring_empty"] = sum.Tx_ring_empty_descs
		s.RxDropped = sum.Rx_dropped + sum.Rx_ring_full + sum.Rx_invalid_descs
		s.TxDropped = sum.Tx_invalid_descs
		if p.d != nil {
			for k, v := range p.d.stats() {
				extra[k] = v
			}
		}
		if p.veth != nil {
			extra["xdp_tx_errors"] = p.veth.check(p.log)
		}
	}
	p.statsMu.Unlock()
	s.Extra = extra
	return s
}

// Close detaches the dispatcher, closes the sockets and takes back every
// frame the kernel held. No queue may be polled during or after Close.
func (p *Port) Close() error {
	if p.closed.Swap(true) {
		return nil
	}
	p.statsMu.Lock()
	defer p.statsMu.Unlock()
	var errs []error
	if p.d != nil {
		errs = append(errs, p.d.close())
	}
	if p.phc != nil {
		errs = append(errs, p.dropPHC())
	}
	p.veth.close()
	for _, q := range p.q {
		q.s.close()
	}
	if p.u != nil {
		p.reclaim()
		errs = append(errs, p.u.close())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("port %q: close: %w", p.name, err)
	}
	return nil
}

// reclaim returns to the UMEM the frames its closed sockets' rings held.
func (p *Port) reclaim() {
	free := make(map[packet.Handle]bool, len(p.u.free))
	for _, h := range p.u.free {
		free[h] = true
	}
	var inKernel uint32
	for _, q := range p.q {
		inKernel += q.fillLen + q.txOut
	}
	if int64(inKernel) != p.u.inUse.Load() {
		// Some frames are still the engine's: leave the count to say so.
		return
	}
	var back []packet.Handle
	for i := range p.u.frames {
		h := packet.Handle(p.u.base + uintptr(i*p.u.frameSize))
		if !free[h] {
			back = append(back, h)
		}
	}
	p.u.FreeHandles(back)
}
