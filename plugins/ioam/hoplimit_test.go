package ioam

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/plugins/stagetest"
)

// hopLimitFrames are frames of every way into ioam.transit, each with the
// hop limit hl: no IOAM, a Hop-by-Hop header without IOAM, a trace of a
// namespace the node knows (fastTrace's layout), of one it does not, with the
// L flag (the general path), and an incremental trace.
func hopLimitFrames(t *testing.T, h *harness, hl uint8) []frameIn {
	t.Helper()
	return hopLimitFramesFor(t, h, hl, "2001:db8:e::1", "2001:db8:d::1")
}

// hopLimitFramesFor is hopLimitFrames with these addresses (outer ones for
// the encapsulated frames).
func hopLimitFramesFor(t *testing.T, h *harness, hl uint8, src, dst string) []frameIn {
	t.Helper()
	enc := func(trace string) []byte {
		e := h.MustBuildNamed("ioam.encap", "enc", fmt.Sprintf(`
node_id = 1
mode = "encap"
src = %q
dst = %q
namespaces = [ { id = 123 }, { id = 7 } ]
[[profiles]]
trace = %s
`, src, dst, trace))
		r := h.run(buildFrame(t, frameSpec{payload: 80, src: src, dst: dst}), 0, false, e)
		if r.data == nil {
			t.Fatalf("encap: %s", r.dropped)
		}
		r.data[14+7] = hl
		return r.data
	}
	plain := func(f frameSpec) []byte {
		d := buildFrame(t, f)
		d[14+7] = hl
		return d
	}
	ra := []byte{0, 0, 0x05, 0x02, 0x00, 0x00, 0x01, 0x00}
	return []frameIn{
		{name: "known namespace", data: enc(`{ namespace = 123, type = "0xC00000", hops = 3 }`)},
		{name: "no IOAM", data: plain(frameSpec{payload: 60, src: src, dst: dst})},
		{name: "router alert only", data: plain(frameSpec{payload: 60, src: src, dst: dst, ext: [][]byte{ra}, extTypes: []uint8{0}})},
		{name: "unknown namespace", data: enc(`{ namespace = 7, type = "0xC00000", hops = 3 }`)},
		{name: "loopback flag", data: enc(`{ namespace = 123, type = "0xC00000", hops = 3, loopback = true }`)},
		{name: "incremental", data: enc(`{ namespace = 123, type = "0xC00000", option = "incremental", hops = 3 }`)},
		{name: "known namespace, parsed", data: enc(`{ namespace = 123, type = "0xC00000", hops = 3 }`), parsed: true},
	}
}

// With decrement_hop_limit, ioam.transit forwards as the kernel does, on
// every path (quickRun, fast, one): every IPv6 packet leaves with its hop
// limit lowered by one, whatever its IOAM, and a packet that arrives with a
// hop limit of 1 or 0 is dropped. Without it, nothing changes.
func TestTransitHopLimitRule(t *testing.T) {
	h := newHarness(t)
	tr := h.MustBuild("ioam.transit", nodeKeys(2)+"decrement_hop_limit = true\n")
	keep := h.MustBuildNamed("ioam.transit", "keep", nodeKeys(2))
	ipv4 := append([]byte(nil), buildFrame(t, frameSpec{payload: 60})...)
	ipv4[12], ipv4[13] = 0x08, 0x00
	for _, hl := range []uint8{64, 2, 1, 0} {
		frames := hopLimitFrames(t, h, hl)
		// A burst the general path starts and quickRun carries on: the first
		// packet teaches the stage the layout, the ones like it go through
		// quickRun; the last of each kind once more after the others.
		var in []frameIn
		in = append(in, frames...)
		in = append(in, frames[0], frames[0], frames[0])
		in = append(in, frames...)
		b := &packet.Burst{}
		for _, f := range in {
			hd := h.Pkt(f.data, f.port)
			if f.parsed {
				if _, err := hd.P().ParseLayers(); err != nil {
					t.Fatal(err)
				}
			}
			b.Push(hd)
		}
		b.Push(h.Pkt(ipv4, 0))
		out := h.runBurst(b, tr)
		for i, r := range out[:len(in)] {
			name := fmt.Sprintf("hop limit %d, packet %d (%s)", hl, i, in[i].name)
			if hl <= 1 {
				if r.dropped != "ioam_hop_limit" {
					t.Errorf("%s: %q, want dropped as ioam_hop_limit", name, r.dropped)
				}
				continue
			}
			if r.data == nil {
				t.Errorf("%s: dropped as %s", name, r.dropped)
				continue
			}
			if got := r.data[14+7]; got != hl-1 {
				t.Errorf("%s: leaves with hop limit %d, want %d", name, got, hl-1)
			}
		}
		if r := out[len(in)]; !bytes.Equal(r.data, ipv4) {
			t.Errorf("hop limit %d: an IPv4 frame changed (%s)", hl, r.dropped)
		}
		for _, f := range frames {
			if r := h.run(f.data, 0, false, keep); r.data == nil || r.data[14+7] != hl {
				t.Errorf("without decrement_hop_limit, %s with hop limit %d: %s", f.name, hl, r.dropped)
			}
		}
	}
	if names := fmt.Sprint(h.CounterNames("ioam.transit#0")); strings.Contains(names, "icmp_errors") {
		t.Errorf("a bump in the wire has ICMP error counters: %s", names)
	}
	if len(h.Env.Emitted) != 0 {
		t.Errorf("a bump in the wire emitted %d packets", len(h.Env.Emitted))
	}
}

