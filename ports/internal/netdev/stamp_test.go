//go:build linux

package netdev

import (
	"strings"
	"testing"
)

// TestStampAllRefuses: a device without a NIC's stamps (loopback stamps in
// software only) is refused with the reason, and changes nothing to restore.
// The success path needs a NIC with a PTP hardware clock; this machine has
// none (no /dev/ptp*).
func TestStampAllRefuses(t *testing.T) {
	s, err := StampAll("lo")
	if err == nil {
		t.Fatalf("StampAll(lo) = %+v, want an error", s)
	}
	if !strings.Contains(err.Error(), "no receive hardware timestamps") {
		t.Errorf("StampAll(lo): %v, want the reason", err)
	}
	if _, err := StampAll("lr-no-such-dev"); err == nil || !strings.Contains(err.Error(), "ETHTOOL_GET_TS_INFO") {
		t.Errorf("StampAll(no such device): %v, want the failed ioctl named", err)
	}
	var none *Stamping
	if err := none.Restore(); err != nil {
		t.Errorf("Restore of nothing: %v", err)
	}
}
