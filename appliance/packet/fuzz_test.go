package packet

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// seedPackets are valid packets of every chain the tests know, for the seed
// corpora.
func seedPackets() [][]byte {
	r := rand.New(rand.NewPCG(99, 100))
	chains := []chain{
		{hbh: -1, proto: ProtocolUDP, payload: 10},
		{tags: 2, hbh: 8, dest1: true, srh: 3, srhTLV: 5, dest2: true, proto: ProtocolUDP, payload: 20},
		{tags: 1, hbh: -1, srh: 1, frag: 1, ah: true, proto: ProtocolUDP},
		{hbh: -1, srh: 2, frag: 2, proto: ProtocolUDP, payload: 30},
		{hbh: 3, esp: true},
		{hbh: -1, rtType: 3, proto: ProtocolTCP},
		{hbh: -1, proto: ProtocolNoNext, trailer: 6},
		{v4: true, proto: ProtocolUDP, payload: 9},
		{v4: true, tags: 1, v4opts: 8, ah: true, proto: ProtocolUDP},
		{v4: true, v4frag: 2, proto: ProtocolUDP},
		{v4: true, esp: true, trailer: 10},
	}
	var out [][]byte
	for _, c := range chains {
		b, _ := genPacket(r, c)
		out = append(out, b)
	}
	for i := 0; i < 8; i++ {
		b, _ := genPacket(r, randomChain(r))
		out = append(out, b)
	}
	return out
}

func FuzzEthernet(f *testing.F) {
	for _, p := range seedPackets() {
		f.Add(p[:min(len(p), 30)])
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		data = bytes.Clone(data) // SwapMAC below writes
		b := Ethernet(data)
		if b.Validate() != nil {
			return
		}
		fl := b.Fields()
		hl := b.HeaderLen()
		if fl.HeaderLen() != hl || hl > len(data) {
			t.Fatalf("HeaderLen %d, Fields %d, data %d", hl, fl.HeaderLen(), len(data))
		}
		out := make(Ethernet, hl)
		out.Encode(&fl)
		if !bytes.Equal(out, data[:hl]) {
			t.Fatalf("Encode(Fields) = %x, want %x", []byte(out), data[:hl])
		}
		if out.Validate() != nil || out.Fields() != fl {
			t.Fatal("round trip")
		}
		// Parse agrees with the view.
		var l Layers
		_ = Parse(data, &l) // may fail above L2, not at it
		if l.L3 != uint16(hl) || int(l.VLANs) != b.NumTags() || l.EtherType != b.EtherType() {
			t.Fatalf("Parse %+v vs view hl %d tags %d", l, hl, b.NumTags())
		}
		b.SwapMAC()
		if b.Dst() != fl.Src || b.Src() != fl.Dst {
			t.Fatal("SwapMAC")
		}
	})
}

func FuzzIPv4(f *testing.F) {
	for _, p := range seedPackets() {
		var l Layers
		if Parse(p, &l) == nil && l.IPVersion == 4 {
			f.Add(p[l.L3:])
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		data = bytes.Clone(data) // DecTTL below writes
		b := IPv4(data)
		if b.Validate() != nil {
			return
		}
		hl := b.HeaderLen()
		fl := b.Fields()
		out := make(IPv4, hl)
		if err := out.Encode(&fl); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out, data[:hl]) {
			t.Fatalf("Encode(Fields) = %x, want %x", []byte(out), data[:hl])
		}
		_ = b.Payload()
		valid := b.IsChecksumValid()
		if valid != (b.CalculateChecksum() == b.Checksum()) && !(b.Checksum() == 0xffff || b.Checksum() == 0) {
			t.Fatalf("IsChecksumValid %v, checksum %#x, calculated %#x", valid, b.Checksum(), b.CalculateChecksum())
		}
		if valid {
			b.DecTTL()
			if !b.IsChecksumValid() {
				t.Fatal("DecTTL broke the checksum")
			}
		}
		var l Layers
		if err := ParseIP(data, &l); err != nil && err != ErrTruncated && err != ErrBadLength && err != ErrExtTooLong {
			t.Fatalf("ParseIP = %v on a valid header", err)
		}
	})
}

