package packet

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
)

func TestLayersFitsScratch(t *testing.T) {
	if LayersSize > ScratchSize {
		t.Fatalf("Layers is %d bytes, Scratch %d", LayersSize, ScratchSize)
	}
	if LayersSize != 40 {
		t.Errorf("Layers is %d bytes; update the doc of the free Scratch tail", LayersSize)
	}
}

// TestParseChains parses one packet per header chain and compares every field of
// Layers with what the generator tracked while building it.
func TestParseChains(t *testing.T) {
	rows := []struct {
		name string
		c    chain
	}{
		{"udp6", chain{hbh: -1, proto: ProtocolUDP, payload: 10}},
		{"udp6/vlan", chain{tags: 1, hbh: -1, proto: ProtocolUDP, payload: 10}},
		{"udp6/qinq-88a8", chain{tags: 2, hbh: -1, proto: ProtocolUDP}},
		{"udp6/qinq-8100", chain{tags: 2, tpid0: EtherTypeVLAN, hbh: -1, proto: ProtocolUDP}},
		{"udp6/empty-payload", chain{hbh: -1, proto: ProtocolUDP}},
		{"tcp6", chain{hbh: -1, proto: ProtocolTCP, payload: 3}},
		{"nonext", chain{hbh: -1, proto: ProtocolNoNext}},
		{"hbh/udp", chain{hbh: 6, proto: ProtocolUDP, payload: 1}},
		{"hbh-empty/udp", chain{hbh: 0, proto: ProtocolUDP}},
		{"hbh-big/udp", chain{hbh: 300, proto: ProtocolUDP}},
		{"srh1/udp", chain{hbh: -1, srh: 1, proto: ProtocolUDP, payload: 44}},
		{"srh5/udp", chain{hbh: -1, srh: 5, proto: ProtocolUDP, payload: 44}},
		{"srh-tlv/udp", chain{hbh: -1, srh: 2, srhTLV: 13, proto: ProtocolUDP}},
		{"hbh/dest1/srh/dest2/udp", chain{hbh: 8, dest1: true, srh: 3, dest2: true, proto: ProtocolUDP, payload: 7}},
		{"dest/udp", chain{hbh: -1, dest1: true, proto: ProtocolUDP}}, // no RH: final destination
		{"dest2/udp", chain{hbh: -1, dest2: true, proto: ProtocolUDP}},
		{"rt3/udp", chain{hbh: -1, rtType: 3, proto: ProtocolUDP}},
		{"frag-first/udp", chain{hbh: -1, frag: 1, proto: ProtocolUDP, payload: 100}},
		{"frag-later", chain{hbh: -1, frag: 2, proto: ProtocolUDP, payload: 100}},
		{"srh/frag-later/dest2", chain{hbh: -1, srh: 2, frag: 2, dest2: true, proto: ProtocolUDP}},
		{"ah/udp", chain{hbh: -1, ah: true, proto: ProtocolUDP, payload: 5}},
		{"srh/ah/esp", chain{hbh: -1, srh: 2, ah: true, esp: true}},
		{"esp", chain{hbh: -1, esp: true}},
		{"trailer", chain{hbh: -1, proto: ProtocolUDP, trailer: 9}},
		{"everything", chain{tags: 2, hbh: 20, dest1: true, srh: 4, srhTLV: 6, frag: 1, ah: true, dest2: true, proto: ProtocolUDP, payload: 30, trailer: 4}},
		{"udp4", chain{v4: true, proto: ProtocolUDP, payload: 10}},
		{"udp4/opts/vlan", chain{v4: true, tags: 1, v4opts: 12, proto: ProtocolUDP}},
		{"udp4/opts-max", chain{v4: true, v4opts: 40, proto: ProtocolUDP}},
		{"tcp4", chain{v4: true, proto: ProtocolTCP}},
		{"udp4/frag-first", chain{v4: true, v4frag: 1, proto: ProtocolUDP}},
		{"udp4/frag-later", chain{v4: true, v4frag: 2, proto: ProtocolUDP, payload: 20}},
		{"ah4/udp", chain{v4: true, ah: true, proto: ProtocolUDP}},
		{"esp4", chain{v4: true, esp: true}},
		{"ah4/esp", chain{v4: true, ah: true, esp: true}},
		{"udp4/ethernet-padding", chain{v4: true, proto: ProtocolUDP, trailer: 18}},
	}
	r := rand.New(rand.NewPCG(1, 2))
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			for i := 0; i < 20; i++ {
				data, want := genPacket(r, row.c)
				var got Layers
				if err := Parse(data, &got); err != nil {
					t.Fatalf("Parse: %v\n%s", err, hex.Dump(data))
				}
				if got != want {
					t.Fatalf("Parse:\n got %+v\nwant %+v\n%s", got, want, hex.Dump(data))
				}
				if want.Flags&FlagUDP != 0 {
					u := got.UDP(data)
					if !u.IsChecksumValid(udpPseudo(&got, data)) {
						t.Errorf("generated UDP checksum %#04x does not verify", u.Checksum())
					}
				}
				// ParseIP from the L3 header gives the same offsets, shifted.
				var ip Layers
				if err := ParseIP(data[got.L3:], &ip); err != nil {
					t.Fatalf("ParseIP: %v", err)
				}
				shift := func(o uint16) uint16 {
					if o == 0 {
						return 0
					}
					return o - got.L3
				}
				w := got
				w.Len -= uint32(got.L3)
				w.End -= uint32(got.L3)
				w.VLAN, w.VLANs = [2]uint16{}, 0
				w.L4, w.HopByHop, w.DestOpts1, w.Routing = shift(w.L4), shift(w.HopByHop), shift(w.DestOpts1), shift(w.Routing)
				w.Fragment, w.AH, w.ESP, w.DestOpts2 = shift(w.Fragment), shift(w.AH), shift(w.ESP), shift(w.DestOpts2)
				w.L3 = 0
				if ip != w {
					t.Fatalf("ParseIP:\n got %+v\nwant %+v", ip, w)
				}
			}
		})
	}
}

