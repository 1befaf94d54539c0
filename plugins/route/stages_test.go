package route

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/plugins"
	"github.com/linerate/linerate/plugins/stagetest"
)

// Test frames are built and checked with gopacket, an implementation that is
// not ours.

func ip(s string) net.IP { return net.IP(netip.MustParseAddr(s).AsSlice()) }

func serialize(t testing.TB, ls ...gopacket.SerializableLayer) []byte {
	t.Helper()
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{ComputeChecksums: true, FixLengths: true}, ls...); err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

func eth(src, dst packet.MAC, typ layers.EthernetType) *layers.Ethernet {
	return &layers.Ethernet{SrcMAC: net.HardwareAddr(src[:]), DstMAC: net.HardwareAddr(dst[:]), EthernetType: typ}
}

// ndFrame makes an ND message from src to dst.
func ndFrame(t testing.TB, srcMAC, dstMAC packet.MAC, src, dst string, hop uint8, msg gopacket.SerializableLayer, typ uint8) []byte {
	ip6 := &layers.IPv6{Version: 6, NextHeader: layers.IPProtocolICMPv6, HopLimit: hop, SrcIP: ip(src), DstIP: ip(dst)}
	icmp := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(typ, 0)}
	_ = icmp.SetNetworkLayerForChecksum(ip6)
	return serialize(t, eth(srcMAC, dstMAC, layers.EthernetTypeIPv6), ip6, icmp, msg)
}

func nsFrame(t testing.TB, srcMAC packet.MAC, src, target string, sll bool) []byte {
	tgt := netip.MustParseAddr(target).As16()
	dst := netip.AddrFrom16(packet.SolicitedNode(tgt))
	ns := &layers.ICMPv6NeighborSolicitation{TargetAddress: ip(target)}
	if sll {
		ns.Options = layers.ICMPv6Options{{Type: layers.ICMPv6OptSourceAddress, Data: srcMAC[:]}}
	}
	return ndFrame(t, srcMAC, packet.MulticastMAC(dst.As16()), src, dst.String(), 255, ns, packet.ICMPv6NeighborSolicit)
}

func naFrame(t testing.TB, srcMAC, dstMAC packet.MAC, src, dst, target string, flags uint8) []byte {
	na := &layers.ICMPv6NeighborAdvertisement{Flags: flags, TargetAddress: ip(target),
		Options: layers.ICMPv6Options{{Type: layers.ICMPv6OptTargetAddress, Data: srcMAC[:]}}}
	return ndFrame(t, srcMAC, dstMAC, src, dst, 255, na, packet.ICMPv6NeighborAdvert)
}

func udp6(t testing.TB, srcMAC, dstMAC packet.MAC, src, dst string, hop uint8, payload int) []byte {
	ip6 := &layers.IPv6{Version: 6, NextHeader: layers.IPProtocolUDP, HopLimit: hop, SrcIP: ip(src), DstIP: ip(dst)}
	u := &layers.UDP{SrcPort: 1000, DstPort: 2000}
	_ = u.SetNetworkLayerForChecksum(ip6)
	return serialize(t, eth(srcMAC, dstMAC, layers.EthernetTypeIPv6), ip6, u, gopacket.Payload(make([]byte, payload)))
}

func udp4(t testing.TB, srcMAC, dstMAC packet.MAC, src, dst string, ttl uint8, payload int) []byte {
	ip4 := &layers.IPv4{Version: 4, IHL: 5, TTL: ttl, Protocol: layers.IPProtocolUDP, SrcIP: ip(src), DstIP: ip(dst), Flags: layers.IPv4DontFragment}
	u := &layers.UDP{SrcPort: 1000, DstPort: 2000}
	_ = u.SetNetworkLayerForChecksum(ip4)
	return serialize(t, eth(srcMAC, dstMAC, layers.EthernetTypeIPv4), ip4, u, gopacket.Payload(make([]byte, payload)))
}

func decode(b []byte) gopacket.Packet {
	return gopacket.NewPacket(b, layers.LayerTypeEthernet, gopacket.Default)
}

func icmp6Of(t *testing.T, p gopacket.Packet) *layers.ICMPv6 {
	t.Helper()
	l, ok := p.Layer(layers.LayerTypeICMPv6).(*layers.ICMPv6)
	if !ok {
		t.Fatalf("no ICMPv6 in %v", p)
	}
	if err := l.SetNetworkLayerForChecksum(p.NetworkLayer()); err != nil {
		t.Fatal(err)
	}
	if err, res := l.VerifyChecksum(); err != nil || !res.Valid {
		t.Fatalf("ICMPv6 checksum: %v %+v", err, res)
	}
	return l
}

