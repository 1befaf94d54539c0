package packet

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

var (
	ndpSrc  = netip.MustParseAddr("fe80::1").As16()
	ndpDst  = netip.MustParseAddr("2001:db8::2").As16()
	ndpMAC  = MAC{0x02, 0, 0, 0, 0, 0x01}
	ndpMAC2 = MAC{0x02, 0, 0, 0, 0, 0x02}
)

// ndpRows are ND messages written out by hand from the RFC 4861 §4 figures,
// valid and malformed.
var ndpRows = []struct {
	name string
	hex  string
	err  error
	typ  uint8
	nopt int
}{
	{"NS with source link-layer address", "8700 0000 00000000 20010db8000000000000000000000002 0101 020000000001", nil, ICMPv6NeighborSolicit, 1},
	{"NS for DAD, no options", "8700 0000 00000000 20010db8000000000000000000000002", nil, ICMPv6NeighborSolicit, 0},
	{"NA R S O with target link-layer address", "8800 0000 e0000000 20010db8000000000000000000000002 0201 020000000002", nil, ICMPv6NeighborAdvert, 1},
	{"RS with source link-layer address", "8500 0000 00000000 0101 020000000001", nil, ICMPv6RouterSolicit, 1},
	{"RA with SLLA, MTU and prefix", "8600 0000 40000708 00000000 00000000 0101 020000000001 0501 0000 000005dc" +
		" 0304 40c0 00278d00 00093a80 00000000 20010db8000000000000000000000000", nil, ICMPv6RouterAdvert, 3},
	{"NS option of length zero", "8700 0000 00000000 20010db8000000000000000000000002 0100 020000000001", ErrNDPOption, ICMPv6NeighborSolicit, 0},
	{"NS option past the end", "8700 0000 00000000 20010db8000000000000000000000002 0102 020000000001", ErrNDPOption, ICMPv6NeighborSolicit, 0},
	{"NS one stray byte", "8700 0000 00000000 20010db8000000000000000000000002 01", ErrNDPOption, ICMPv6NeighborSolicit, 0},
	{"NS truncated target", "8700 0000 00000000 20010db8", ErrTruncated, ICMPv6NeighborSolicit, 0},
	{"NS code 1", "8701 0000 00000000 20010db8000000000000000000000002", ErrNDPCode, ICMPv6NeighborSolicit, 0},
	{"echo is not ND", "8000 0000 00000000", ErrNDPCode, ICMPv6EchoRequest, 0},
}

func TestNDPRows(t *testing.T) {
	for _, r := range ndpRows {
		t.Run(r.name, func(t *testing.T) {
			b := mustHex(t, r.hex)
			var arr [8]NDPOption
			f, err := ParseNDP(b, arr[:0])
			if !errors.Is(err, r.err) {
				t.Fatalf("ParseNDP: %v, want %v", err, r.err)
			}
			// The typed views agree with ParseNDP.
			var verr error
			switch r.typ {
			case ICMPv6NeighborSolicit:
				verr = NDPNeighborSolicit(b).Validate()
			case ICMPv6NeighborAdvert:
				verr = NDPNeighborAdvert(b).Validate()
			case ICMPv6RouterSolicit:
				verr = NDPRouterSolicit(b).Validate()
			case ICMPv6RouterAdvert:
				verr = NDPRouterAdvert(b).Validate()
			default:
				verr = NDPNeighborSolicit(b).Validate()
			}
			if !errors.Is(verr, r.err) {
				t.Fatalf("view Validate: %v, want %v", verr, r.err)
			}
			if err != nil {
				return
			}
			if f.Type != r.typ || len(f.Options) != r.nopt {
				t.Fatalf("type %d options %d", f.Type, len(f.Options))
			}
			out := make([]byte, f.Len())
			n, err := f.Encode(out)
			if err != nil || n != len(b) || !bytes.Equal(out, b) {
				t.Fatalf("Encode: %d %v\n got %x\nwant %x", n, err, out, b)
			}
			// gopacket decodes the same fields.
			checkNDPWithGopacket(t, b, f)
		})
	}
}

