package rlnc

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/plugins"
	"github.com/linerate/linerate/plugins/stagetest"
)

// The harness runs RLNC stages without the engine (plugins/stagetest) on
// four ports sharing one pool.
type harness struct {
	*stagetest.Harness
	pool *packet.Slab
}

func newHarness(t testing.TB) *harness {
	t.Helper()
	h := &harness{Harness: stagetest.NewHarness(t, 0)}
	h.Clock.Set(1e9)
	h.pool = h.NewPool("test", 8192, 2048)
	h.Ports = stagetest.Ports{
		{ID: 0, Name: "eth0", MTU: 1500, Pool: h.pool},
		{ID: 1, Name: "eth1", MTU: 1500, Pool: h.pool},
		{ID: 2, Name: "mem0", MTU: 9000, Pool: h.pool, Internal: true},
		{ID: 3, Name: "mem1", MTU: 9000, Pool: h.pool, Internal: true},
	}
	return h
}

// produce drains st's Producer fully.
func (h *harness) produce(st plugins.Stage) []packet.Handle {
	h.T.Helper()
	if _, ok := st.(plugins.Producer); !ok {
		return nil
	}
	var out []packet.Handle
	for {
		b := h.Produce(st)
		if b.N == 0 {
			return out
		}
		for _, hd := range b.Handles() {
			if hd.P().Verdict() != packet.Continue {
				h.T.Errorf("produced packet with verdict %v", hd.P().Verdict())
			}
		}
		out = append(out, b.Handles()...)
	}
}

// bursts makes bursts of at most 64 packets from frames.
func (h *harness) bursts(frames [][]byte, in uint16) []*packet.Burst {
	var out []*packet.Burst
	for len(frames) > 0 {
		n := min(len(frames), packet.MaxBurst)
		b := &packet.Burst{}
		for _, f := range frames[:n] {
			b.Push(h.Pkt(f, in))
		}
		out = append(out, b)
		frames = frames[n:]
	}
	return out
}

// handlesBursts groups handles into bursts.
func handlesBursts(hs []packet.Handle) []*packet.Burst {
	var out []*packet.Burst
	for len(hs) > 0 {
		n := min(len(hs), packet.MaxBurst)
		b := &packet.Burst{N: n}
		copy(b.H[:], hs[:n])
		out = append(out, b)
		hs = hs[n:]
	}
	return out
}

var (
	testSrc = netip.MustParseAddr("2001:db8:1::1")
	testDst = netip.MustParseAddr("2001:db8:2::1")
)

// udpFrame builds an Ethernet/IPv6/UDP frame with the UDP checksum set.
func udpFrame(src, dst netip.Addr, sport, dport uint16, payload []byte) []byte {
	d := make([]byte, 14+40+8+len(payload))
	copy(d[0:6], []byte{2, 0, 0, 0, 0, 2})
	copy(d[6:12], []byte{2, 0, 0, 0, 0, 1})
	binary.BigEndian.PutUint16(d[12:], 0x86DD)
	ip := packet.IPv6(d[14:])
	ip[0] = 0x60
	ip.SetPayloadLength(uint16(8 + len(payload)))
	ip.SetNextHeader(17)
	ip.SetHopLimit(64)
	ip.SetSrc(src.As16())
	ip.SetDst(dst.As16())
	u := d[54:]
	binary.BigEndian.PutUint16(u[0:], sport)
	binary.BigEndian.PutUint16(u[2:], dport)
	binary.BigEndian.PutUint16(u[4:], uint16(8+len(payload)))
	copy(u[8:], payload)
	s16, d16 := src.As16(), dst.As16()
	c := packet.UDP(u).ChecksumIPv6(s16, d16)
	binary.BigEndian.PutUint16(u[6:], c)
	return d
}