// In routed mode (its ports have addresses) the transit node answers an
// expired hop limit with an ICMPv6 Time Exceeded, as the route stage does:
// from the input port's address, to the packet's source, quoting it.
func TestTransitTimeExceeded(t *testing.T) {
	h := newHarness(t)
	mac := [6]byte{2, 0, 0, 0, 0xa, 1}
	h.Ports[0].MAC, h.Ports[0].Addrs = mac, []netip.Prefix{netip.MustParsePrefix("2001:db8:a::1/64")}
	tr := h.MustBuild("ioam.transit", nodeKeys(2)+"decrement_hop_limit = true\n")
	for _, f := range hopLimitFrames(t, h, 1) {
		t.Run(f.name, func(t *testing.T) {
			before := h.StageCounter("ioam.transit#0", "icmp_errors_sent")
			if r := h.run(f.data, 0, false, tr); r.dropped != "ioam_hop_limit" {
				t.Fatalf("%q, want dropped as ioam_hop_limit", r.dropped)
			}
			em := h.Env.TakeEmitted()
			if len(em) != 1 || em[0].Port != 0 {
				stagetest.FreeSent(em)
				t.Fatalf("%d packets emitted, want one ICMP error back out of eth0", len(em))
			}
			d := stagetest.TakeData(em[0].H)
			var l packet.Layers
			if err := packet.Parse(d, &l); err != nil {
				t.Fatal(err)
			}
			ip := packet.IPv6(d[14:])
			inIP := packet.IPv6(f.data[14:])
			if l.Proto != packet.ProtocolICMPv6 || ip.SrcAddr().String() != "2001:db8:a::1" || ip.Dst() != inIP.Src() ||
				packet.Ethernet(d).Src() != mac || packet.Ethernet(d).Dst() != packet.Ethernet(f.data).Src() {
				t.Fatalf("not an ICMPv6 error from eth0 to the source: % x", d[:54])
			}
			m := packet.ICMPv6(d[l.L4:])
			if m.Type() != packet.ICMPv6TimeExceeded || m.Code() != packet.ICMPv6HopLimitExceeded ||
				!m.IsChecksumValid(ip.Src(), ip.Dst()) || binary.BigEndian.Uint32(m[4:]) != 0 {
				t.Errorf("ICMPv6 type %d code %d", m.Type(), m.Code())
			}
			if !bytes.Equal(m[packet.ICMPv6MinLen:], f.data[14:]) {
				t.Errorf("the error does not quote the packet as it came")
			}
			if n := h.StageCounter("ioam.transit#0", "icmp_errors_sent"); n != before+1 {
				t.Errorf("icmp_errors_sent %d, want %d", n, before+1)
			}
		})
	}
}

// The hop limit rule allocates nothing, the Time Exceeded of routed mode
// included.
func TestHopLimitNoAllocs(t *testing.T) {
	h := newHarness(t)
	h.Ctx.Env = &quietEnv{}
	h.Ports[0].MAC, h.Ports[0].Addrs = [6]byte{2, 0, 0, 0, 0xa, 1}, []netip.Prefix{netip.MustParsePrefix("2001:db8:a::1/64")}
	tr := h.MustBuild("ioam.transit", nodeKeys(2)+"decrement_hop_limit = true\n")
	var frames [][]byte
	for _, hl := range []uint8{1, 9} {
		for _, f := range hopLimitFrames(t, h, hl) {
			frames = append(frames, f.data)
		}
	}
	var b packet.Burst
	allocs := testing.AllocsPerRun(200, func() {
		for _, f := range frames {
			b.Push(h.Pkt(f, 0))
		}
		h.Ctx.Now += int64(time.Millisecond) // room in the error rate for a few
		tr.Process(&h.Ctx, &b)
		packet.Free(&b)
	})
	if allocs != 0 {
		t.Errorf("%v allocations per burst", allocs)
	}
	if h.StageCounter("ioam.transit#0", "icmp_errors_sent") == 0 {
		t.Error("no Time Exceeded sent")
	}
}