// checkNDPWithGopacket decodes b with gopacket and compares.
func checkNDPWithGopacket(t *testing.T, b []byte, f NDPFields) {
	t.Helper()
	var opts layers.ICMPv6Options
	var target net.IP
	var layer gopacket.DecodingLayer
	body := b[4:]
	switch f.Type {
	case ICMPv6NeighborSolicit:
		l := &layers.ICMPv6NeighborSolicitation{}
		layer = l
		defer func() { opts, target = l.Options, l.TargetAddress; checkOpts(t, f, target, opts) }()
	case ICMPv6NeighborAdvert:
		l := &layers.ICMPv6NeighborAdvertisement{}
		layer = l
		defer func() {
			if l.Flags != uint8(f.Rest>>24) {
				t.Errorf("gopacket flags %#x, want %#x", l.Flags, f.Rest>>24)
			}
			opts, target = l.Options, l.TargetAddress
			checkOpts(t, f, target, opts)
		}()
	case ICMPv6RouterSolicit:
		l := &layers.ICMPv6RouterSolicitation{}
		layer = l
		defer func() { checkOpts(t, f, nil, l.Options) }()
	case ICMPv6RouterAdvert:
		l := &layers.ICMPv6RouterAdvertisement{}
		layer = l
		defer func() {
			ra := NDPRouterAdvert(b)
			if l.HopLimit != ra.CurHopLimit() || l.Flags != ra.Flags() || l.RouterLifetime != ra.RouterLifetime() ||
				l.ReachableTime != ra.ReachableTime() || l.RetransTimer != ra.RetransTimer() {
				t.Errorf("gopacket RA %+v", l)
			}
			checkOpts(t, f, nil, l.Options)
		}()
	}
	if err := layer.DecodeFromBytes(body, gopacket.NilDecodeFeedback); err != nil {
		t.Fatalf("gopacket: %v", err)
	}
}

func checkOpts(t *testing.T, f NDPFields, target net.IP, opts layers.ICMPv6Options) {
	t.Helper()
	if target != nil && !bytes.Equal(target, f.Target[:]) {
		t.Errorf("gopacket target %v, want %x", target, f.Target)
	}
	if len(opts) != len(f.Options) {
		t.Fatalf("gopacket %d options, want %d", len(opts), len(f.Options))
	}
	for i, o := range opts {
		if uint8(o.Type) != f.Options[i].Type || !bytes.Equal(o.Data, f.Options[i].Data) {
			t.Errorf("option %d: gopacket %d %x, want %d %x", i, o.Type, o.Data, f.Options[i].Type, f.Options[i].Data)
		}
	}
}

// TestNDPBuild builds an NS and an NA the way the neighbor stage does, and
// gopacket decodes them, checksum included.
func TestNDPBuild(t *testing.T) {
	b := make([]byte, NDPNeighborSolicitLen+NDPLinkAddrOptLen)
	f := NDPFields{Type: ICMPv6NeighborSolicit, Target: ndpDst}
	if _, err := f.Encode(b); err != nil {
		t.Fatal(err)
	}
	PutNDPLinkAddr(b[NDPNeighborSolicitLen:], NDPOptSourceLinkAddr, ndpMAC)
	ICMPv6(b).SetChecksum(ICMPv6(b).CalculateChecksum(ndpSrc, SolicitedNode(ndpDst)))
	ns := NDPNeighborSolicit(b)
	if err := ns.Validate(); err != nil {
		t.Fatal(err)
	}
	if m, ok := ns.Options().LinkAddr(NDPOptSourceLinkAddr); !ok || m != ndpMAC {
		t.Errorf("LinkAddr = %v %v", m, ok)
	}
	if _, ok := ns.Options().LinkAddr(NDPOptTargetLinkAddr); ok {
		t.Error("found a target link-layer address in an NS")
	}
	if ns.Target() != ndpDst {
		t.Error("target")
	}
	pkt := gopacketIPv6(t, ndpSrc, SolicitedNode(ndpDst), b)
	icmp, _ := pkt.Layer(layers.LayerTypeICMPv6).(*layers.ICMPv6)
	nsl, _ := pkt.Layer(layers.LayerTypeICMPv6NeighborSolicitation).(*layers.ICMPv6NeighborSolicitation)
	if icmp == nil || nsl == nil {
		t.Fatalf("gopacket: %v", pkt)
	}
	if !bytes.Equal(nsl.TargetAddress, ndpDst[:]) || len(nsl.Options) != 1 || !bytes.Equal(nsl.Options[0].Data, ndpMAC[:]) {
		t.Errorf("gopacket NS %+v", nsl)
	}
	if err, res := icmp.VerifyChecksum(); err != nil || !res.Valid {
		t.Errorf("gopacket checksum: %v", err)
	}

	// An NA answering it.
	a := make([]byte, NDPNeighborAdvertLen+NDPLinkAddrOptLen)
	f = NDPFields{Type: ICMPv6NeighborAdvert, Rest: (NDPFlagRouter | NDPFlagSolicited | NDPFlagOverride) << 24, Target: ndpDst}
	if _, err := f.Encode(a); err != nil {
		t.Fatal(err)
	}
	PutNDPLinkAddr(a[NDPNeighborAdvertLen:], NDPOptTargetLinkAddr, ndpMAC2)
	ICMPv6(a).SetChecksum(ICMPv6(a).CalculateChecksum(ndpDst, ndpSrc))
	na := NDPNeighborAdvert(a)
	if !na.Router() || !na.Solicited() || !na.Override() || na.Target() != ndpDst {
		t.Errorf("NA flags %#x", na.Flags())
	}
	if !ICMPv6(a).IsChecksumValid(ndpDst, ndpSrc) {
		t.Error("NA checksum")
	}
	pkt = gopacketIPv6(t, ndpDst, ndpSrc, a)
	nal, _ := pkt.Layer(layers.LayerTypeICMPv6NeighborAdvertisement).(*layers.ICMPv6NeighborAdvertisement)
	if nal == nil || !nal.Router() || !nal.Solicited() || !nal.Override() || !bytes.Equal(nal.Options[0].Data, ndpMAC2[:]) {
		t.Errorf("gopacket NA %+v", nal)
	}
	if err, res := pkt.Layer(layers.LayerTypeICMPv6).(*layers.ICMPv6).VerifyChecksum(); err != nil || !res.Valid {
		t.Errorf("gopacket NA checksum: %v", err)
	}
}