func FuzzIPv6(f *testing.F) {
	for _, p := range seedPackets() {
		var l Layers
		if Parse(p, &l) == nil && l.IPVersion == 6 {
			f.Add(p[l.L3:])
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		b := IPv6(data)
		if b.Validate() != nil {
			return
		}
		fl := b.Fields()
		out := make(IPv6, IPv6Len)
		out.Encode(&fl)
		if !bytes.Equal(out, data[:IPv6Len]) {
			t.Fatalf("Encode(Fields) = %x, want %x", []byte(out), data[:IPv6Len])
		}
		if len(b.Payload()) != int(b.PayloadLength()) {
			t.Fatal("Payload")
		}
		out.SetFlowLabel(fl.FlowLabel)
		out.SetTrafficClass(fl.TrafficClass)
		if !bytes.Equal(out, data[:IPv6Len]) {
			t.Fatal("setters changed other fields")
		}
	})
}

// FuzzParse walks any bytes with Parse and ParseIP. When the walk succeeds, the
// record must describe headers inside the packet, in order; and rebuilding the
// packet from the views (options from their TLVs, the SRH from its fields)
// must give the same bytes and the same record.
func FuzzParse(f *testing.F) {
	for _, p := range seedPackets() {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var ip Layers
		_ = ParseIP(data, &ip)
		var l Layers
		if Parse(data, &l) != nil {
			return
		}
		checkLayers(t, data, &l)
		if l.IPVersion != 6 {
			return
		}
		out := rebuild(t, data, &l)
		if !bytes.Equal(out, data) {
			t.Fatalf("rebuilt packet differs:\n got %x\nwant %x", out, data)
		}
		var l2 Layers
		if err := Parse(out, &l2); err != nil || l2 != l {
			t.Fatalf("reparse: %v\n got %+v\nwant %+v", err, l2, l)
		}
	})
}

// checkLayers checks the invariants of a successful parse.
func checkLayers(t *testing.T, data []byte, l *Layers) {
	t.Helper()
	if int(l.Len) != len(data) || l.End > l.Len || (l.End < l.Len) != (l.Flags&FlagTrailer != 0) {
		t.Fatalf("Len %d End %d data %d flags %#x", l.Len, l.End, len(data), l.Flags)
	}
	if l.IPVersion == 0 {
		return
	}
	first := int(l.L3) + IPv6Len
	if l.IPVersion == 4 {
		first = int(l.L3) + IPv4(data[l.L3:]).HeaderLen()
	}
	for _, o := range []uint16{l.HopByHop, l.DestOpts1, l.Routing, l.Fragment, l.AH, l.ESP, l.DestOpts2, l.L4} {
		if o != 0 && (int(o) < first || uint32(o) > l.End) {
			t.Fatalf("offset %d outside [%d, %d]: %+v", o, first, l.End, l)
		}
	}
	if l.L4 == 0 {
		t.Fatalf("IP without L4 offset: %+v", l)
	}
	if l.HopByHop != 0 && int(l.HopByHop) != int(l.L3)+IPv6Len {
		t.Fatalf("Hop-by-Hop at %d", l.HopByHop)
	}
	if l.Flags&FlagSRH != 0 {
		if err := SRH(data[l.Routing:l.End]).validateFixed(); err != nil {
			t.Fatalf("FlagSRH but %v", err)
		}
		_ = l.FinalDst(data)
	}
	if l.Flags&FlagUDP != 0 {
		u := l.UDP(data)
		if err := u.Validate(); err != nil {
			t.Fatalf("FlagUDP but %v", err)
		}
		_ = l.UDPChecksum(data)
	}
	if l.Flags&FlagESP != 0 && (l.ESP == 0 || l.Proto != ProtocolESP) {
		t.Fatalf("FlagESP: %+v", l)
	}
}

