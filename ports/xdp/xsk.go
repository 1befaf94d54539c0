//go:build linux

package xdp

import (
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ring is one of an AF_XDP socket's four rings: a producer and a consumer
// index shared with the kernel, and size entries. One side of each ring is
// ours, and one thread (the queue's lcore) runs it: the cached indices are
// plain, the shared ones are read and written with atomics, which order the
// entries' reads and writes around them.
type ring struct {
	prod, cons *uint32
	flags      *uint32
	descs      unsafe.Pointer
	mask       uint32
	size       uint32
	mem        []byte
}

// mapRing maps the ring at pgoff whose offsets are off, with entries of
// entry bytes.
func mapRing(fd int, off unix.XDPRingOffset, pgoff int64, size, entry uint32) (*ring, error) {
	n := int(off.Desc) + int(size*entry)
	mem, err := unix.Mmap(fd, pgoff, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return nil, err
	}
	base := unsafe.Pointer(&mem[0])
	return &ring{prod: (*uint32)(unsafe.Add(base, off.Producer)), cons: (*uint32)(unsafe.Add(base, off.Consumer)),
		flags: (*uint32)(unsafe.Add(base, off.Flags)), descs: unsafe.Add(base, off.Desc), mask: size - 1, size: size,
		mem: mem}, nil
}

func (r *ring) unmap() error {
	if r == nil || r.mem == nil {
		return nil
	}
	err := unix.Munmap(r.mem)
	r.mem = nil
	return err
}

func (r *ring) needWakeup() bool { return atomic.LoadUint32(r.flags)&unix.XDP_RING_NEED_WAKEUP != 0 }

// addr is entry i of a fill or completion ring.
func (r *ring) addr(i uint32) *uint64 {
	return (*uint64)(unsafe.Add(r.descs, uintptr(i&r.mask)*8))
}

// desc is entry i of an rx or tx ring.
func (r *ring) desc(i uint32) *unix.XDPDesc {
	return (*unix.XDPDesc)(unsafe.Add(r.descs, uintptr(i&r.mask)*unsafe.Sizeof(unix.XDPDesc{})))
}

// xsk is one AF_XDP socket, bound to one queue of the interface.
type xsk struct {
	fd         int
	queue      int
	fill, comp *ring
	rx, tx     *ring
	zeroCopy   bool
}

func getsockopt(fd, level, opt int, p unsafe.Pointer, size uintptr) error {
	l := uint32(size)
	_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), uintptr(level), uintptr(opt), uintptr(p),
		uintptr(unsafe.Pointer(&l)), 0)
	if e != 0 {
		return e
	}
	return nil
}

func setsockopt(fd, level, opt int, p unsafe.Pointer, size uintptr) error {
	_, _, e := unix.Syscall6(unix.SYS_SETSOCKOPT, uintptr(fd), uintptr(level), uintptr(opt), uintptr(p), size, 0)
	if e != 0 {
		return e
	}
	return nil
}

// xskOptions are how a socket is opened.
type xskOptions struct {
	ifindex, queue int
	ringSize       uint32
	u              *umem
	sharedFD       int    // -1: this socket registers the UMEM
	copyMode       string // "auto", "zerocopy" or "copy"
}