func TestNeighborAnswersNS(t *testing.T) {
	h := newHarness(t)
	n := h.build("neighbor", "")
	o := h.run(port0, [][]byte{nsFrame(t, host1, "2001:db8:1::2", "2001:db8:1::1", true)}, n)
	if len(o.Forwarded) != 1 || o.Forwarded[0].Port != port0 {
		t.Fatalf("outcome %+v", o)
	}
	p := decode(stagetest.TakeData(o.Forwarded[0].H))
	e := p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
	ip6 := p.Layer(layers.LayerTypeIPv6).(*layers.IPv6)
	na, ok := p.Layer(layers.LayerTypeICMPv6NeighborAdvertisement).(*layers.ICMPv6NeighborAdvertisement)
	icmp6Of(t, p)
	if !ok || !bytes.Equal(e.DstMAC, host1[:]) || !bytes.Equal(e.SrcMAC, mac0[:]) {
		t.Fatalf("NA frame %v", p)
	}
	if !ip6.SrcIP.Equal(ip("2001:db8:1::1")) || !ip6.DstIP.Equal(ip("2001:db8:1::2")) || ip6.HopLimit != 255 {
		t.Errorf("IPv6 %v → %v hop %d", ip6.SrcIP, ip6.DstIP, ip6.HopLimit)
	}
	if !na.Router() || !na.Solicited() || !na.Override() || !na.TargetAddress.Equal(ip("2001:db8:1::1")) ||
		len(na.Options) != 1 || na.Options[0].Type != layers.ICMPv6OptTargetAddress || !bytes.Equal(na.Options[0].Data, mac0[:]) {
		t.Errorf("NA %+v", na)
	}
	// It learnt the soliciting host, STALE (RFC 4861 §7.2.3).
	if m, st, ok := h.routed().Neighbors().Lookup(port0, a16("2001:db8:1::2"), h.Clock.Now()); !ok || st != Stale || m != host1 {
		t.Errorf("learnt %v %v %v", m, st, ok)
	}
	if h.Counter("ns_received") != 1 || h.Counter("na_sent") != 1 || h.Counter("learned") != 1 {
		t.Error("counters")
	}
}

