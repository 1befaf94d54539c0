//go:build linux

package afpacket

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/linerate/linerate/appliance/clock"
	"github.com/linerate/linerate/ports/internal/devclock"
	"github.com/linerate/linerate/ports/internal/netdev"
)

// Rx timestamp modes (the rx_timestamp key) and the sources Info names.
const (
	TimestampAuto     = "auto"     // hardware where the NIC stamps every frame, else kernel
	TimestampHardware = "hardware" // the NIC's stamps (SO_TIMESTAMPING raw hardware); an error without them
	TimestampKernel   = "kernel"   // the kernel's software stamps
	TimestampEngine   = "engine"   // the engine's clock when the lcore takes the burst
)

// What Info says of each source: where the stamp is taken, and how far
// from the wire it can be.
const (
	detailHardware = "the NIC's receive stamp (SO_TIMESTAMPING raw hardware, every frame), its PHC " +
		"mapped onto the engine clock every 100 ms: nanoseconds from the wire, plus the mapping's " +
		"error (half a PHC read's bracket, a microsecond or less)"
	detailKernel = "the kernel's receive stamp (SO_TIMESTAMPING software, CLOCK_REALTIME mapped onto " +
		"the engine clock): taken as the driver hands the frame to the stack, after the NIC and its " +
		"interrupt moderation; microseconds from the wire on a veth, up to the NIC's interrupt " +
		"coalescing time on hardware"
	detailEngine = "the engine clock when the lcore takes the burst: after the ring hands the block " +
		"over (up to block_timeout late) and the lcore polls; a millisecond or more from the wire"
)

// timestamps is a port's rx timestamp source, shared by its rx queues: the
// engine clock (for the Unix offset that maps the kernel's CLOCK_REALTIME
// stamps) and, with hardware stamps, the PHC's mapping.
type timestamps struct {
	clk      clock.Clock
	hw       atomic.Pointer[devclock.Map] // nil: software stamps only
	phc      *phc
	stop     chan struct{}
	done     sync.WaitGroup
	ifname   string
	stamping *netdev.Stamping // the NIC's stamping config before the port changed it
}

// setupTimestamps sets the interface up for the mode and returns the source
// and Info's name for it; nil means engine stamps. The rx sockets enable it.
func setupTimestamps(mode, ifname string, c clock.Clock) (*timestamps, string, error) {
	if _, host := c.(*clock.System); !host || mode == TimestampEngine {
		if mode == TimestampHardware || mode == TimestampKernel {
			return nil, "", fmt.Errorf("rx_timestamp = %q needs the host clock (the engine runs in virtual time)", mode)
		}
		return nil, TimestampEngine, nil
	}
	ts := &timestamps{clk: c, ifname: ifname}
	if mode == TimestampAuto || mode == TimestampHardware {
		err := ts.setupHardware()
		switch {
		case err == nil:
			return ts, TimestampHardware, nil
		case mode == TimestampHardware:
			return nil, "", fmt.Errorf("rx_timestamp = \"hardware\": %s: %w", ifname, err)
		}
	}
	return ts, TimestampKernel, nil
}

// enable asks the kernel for stamps on an rx socket: software ones taken
// as the frame enters the stack (rather than when the ring is written), and
// with the PHC set up, the NIC's in the ring (PACKET_TIMESTAMP).
func (ts *timestamps) enable(fd int) error {
	flags := unix.SOF_TIMESTAMPING_RX_SOFTWARE | unix.SOF_TIMESTAMPING_SOFTWARE
	if ts.phc != nil {
		flags |= unix.SOF_TIMESTAMPING_RX_HARDWARE | unix.SOF_TIMESTAMPING_RAW_HARDWARE
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_TIMESTAMP, unix.SOF_TIMESTAMPING_RAW_HARDWARE); err != nil {
			return fmt.Errorf("PACKET_TIMESTAMP: %w", err)
		}
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPING, flags); err != nil {
		return fmt.Errorf("SO_TIMESTAMPING: %w", err)
	}
	return nil
}

// setupHardware turns on the NIC's stamping of every received frame and
// maps its PHC onto the engine clock. It says why not when the interface
// cannot.
func (ts *timestamps) setupHardware() error {
	st, err := netdev.StampAll(ts.ifname)
	if err != nil {
		return err
	}
	p, err := openPHC(fmt.Sprintf("/dev/ptp%d", st.PHC))
	if err != nil {
		return errors.Join(err, st.Restore())
	}
	ts.stamping = st
	ts.phc = p
	ts.hw.Store(p.calibrate(ts.clk, nil))
	ts.stop = make(chan struct{})
	ts.done.Add(1)
	go ts.follow()
	return nil
}

// follow keeps the PHC's mapping current: the PHC may be steered (ptp4l,
// phc2sys) or free-running at its own rate.
func (ts *timestamps) follow() {
	defer ts.done.Done()
	t := time.NewTicker(phcInterval)
	defer t.Stop()
	for {
		select {
		case <-ts.stop:
			return
		case <-t.C:
			ts.hw.Store(ts.phc.calibrate(ts.clk, ts.hw.Load()))
		}
	}
}

// close stops following the PHC and gives the interface its stamping config
// back. It runs before the rx sockets close.
func (ts *timestamps) close() error {
	if ts == nil || ts.phc == nil {
		return nil
	}
	close(ts.stop)
	ts.done.Wait()
	ts.phc.close()
	return ts.stamping.Restore()
}

// phcInterval is how often the PHC mapping is taken again.
const phcInterval = 100 * time.Millisecond

// phc is a PTP hardware clock, read as a dynamic POSIX clock.
type phc struct {
	f  *os.File
	id int32
}

func openPHC(path string) (*phc, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("PTP hardware clock: %w", err)
	}
	// FD_TO_CLOCKID (linux/posix-timers.h): a clock id for an open clock
	// device.
	return &phc{f: f, id: int32((^uint32(f.Fd()))<<3 | 3)}, nil
}

func (p *phc) close() { p.f.Close() }

func (p *phc) now() (int64, error) {
	var t unix.Timespec
	if err := unix.ClockGettime(p.id, &t); err != nil {
		return 0, err
	}
	return t.Nano(), nil
}

// calibrate takes a reading of the PHC and returns the mapping with it;
// prev (nil at first) holds the earlier readings. A failed read keeps prev.
func (p *phc) calibrate(c clock.Clock, prev *devclock.Map) *devclock.Map {
	pt, err := devclock.Read(p.now, c.Now)
	if err != nil {
		return prev
	}
	return devclock.Next(prev, pt, 1) // a PHC counts nanoseconds
}
