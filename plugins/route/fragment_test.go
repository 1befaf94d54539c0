package route

import (
	"bytes"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/ip4defrag"
	"github.com/gopacket/gopacket/layers"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/plugins/stagetest"
)

// big4 is an IPv4 UDP datagram from host 1 to host 2 with flags, a fragment
// offset and two options: Security (130, copied into every fragment) and
// Record Route (7, first fragment only).
func big4(t *testing.T, flags layers.IPv4Flag, offset uint16, payload int) []byte {
	t.Helper()
	ip4 := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: ip("192.0.2.2"), DstIP: ip("198.51.100.2"),
		Id: 0x4c52, Flags: flags, FragOffset: offset / 8, Options: []layers.IPv4Option{
			{OptionType: 130, OptionLength: 11, OptionData: []byte{1, 2, 3, 4, 5, 6, 7, 8, 9}},
			{OptionType: 7, OptionLength: 7, OptionData: []byte{4, 0, 0, 0, 0}},
		}}
	data := make([]byte, payload)
	for i := range data {
		data[i] = byte(i * 7)
	}
	if offset != 0 { // a later fragment carries no UDP header
		return serialize(t, eth(host1, mac0, layers.EthernetTypeIPv4), ip4, gopacket.Payload(data))
	}
	u := &layers.UDP{SrcPort: 1000, DstPort: 2000}
	_ = u.SetNetworkLayerForChecksum(ip4)
	return serialize(t, eth(host1, mac0, layers.EthernetTypeIPv4), ip4, u, gopacket.Payload(data))
}

// TestRouteFragmentsIPv4: an IPv4 packet larger than the output port's MTU
// without Don't Fragment is fragmented (RFC 791, RFC 1812 §5.2.6), and
// gopacket's defragmenter, not ours, puts it back together; with Don't
// Fragment its sender hears Fragmentation Needed.
func TestRouteFragmentsIPv4(t *testing.T) {
	h := newHarness(t)
	h.Ports[port1].MTU = 600
	r := h.build("route", "")
	h.routed().Neighbors().SetStatic(port1, a16("::ffff:198.51.100.2"), host2, h.Clock.Now())

	in := big4(t, 0, 0, 1400) // 40-byte header, 1408 bytes of data
	o := h.run(port0, [][]byte{in}, r)
	if len(o.Forwarded) != 1 || o.Forwarded[0].Port != port1 || len(o.Dropped) != 0 {
		t.Fatalf("outcome %+v", o)
	}
	frags := []gopacket.Packet{decode(stagetest.TakeData(o.Forwarded[0].H))}
	frags = append(frags, emittedOn(t, h, port1)...)
	type want struct {
		ihl    uint8
		offset uint16
		more   bool
		data   int
	}
	// 600 − 40 → 560 bytes in the first; 600 − 32 → 568 in the others.
	wants := []want{{10, 0, true, 560}, {8, 560, true, 568}, {8, 1128, false, 280}}
	if len(frags) != len(wants) {
		t.Fatalf("%d fragments, want %d", len(frags), len(wants))
	}
	d := ip4defrag.NewIPv4Defragmenter()
	var whole *layers.IPv4
	for i, p := range frags {
		e := p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
		f := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		w := wants[i]
		if !bytes.Equal(e.SrcMAC, mac1[:]) || !bytes.Equal(e.DstMAC, host2[:]) || f.TTL != 63 || f.Id != 0x4c52 ||
			f.Flags&layers.IPv4DontFragment != 0 || (f.Flags&layers.IPv4MoreFragments != 0) != w.more ||
			f.FragOffset*8 != w.offset || f.IHL != w.ihl || int(f.Length) != int(w.ihl)*4+w.data || int(f.Length) > 600 ||
			!packet.IPv4(p.Data()[14:]).IsChecksumValid() {
			t.Errorf("fragment %d: %v → %v, TTL %d id %#x flags %v offset %d IHL %d length %d, want %+v", i, e.SrcMAC, e.DstMAC,
				f.TTL, f.Id, f.Flags, f.FragOffset*8, f.IHL, f.Length, w)
		}
		opts := p.Data()[14+20 : 14+int(f.IHL)*4]
		switch {
		case i == 0 && !bytes.Equal(opts, in[14+20:14+40]):
			t.Errorf("first fragment's options %x", opts)
		case i > 0 && !bytes.Equal(opts, append(bytes.Clone(in[14+20:14+31]), 0)):
			t.Errorf("fragment %d's options %x: want Security only", i, opts)
		}
		out, err := d.DefragIPv4(f)
		if err != nil {
			t.Fatal(err)
		}
		if out != nil {
			whole = out
		}
	}
	if whole == nil || !bytes.Equal(whole.Payload, in[14+40:]) {
		t.Fatal("the fragments do not put the datagram back together")
	}
	if h.Counter("fragmented") != 1 || h.Counter("fragments") != 3 || h.Counter("forwarded") != 1 {
		t.Errorf("counters fragmented %d, fragments %d, forwarded %d", h.Counter("fragmented"), h.Counter("fragments"), h.Counter("forwarded"))
	}

	// A fragment already (more to come, at 800) is cut into fragments of it:
	// each says more follow.
	o = h.run(port0, [][]byte{big4(t, layers.IPv4MoreFragments, 800, 1000)}, r)
	frags = []gopacket.Packet{decode(stagetest.TakeData(o.Forwarded[0].H))}
	frags = append(frags, emittedOn(t, h, port1)...)
	var offsets []uint16
	for _, p := range frags {
		f := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		if f.Flags&layers.IPv4MoreFragments == 0 {
			t.Error("a fragment of a fragment with more to come says it is the last")
		}
		offsets = append(offsets, f.FragOffset*8)
	}
	if len(offsets) != 2 || offsets[0] != 800 || offsets[1] != 800+560 {
		t.Errorf("offsets %v", offsets)
	}

	// Don't Fragment: Fragmentation Needed with the MTU, and a drop.
	df := big4(t, layers.IPv4DontFragment, 0, 1400)
	o = h.run(port0, [][]byte{df}, r)
	if o.Dropped["route_too_big"] != 1 {
		t.Fatalf("DF: outcome %+v", o)
	}
	errs := emittedOn(t, h, port0)
	if len(errs) != 1 {
		t.Fatalf("%d ICMP errors", len(errs))
	}
	m := errs[0].Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4)
	if m.TypeCode.Type() != packet.ICMPv4DstUnreachable || m.TypeCode.Code() != packet.ICMPv4FragNeeded || m.Seq != 600 {
		t.Errorf("DF: %v, next-hop MTU %d", m.TypeCode, m.Seq)
	}
}