func udpPseudo(l *Layers, data []byte) uint16 {
	u := l.UDP(data)
	if l.IPVersion == 4 {
		ip := l.IPv4(data)
		s, d := ip.Src(), ip.Dst()
		return PseudoHeaderChecksum(ProtocolUDP, s[:], d[:], uint32(u.Length()))
	}
	s, d := l.IPv6(data).Src(), l.FinalDst(data)
	return PseudoHeaderChecksum(ProtocolUDP, s[:], d[:], uint32(u.Length()))
}

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	s = strings.Join(strings.Fields(s), "")
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// An IPv6/SRH/UDP packet written out by hand from the RFC 8754 figure, with
// its offsets worked out by hand too.
func TestParseHandWritten(t *testing.T) {
	data := mustHex(t, `
		020000000002 020000000001 8100 6064 86dd
		60000000 0030 2b 40 20010db8000000000000000000000002 20010db8000000000000000000000003
		11 04 04 01 01 00 1234
		20010db8000000000000000000000009
		20010db8000000000000000000000003
		1f40 4e20 0008 0000`)
	if len(data) != 18+40+40+8 {
		t.Fatalf("fixture is %d bytes", len(data))
	}
	var l Layers
	if err := Parse(data, &l); err != nil {
		t.Fatal(err)
	}
	want := Layers{
		Len: 106, End: 106, Flags: FlagIPv6 | FlagSRH | FlagUDP, EtherType: EtherTypeIPv6,
		VLAN: [2]uint16{0x6064}, L3: 18, L4: 98, Routing: 58,
		VLANs: 1, IPVersion: 6, Proto: ProtocolUDP, NumExt: 1,
	}
	if l != want {
		t.Fatalf("got %+v\nwant %+v", l, want)
	}
	tag := l.Ethernet(data).Tag(0)
	if tag.PCP != 3 || tag.DEI || tag.VID != 0x064 {
		t.Errorf("tag %+v", tag)
	}
	srh := l.SRH(data)
	if srh.SegmentsLeft() != 1 || srh.LastEntry() != 1 || srh.Flags() != 0 || srh.Tag() != 0x1234 {
		t.Errorf("srh fields: sl %d le %d flags %d tag %#x", srh.SegmentsLeft(), srh.LastEntry(), srh.Flags(), srh.Tag())
	}
	if got := netip.AddrFrom16(l.FinalDst(data)); got != netip.MustParseAddr("2001:db8::9") {
		t.Errorf("FinalDst %v", got)
	}
	if a, ok := srh.ActiveSegment(); !ok || netip.AddrFrom16(a) != netip.MustParseAddr("2001:db8::3") {
		t.Errorf("ActiveSegment %v %v", a, ok)
	}
	if u := l.UDP(data); u.SrcPort() != 8000 || u.DstPort() != 20000 || u.Length() != 8 {
		t.Errorf("udp %+v", u.Fields())
	}
}

