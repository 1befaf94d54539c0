//go:build linux

package xdp

import (
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/linerate/linerate/appliance/kernel"
	"github.com/linerate/linerate/internal/netns"
)

func now(id int32) int64 {
	var t unix.Timespec
	_ = unix.ClockGettime(id, &t)
	return t.Nano()
}

// TestFollowClock: a device clock is mapped onto the engine's. No PHC
// here: CLOCK_REALTIME stands in for one (another clock that counts
// nanoseconds from another epoch), and a time read from it maps onto
// CLOCK_MONOTONIC read at the same moment, within the reads' jitter, and
// still after the mapping has been taken again.
func TestFollowClock(t *testing.T) {
	c, err := followClock("CLOCK_REALTIME", unix.CLOCK_REALTIME)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	check := func() {
		t.Helper()
		m0 := now(unix.CLOCK_MONOTONIC)
		got := c.mono(uint64(now(unix.CLOCK_REALTIME)))
		m1 := now(unix.CLOCK_MONOTONIC)
		// A reading's error is half its bracket; a loaded machine can
		// stretch one to milliseconds.
		if slack := int64(50 * time.Millisecond); got < m0-slack || got > m1+slack {
			t.Errorf("CLOCK_REALTIME maps to %d, CLOCK_MONOTONIC is [%d, %d]", got, m0, m1)
		}
	}
	check()
	for deadline := time.Now().Add(10 * time.Second); c.m.Load().Readings() < 3 && time.Now().Before(deadline); {
		time.Sleep(phcInterval)
	}
	if n := c.m.Load().Readings(); n < 3 {
		t.Errorf("%d readings after 10 s: the mapping is not taken again", n)
	}
	check()
}

// TestNoPHC: veth has no PTP hardware clock: the port says its stamps are
// the XDP program's (the engine's where the kernel can carry none), and
// loads the dispatcher without the NIC's.
func TestNoPHC(t *testing.T) {
	ns := netns.New(t)
	netns.Veth(t, ns, "xa", ns, "xb")
	var c *devClock
	if err := ns.Do(func() (err error) { c, err = openPHC("xa"); return err }); err != nil || c != nil {
		t.Fatalf("openPHC(veth) = %v, %v; want none", c, err)
	}
	p := openPort(t, ns, Options{Name: "p0", Interface: "xa", TakeAll: true, RingSize: 64})
	want := "engine"
	if kernel.Has(kernel.XDPAdjustMeta) || kernel.Has(kernel.XDPAdjustHead) {
		want = "kernel"
	}
	if info := p.Info(); info.TimestampSource != want || p.phc != nil || p.devBound ||
		!strings.Contains(info.TimestampDetail, "xa has no PTP hardware clock") {
		t.Errorf("info %+v, want source %s", info, want)
	}
}