func TestNeighborNSRows(t *testing.T) {
	h := newHarness(t)
	n := h.build("neighbor", "")
	ns := nsFrame(t, host1, "2001:db8:1::2", "2001:db8:1::1", true)
	badHop := bytes.Clone(ns)
	badHop[14+7] = 64
	badSum := bytes.Clone(ns)
	badSum[len(badSum)-1] ^= 1
	// A duplicate address check: from ::, no source link-layer option.
	dad := nsFrame(t, host1, "::", "2001:db8:1::1", false)
	// The link-local address made from the port's MAC.
	ll := linkLocal(mac0).String()
	for _, c := range []struct {
		name   string
		frame  []byte
		in     uint16
		reason string
		check  func(t *testing.T, p gopacket.Packet)
	}{
		{"hop limit 64", badHop, port0, "neighbor_invalid", nil},
		{"bad checksum", badSum, port0, "neighbor_invalid", nil},
		{"another node's address", nsFrame(t, host1, "2001:db8:1::2", "2001:db8:1::3", true), port0, "neighbor_not_ours", nil},
		{"our address on the other port", nsFrame(t, host1, "2001:db8:1::2", "2001:db8:2::1", true), port0, "neighbor_not_ours", nil},
		{"DAD from ::", dad, port0, "", func(t *testing.T, p gopacket.Packet) {
			ip6 := p.Layer(layers.LayerTypeIPv6).(*layers.IPv6)
			na := p.Layer(layers.LayerTypeICMPv6NeighborAdvertisement).(*layers.ICMPv6NeighborAdvertisement)
			if !ip6.DstIP.Equal(ip("ff02::1")) || na.Solicited() || !bytes.Equal(p.LinkLayer().LinkFlow().Dst().Raw(), []byte{0x33, 0x33, 0, 0, 0, 1}) {
				t.Errorf("DAD answer to %v solicited %v", ip6.DstIP, na.Solicited())
			}
		}},
		{"link-local target", nsFrame(t, host1, "fe80::2", ll, true), port0, "", func(t *testing.T, p gopacket.Packet) {
			ip6 := p.Layer(layers.LayerTypeIPv6).(*layers.IPv6)
			if !ip6.SrcIP.Equal(ip(ll)) || !ip6.DstIP.Equal(ip("fe80::2")) {
				t.Errorf("%v → %v", ip6.SrcIP, ip6.DstIP)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := h.run(c.in, [][]byte{c.frame}, n)
			if c.reason != "" {
				if o.Dropped[c.reason] != 1 {
					t.Errorf("outcome %+v, want dropped as %s", o, c.reason)
				}
				o.Free()
				return
			}
			if len(o.Forwarded) != 1 {
				t.Fatalf("outcome %+v", o)
			}
			p := decode(stagetest.TakeData(o.Forwarded[0].H))
			icmp6Of(t, p)
			c.check(t, p)
		})
	}
}

func TestNeighborARP(t *testing.T) {
	h := newHarness(t)
	n := h.build("neighbor", "")
	req := serialize(t, eth(host1, packet.BroadcastMAC, layers.EthernetTypeARP), &layers.ARP{AddrType: layers.LinkTypeEthernet,
		Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4, Operation: layers.ARPRequest,
		SourceHwAddress: host1[:], SourceProtAddress: ip("192.0.2.2").To4(), DstHwAddress: make([]byte, 6), DstProtAddress: ip("192.0.2.1").To4()})
	o := h.run(port0, [][]byte{req}, n)
	if len(o.Forwarded) != 1 {
		t.Fatalf("outcome %+v", o)
	}
	p := decode(stagetest.TakeData(o.Forwarded[0].H))
	a := p.Layer(layers.LayerTypeARP).(*layers.ARP)
	if a.Operation != layers.ARPReply || !bytes.Equal(a.SourceHwAddress, mac0[:]) || !net.IP(a.SourceProtAddress).Equal(ip("192.0.2.1")) ||
		!bytes.Equal(a.DstHwAddress, host1[:]) || !net.IP(a.DstProtAddress).Equal(ip("192.0.2.2")) {
		t.Errorf("ARP reply %+v", a)
	}
	if m, st, ok := h.routed().Neighbors().Lookup(port0, a16("::ffff:192.0.2.2"), h.Clock.Now()); !ok || st != Stale || m != host1 {
		t.Errorf("learnt %v %v %v", m, st, ok)
	}
	// A request for another address teaches nothing new and is dropped.
	other := bytes.Clone(req)
	copy(other[14+24:], ip("192.0.2.9").To4())
	copy(other[14+14:], ip("192.0.2.8").To4())
	o = h.run(port0, [][]byte{other}, n)
	if o.Dropped["neighbor_not_ours"] != 1 {
		t.Errorf("outcome %+v", o)
	}
	if _, _, ok := h.routed().Neighbors().Lookup(port0, a16("::ffff:192.0.2.8"), h.Clock.Now()); ok {
		t.Error("learnt from a request for another node")
	}
}

func TestRouteForwards(t *testing.T) {
	h := newHarness(t)
	n := h.build("neighbor", "")
	r := h.build("route", "")
	tb := h.routed().Neighbors()
	now := h.Clock.Now()
	tb.SetStatic(port1, a16("2001:db8:2::2"), host2, now)
	tb.SetStatic(port1, a16("::ffff:198.51.100.2"), host2, now)
	in6 := udp6(t, host1, mac0, "2001:db8:1::2", "2001:db8:2::2", 64, 100)
	in4 := udp4(t, host1, mac0, "192.0.2.2", "198.51.100.2", 64, 100)
	o := h.run(port0, [][]byte{in6, in4}, n, r)
	if len(o.Forwarded) != 2 || o.Forwarded[0].Port != port1 || o.Forwarded[1].Port != port1 {
		t.Fatalf("outcome %+v", o)
	}
	p6 := decode(stagetest.TakeData(o.Forwarded[0].H))
	p4 := decode(stagetest.TakeData(o.Forwarded[1].H))
	for _, p := range []gopacket.Packet{p6, p4} {
		e := p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
		if !bytes.Equal(e.SrcMAC, mac1[:]) || !bytes.Equal(e.DstMAC, host2[:]) {
			t.Errorf("MACs %v → %v", e.SrcMAC, e.DstMAC)
		}
	}
	if hl := p6.Layer(layers.LayerTypeIPv6).(*layers.IPv6).HopLimit; hl != 63 {
		t.Errorf("hop limit %d", hl)
	}
	ip4 := p4.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
	if ip4.TTL != 63 || !packet.IPv4(p4.Data()[14:]).IsChecksumValid() {
		t.Errorf("TTL %d checksum %#x valid %v", ip4.TTL, ip4.Checksum, packet.IPv4(p4.Data()[14:]).IsChecksumValid())
	}
	// The rest is byte for byte what came in.
	if !bytes.Equal(p6.Data()[14+8:], in6[14+8:]) || !bytes.Equal(p4.Data()[14+12:], in4[14+12:]) {
		t.Error("payload changed")
	}
	if h.Counter("forwarded") != 2 {
		t.Error("forwarded counter")
	}
}

func TestRouteAllocs(t *testing.T) {
	h := newHarness(t)
	r := h.build("route", "")
	h.routed().Neighbors().SetStatic(port1, a16("2001:db8:2::2"), host2, h.Clock.Now())
	frame := udp6(t, host1, mac0, "2001:db8:1::2", "2001:db8:2::2", 64, 100)
	var b packet.Burst
	pool := h.Pools["default"]
	allocs := testing.AllocsPerRun(200, func() {
		b.N = 0
		for range 32 {
			hd, _ := pool.AllocOne()
			d, _ := hd.P().Append(len(frame))
			copy(d, frame)
			hd.P().InPort = port0
			b.Push(hd)
		}
		r.Process(&h.Ctx, &b)
		packet.Free(&b)
	})
	if allocs != 0 {
		t.Errorf("%v allocations per burst", allocs)
	}
}

// emittedOn takes the stage's emitted frames on port.
func emittedOn(t *testing.T, h *harness, port uint16) []gopacket.Packet {
	t.Helper()
	var out []gopacket.Packet
	for _, e := range h.Env.TakeEmitted() {
		if e.Port != port {
			t.Errorf("emitted on port %d, want %d", e.Port, port)
		}
		out = append(out, decode(stagetest.TakeData(e.H)))
	}
	return out
}

func TestRouteICMPErrors(t *testing.T) {
	h := newHarness(t)
	r := h.build("route", "")
	h.routed().Neighbors().SetStatic(port1, a16("2001:db8:2::2"), host2, h.Clock.Now())
	big := udp6(t, host1, mac0, "2001:db8:1::2", "2001:db8:2::2", 64, 1500)
	for _, c := range []struct {
		name     string
		frame    []byte
		reason   string
		typ      uint8
		code     uint8
		rest     uint32
		src      string
		quoteLen int
	}{
		{"hop limit 1", udp6(t, host1, mac0, "2001:db8:1::2", "2001:db8:2::2", 1, 100), "route_hop_limit",
			packet.ICMPv6TimeExceeded, packet.ICMPv6HopLimitExceeded, 0, "2001:db8:1::1", 40 + 8 + 100},
		{"no route", udp6(t, host1, mac0, "2001:db8:1::2", "2001:db8:99::1", 64, 10), "route_no_route",
			packet.ICMPv6DstUnreachable, packet.ICMPv6NoRoute, 0, "2001:db8:1::1", 40 + 8 + 10},
		{"too big", big, "route_too_big", packet.ICMPv6PacketTooBig, 0, 1500, "2001:db8:1::1", 1280 - 48},
		{"link-local source", udp6(t, host1, mac0, "fe80::2", "2001:db8:2::2", 64, 10), "route_scope",
			packet.ICMPv6DstUnreachable, packet.ICMPv6BeyondScope, 0, linkLocal(mac0).String(), 40 + 8 + 10},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := h.run(port0, [][]byte{c.frame}, r)
			if o.Dropped[c.reason] != 1 {
				t.Fatalf("outcome %+v", o)
			}
			if em := h.Env.Emitted; len(em) != 1 || em[0].H.P().Flags()&packet.FlagLocal == 0 {
				t.Fatalf("%d errors sent, or not marked local", len(em))
			}
			out := emittedOn(t, h, port0)
			p := out[0]
			e := p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
			ip6 := p.Layer(layers.LayerTypeIPv6).(*layers.IPv6)
			m := icmp6Of(t, p)
			if !bytes.Equal(e.DstMAC, host1[:]) || !bytes.Equal(e.SrcMAC, mac0[:]) || !ip6.SrcIP.Equal(ip(c.src)) ||
				!ip6.DstIP.Equal(net.IP(c.frame[14+8:14+24])) {
				t.Errorf("error %v → %v, %v → %v", e.SrcMAC, e.DstMAC, ip6.SrcIP, ip6.DstIP)
			}
			if m.TypeCode.Type() != c.typ || m.TypeCode.Code() != c.code {
				t.Errorf("type %v", m.TypeCode)
			}
			body := m.LayerPayload()
			if len(body) != 4+c.quoteLen || binary.BigEndian.Uint32(body) != c.rest {
				t.Fatalf("body %d bytes (want %d), rest %x", len(body), 4+c.quoteLen, body[:4])
			}
			if !bytes.Equal(body[4:], c.frame[14:14+c.quoteLen]) {
				t.Error("the quoted packet differs from the original")
			}
			if int(ip6.Length)+40 > 1280 {
				t.Errorf("error of %d bytes", ip6.Length+40)
			}
		})
	}
	// IPv4: TTL 1 gets Time Exceeded quoting the header and the datagram.
	in := udp4(t, host1, mac0, "192.0.2.2", "198.51.100.2", 1, 20)
	o := h.run(port0, [][]byte{in}, r)
	if o.Dropped["route_hop_limit"] != 1 {
		t.Fatalf("outcome %+v", o)
	}
	out := emittedOn(t, h, port0)
	if len(out) != 1 {
		t.Fatalf("%d errors", len(out))
	}
	ip4 := out[0].Layer(layers.LayerTypeIPv4).(*layers.IPv4)
	m := out[0].Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4)
	if m.TypeCode.Type() != packet.ICMPv4TimeExceeded || !ip4.SrcIP.Equal(ip("192.0.2.1")) || !ip4.DstIP.Equal(ip("192.0.2.2")) ||
		!packet.ICMPv4(m.Contents).IsChecksumValid() && len(m.Payload) == 0 || !bytes.Equal(m.Payload, in[14:14+48]) {
		t.Errorf("ICMP %v %v → %v payload %x", m.TypeCode, ip4.SrcIP, ip4.DstIP, m.Payload)
	}
	if !packet.ICMPv4(out[0].Data()[34:34+8+48]).IsChecksumValid() || !packet.IPv4(out[0].Data()[14:]).IsChecksumValid() {
		t.Error("IPv4 error checksums")
	}
	// No error answers an error.
	te := out[0].Data()
	o = h.run(port0, [][]byte{func() []byte {
		f := bytes.Clone(te)
		packet.Ethernet(f).SetDst(mac0)
		packet.Ethernet(f).SetSrc(host1)
		ip := packet.IPv4(f[14:])
		ip.SetDst([4]byte{198, 51, 100, 9})
		ip.SetTTL(1)
		ip.SetChecksum(ip.CalculateChecksum())
		return f
	}()}, r)
	if o.Dropped["route_hop_limit"] != 1 || len(h.Env.TakeEmitted()) != 0 {
		t.Errorf("answered an ICMP error: %+v", o)
	}
}

