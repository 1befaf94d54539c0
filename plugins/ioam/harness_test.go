package ioam

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/plugins"
	"github.com/linerate/linerate/plugins/stagetest"
)

// The harness runs IOAM stages without the engine (plugins/stagetest), on
// one pool of its own.
type harness struct {
	*stagetest.Harness
	pool *packet.Slab
}

// testUnixBase is the harness clock's wall time at virtual zero: 2024-01-01.
const testUnixBase = 1704067200 * 1e9

// testStart is the harness clock's first reading: 1 s of virtual time, so
// that no rx time is zero.
const testStart = 1e9

// testSec is the Unix seconds of testStart.
const testSec = testUnixBase/1e9 + 1

func newHarness(t testing.TB) *harness {
	t.Helper()
	return newHarnessOf(t, 2048)
}

// newHarnessOf is newHarness with a pool of n buffers.
func newHarnessOf(t testing.TB, n int) *harness {
	t.Helper()
	h := &harness{Harness: stagetest.NewHarness(t, testUnixBase)}
	h.pool = h.NewPool("ioam-test", n, 2048)
	h.Ports = stagetest.Ports{
		{ID: 0, Name: "eth0", MTU: 1500, Pool: h.pool},
		{ID: 1, Name: "eth1", MTU: 1500, Pool: h.pool},
		{ID: 2, Name: "big", MTU: 9000, Pool: h.pool},
	}
	h.Clock.Set(testStart)
	return h
}

// result is what became of one packet through a chain.
type result struct {
	data    []byte // the packet's bytes when it left the chain (forwarded or continued)
	dropped string
}

// run passes one packet through stages, applying verdicts, and returns a copy
// of its bytes (it frees the packet).
func (h *harness) run(data []byte, in uint16, local bool, stages ...plugins.Stage) result {
	h.T.Helper()
	b := &packet.Burst{}
	hd := h.Pkt(data, in)
	if local {
		hd.P().SetFlag(packet.FlagLocal)
	}
	b.Push(hd)
	return h.runBurst(b, stages...)[0]
}

// runBurst passes a burst through stages and returns each packet's fate, in
// order, freeing them all.
func (h *harness) runBurst(b *packet.Burst, stages ...plugins.Stage) []result {
	h.T.Helper()
	o := h.Run(b, stages...)
	out := make([]result, len(o.Fates))
	for i, f := range o.Fates {
		out[i].data, out[i].dropped = f.Take()
	}
	return out
}

// frame builds an Ethernet/IPv6/UDP frame with payload bytes of payload and
// the given extension headers (raw, next headers already chained; the last's
// next header is set to UDP here).
type frameSpec struct {
	src, dst string
	hopLimit uint8
	vlan     int
	ext      [][]byte // extension headers; each ext[i][0] is overwritten with the next one
	extTypes []uint8  // their header types
	payload  int
}

func buildFrame(t testing.TB, f frameSpec) []byte {
	t.Helper()
	if f.src == "" {
		f.src = "2001:db8:1::1"
	}
	if f.dst == "" {
		f.dst = "2001:db8:2::1"
	}
	if f.hopLimit == 0 {
		f.hopLimit = 64
	}
	var b []byte
	b = append(b, 2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1)
	if f.vlan > 0 {
		b = binary.BigEndian.AppendUint16(b, 0x8100)
		b = binary.BigEndian.AppendUint16(b, uint16(f.vlan))
	}
	b = binary.BigEndian.AppendUint16(b, 0x86DD)
	l3 := len(b)
	extLen := 0
	for _, e := range f.ext {
		extLen += len(e)
	}
	udpLen := 8 + f.payload
	ip := make([]byte, 40)
	first := uint8(packet.ProtocolUDP)
	if len(f.ext) > 0 {
		first = f.extTypes[0]
	}
	src, dst := netip.MustParseAddr(f.src).As16(), netip.MustParseAddr(f.dst).As16()
	packet.IPv6(ip).Encode(&packet.IPv6Fields{TrafficClass: 0x28, FlowLabel: 0x12345, PayloadLength: uint16(extLen + udpLen),
		NextHeader: first, HopLimit: f.hopLimit, Src: src, Dst: dst})
	b = append(b, ip...)
	for i, e := range f.ext {
		e = append([]byte(nil), e...)
		if i+1 < len(f.ext) {
			e[0] = f.extTypes[i+1]
		} else {
			e[0] = packet.ProtocolUDP
		}
		b = append(b, e...)
	}
	u := make([]byte, udpLen)
	binary.BigEndian.PutUint16(u[0:], 10000)
	binary.BigEndian.PutUint16(u[2:], 20000)
	binary.BigEndian.PutUint16(u[4:], uint16(udpLen))
	for i := 8; i < udpLen; i++ {
		u[i] = byte(i)
	}
	b = append(b, u...)
	ul := packet.UDP(b[len(b)-udpLen:])
	var l packet.Layers
	if err := packet.Parse(b, &l); err != nil {
		t.Fatalf("buildFrame: %v", err)
	}
	ul.SetChecksum(0)
	c := l.UDPChecksum(b)
	if c == 0 {
		c = 0xFFFF
	}
	ul.SetChecksum(c)
	_ = l3
	return b
}