// TestFragmentHeld: a packet held for its next hop is fragmented when it is
// released.
func TestFragmentHeld(t *testing.T) {
	h := newHarness(t)
	h.Ports[port1].MTU = 600
	n := h.build("neighbor", "")
	r := h.build("route", "")
	o := h.run(port0, [][]byte{big4(t, 0, 0, 1400)}, n, r)
	if o.Consumed != 1 || r.(*forwarder).Held() != 1 {
		t.Fatalf("outcome %+v", o)
	}
	emittedOn(t, h, port1) // the ARP request
	rep := serialize(t, eth(host2, mac1, layers.EthernetTypeARP), &layers.ARP{AddrType: layers.LinkTypeEthernet,
		Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4, Operation: layers.ARPReply,
		SourceHwAddress: host2[:], SourceProtAddress: ip("198.51.100.2").To4(), DstHwAddress: mac1[:], DstProtAddress: ip("198.51.100.1").To4()})
	h.run(port1, [][]byte{rep}, n, r)
	h.Tick(r)
	out := emittedOn(t, h, port1)
	if len(out) != 3 || h.Counter("released") != 1 || h.Counter("fragments") != 3 {
		t.Fatalf("released %d frames", len(out))
	}
	for _, p := range out {
		if f := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4); f.Length > 600 || f.TTL != 63 {
			t.Errorf("fragment of %d bytes, TTL %d", f.Length, f.TTL)
		}
	}
}

// TestFragmentAllocs: fragmenting allocates nothing on the heap.
func TestFragmentAllocs(t *testing.T) {
	h := newHarness(t)
	h.Ports[port1].MTU = 600
	r := h.build("route", "")
	h.routed().Neighbors().SetStatic(port1, a16("::ffff:198.51.100.2"), host2, h.Clock.Now())
	frame := big4(t, 0, 0, 1400)
	pool := h.Pools["default"]
	var b packet.Burst
	allocs := testing.AllocsPerRun(100, func() {
		b.N = 0
		for range 8 {
			hd, _ := pool.AllocOne()
			d, _ := hd.P().Append(len(frame))
			copy(d, frame)
			hd.P().InPort = port0
			b.Push(hd)
		}
		r.Process(&h.Ctx, &b)
		packet.Free(&b)
		for _, e := range h.Env.Emitted {
			packet.FreeOne(e.H)
		}
		h.Env.Emitted = h.Env.Emitted[:0]
	})
	if allocs != 0 {
		t.Errorf("%v allocations per burst", allocs)
	}
	if h.Counter("fragments") == 0 {
		t.Error("nothing was fragmented")
	}
}