func TestICMPErrorRateLimit(t *testing.T) {
	h := newHarness(t)
	h.build("icmp", "error_rate = \"10pps\"\nerror_burst = 5")
	r := h.build("route", "")
	var frames [][]byte
	for range 40 {
		frames = append(frames, udp6(t, host1, mac0, "2001:db8:1::2", "2001:db8:2::2", 1, 10))
	}
	o := h.run(port0, frames, r)
	if o.Dropped["route_hop_limit"] != 40 {
		t.Fatalf("outcome %+v", o)
	}
	if got := len(emittedOn(t, h, port0)); got != 5 {
		t.Errorf("%d errors in a burst, want 5", got)
	}
	if h.Counter("icmp_errors_limited") != 35 || h.Counter("icmp_errors_sent") != 5 {
		t.Errorf("limited %d sent %d", h.Counter("icmp_errors_limited"), h.Counter("icmp_errors_sent"))
	}
	h.Clock.Advance(time.Second)
	o = h.run(port0, frames[:20], r)
	if got := len(emittedOn(t, h, port0)); got != 5 {
		t.Errorf("%d errors a second later, want 5 (the bucket refilled)", got)
	}
}

// TestResolve: with no neighbour, route holds the packet and solicits; the
// advertisement that answers releases it.
func TestResolve(t *testing.T) {
	h := newHarness(t)
	n := h.build("neighbor", "")
	r := h.build("route", "")
	o := h.run(port0, [][]byte{udp6(t, host1, mac0, "2001:db8:1::2", "2001:db8:2::2", 64, 10),
		udp4(t, host1, mac0, "192.0.2.2", "198.51.100.2", 64, 10)}, n, r)
	if o.Consumed != 2 || r.(*forwarder).Held() != 2 || h.Counter("held") != 2 {
		t.Fatalf("outcome %+v held %d", o, r.(*forwarder).Held())
	}
	sol := emittedOn(t, h, port1)
	if len(sol) != 2 {
		t.Fatalf("%d solicitations", len(sol))
	}
	ns, ok := sol[0].Layer(layers.LayerTypeICMPv6NeighborSolicitation).(*layers.ICMPv6NeighborSolicitation)
	icmp6Of(t, sol[0])
	ip6 := sol[0].Layer(layers.LayerTypeIPv6).(*layers.IPv6)
	if !ok || !ns.TargetAddress.Equal(ip("2001:db8:2::2")) || !ip6.DstIP.Equal(ip("ff02::1:ff00:2")) || !ip6.SrcIP.Equal(ip("2001:db8:2::1")) ||
		ip6.HopLimit != 255 || len(ns.Options) != 1 || !bytes.Equal(ns.Options[0].Data, mac1[:]) ||
		!bytes.Equal(sol[0].LinkLayer().LinkFlow().Dst().Raw(), []byte{0x33, 0x33, 0xff, 0, 0, 2}) {
		t.Errorf("NS %v", sol[0])
	}
	arp, ok := sol[1].Layer(layers.LayerTypeARP).(*layers.ARP)
	if !ok || arp.Operation != layers.ARPRequest || !net.IP(arp.DstProtAddress).Equal(ip("198.51.100.2")) ||
		!net.IP(arp.SourceProtAddress).Equal(ip("198.51.100.1")) || !bytes.Equal(arp.SourceHwAddress, mac1[:]) || len(sol[1].Data()) != 60 {
		t.Errorf("ARP %v", sol[1])
	}
	// The answers.
	na := naFrame(t, host2, mac1, "2001:db8:2::2", "2001:db8:2::1", "2001:db8:2::2", 0x60)
	rep := serialize(t, eth(host2, mac1, layers.EthernetTypeARP), &layers.ARP{AddrType: layers.LinkTypeEthernet,
		Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4, Operation: layers.ARPReply,
		SourceHwAddress: host2[:], SourceProtAddress: ip("198.51.100.2").To4(), DstHwAddress: mac1[:], DstProtAddress: ip("198.51.100.1").To4()})
	o = h.run(port1, [][]byte{na, rep}, n, r)
	if o.Consumed != 2 {
		t.Fatalf("answers: %+v", o)
	}
	tb := h.routed().Neighbors()
	for _, a := range []string{"2001:db8:2::2", "::ffff:198.51.100.2"} {
		if m, st, _ := tb.Lookup(port1, a16(a), h.Clock.Now()); st != Reachable || m != host2 {
			t.Errorf("%s: %v %v", a, m, st)
		}
	}
	h.Tick(r)
	out := emittedOn(t, h, port1)
	if len(out) != 2 || r.(*forwarder).Held() != 0 || h.Counter("released") != 2 {
		t.Fatalf("released %d, held %d", len(out), r.(*forwarder).Held())
	}
	for _, p := range out {
		e := p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
		if !bytes.Equal(e.DstMAC, host2[:]) || !bytes.Equal(e.SrcMAC, mac1[:]) {
			t.Errorf("released with MACs %v → %v", e.SrcMAC, e.DstMAC)
		}
	}
	if hl := out[0].Layer(layers.LayerTypeIPv6).(*layers.IPv6).HopLimit; hl != 63 {
		t.Errorf("released hop limit %d", hl)
	}
	if ip4 := out[1].Layer(layers.LayerTypeIPv4).(*layers.IPv4); ip4.TTL != 63 || !packet.IPv4(out[1].Data()[14:]).IsChecksumValid() {
		t.Errorf("released TTL %d", ip4.TTL)
	}
}