// rebuild serialises the parsed IPv6 packet again from its views.
func rebuild(t *testing.T, data []byte, l *Layers) []byte {
	t.Helper()
	out := make([]byte, 0, len(data)+64)
	ef := Ethernet(data).Fields()
	e := make(Ethernet, ef.HeaderLen())
	e.Encode(&ef)
	out = append(out, e...)
	ipf := IPv6(data[l.L3:]).Fields()
	ip := make(IPv6, IPv6Len)
	ip.Encode(&ipf)
	out = append(out, ip...)
	off := int(l.L3) + IPv6Len
	nh := ipf.NextHeader
	stop := int(l.L4)
	if l.ESP != 0 {
		stop = int(l.ESP)
	}
	buf := make([]byte, 4096)
	for off < stop {
		var n int
		switch nh {
		case ProtocolHopByHop, ProtocolDestOpts:
			h := IPv6Options(data[off:l.End])
			if h.Validate() != nil {
				n = copy(buf, h[:h.Len()])
				break
			}
			var opts []IPv6Option
			it := h.Options()
			for o, ok := it.Next(); ok; o, ok = it.Next() {
				opts = append(opts, o)
			}
			var err error
			if n, err = PutIPv6Options(buf, h.NextHeader(), opts); err != nil || n != h.Len() {
				t.Fatalf("PutIPv6Options: %d %v, header %d", n, err, h.Len())
			}
		case ProtocolRouting:
			rt := IPv6Routing(data[off:l.End])
			if rt.RoutingType() != RoutingTypeSRH || SRH(rt).Validate() != nil {
				n = copy(buf, rt[:rt.Len()])
				break
			}
			sf := SRH(rt).Fields()
			var err error
			if n, err = PutSRH(buf, &sf); err != nil || n != rt.Len() {
				t.Fatalf("PutSRH: %d %v, header %d", n, err, rt.Len())
			}
			// PutSRH writes Last Entry from the list; the list fills the
			// header, so they agree.
		case ProtocolFragment:
			fr := IPv6Fragment(data[off:])
			IPv6Fragment(buf).Encode(fr.NextHeader(), fr.FragmentOffset(), fr.More(), fr.ID())
			// Reserved fields are zero on Encode; keep the packet's.
			buf[1] = fr[1]
			buf[3] = buf[3]&^6 | fr[3]&6
			n = IPv6FragmentLen
		case ProtocolAH:
			a := AH(data[off:])
			n = copy(buf, a[:a.Len()])
		default:
			t.Fatalf("rebuild: unexpected next header %d at %d (%+v)", nh, off, l)
		}
		nh = buf[0]
		out = append(out, buf[:n]...)
		off += n
	}
	return append(out, data[off:]...)
}

func FuzzIPv6Options(f *testing.F) {
	f.Add([]byte{0x11, 0, 5, 2, 0, 0, 1, 0})
	f.Add([]byte{0x3b, 1, 0x1e, 6, 1, 2, 3, 4, 5, 6, 1, 3, 0, 0, 0, 0})
	f.Add([]byte{0x3b, 0, 0x1e, 7, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		h := IPv6Options(data)
		if h.Validate() != nil {
			if len(data) >= 8 && h.Len() <= len(data) {
				it := h.Options()
				for _, ok := it.Next(); ok; _, ok = it.Next() {
				}
				if it.Err() == nil {
					t.Fatal("Validate failed but the options iterate cleanly")
				}
			}
			return
		}
		var opts []IPv6Option
		it := h.Options()
		for o, ok := it.Next(); ok; o, ok = it.Next() {
			if it.Off() < 2 || it.Off()+o.Len() > h.Len() {
				t.Fatalf("option at %d len %d outside header %d", it.Off(), o.Len(), h.Len())
			}
			opts = append(opts, o)
		}
		out := make([]byte, ipv6ExtMaxLen)
		n, err := PutIPv6Options(out, h.NextHeader(), opts)
		if err != nil || !bytes.Equal(out[:n], data[:h.Len()]) {
			t.Fatalf("PutIPv6Options = %x, %v; want %x", out[:n], err, data[:h.Len()])
		}
	})
}

func FuzzSRH(f *testing.F) {
	for _, p := range seedPackets() {
		var l Layers
		if Parse(p, &l) == nil && l.Flags&FlagSRH != 0 {
			f.Add(p[l.Routing:l.End], uint8(0), uint8(0), []byte(nil))
		}
	}
	f.Add(make([]byte, 0), uint8(3), uint8(2), []byte{6, 1, 'x'})
	// data is parsed as an SRH; nseg, sl and tlv drive the builder.
	f.Fuzz(func(t *testing.T, data []byte, nseg, sl uint8, tlv []byte) {
		if s := SRH(data); s.Validate() == nil {
			fl := s.Fields()
			out := make([]byte, ipv6ExtMaxLen)
			n, err := PutSRH(out, &fl)
			if err != nil || !bytes.Equal(out[:n], data[:s.Len()]) {
				t.Fatalf("PutSRH(Fields) = %x, %v; want %x", out[:n], err, data[:s.Len()])
			}
			_, _ = s.ActiveSegment()
			for i := 0; i < s.NumSegments(); i++ {
				_ = s.SegmentAddr(i)
			}
		}
		// Build one from the other inputs: what PutSRH writes must validate and
		// read back.
		fl := SRHFields{NextHeader: ProtocolUDP, SegmentsLeft: sl, Tag: uint16(len(tlv))}
		for i := 0; i < int(nseg%130); i++ {
			var a [16]byte
			binary.BigEndian.PutUint32(a[12:], uint32(i))
			fl.Segments = append(fl.Segments, a)
		}
		if len(tlv) > 0 {
			fl.TLVs = []SRHTLV{{Type: 6 + tlv[0]%100, Data: tlv[1:]}}
		}
		out := make([]byte, 4096)
		n, err := PutSRH(out, &fl)
		if err != nil {
			return
		}
		s := SRH(out[:n])
		if err := s.Validate(); err != nil {
			t.Fatalf("PutSRH wrote an invalid SRH (%v): %x", err, out[:n])
		}
		if s.NumSegments() != len(fl.Segments) || s.SegmentsLeft() != sl || s.Segment(len(fl.Segments)-1) != fl.Segments[len(fl.Segments)-1] {
			t.Fatal("PutSRH fields")
		}
	})
}

