//go:build linux

// Package tap is the tap port driver: a Linux TAP device (/dev/net/tun with
// IFF_TAP | IFF_NO_PI), the exception path between linerate and the host's own
// network stack. Frames linerate sends on the port arrive at the kernel as if
// received on the device; frames the kernel sends out of the device are what
// the port receives. Every frame is one read or write system call, copied in
// and out of pool buffers: it is the slow path, for traffic to and from the
// host, not for line rate.
//
// The device lives as long as the port, in the network namespace of the
// thread that opened it. With several rx queues it is opened with
// IFF_MULTI_QUEUE, one file per queue; tx queues share those files.
package tap

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/ports"
	"github.com/linerate/linerate/ports/internal/netdev"
)

func init() { ports.Register("tap", open) }

// config is the driver's table in the config file.
type tapConfig struct {
	Interface string `toml:"interface"` // the device's name, made when the port opens
	Up        *bool  `toml:"up"`        // bring the device up (default true)
}

// Options open a tap port without a config file.
type Options struct {
	Name      string
	Interface string
	Pool      packet.Pool
	RxQueues  int // 1 when zero
	TxQueues  int // 1 when zero
	Down      bool
	// MTU, when not zero, is set on the device; the old one is put back at
	// Close for a device that outlives the port (a persistent TAP).
	MTU int
}

func open(s *ports.Setup) (ports.Port, error) {
	c := tapConfig{}
	if s.Config != nil {
		if err := s.Config.Decode(&c); err != nil {
			return nil, err
		}
	}
	o := Options{Name: s.Name, Interface: c.Interface, Pool: s.Pool, RxQueues: s.RxQueues, TxQueues: s.TxQueues,
		Down: c.Up != nil && !*c.Up, MTU: s.MTU}
	if err := o.check(); err != nil {
		return nil, err
	}
	if s.DryRun {
		return nil, nil
	}
	return New(o)
}

func (o *Options) check() error {
	switch {
	case o.Interface == "":
		return errors.New("interface is required: the TAP device's name")
	case len(o.Interface) >= unix.IFNAMSIZ:
		return fmt.Errorf("interface name %q is longer than %d bytes", o.Interface, unix.IFNAMSIZ-1)
	case o.RxQueues < 0 || o.TxQueues < 0 || o.RxQueues > 256 || o.TxQueues > 1024:
		return fmt.Errorf("queues %d rx, %d tx: outside 1..256 rx, 1..1024 tx", o.RxQueues, o.TxQueues)
	case o.MTU < 0 || o.MTU > 65535:
		return fmt.Errorf("mtu %d is outside 0..65535", o.MTU)
	}
	return nil
}

// Port is a tap port.
type Port struct {
	name   string
	ifname string
	pool   packet.Pool
	fds    []int
	ctl    int // a socket in the device's namespace, for its ioctls
	rx     []rxQueue
	tx     []txQueue
	mtu    int
	mac    [6]byte
	saved  *netdev.Saved // the device's MTU before mtu was set
	closed atomic.Bool
}

type rxQueue struct {
	fd    int
	spare packet.Handle // a buffer kept across empty polls
	pub   queueStats
	_     [64]byte
}

type txQueue struct {
	fd   int
	done packet.Burst // sent, to free
	pub  queueStats
	_    [64]byte
}

type queueStats struct {
	packets, bytes, errors, noBuffer atomic.Uint64
}

var _ ports.Port = (*Port)(nil)

// New makes the TAP device o.Interface and opens the port on it. The device is
// made in the calling thread's network namespace.
func New(o Options) (*Port, error) {
	if o.RxQueues == 0 {
		o.RxQueues = 1
	}
	if o.TxQueues == 0 {
		o.TxQueues = 1
	}
	if err := o.check(); err != nil {
		return nil, fmt.Errorf("port %q: %w", o.Name, err)
	}
	if o.Pool == nil {
		return nil, fmt.Errorf("port %q: no pool", o.Name)
	}
	p := &Port{name: o.Name, ifname: o.Interface, pool: o.Pool, ctl: -1}
	ctl, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("port %q: %w", o.Name, err)
	}
	p.ctl = ctl
	flags := uint16(unix.IFF_TAP | unix.IFF_NO_PI)
	if o.RxQueues > 1 {
		flags |= unix.IFF_MULTI_QUEUE
	}
	for i := 0; i < o.RxQueues; i++ {
		fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("port %q: open /dev/net/tun: %w", o.Name, err)
		}
		p.fds = append(p.fds, fd)
		ifr, err := unix.NewIfreq(o.Interface)
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("port %q: %w", o.Name, err)
		}
		ifr.SetUint16(flags)
		if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
			p.Close()
			return nil, fmt.Errorf("port %q: TUNSETIFF %s: %w", o.Name, o.Interface, err)
		}
		p.rx = append(p.rx, rxQueue{fd: fd})
	}
	for i := 0; i < o.TxQueues; i++ {
		p.tx = append(p.tx, txQueue{fd: p.fds[i%len(p.fds)]})
	}
	if err := p.setup(!o.Down, o.MTU); err != nil {
		p.Close()
		return nil, fmt.Errorf("port %q: %s: %w", o.Name, o.Interface, err)
	}
	return p, nil
}