// TestHoldExpires: a next hop that never answers is solicited three times;
// the packet is then freed and its sender told the address is unreachable.
func TestHoldExpires(t *testing.T) {
	h := newHarness(t)
	n := h.build("neighbor", "")
	r := h.build("route", `hold = 1
hold_time = "3s"`)
	o := h.run(port0, [][]byte{udp6(t, host1, mac0, "2001:db8:1::2", "2001:db8:2::7", 64, 10),
		udp6(t, host1, mac0, "2001:db8:1::2", "2001:db8:2::8", 64, 10)}, n, r)
	if o.Consumed != 1 || o.Dropped["route_unresolved"] != 1 {
		t.Fatalf("outcome %+v", o)
	}
	solicits := len(emittedOn(t, h, port1))
	for range 40 {
		h.Clock.Advance(100 * time.Millisecond)
		h.Tick(n, r)
		for _, e := range h.Env.TakeEmitted() {
			if e.Port == port1 {
				solicits++
				packet.FreeOne(e.H)
				continue
			}
			p := decode(stagetest.TakeData(e.H))
			m := icmp6Of(t, p)
			if m.TypeCode.Type() != packet.ICMPv6DstUnreachable || m.TypeCode.Code() != packet.ICMPv6AddressUnreachable {
				t.Errorf("error %v", m.TypeCode)
			}
			if e.Port != port0 {
				t.Errorf("error on port %d", e.Port)
			}
		}
	}
	// Two next hops, three solicitations each (the second was never held,
	// but its resolution went on).
	if solicits != 6 || h.Counter("hold_expired") != 1 || r.(*forwarder).Held() != 0 || h.Counter("icmp_errors_sent") != 1 {
		t.Errorf("solicits %d, expired %d, held %d", solicits, h.Counter("hold_expired"), r.(*forwarder).Held())
	}
	if st := h.routed().Neighbors().Stats(); st.Failed != 2 || h.routed().Neighbors().Len() != 0 {
		t.Errorf("table %+v len %d", st, h.routed().Neighbors().Len())
	}
}