// TestParseMalformed: one row per fault, each from a valid packet with one
// field broken.
func TestParseMalformed(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	base := func(c chain) ([]byte, Layers) { return genPacket(r, c) }
	v6 := chain{hbh: -1, proto: ProtocolUDP, payload: 8}
	rows := []struct {
		name string
		c    chain
		mod  func(b []byte, l Layers) []byte
		want error
	}{
		{"empty", v6, func(b []byte, l Layers) []byte { return nil }, ErrTruncated},
		{"short ethernet", v6, func(b []byte, l Layers) []byte { return b[:13] }, ErrTruncated},
		{"short vlan tag", chain{tags: 1, hbh: -1, proto: ProtocolUDP}, func(b []byte, l Layers) []byte { return b[:17] }, ErrTruncated},
		{"short inner tag", chain{tags: 2, hbh: -1, proto: ProtocolUDP}, func(b []byte, l Layers) []byte { return b[:21] }, ErrTruncated},
		{"three tags", chain{tags: 2, hbh: -1, proto: ProtocolUDP}, func(b []byte, l Layers) []byte {
			binary.BigEndian.PutUint16(b[20:], EtherTypeVLAN)
			return b
		}, ErrTooManyVLANs},
		{"short ipv6", v6, func(b []byte, l Layers) []byte { return b[:14+39] }, ErrTruncated},
		{"ipv6 version 4", v6, func(b []byte, l Layers) []byte { b[14] = 0x40; return b }, ErrBadVersion},
		{"ipv6 payload past data", v6, func(b []byte, l Layers) []byte { return b[:len(b)-1] }, ErrTruncated},
		{"hbh short", chain{hbh: 2, proto: ProtocolUDP}, func(b []byte, l Layers) []byte {
			binary.BigEndian.PutUint16(b[14+4:], 4)
			return b[:14+40+4]
		}, ErrTruncated},
		{"hbh too long", chain{hbh: 2, proto: ProtocolUDP}, func(b []byte, l Layers) []byte {
			b[l.HopByHop+1] = 200
			return b
		}, ErrExtTooLong},
		{"hbh not first", chain{hbh: -1, dest1: true, srh: 1, proto: ProtocolUDP}, func(b []byte, l Layers) []byte {
			b[l.Routing] = ProtocolHopByHop // SRH → HBH
			return b
		}, ErrExtOrder},
		{"srh last entry past header", chain{hbh: -1, srh: 2, proto: ProtocolUDP}, func(b []byte, l Layers) []byte {
			b[l.Routing+4] = 2
			return b
		}, ErrBadSRH},
		{"srh segments left past last entry+1", chain{hbh: -1, srh: 2, proto: ProtocolUDP}, func(b []byte, l Layers) []byte {
			b[l.Routing+3] = 3
			return b
		}, ErrBadSRH},
		{"srh hdr ext len odd short", chain{hbh: -1, srh: 1, proto: ProtocolUDP}, func(b []byte, l Layers) []byte {
			b[l.Routing+1] = 1
			return b
		}, ErrBadSRH},
		{"ah short payload len", chain{hbh: -1, ah: true, proto: ProtocolUDP}, func(b []byte, l Layers) []byte {
			b[l.AH+1] = 0
			return b
		}, ErrBadLength},
		{"esp truncated", chain{hbh: -1, esp: true}, func(b []byte, l Layers) []byte {
			binary.BigEndian.PutUint16(b[14+4:], 4)
			return b[:14+40+4]
		}, ErrTruncated},
		{"udp truncated", v6, func(b []byte, l Layers) []byte {
			binary.BigEndian.PutUint16(b[14+4:], 7)
			return b[:14+40+7]
		}, ErrTruncated},
		{"udp length below 8", v6, func(b []byte, l Layers) []byte {
			binary.BigEndian.PutUint16(b[l.L4+4:], 7)
			return b
		}, ErrBadLength},
		{"udp length past ip payload", v6, func(b []byte, l Layers) []byte {
			binary.BigEndian.PutUint16(b[l.L4+4:], uint16(len(b)-int(l.L4)+1))
			return b
		}, ErrTruncated},
		{"short ipv4", chain{v4: true, proto: ProtocolUDP}, func(b []byte, l Layers) []byte { return b[:14+19] }, ErrTruncated},
		{"ipv4 version 6", chain{v4: true, proto: ProtocolUDP}, func(b []byte, l Layers) []byte { b[14] = 0x65; return b }, ErrBadVersion},
		{"ipv4 ihl 4", chain{v4: true, proto: ProtocolUDP}, func(b []byte, l Layers) []byte { b[14] = 0x44; return b }, ErrBadLength},
		{"ipv4 total below ihl", chain{v4: true, proto: ProtocolUDP}, func(b []byte, l Layers) []byte {
			binary.BigEndian.PutUint16(b[16:], 19)
			return b
		}, ErrBadLength},
		{"ipv4 total past data", chain{v4: true, proto: ProtocolUDP}, func(b []byte, l Layers) []byte { return b[:len(b)-1] }, ErrTruncated},
		{"ipv4 ah too long", chain{v4: true, ah: true, proto: ProtocolUDP}, func(b []byte, l Layers) []byte {
			b[l.AH+1] = 100
			return b
		}, ErrExtTooLong},
		{"ipv4 udp length below 8", chain{v4: true, proto: ProtocolUDP}, func(b []byte, l Layers) []byte {
			binary.BigEndian.PutUint16(b[l.L4+4:], 0)
			return b
		}, ErrBadLength},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			b, l := base(row.c)
			b = row.mod(b, l)
			var got Layers
			if err := Parse(b, &got); !errors.Is(err, row.want) {
				t.Fatalf("Parse = %v, want %v\n%s", err, row.want, hex.Dump(b))
			}
		})
	}
}

