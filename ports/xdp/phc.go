//go:build linux

package xdp

import (
	"fmt"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/linerate/linerate/ports/internal/devclock"
)

// phcInterval is how often the PHC mapping is taken again, as the afpacket
// port does: the PHC runs at its own rate, and ptp4l may steer it.
const phcInterval = 100 * time.Millisecond

// devClock maps a device clock, the NIC's PTP hardware clock, onto the
// engine's (CLOCK_MONOTONIC), for the rx stamps the dispatcher reads with
// bpf_xdp_metadata_rx_timestamp.
type devClock struct {
	name string
	fd   int // the clock device, or -1
	id   int32
	m    atomic.Pointer[devclock.Map]
	stop chan struct{}
	done chan struct{}
}

// openPHC opens ifname's PTP hardware clock; nil, nil when it has none
// (`ethtool -T` says "PTP Hardware Clock: none"; veth has none).
func openPHC(ifname string) (*devClock, error) {
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	info, err := unix.IoctlGetEthtoolTsInfo(s, ifname)
	unix.Close(s)
	if err != nil || info.Phc_index < 0 {
		return nil, nil // EOPNOTSUPP: a driver without timestamping
	}
	name := fmt.Sprintf("/dev/ptp%d", info.Phc_index)
	fd, err := unix.Open(name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("%s's PTP hardware clock: %w", ifname, err)
	}
	c, err := followClock(name, unix.FdToClockID(fd))
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("%s's PTP hardware clock: %w", ifname, err)
	}
	c.fd = fd
	return c, nil
}

// followClock maps clock id onto CLOCK_MONOTONIC, now and every phcInterval
// until close.
func followClock(name string, id int32) (*devClock, error) {
	c := &devClock{name: name, fd: -1, id: id, stop: make(chan struct{}), done: make(chan struct{})}
	m := c.calibrate(nil)
	if m == nil {
		close(c.done)
		return nil, fmt.Errorf("%s: cannot read it", name)
	}
	c.m.Store(m)
	go func() {
		defer close(c.done)
		t := time.NewTicker(phcInterval)
		defer t.Stop()
		for {
			select {
			case <-c.stop:
				return
			case <-t.C:
				c.m.Store(c.calibrate(c.m.Load()))
			}
		}
	}()
	return c, nil
}

// calibrate takes a reading and returns the mapping with it; prev (nil at
// first) holds the earlier readings. A failed read keeps prev.
func (c *devClock) calibrate(prev *devclock.Map) *devclock.Map {
	pt, err := devclock.Read(func() (int64, error) {
		var t unix.Timespec
		if err := unix.ClockGettime(c.id, &t); err != nil {
			return 0, err
		}
		return t.Nano(), nil
	}, func() int64 {
		var t unix.Timespec
		_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &t)
		return t.Nano()
	})
	if err != nil {
		return prev
	}
	return devclock.Next(prev, pt, 1) // a PHC counts nanoseconds
}

// mono is device time t on the engine's clock.
func (c *devClock) mono(t uint64) int64 { return c.m.Load().Mono(int64(t)) }

func (c *devClock) close() {
	close(c.stop)
	<-c.done
	if c.fd >= 0 {
		unix.Close(c.fd)
	}
}