func TestRoutePassesOn(t *testing.T) {
	h := newHarness(t)
	r := h.build("route", "")
	other := packet.MAC{2, 9, 9, 9, 9, 9}
	mcast := udp6(t, host1, packet.MAC{0x33, 0x33, 0, 0, 0, 0x16}, "2001:db8:1::2", "ff02::16", 1, 10)
	o := h.run(port0, [][]byte{
		udp6(t, host1, mac0, "2001:db8:1::2", "2001:db8:1::1", 64, 10), // ours
		udp4(t, host1, mac0, "192.0.2.2", "198.51.100.1", 64, 10),      // ours, on the other port
		mcast,
		udp6(t, host1, other, "2001:db8:1::2", "2001:db8:2::2", 64, 10), // someone else's frame
	}, r)
	if len(o.Continued) != 3 || o.Dropped["route_not_for_us"] != 1 || h.Counter("local") != 2 {
		t.Errorf("outcome %+v", o)
	}
	o.Free()
}

// TestOtherHostsFrames: a routed port is promiscuous, so frames between other
// hosts on its link reach the stages. Whatever they carry (VLAN-tagged, not
// IP, ARP, ND, an Echo Request to our address), they are dropped as
// route_not_for_us: never answered, learnt from, routed, or punted to the
// host readdressed as its own. The same frames to linerate's MAC go on.
func TestOtherHostsFrames(t *testing.T) {
	h := newHarness(t)
	chain := []plugins.Stage{h.build("neighbor", ""), h.build("icmp", ""), h.build("route", ""), h.build("punt", `port = "tap0"`)}
	other := packet.MAC{2, 9, 9, 9, 9, 9}
	frames := func(dst packet.MAC) [][]byte {
		vlan := serialize(t, eth(host1, dst, layers.EthernetTypeDot1Q),
			&layers.Dot1Q{VLANIdentifier: 7, Type: layers.EthernetTypeIPv6},
			&layers.IPv6{Version: 6, NextHeader: layers.IPProtocolNoNextHeader, HopLimit: 64, SrcIP: ip("2001:db8:1::2"), DstIP: ip("2001:db8:1::1")})
		nonIP := append(serialize(t, eth(host1, dst, layers.EthernetType(0x88b5))), make([]byte, 46)...)
		arpReply := serialize(t, eth(host1, dst, layers.EthernetTypeARP), &layers.ARP{AddrType: layers.LinkTypeEthernet,
			Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4, Operation: layers.ARPReply,
			SourceHwAddress: host1[:], SourceProtAddress: ip("192.0.2.2").To4(), DstHwAddress: dst[:], DstProtAddress: ip("192.0.2.1").To4()})
		na := naFrame(t, host1, dst, "2001:db8:1::2", "2001:db8:1::1", "2001:db8:1::2", 0x20)
		ip4 := &layers.IPv4{Version: 4, IHL: 5, TTL: 9, Protocol: layers.IPProtocolICMPv4, SrcIP: ip("192.0.2.2"), DstIP: ip("192.0.2.1")}
		echo := serialize(t, eth(host1, dst, layers.EthernetTypeIPv4), ip4,
			&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(packet.ICMPv4Echo, 0), Id: 9, Seq: 4}, gopacket.Payload("hello4"))
		return [][]byte{vlan, nonIP, arpReply, na, echo}
	}
	o := h.run(port0, frames(other), chain...)
	if o.Dropped["route_not_for_us"] != 5 || len(o.Forwarded)+len(o.Continued) != 0 {
		t.Errorf("another host's frames: %+v", o)
	}
	if h.routed().Neighbors().Len() != 0 {
		t.Error("learnt from another host's frames")
	}
	o.Free()
	// To linerate: the tagged and the non-IP frames are punted, addressed to
	// the host; ARP and ND are taken, the echo answered.
	o = h.run(port0, frames(mac0), chain...)
	// (The echo reply leaves at icmp, the punted frames at punt.)
	if len(o.Dropped) != 0 || len(o.Forwarded) != 3 || o.Forwarded[0].Port != port0 || o.Forwarded[1].Port != portT ||
		o.Forwarded[2].Port != portT {
		t.Fatalf("linerate's frames: %+v", o)
	}
	if e := packet.Ethernet(o.Forwarded[1].H.P().Data()); e.Dst() != macTHost || e.Src() != macT {
		t.Errorf("punted %v → %v", e.Src(), e.Dst())
	}
	o.Free()
	// punt alone (no route stage before it) readdresses only what is ours.
	o = h.run(port0, frames(other)[:2], chain[3])
	if o.Dropped["route_not_for_us"] != 2 {
		t.Errorf("punt alone: %+v", o)
	}
}