// gopacketIPv6 wraps an ICMPv6 message in an IPv6 header and decodes it with
// gopacket.
func gopacketIPv6(t *testing.T, src, dst [16]byte, icmp []byte) gopacket.Packet {
	t.Helper()
	ip := make(IPv6, IPv6Len+len(icmp))
	ip.Encode(&IPv6Fields{PayloadLength: uint16(len(icmp)), NextHeader: ProtocolICMPv6, HopLimit: 255, Src: src, Dst: dst})
	copy(ip[IPv6Len:], icmp)
	pkt := gopacket.NewPacket(ip, layers.LayerTypeIPv6, gopacket.Default)
	if l, ok := pkt.Layer(layers.LayerTypeICMPv6).(*layers.ICMPv6); ok {
		if err := l.SetNetworkLayerForChecksum(pkt.NetworkLayer()); err != nil {
			t.Fatal(err)
		}
	}
	return pkt
}

func TestSolicitedNode(t *testing.T) {
	a := netip.MustParseAddr("2001:db8::1:2:3").As16()
	if got := netip.AddrFrom16(SolicitedNode(a)).String(); got != "ff02::1:ff02:3" {
		t.Errorf("SolicitedNode = %s", got)
	}
	if got := MulticastMAC(SolicitedNode(a)).String(); got != "33:33:ff:02:00:03" {
		t.Errorf("MulticastMAC = %s", got)
	}
}

// TestICMPv6Echo checks the checksum against gopacket's and that turning a
// request into a reply in place keeps it right.
func TestICMPv6Echo(t *testing.T) {
	payload := []byte("linerate echo payload, odd length")
	icmp := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(ICMPv6EchoRequest, 0)}
	ip := &layers.IPv6{Version: 6, NextHeader: layers.IPProtocolICMPv6, HopLimit: 64, SrcIP: ndpSrc[:], DstIP: ndpDst[:]}
	if err := icmp.SetNetworkLayerForChecksum(ip); err != nil {
		t.Fatal(err)
	}
	buf := gopacket.NewSerializeBuffer()
	err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{ComputeChecksums: true, FixLengths: true},
		ip, icmp, &layers.ICMPv6Echo{Identifier: 0x1234, SeqNumber: 7}, gopacket.Payload(payload))
	if err != nil {
		t.Fatal(err)
	}
	m := ICMPv6(buf.Bytes()[IPv6Len:])
	if m.Validate() != nil || m.Type() != ICMPv6EchoRequest || m.Ident() != 0x1234 || m.Seq() != 7 || m.IsError() {
		t.Fatalf("echo %x", []byte(m))
	}
	if !m.IsChecksumValid(ndpSrc, ndpDst) || m.CalculateChecksum(ndpSrc, ndpDst) != m.Checksum() {
		t.Fatalf("checksum %#x, calculated %#x", m.Checksum(), m.CalculateChecksum(ndpSrc, ndpDst))
	}
	if !bytes.Equal(m.Payload(), payload) {
		t.Error("payload")
	}
	m.SetTypeUpdate(ICMPv6EchoReply)
	if !m.IsChecksumValid(ndpDst, ndpSrc) {
		t.Error("SetTypeUpdate broke the checksum")
	}
	fl := m.Fields()
	out := make(ICMPv6, ICMPv6MinLen)
	out.Encode(&fl)
	if !bytes.Equal(out, m[:ICMPv6MinLen]) {
		t.Error("Encode(Fields)")
	}
	if (ICMPv6{1, 0, 0, 0, 0, 0, 0}).Validate() != ErrTruncated {
		t.Error("7 bytes validated")
	}
	m.SetType(ICMPv6TimeExceeded)
	if !m.IsError() {
		t.Error("Time Exceeded is an error")
	}
}