func TestParseTooManyExt(t *testing.T) {
	// IPv6, then MaxExtHeaders+1 Destination Options headers.
	data := make([]byte, 14+40+8*(MaxExtHeaders+1)+8)
	binary.BigEndian.PutUint16(data[12:], EtherTypeIPv6)
	ip := IPv6(data[14:])
	ip.Encode(&IPv6Fields{PayloadLength: uint16(len(data) - 54), NextHeader: ProtocolDestOpts})
	for i := 0; i <= MaxExtHeaders; i++ {
		data[54+8*i] = ProtocolDestOpts
		data[54+8*i+2] = IPv6OptPadN
		data[54+8*i+3] = 4
	}
	var l Layers
	if err := Parse(data, &l); err != ErrTooManyExt {
		t.Fatalf("Parse = %v, want ErrTooManyExt", err)
	}
	// One fewer is fine, and marks the repeat.
	data[54+8*(MaxExtHeaders-1)] = ProtocolNoNext
	if err := Parse(data, &l); err != nil {
		t.Fatal(err)
	}
	if l.NumExt != MaxExtHeaders || l.Flags&FlagExtRepeated == 0 || l.DestOpts2 != 54 || l.Proto != ProtocolNoNext {
		t.Fatalf("%+v", l)
	}
}

func TestParseNonIP(t *testing.T) {
	data := make([]byte, 60)
	binary.BigEndian.PutUint16(data[12:], EtherTypeARP)
	var l Layers
	if err := Parse(data, &l); err != nil {
		t.Fatal(err)
	}
	if l.EtherType != EtherTypeARP || l.IPVersion != 0 || l.L3 != 14 || l.Flags != 0 || l.End != 60 {
		t.Fatalf("%+v", l)
	}
	if err := ParseIP([]byte{0x50}, &l); err != ErrBadVersion {
		t.Fatalf("ParseIP version 5: %v", err)
	}
}