func FuzzUDP(f *testing.F) {
	for _, p := range seedPackets() {
		var l Layers
		if Parse(p, &l) == nil && l.Flags&FlagUDP != 0 {
			f.Add(p[l.L4:l.End], p[l.L3+8:l.L3+40])
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, addrs []byte) {
		data = bytes.Clone(data) // SetChecksum below writes
		u := UDP(data)
		if u.Validate() != nil || len(addrs) < 32 {
			return
		}
		fl := u.Fields()
		out := make(UDP, UDPLen)
		out.Encode(&fl)
		if !bytes.Equal(out, data[:UDPLen]) {
			t.Fatal("Encode(Fields)")
		}
		src, dst := [16]byte(addrs[:16]), [16]byte(addrs[16:32])
		u.SetChecksum(u.ChecksumIPv6(src, dst))
		if !u.IsChecksumValid(PseudoHeaderChecksum(ProtocolUDP, src[:], dst[:], uint32(u.Length()))) {
			t.Fatal("computed IPv6 checksum does not verify")
		}
		s4, d4 := [4]byte(addrs[:4]), [4]byte(addrs[4:8])
		u.SetChecksum(u.ChecksumIPv4(s4, d4))
		if !u.IsChecksumValid(PseudoHeaderChecksum(ProtocolUDP, s4[:], d4[:], uint32(u.Length()))) {
			t.Fatal("computed IPv4 checksum does not verify")
		}
	})
}

// FuzzChecksum: the fast sum equals RFC 1071's loop, and incremental updates of
// a 16-bit word, a 32-bit word and a byte range equal recomputing.
func FuzzChecksum(f *testing.F) {
	f.Add([]byte{0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7}, uint16(0), uint16(3), []byte{0x55, 0x55, 1})
	f.Add(bytes.Repeat([]byte{0xff}, 100), uint16(0xffff), uint16(7), []byte{0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte, init uint16, at uint16, repl []byte) {
		if got, want := Checksum(data, init), refSum(data, init); !same(got, want) {
			t.Fatalf("Checksum = %#04x, reference %#04x", got, want)
		}
		if len(data) < 4 {
			return
		}
		data = append([]byte(nil), data...)
		hc := ^Checksum(data, 0)
		i := int(at) % (len(data) - 3) &^ 1
		old16 := binary.BigEndian.Uint16(data[i:])
		new16 := old16 ^ uint16(len(repl))*0x0101 ^ init
		binary.BigEndian.PutUint16(data[i:], new16)
		hc = ChecksumUpdate16(hc, old16, new16)
		if full := ^Checksum(data, 0); !same(hc, full) {
			t.Fatalf("16-bit: %#04x, full %#04x", hc, full)
		}
		old32 := binary.BigEndian.Uint32(data[i:])
		new32 := old32 ^ uint32(init)<<16 ^ uint32(at)
		binary.BigEndian.PutUint32(data[i:], new32)
		hc = ChecksumUpdate32(hc, old32, new32)
		if full := ^Checksum(data, 0); !same(hc, full) {
			t.Fatalf("32-bit: %#04x, full %#04x", hc, full)
		}
		j := int(at) % len(data)
		n := min(len(repl), len(data)-j)
		oldB := append([]byte(nil), data[j:j+n]...)
		copy(data[j:], repl[:n])
		hc = ChecksumUpdate(hc, j, oldB, repl[:n])
		if full := ^Checksum(data, 0); !same(hc, full) {
			t.Fatalf("range at %d len %d: %#04x, full %#04x", j, n, hc, full)
		}
	})
}