// setup reads the device's MTU (setting mtu first when it is not zero) and
// MAC, and brings it up.
func (p *Port) setup(up bool, mtu int) error {
	s := p.ctl
	ifr, err := unix.NewIfreq(p.ifname)
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(s, unix.SIOCGIFMTU, ifr); err != nil {
		return fmt.Errorf("SIOCGIFMTU: %w", err)
	}
	p.mtu = int(ifr.Uint32())
	if mtu > 0 && mtu != p.mtu {
		if p.saved, err = netdev.Keep(p.ifname); err == nil {
			err = p.saved.Set(mtu)
		}
		if err != nil {
			return fmt.Errorf("mtu %d: %w", mtu, err)
		}
		p.mtu = mtu
	}
	ifr, _ = unix.NewIfreq(p.ifname)
	if err := unix.IoctlIfreq(s, unix.SIOCGIFHWADDR, ifr); err != nil {
		return fmt.Errorf("SIOCGIFHWADDR: %w", err)
	}
	// struct sockaddr: family (2 bytes), then the address.
	raw := (*[unix.IFNAMSIZ + 16]byte)(unsafe.Pointer(ifr))
	copy(p.mac[:], raw[unix.IFNAMSIZ+2:])
	if !up {
		return nil
	}
	ifr, _ = unix.NewIfreq(p.ifname)
	if err := unix.IoctlIfreq(s, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("SIOCGIFFLAGS: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(s, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("SIOCSIFFLAGS up: %w", err)
	}
	return nil
}

func (p *Port) Name() string      { return p.name }
func (p *Port) Pool() packet.Pool { return p.pool }

// Info describes the port. MAC is the kernel side's address.
func (p *Port) Info() ports.Info {
	return ports.Info{Driver: "tap", RxQueues: len(p.rx), TxQueues: len(p.tx), MTU: p.mtu, MAC: p.mac,
		TimestampSource: "engine", LinkUp: p.linkUp(),
		TimestampDetail: "the engine clock when the lcore reads the frame from the TAP device: after the " +
			"host kernel queued it, up to one poll of the lcore later"}
}

func (p *Port) linkUp() bool {
	if p.closed.Load() || len(p.fds) == 0 {
		return false
	}
	// The control socket asks the device's namespace, whatever thread calls.
	ifr, err := unix.NewIfreq(p.ifname)
	if err != nil || unix.IoctlIfreq(p.ctl, unix.SIOCGIFFLAGS, ifr) != nil {
		return false
	}
	f := ifr.Uint16()
	return f&unix.IFF_UP != 0 && f&unix.IFF_RUNNING != 0
}

// Stats sums the queues' counters.
func (p *Port) Stats() ports.Stats {
	var s ports.Stats
	var rxErr, noBuf, txErr uint64
	for i := range p.rx {
		q := &p.rx[i].pub
		s.RxPackets += q.packets.Load()
		s.RxBytes += q.bytes.Load()
		rxErr += q.errors.Load()
		noBuf += q.noBuffer.Load()
	}
	for i := range p.tx {
		q := &p.tx[i].pub
		s.TxPackets += q.packets.Load()
		s.TxBytes += q.bytes.Load()
		txErr += q.errors.Load()
	}
	s.RxErrors = rxErr
	s.RxDropped = noBuf
	s.TxDropped = txErr
	s.Extra = map[string]uint64{"rx_read_errors": rxErr, "rx_no_buffer": noBuf, "tx_write_errors": txErr}
	return s
}

// RxBurst reads frames the kernel sent out of the device, one read each, until
// the device has none or b is full.
func (p *Port) RxBurst(queue int, b *packet.Burst) int {
	q := &p.rx[queue]
	n, bytes := 0, 0
	for b.N < packet.MaxBurst {
		h := q.spare
		if h == 0 {
			var ok bool
			if h, ok = p.pool.AllocOne(); !ok {
				q.pub.noBuffer.Add(1)
				break
			}
		}
		pk := h.P()
		buf, err := pk.Append(pk.Tailroom())
		if err != nil {
			q.spare = h
			break
		}
		k, err := unix.Read(q.fd, buf)
		if err != nil || k <= 0 {
			_ = pk.Trim(len(buf))
			q.spare = h
			if err != nil && err != unix.EAGAIN && err != unix.EINTR {
				q.pub.errors.Add(1)
			}
			break
		}
		_ = pk.Trim(len(buf) - k)
		q.spare = 0
		b.H[b.N] = h
		b.N++
		n++
		bytes += k
	}
	if n > 0 {
		q.pub.packets.Add(uint64(n))
		q.pub.bytes.Add(uint64(bytes))
	}
	return n
}

// TxBurst writes frames to the device, one write each, until the device pushes
// back. A frame the kernel refuses for another reason is taken and counted.
func (p *Port) TxBurst(queue int, b *packet.Burst) int {
	q := &p.tx[queue]
	q.done.N = 0
	taken, sent, bytes := 0, 0, 0
	for taken < b.N {
		pk := b.H[taken].P()
		k, err := unix.Write(q.fd, pk.Data())
		if err == unix.EAGAIN || err == unix.EINTR {
			break
		}
		if err != nil {
			q.pub.errors.Add(1)
		} else {
			sent++
			bytes += k
		}
		q.done.H[q.done.N] = b.H[taken]
		q.done.N++
		taken++
	}
	packet.Free(&q.done)
	if sent > 0 {
		q.pub.packets.Add(uint64(sent))
		q.pub.bytes.Add(uint64(bytes))
	}
	return taken
}

// Close frees the spare buffers and closes the device's files, which removes
// it. No queue may be polled during or after Close.
func (p *Port) Close() error {
	if p.closed.Swap(true) {
		return nil
	}
	var errs []error
	for i := range p.rx {
		if h := p.rx[i].spare; h != 0 {
			packet.FreeOne(h)
			p.rx[i].spare = 0
		}
	}
	// While the device is surely there: one that outlives the port keeps
	// what it had.
	if err := p.saved.Restore(); err != nil {
		errs = append(errs, err)
	}
	for _, fd := range append(p.fds, p.ctl) {
		if err := unix.Close(fd); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("port %q: close: %w", p.name, os.NewSyscallError("close", err))
	}
	return nil
}