// TestARP compares the view with gopacket both ways.
func TestARP(t *testing.T) {
	g := &layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4,
		Operation: layers.ARPRequest, SourceHwAddress: ndpMAC[:], SourceProtAddress: []byte{192, 0, 2, 2},
		DstHwAddress: make([]byte, 6), DstProtAddress: []byte{192, 0, 2, 1}}
	buf := gopacket.NewSerializeBuffer()
	if err := g.SerializeTo(buf, gopacket.SerializeOptions{}); err != nil {
		t.Fatal(err)
	}
	a := ARP(buf.Bytes())
	if err := a.Validate(); err != nil {
		t.Fatal(err)
	}
	if a.Op() != ARPRequest || a.SenderMAC() != ndpMAC || a.SenderIP() != [4]byte{192, 0, 2, 2} || a.TargetIP() != [4]byte{192, 0, 2, 1} || a.TargetMAC() != (MAC{}) {
		t.Errorf("fields %+v", a.Fields())
	}
	// The reply, built in place as the neighbor stage does.
	a.SetOp(ARPReply)
	a.SetTarget(a.SenderMAC(), a.SenderIP())
	a.SetSender(ndpMAC2, [4]byte{192, 0, 2, 1})
	var d layers.ARP
	if err := d.DecodeFromBytes(a, gopacket.NilDecodeFeedback); err != nil {
		t.Fatal(err)
	}
	if d.Operation != ARPReply || !bytes.Equal(d.SourceHwAddress, ndpMAC2[:]) || !bytes.Equal(d.DstHwAddress, ndpMAC[:]) ||
		!bytes.Equal(d.SourceProtAddress, []byte{192, 0, 2, 1}) || !bytes.Equal(d.DstProtAddress, []byte{192, 0, 2, 2}) {
		t.Errorf("gopacket reply %+v", d)
	}
	fl := a.Fields()
	out := make(ARP, ARPLen)
	out.Encode(&fl)
	if !bytes.Equal(out, a[:ARPLen]) {
		t.Error("Encode(Fields)")
	}
	for _, row := range []struct {
		name string
		mod  func(ARP) ARP
		err  error
	}{
		{"truncated", func(a ARP) ARP { return a[:27] }, ErrTruncated},
		{"token ring", func(a ARP) ARP { a[1] = 6; return a }, ErrBadVersion},
		{"IPv6 protocol", func(a ARP) ARP { a[2], a[3] = 0x86, 0xdd; return a }, ErrBadVersion},
		{"hardware length 8", func(a ARP) ARP { a[4] = 8; return a }, ErrBadLength},
	} {
		b := ARP(bytes.Clone(out))
		if err := row.mod(b).Validate(); err != row.err {
			t.Errorf("%s: %v, want %v", row.name, err, row.err)
		}
	}
}

// TestICMPv4 compares the checksum with gopacket's and checks an in-place reply.
func TestICMPv4(t *testing.T) {
	g := &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(ICMPv4Echo, 0), Id: 0x4321, Seq: 9}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{ComputeChecksums: true}, g, gopacket.Payload("abcde")); err != nil {
		t.Fatal(err)
	}
	m := ICMPv4(buf.Bytes())
	if m.Validate() != nil || m.Type() != ICMPv4Echo || m.Ident() != 0x4321 || m.Seq() != 9 || m.IsError() {
		t.Fatalf("echo %x", []byte(m))
	}
	if !m.IsChecksumValid() || m.CalculateChecksum() != m.Checksum() {
		t.Fatalf("checksum %#x, calculated %#x", m.Checksum(), m.CalculateChecksum())
	}
	m.SetTypeUpdate(ICMPv4EchoReply)
	if !m.IsChecksumValid() {
		t.Error("SetTypeUpdate broke the checksum")
	}
	var d layers.ICMPv4
	if err := d.DecodeFromBytes(m, gopacket.NilDecodeFeedback); err != nil || d.TypeCode.Type() != ICMPv4EchoReply {
		t.Fatalf("gopacket %v %v", d.TypeCode, err)
	}
	m.SetType(ICMPv4TimeExceeded)
	if !m.IsError() {
		t.Error("Time Exceeded is an error")
	}
	m.SetType(ICMPv4DstUnreachable)
	m.SetCode(ICMPv4FragNeeded)
	m.SetRest(1400)
	if m.NextHopMTU() != 1400 || m.Code() != ICMPv4FragNeeded {
		t.Error("Frag Needed MTU")
	}
}
