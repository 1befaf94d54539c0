package stamp

import (
	"golang.org/x/sys/unix"

	"github.com/linerate/linerate/plugins/stamp/bpf"
)

// xdpConfig is the reflector's config as its XDP program reads it. The
// program reads CLOCK_TAI; utcOff is Unix time − CLOCK_TAI (kernelTAIOffset
// says how far apart they are).
func (r *reflector) xdpConfig() bpf.ReflectorConfig {
	r.ee.refresh()
	utcOff := -int64(kernelTAIOffset()) * 1e9
	c := bpf.ReflectorConfig{Port: r.port, HopLimit: r.hopLimit, SwapMAC: r.swapMAC, ReflectAll: r.reflectAll,
		Format:         int8(r.format),
		ErrorEstimates: [2]uint16{uint16(r.ee.ee[formatNTP]), uint16(r.ee.ee[formatPTP])},
		UTCOffset:      utcOff, PTPOffset: utcOff + int64(r.ee.tai)*1e9,
		Broadcasts: r.bcast, Addresses: r.addrs, Allow: r.allow}
	if r.limiter != nil {
		c.RateLimit, c.RateBurst = r.limiter.perNs*1e9, int(r.limiter.burst)
	}
	return c
}

// kernelTAIOffset is CLOCK_TAI − CLOCK_REALTIME in seconds: the kernel's
// TAI offset, 0 until something (chrony, ptp4l) sets it.
func kernelTAIOffset() int {
	var tx unix.Timex
	if _, err := unix.Adjtimex(&tx); err != nil {
		return 0
	}
	return int(tx.Tai)
}

// xdpSession is a reflector session as the XDP program reads it.
func xdpSession(s *rfSession) bpf.ReflectorSession {
	x := bpf.ReflectorSession{SSID: s.id, Stateful: s.cfg.Stateful, Running: s.running.Load(), Auth: s.cfg.Auth,
		Pinned: s.pinned, Format: int8(s.format), Sender: s.sender, ReturnEnd: s.retLast,
		SRH: s.srh, SRHLast: s.srhLast}
	if s.cfg.Source.IsValid() {
		x.Source, x.HasSource = as16(s.cfg.Source), true
	}
	return x
}

// syncXDP makes the program's sessions this stage's: those of the table
// put (their program state kept), the others removed.
func (r *reflector) syncXDP(p *bpf.Reflector, t *rfTable) error {
	have, err := p.Sessions()
	if err != nil {
		return err
	}
	keep := map[uint16]bool{}
	if t != nil {
		for id, s := range t.m {
			if s.stage != r.name {
				continue
			}
			x := xdpSession(s)
			if !x.Offloadable() {
				continue // its packets go up to this stage
			}
			if err := p.PutSession(x); err != nil {
				return err
			}
			keep[id] = true
		}
	}
	for _, id := range have {
		if !keep[id] {
			if err := p.DeleteSession(id); err != nil {
				return err
			}
		}
	}
	return nil
}