func TestICMPEcho(t *testing.T) {
	h := newHarness(t)
	c := h.build("icmp", "")
	ip6 := &layers.IPv6{Version: 6, NextHeader: layers.IPProtocolICMPv6, HopLimit: 7, SrcIP: ip("2001:db8:1::2"), DstIP: ip("2001:db8:2::1")}
	m6 := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(packet.ICMPv6EchoRequest, 0)}
	_ = m6.SetNetworkLayerForChecksum(ip6)
	req6 := serialize(t, eth(host1, mac0, layers.EthernetTypeIPv6), ip6, m6, &layers.ICMPv6Echo{Identifier: 9, SeqNumber: 3}, gopacket.Payload("hello"))
	ip4 := &layers.IPv4{Version: 4, IHL: 5, TTL: 9, Protocol: layers.IPProtocolICMPv4, SrcIP: ip("192.0.2.2"), DstIP: ip("192.0.2.1")}
	req4 := serialize(t, eth(host1, mac0, layers.EthernetTypeIPv4), ip4,
		&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(packet.ICMPv4Echo, 0), Id: 9, Seq: 4}, gopacket.Payload("hello4"))
	notOurs := udp6(t, host1, mac0, "2001:db8:1::2", "2001:db8:2::2", 64, 10)
	o := h.run(port0, [][]byte{req6, req4, notOurs}, c)
	if len(o.Forwarded) != 2 || len(o.Continued) != 1 {
		t.Fatalf("outcome %+v", o)
	}
	p6 := decode(stagetest.TakeData(o.Forwarded[0].H))
	r6 := icmp6Of(t, p6)
	i6 := p6.Layer(layers.LayerTypeIPv6).(*layers.IPv6)
	echo := p6.Layer(layers.LayerTypeICMPv6Echo).(*layers.ICMPv6Echo)
	if r6.TypeCode.Type() != packet.ICMPv6EchoReply || !i6.SrcIP.Equal(ip("2001:db8:2::1")) || !i6.DstIP.Equal(ip("2001:db8:1::2")) ||
		echo.Identifier != 9 || echo.SeqNumber != 3 || string(echo.Payload) != "hello" || o.Forwarded[0].Port != port0 {
		t.Errorf("reply %v", p6)
	}
	p4 := decode(stagetest.TakeData(o.Forwarded[1].H))
	i4 := p4.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
	r4 := p4.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4)
	e4 := p4.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
	if r4.TypeCode.Type() != packet.ICMPv4EchoReply || r4.Id != 9 || r4.Seq != 4 || string(r4.Payload) != "hello4" ||
		!i4.SrcIP.Equal(ip("192.0.2.1")) || !i4.DstIP.Equal(ip("192.0.2.2")) || !bytes.Equal(e4.DstMAC, host1[:]) || !bytes.Equal(e4.SrcMAC, mac0[:]) {
		t.Errorf("reply %v", p4)
	}
	if !packet.IPv4(p4.Data()[14:]).IsChecksumValid() || !packet.ICMPv4(p4.Data()[34:]).IsChecksumValid() {
		t.Error("IPv4 reply checksums")
	}
	packet.FreeOne(o.Continued[0])
}

