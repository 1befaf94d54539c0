//go:build linux

// Package netdev keeps a kernel network device's settings for the drivers
// whose ports run on one (afpacket, tap, xdp, DPDK PMDs over kernel
// interfaces): it sets the port's mtu, or the NIC's receive stamping, on the
// device while the port is open, and puts back what the device had when the
// port closes.
package netdev

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Saved is a device's MTU as it was when a port opened.
type Saved struct {
	fd   int // a socket in the device's network namespace: its ioctls reach the device from any thread
	name string
	old  int
}

// Keep records the MTU of the device name, in the calling thread's network
// namespace, for Restore.
func Keep(name string) (*Saved, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socket: %w", err)
	}
	s := &Saved{fd: fd, name: name}
	if s.old, err = s.MTU(); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return s, nil
}

// KeepIndex is Keep for the device with index ifindex.
func KeepIndex(ifindex int) (*Saved, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socket: %w", err)
	}
	defer unix.Close(fd)
	ifr, _ := unix.NewIfreq("")
	ifr.SetUint32(uint32(ifindex))
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFNAME, ifr); err != nil {
		return nil, fmt.Errorf("device %d: SIOCGIFNAME: %w", ifindex, err)
	}
	return Keep(ifr.Name())
}

// Name is the device's name.
func (s *Saved) Name() string { return s.name }

// Old is the MTU the device had.
func (s *Saved) Old() int { return s.old }

// MTU reads the device's MTU now.
func (s *Saved) MTU() (int, error) {
	ifr, err := unix.NewIfreq(s.name)
	if err != nil {
		return 0, err
	}
	if err := unix.IoctlIfreq(s.fd, unix.SIOCGIFMTU, ifr); err != nil {
		return 0, fmt.Errorf("%s: SIOCGIFMTU: %w", s.name, err)
	}
	return int(ifr.Uint32()), nil
}

// Set sets the device's MTU.
func (s *Saved) Set(mtu int) error {
	ifr, err := unix.NewIfreq(s.name)
	if err != nil {
		return err
	}
	ifr.SetUint32(uint32(mtu))
	if err := unix.IoctlIfreq(s.fd, unix.SIOCSIFMTU, ifr); err != nil {
		return fmt.Errorf("set %s's MTU to %d (it is %d): %w", s.name, mtu, s.old, err)
	}
	return nil
}

// Restore puts the device's MTU back as it was, if it changed, and lets go of
// the device. A device that is gone (a TAP its port removed) needs nothing.
func (s *Saved) Restore() error {
	if s == nil || s.fd < 0 {
		return nil
	}
	defer func() { unix.Close(s.fd); s.fd = -1 }()
	now, err := s.MTU()
	if errors.Is(err, unix.ENODEV) {
		return nil
	}
	if err != nil || now == s.old {
		return err
	}
	return s.Set(s.old)
}