// openXsk opens and binds a socket. The UMEM is registered on the first
// socket of a port; the others share it (XDP_SHARED_UMEM), each with fill and
// completion rings of its own, as sockets on different queues must.
func openXsk(o xskOptions) (*xsk, error) {
	fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socket(AF_XDP): %w", err)
	}
	s := &xsk{fd: fd, queue: o.queue}
	fail := func(what string, err error) (*xsk, error) {
		s.close()
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if o.sharedFD < 0 {
		reg := unix.XDPUmemReg{Addr: uint64(o.u.base), Len: uint64(len(o.u.mem)), Size: uint32(o.u.frameSize),
			Headroom: umemHeadroom}
		if err := setsockopt(fd, unix.SOL_XDP, unix.XDP_UMEM_REG, unsafe.Pointer(&reg), unsafe.Sizeof(reg)); err != nil {
			return fail("XDP_UMEM_REG", err)
		}
	}
	size := o.ringSize
	for _, opt := range []int{unix.XDP_UMEM_FILL_RING, unix.XDP_UMEM_COMPLETION_RING, unix.XDP_RX_RING, unix.XDP_TX_RING} {
		if err := setsockopt(fd, unix.SOL_XDP, opt, unsafe.Pointer(&size), 4); err != nil {
			return fail(fmt.Sprintf("ring size %d", size), err)
		}
	}
	var off unix.XDPMmapOffsets
	if err := getsockopt(fd, unix.SOL_XDP, unix.XDP_MMAP_OFFSETS, unsafe.Pointer(&off), unsafe.Sizeof(off)); err != nil {
		return fail("XDP_MMAP_OFFSETS", err)
	}
	if s.fill, err = mapRing(fd, off.Fr, unix.XDP_UMEM_PGOFF_FILL_RING, size, 8); err != nil {
		return fail("mmap fill ring", err)
	}
	if s.comp, err = mapRing(fd, off.Cr, unix.XDP_UMEM_PGOFF_COMPLETION_RING, size, 8); err != nil {
		return fail("mmap completion ring", err)
	}
	dsz := uint32(unsafe.Sizeof(unix.XDPDesc{}))
	if s.rx, err = mapRing(fd, off.Rx, unix.XDP_PGOFF_RX_RING, size, dsz); err != nil {
		return fail("mmap rx ring", err)
	}
	if s.tx, err = mapRing(fd, off.Tx, unix.XDP_PGOFF_TX_RING, size, dsz); err != nil {
		return fail("mmap tx ring", err)
	}
	bind := func(flags uint16) error {
		sa := &unix.SockaddrXDP{Flags: flags | unix.XDP_USE_NEED_WAKEUP, Ifindex: uint32(o.ifindex), QueueID: uint32(o.queue)}
		if o.sharedFD >= 0 {
			sa.Flags |= unix.XDP_SHARED_UMEM
			sa.SharedUmemFD = uint32(o.sharedFD)
		}
		return unix.Bind(fd, sa)
	}
	switch o.copyMode {
	case "zerocopy":
		err = bind(unix.XDP_ZEROCOPY)
		s.zeroCopy = true
	case "copy":
		err = bind(unix.XDP_COPY)
	default:
		// Zero-copy where the driver has it; veth and generic XDP refuse it.
		if err = bind(unix.XDP_ZEROCOPY); err == nil {
			s.zeroCopy = true
		} else if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EPROTONOSUPPORT) {
			err = bind(unix.XDP_COPY)
		}
	}
	if err != nil {
		return fail(fmt.Sprintf("bind to queue %d (%s)", o.queue, o.copyMode), err)
	}
	return s, nil
}

// stats reads XDP_STATISTICS.
func (s *xsk) stats() (unix.XDPStatistics, error) {
	var st unix.XDPStatistics
	err := getsockopt(s.fd, unix.SOL_XDP, unix.XDP_STATISTICS, unsafe.Pointer(&st), unsafe.Sizeof(st))
	return st, err
}

// busyPoll asks the kernel to let this socket's reads and writes run the
// device's NAPI loop (SO_PREFER_BUSY_POLL), budget frames at a time.
func (s *xsk) busyPoll(budget int) error {
	for _, o := range [][2]int{{unix.SO_PREFER_BUSY_POLL, 1}, {unix.SO_BUSY_POLL, 20}, {unix.SO_BUSY_POLL_BUDGET, budget}} {
		if err := unix.SetsockoptInt(s.fd, unix.SOL_SOCKET, o[0], o[1]); err != nil {
			return err
		}
	}
	return nil
}

func (s *xsk) close() {
	for _, r := range []*ring{s.fill, s.comp, s.rx, s.tx} {
		_ = r.unmap()
	}
	if s.fd >= 0 {
		_ = unix.Close(s.fd)
		s.fd = -1
	}
}
