//go:build linux

package netdev

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/linerate/linerate/appliance/kernel"
)

// Stamping is a device's receive-stamping config as it was before StampAll
// changed it.
type Stamping struct {
	// PHC is the index of the NIC's PTP hardware clock: /dev/ptpPHC.
	PHC   int
	name  string
	saved *unix.HwTstampConfig // nil: nothing changed
}

// StampAll has the NIC name stamp every received frame with its PTP hardware
// clock (SIOCSHWTSTAMP, rx_filter ALL), as ptp4l or hwstamp_ctl would, and
// returns the old config for Restore. The afpacket port reads those stamps
// from its ring, the xdp port's dispatcher with bpf_xdp_metadata_rx_timestamp;
// most drivers give neither until the filter is on. It says why when the
// device cannot: no hardware rx stamps, no PHC, or PTP frames only.
func StampAll(name string) (*Stamping, error) {
	// The same reading and reasons as linerate doctor's HWSTAMP column.
	info, err := kernel.ReadStamping(name)
	if err != nil {
		return nil, err
	}
	if err := info.RxAll(); err != nil {
		return nil, err
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	saved, err := unix.IoctlGetHwTstamp(fd, name)
	if err != nil {
		return nil, fmt.Errorf("SIOCGHWTSTAMP: %w", err)
	}
	s := &Stamping{PHC: info.PHC, name: name}
	if saved.Rx_filter != unix.HWTSTAMP_FILTER_ALL {
		cfg := *saved
		cfg.Rx_filter = unix.HWTSTAMP_FILTER_ALL
		if err := unix.IoctlSetHwTstamp(fd, name, &cfg); err != nil {
			return nil, fmt.Errorf("SIOCSHWTSTAMP rx_filter ALL: %w", err)
		}
		s.saved = saved
	}
	return s, nil
}

// Restore gives the device its stamping config back, if StampAll changed it.
func (s *Stamping) Restore() error {
	if s == nil || s.saved == nil {
		return nil
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.IoctlSetHwTstamp(fd, s.name, s.saved); err != nil {
		return fmt.Errorf("SIOCSHWTSTAMP restore: %w", err)
	}
	s.saved = nil
	return nil
}
