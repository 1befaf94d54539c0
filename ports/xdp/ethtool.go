//go:build linux

package xdp

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// devStats reads a network device's driver counters (ethtool -S) through
// a socket of the device's network namespace: its ioctls reach the device
// from any thread.
type devStats struct {
	fd     int
	ifname string
	driver string   // ethtool -i
	names  []string // the counters' names, in the driver's order
}

// openDevStats opens the device's counters; the caller's thread is in its
// network namespace.
func openDevStats(ifname string) (*devStats, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	s := &devStats{fd: fd, ifname: ifname}
	info, err := unix.IoctlGetEthtoolDrvinfo(fd, ifname)
	if err != nil {
		s.close()
		return nil, fmt.Errorf("%s: ETHTOOL_GDRVINFO: %w", ifname, err)
	}
	s.driver = cstr(info.Driver[:])
	if n := int(info.N_stats); n > 0 {
		// struct ethtool_gstrings: cmd, string_set, len, then len strings of 32 bytes.
		const ethSSStats, strLen = 1, 32
		buf := make([]byte, 12+n*strLen)
		binary.NativeEndian.PutUint32(buf[0:], unix.ETHTOOL_GSTRINGS)
		binary.NativeEndian.PutUint32(buf[4:], ethSSStats)
		binary.NativeEndian.PutUint32(buf[8:], uint32(n))
		if err := s.ioctl(unsafe.Pointer(&buf[0])); err != nil {
			s.close()
			return nil, fmt.Errorf("%s: ETHTOOL_GSTRINGS: %w", ifname, err)
		}
		n = min(n, int(binary.NativeEndian.Uint32(buf[8:])))
		for i := range n {
			s.names = append(s.names, cstr(buf[12+i*strLen:12+(i+1)*strLen]))
		}
	}
	return s, nil
}

// ifreqData is struct ifreq with ifr_data, for SIOCETHTOOL.
type ifreqData struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [24 - unsafe.Sizeof(uintptr(0))]byte
}

func (s *devStats) ioctl(data unsafe.Pointer) error {
	var ifr ifreqData
	copy(ifr.name[:unix.IFNAMSIZ-1], s.ifname)
	ifr.data = data
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(s.fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr)))
	if e != 0 {
		return e
	}
	return nil
}

// read returns the counters whose names match keep, by name.
func (s *devStats) read(keep func(name string) bool) (map[string]uint64, error) {
	n := len(s.names)
	if n == 0 {
		return nil, nil
	}
	// struct ethtool_stats: cmd, n_stats, then n_stats u64.
	buf := make([]byte, 8+8*n)
	binary.NativeEndian.PutUint32(buf[0:], unix.ETHTOOL_GSTATS)
	binary.NativeEndian.PutUint32(buf[4:], uint32(n))
	if err := s.ioctl(unsafe.Pointer(&buf[0])); err != nil {
		return nil, fmt.Errorf("%s: ETHTOOL_GSTATS: %w", s.ifname, err)
	}
	n = min(n, int(binary.NativeEndian.Uint32(buf[4:])))
	out := map[string]uint64{}
	for i, name := range s.names[:n] {
		if keep(name) {
			out[name] = binary.NativeEndian.Uint64(buf[8+8*i:])
		}
	}
	return out, nil
}

// sum adds up the counters named prefix*suffix (rx_queue_*_xdp_tx_errors).
func (s *devStats) sum(prefix, suffix string) (uint64, error) {
	m, err := s.read(func(n string) bool { return strings.HasPrefix(n, prefix) && strings.HasSuffix(n, suffix) })
	var t uint64
	for _, v := range m {
		t += v
	}
	return t, err
}

func (s *devStats) close() {
	if s != nil && s.fd >= 0 {
		unix.Close(s.fd)
		s.fd = -1
	}
}

func cstr(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}