func TestFinalDst(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	data, l := genPacket(r, chain{hbh: -1, srh: 3, proto: ProtocolUDP})
	srh := l.SRH(data)
	ip := l.IPv6(data)
	srh.SetSegmentsLeft(0)
	if l.FinalDst(data) != ip.Dst() {
		t.Error("SL 0: FinalDst is not the destination address")
	}
	srh.SetSegmentsLeft(2)
	if l.FinalDst(data) != srh.Segment(0) {
		t.Error("SL 2: FinalDst is not Segment List[0]")
	}
	// Type 0 (deprecated, RFC 5095) and 2 carry their addresses after 4
	// reserved bytes; the last one is final.
	data, l = genPacket(r, chain{hbh: -1, rtType: 3, proto: ProtocolUDP})
	rt := IPv6Routing(data[l.Routing:])
	rt[3] = 1
	if l.FinalDst(data) != l.IPv6(data).Dst() {
		t.Error("type 3: FinalDst is not the destination address")
	}
	if rt.Len() >= 24 {
		rt[2] = 0
		n := (rt.Len() - 8) / 16
		if l.FinalDst(data) != [16]byte(rt[8+16*(n-1):]) {
			t.Error("type 0: FinalDst is not the last address")
		}
	}
}

func TestParseAllocs(t *testing.T) {
	pkts := walkPackets(t)
	bad := []byte{0, 1, 2}
	var l Layers
	allocs := testing.AllocsPerRun(100, func() {
		for _, p := range pkts {
			_ = Parse(p, &l)
		}
		_ = Parse(bad, &l)
		_ = ParseIP(bad, &l)
	})
	if allocs != 0 {
		t.Fatalf("Parse allocates %v times per run", allocs)
	}
}

// TestPacketLayers: the record lives in Scratch, is marked valid by
// ParseLayers, and every data-window change ends it.
func TestPacketLayers(t *testing.T) {
	s := newTestSlab(t, 4)
	r := rand.New(rand.NewPCG(7, 8))
	data, want := genPacket(r, chain{tags: 1, hbh: 4, srh: 2, proto: ProtocolUDP, payload: 20})
	h, ok := s.AllocOne()
	if !ok {
		t.Fatal("alloc")
	}
	defer s.FreeOne(h)
	p := h.P()
	ops := []struct {
		name string
		op   func()
	}{
		{"Prepend", func() { p.Prepend(4) }},
		{"Adj", func() { p.Adj(4) }},
		{"Append", func() { p.Append(4) }},
		{"Trim", func() { p.Trim(4) }},
		{"InsertGap", func() { p.InsertGap(14, 8) }},
		{"RemoveGap", func() { p.RemoveGap(14, 8) }},
		{"SetWindow", func() { p.SetWindow(p.Offset(), p.Len()) }},
		{"InvalidateLayers", func() { p.InvalidateLayers() }},
	}
	for _, o := range ops {
		p.Reset(s.Headroom())
		if p.LayersValid() {
			t.Fatal("valid after Reset")
		}
		buf, _ := p.Append(len(data))
		copy(buf, data)
		l, err := p.ParseLayers()
		if err != nil || *l != want || !p.LayersValid() {
			t.Fatalf("ParseLayers = %+v, %v", *l, err)
		}
		if uintptr(unsafePointer(l)) != uintptr(unsafePointer(&p.Scratch)) {
			t.Fatal("Layers is not in Scratch")
		}
		// A second call returns the record without parsing again: spoil the
		// data and check the record survives.
		p.Data()[14] = 0
		if l2, err := p.ParseLayers(); err != nil || *l2 != want {
			t.Fatalf("cached ParseLayers = %v", err)
		}
		o.op()
		if p.LayersValid() {
			t.Errorf("%s left the record valid", o.name)
		}
	}
	// A failed parse leaves it invalid.
	p.Reset(s.Headroom())
	p.Append(10)
	if _, err := p.ParseLayers(); err == nil || p.LayersValid() {
		t.Fatalf("short packet: err %v, valid %v", err, p.LayersValid())
	}
	// CopyFrom carries a valid record: offsets are relative to the data.
	p.Reset(s.Headroom())
	buf, _ := p.Append(len(data))
	copy(buf, data)
	p.ParseLayers()
	h2, _ := s.AllocOne()
	defer s.FreeOne(h2)
	if err := h2.P().CopyFrom(p, 400); err != nil {
		t.Fatal(err)
	}
	if !h2.P().LayersValid() || *h2.P().Layers() != want {
		t.Fatal("CopyFrom lost the record")
	}
}