func TestPunt(t *testing.T) {
	h := newHarness(t)
	p := h.build("punt", `port = "tap0"`)
	frame := udp6(t, host1, mac0, "2001:db8:1::2", "2001:db8:1::1", 64, 10)
	o := h.run(port0, [][]byte{frame}, p)
	if len(o.Forwarded) != 1 || o.Forwarded[0].Port != portT {
		t.Fatalf("outcome %+v", o)
	}
	e := packet.Ethernet(stagetest.TakeData(o.Forwarded[0].H))
	if e.Dst() != macTHost || e.Src() != macT {
		t.Errorf("punted with %v → %v", e.Src(), e.Dst())
	}
	o = h.run(portT, [][]byte{frame}, p)
	if o.Dropped["punt_loop"] != 1 {
		t.Errorf("from the TAP: %+v", o)
	}
	none := h.build("punt", "")
	o = h.run(port0, [][]byte{frame}, none)
	if o.Dropped["punt_no_port"] != 1 {
		t.Errorf("without a port: %+v", o)
	}
}

func TestRoutedSetupErrors(t *testing.T) {
	for _, c := range []struct {
		name   string
		routes string
		kind   string
		keys   string
		want   string
	}{
		{"route to a connected prefix", "[[routes]]\nprefix = \"2001:db8:1::/64\"\nport = \"eth1\"\n",
			"route", "", `routes[0]: route 2001:db8:1::/64: 2001:db8:1::/64 is connected: port "eth0" has 2001:db8:1::1/64 on it; ` +
				"connected routes come from the ports' addresses and cannot be added, replaced or deleted"},
		{"via on no link", "[[routes]]\nprefix = \"2001:db8:9::/48\"\nvia = \"2001:db8:7::1\"\n",
			"route", "", "routes[0]: route 2001:db8:9::/48: next hop 2001:db8:7::1 is on no port's prefix: name the port, or give a port an address on its link"},
		{"tiny table", "", "neighbor", "max_entries = 4", "max_entries 4: want 8 to 16777216"},
		{"negative hold", "", "route", "hold = -1", "hold -1: want 0 to 65536 packets"},
		{"unknown punt port", "", "punt", `port = "tap9"`, `punt: no port "tap9"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			h.Sections = c.routes
			k, _ := plugins.Lookup(c.kind)
			_, err := k.New(h.Setup(c.kind, c.keys))
			if err == nil || err.Error() != c.want {
				t.Errorf("error %v, want %s", err, c.want)
			}
		})
	}
	// Two neighbor stages must agree on the cache.
	h := newHarness(t)
	h.build("neighbor", "max_entries = 64")
	k, _ := plugins.Lookup("neighbor")
	if _, err := k.New(h.Setup("neighbor", "max_entries = 128")); err == nil {
		t.Error("two neighbor stages with different caches")
	}
}

// TestRouteFragments: a first fragment whose UDP length runs past it, as a
// host's own fragmentation makes, is routed like any packet.
func TestRouteFragments(t *testing.T) {
	h := newHarness(t)
	r := h.build("route", "")
	h.routed().Neighbors().SetStatic(port1, a16("2001:db8:2::2"), host2, h.Clock.Now())
	ip6 := &layers.IPv6{Version: 6, NextHeader: layers.IPProtocolIPv6Fragment, HopLimit: 64, SrcIP: ip("2001:db8:1::2"), DstIP: ip("2001:db8:2::2")}
	frag := &layers.IPv6Fragment{NextHeader: layers.IPProtocolUDP, MoreFragments: true, Identification: 7}
	// A UDP header claiming 1400 bytes, and only 100 of them here.
	udp := []byte{0x03, 0xe8, 0x07, 0xd0, 0x05, 0x78, 0, 0}
	first := serialize(t, eth(host1, mac0, layers.EthernetTypeIPv6), ip6, frag, gopacket.Payload(append(udp, make([]byte, 92)...)))
	var l packet.Layers
	if packet.Parse(first, &l) == nil {
		t.Fatal("the first fragment parses cleanly; the test needs one that does not")
	}
	o := h.run(port0, [][]byte{first}, r)
	if len(o.Forwarded) != 1 || o.Forwarded[0].Port != port1 {
		t.Fatalf("outcome %+v", o)
	}
	if d := stagetest.TakeData(o.Forwarded[0].H); d[14+7] != 63 || packet.Ethernet(d).Dst() != host2 {
		t.Errorf("hop limit %d, dst %v", d[14+7], packet.Ethernet(d).Dst())
	}
	// A truncated IPv6 header is malformed.
	o = h.run(port0, [][]byte{first[:14+30]}, r)
	if o.Dropped["malformed"] != 1 {
		t.Errorf("truncated header: %+v", o)
	}
}

func TestNeighborNeedsMAC(t *testing.T) {
	h := newHarness(t)
	h.Ports[port1].MAC = packet.MAC{}
	k, _ := plugins.Lookup("neighbor")
	st, err := k.New(h.Setup("neighbor", ""))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.(plugins.Starter).Start(&h.Ctx); err == nil || !strings.Contains(err.Error(), `port "eth1" has addresses but no MAC`) {
		t.Errorf("Start: %v", err)
	}
}
