package packet

import (
	"bytes"
	"encoding/hex"
	"math/rand/v2"
	"net"
	"testing"
	"unsafe"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// oracleChain is a random chain over every kind the generator knows.
func oracleChain(r *rand.Rand) chain {
	c := randomChain(r)
	c.trailer = r.IntN(3) * r.IntN(20)
	if c.v4 {
		c.v4frag = r.IntN(4) % 3 // more often none
		c.ah = r.IntN(5) == 0
		c.esp = r.IntN(6) == 0
		if r.IntN(4) == 0 {
			c.proto = ProtocolTCP
		}
		return c
	}
	if c.srh == 0 && r.IntN(5) == 0 {
		c.rtType = 3
	}
	if c.srh > 0 && r.IntN(4) == 0 {
		c.srhTLV = r.IntN(30)
	}
	if r.IntN(6) == 0 {
		c.frag = 1 + r.IntN(2)
	}
	c.ah = r.IntN(6) == 0
	c.esp = r.IntN(8) == 0
	switch r.IntN(8) {
	case 0:
		c.proto = ProtocolTCP
	case 1:
		c.proto = ProtocolNoNext
		c.payload++ // gopacket takes a zero payload length for a broken jumbogram
	}
	return c
}

// offsetIn is where sub starts in data.
func offsetIn(data, sub []byte) int {
	if len(sub) == 0 {
		return -1
	}
	return int(uintptr(unsafe.Pointer(&sub[0])) - uintptr(unsafe.Pointer(&data[0])))
}

// TestGopacketOracle parses random packets with Parse and the views, decodes them
// with gopacket, and compares every field both decode, and the checksums
// gopacket computes.
func TestGopacketOracle(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	var cnt oracleCounts
	n := 3000
	if testing.Short() {
		n = 300
	}
	for i := 0; i < n; i++ {
		c := oracleChain(r)
		data, want := genPacket(r, c)
		var l Layers
		if err := Parse(data, &l); err != nil {
			t.Fatalf("packet %d %+v: %v", i, c, err)
		}
		if l != want {
			t.Fatalf("packet %d %+v:\n got %+v\nwant %+v", i, c, l, want)
		}
		gp := gopacket.NewPacket(data, layers.LayerTypeEthernet, gopacket.DecodeOptions{NoCopy: true})
		if el := gp.ErrorLayer(); el != nil {
			t.Fatalf("packet %d %+v: gopacket: %v\n%s", i, c, el.Error(), hex.Dump(data))
		}
		compareGopacket(t, i, data, &l, gp, &cnt)
	}
	t.Logf("compared: %+v", cnt)
	if cnt.udp < n/2 || cnt.srh < n/4 || cnt.hbh < n/4 || cnt.v4 < n/20 || cnt.frag == 0 || cnt.ah == 0 || cnt.esp == 0 {
		t.Errorf("too little compared: %+v", cnt)
	}
}

// oracleCounts counts what compareGopacket compared, so the test can tell it did.
type oracleCounts struct{ udp, srh, hbh, v4, frag, ah, esp int }

func compareGopacket(t *testing.T, i int, data []byte, l *Layers, gp gopacket.Packet, cnt *oracleCounts) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("packet %d: "+format+"\n%s", append([]any{i}, append(args, hex.Dump(data))...)...)
	}
	eth := l.Ethernet(data)
	ge := gp.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
	dst, src := eth.Dst(), eth.Src()
	if !bytes.Equal(ge.DstMAC, dst[:]) || !bytes.Equal(ge.SrcMAC, src[:]) {
		fail("MACs %v %v vs %v %v", eth.Dst(), eth.Src(), ge.DstMAC, ge.SrcMAC)
	}
	if eth.HeaderLen() != int(l.L3) || eth.EtherType() != l.EtherType {
		fail("ethernet view: hl %d type %#x", eth.HeaderLen(), eth.EtherType())
	}
	tags := 0
	for _, gl := range gp.Layers() {
		q, ok := gl.(*layers.Dot1Q)
		if !ok {
			continue
		}
		tag := eth.Tag(tags)
		if q.VLANIdentifier != tag.VID || q.Priority != tag.PCP || q.DropEligible != tag.DEI || tag.TCI() != l.VLAN[tags] {
			fail("tag %d: %+v vs %+v", tags, tag, q)
		}
		tags++
	}
	if tags != int(l.VLANs) || tags != eth.NumTags() {
		fail("%d tags, gopacket %d", l.VLANs, tags)
	}

	// Offsets of each extension header gopacket found, by kind, before the walk
	// stops at a fragment or ESP.
	seen := map[gopacket.LayerType][]int{}
	for _, gl := range gp.Layers() {
		seen[gl.LayerType()] = append(seen[gl.LayerType()], offsetIn(data, gl.LayerContents()))
	}
	has := func(lt gopacket.LayerType, off uint16) {
		t.Helper()
		offs := seen[lt]
		if off == 0 || l.Flags&FlagFragment != 0 && off > l.Fragment {
			// gopacket stops at any fragment, first or not.
			return
		}
		for _, o := range offs {
			if o == int(off) {
				return
			}
		}
		fail("%v at %d: gopacket has it at %v", lt, off, offs)
	}

	switch l.IPVersion {
	case 6:
		ip := l.IPv6(data)
		g := gp.Layer(layers.LayerTypeIPv6).(*layers.IPv6)
		if g.TrafficClass != ip.TrafficClass() || g.FlowLabel != ip.FlowLabel() || g.Length != ip.PayloadLength() ||
			uint8(g.NextHeader) != ip.NextHeader() || g.HopLimit != ip.HopLimit() ||
			!g.SrcIP.Equal(net.IP(ip.SrcAddr().AsSlice())) || !g.DstIP.Equal(net.IP(ip.DstAddr().AsSlice())) {
			fail("ipv6 %+v vs %+v", ip.Fields(), g)
		}
		if l.HopByHop != 0 {
			h := IPv6Options(data[l.HopByHop:l.End])
			if g.HopByHop == nil || g.HopByHop.ActualLength != h.Len() {
				fail("hop-by-hop: gopacket %+v", g.HopByHop)
			}
			it := h.Options()
			k := 0
			for o, ok := it.Next(); ok; o, ok = it.Next() {
				if k >= len(g.HopByHop.Options) {
					fail("hop-by-hop: more options than gopacket")
				}
				go_ := g.HopByHop.Options[k]
				if go_.OptionType != o.Type || go_.ActualLength != o.Len() || !bytes.Equal(go_.OptionData, o.Data) {
					fail("option %d: %+v vs %+v", k, o, go_)
				}
				k++
			}
			if it.Err() != nil || k != len(g.HopByHop.Options) {
				fail("hop-by-hop: %d options, gopacket %d, err %v", k, len(g.HopByHop.Options), it.Err())
			}
			cnt.hbh++
		}
		has(layers.LayerTypeIPv6Destination, l.DestOpts1)
		has(layers.LayerTypeIPv6Destination, l.DestOpts2)
		has(layers.LayerTypeIPv6Routing, l.Routing)
		has(layers.LayerTypeIPv6Fragment, l.Fragment)
		has(layers.LayerTypeIPSecAH, l.AH)
		has(layers.LayerTypeIPSecESP, l.ESP)
		if l.Routing != 0 {
			gr := gp.Layer(layers.LayerTypeIPv6Routing).(*layers.IPv6Routing)
			rt := IPv6Routing(data[l.Routing:l.End])
			if gr.RoutingType != rt.RoutingType() || gr.SegmentsLeft != rt.SegmentsLeft() || gr.ActualLength != rt.Len() {
				fail("routing %+v", gr)
			}
			if s := l.SRH(data); s != nil {
				if err := s.Validate(); err != nil {
					fail("SRH.Validate: %v", err)
				}
				if gr.Reserved[0] != s.LastEntry() || gr.Reserved[1] != s.Flags() ||
					uint16(gr.Reserved[2])<<8|uint16(gr.Reserved[3]) != s.Tag() {
					fail("srh last entry/flags/tag vs %x", gr.Reserved)
				}
				for k := 0; k < s.NumSegments(); k++ {
					seg := s.Segment(k)
					if !bytes.Equal(gr.Data[16*k:16*k+16], seg[:]) {
						fail("segment %d", k)
					}
				}
				cnt.srh++
			}
		}
		if l.Fragment != 0 {
			gf := gp.Layer(layers.LayerTypeIPv6Fragment).(*layers.IPv6Fragment)
			f := IPv6Fragment(data[l.Fragment:l.End])
			if gf.FragmentOffset*8 != f.FragmentOffset() || gf.MoreFragments != f.More() || gf.Identification != f.ID() {
				fail("fragment %+v", gf)
			}
			cnt.frag++
		}
	case 4:
		ip := l.IPv4(data)
		g := gp.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		if int(g.IHL)*4 != ip.HeaderLen() || g.TOS != ip.TOS() || g.Length != ip.TotalLength() || g.Id != ip.ID() ||
			uint8(g.Flags) != ip.Flags() || g.FragOffset*8 != ip.FragmentOffset() || g.TTL != ip.TTL() ||
			uint8(g.Protocol) != ip.Protocol() || g.Checksum != ip.Checksum() ||
			!g.SrcIP.Equal(net.IP(ip.SrcAddr().AsSlice())) || !g.DstIP.Equal(net.IP(ip.DstAddr().AsSlice())) {
			fail("ipv4 %+v vs %+v", ip.Fields(), g)
		}
		if err, v := g.VerifyChecksum(); err != nil || uint16(v.Correct) != ip.CalculateChecksum() || !v.Valid || !ip.IsChecksumValid() {
			fail("ipv4 checksum %#x, gopacket %+v %v", ip.CalculateChecksum(), v, err)
		}
		cnt.v4++
		has(layers.LayerTypeIPSecAH, l.AH)
		has(layers.LayerTypeIPSecESP, l.ESP)
	}
	if l.Flags&FlagFragment != 0 && (l.IPVersion == 4 || l.AH > l.Fragment) {
		// gopacket decodes no further.
	} else if l.AH != 0 {
		ga := gp.Layer(layers.LayerTypeIPSecAH).(*layers.IPSecAH)
		a := AH(data[l.AH:l.End])
		if err := a.Validate(); err != nil || ga.SPI != a.SPI() || ga.Seq != a.Seq() || !bytes.Equal(ga.AuthenticationData, a.ICV()) {
			fail("ah %+v: %v", ga, err)
		}
		cnt.ah++
	}
	if l.ESP != 0 && (l.Flags&FlagFragment == 0 || l.IPVersion == 6 && l.ESP < l.Fragment) {
		ge := gp.Layer(layers.LayerTypeIPSecESP).(*layers.IPSecESP)
		e := ESP(data[l.ESP:l.End])
		if ge.SPI != e.SPI() || ge.Seq != e.Seq() {
			fail("esp %+v", ge)
		}
		cnt.esp++
	}
	gu, _ := gp.Layer(layers.LayerTypeUDP).(*layers.UDP)
	if l.Flags&FlagUDP != 0 && gu != nil {
		u := l.UDP(data)
		if offsetIn(data, gu.Contents) != int(l.L4) || uint16(gu.SrcPort) != u.SrcPort() || uint16(gu.DstPort) != u.DstPort() ||
			gu.Length != u.Length() || gu.Checksum != u.Checksum() {
			fail("udp %+v vs %+v", u.Fields(), gu)
		}
		if err := gu.SetNetworkLayerForChecksum(gp.NetworkLayer()); err != nil {
			fail("gopacket: %v", err)
		}
		err, v := gu.VerifyChecksum()
		if err != nil || uint16(v.Correct) != l.UDPChecksum(data) || !v.Valid {
			fail("udp checksum %#x, gopacket %+v %v", l.UDPChecksum(data), v, err)
		}
		cnt.udp++
	} else if l.Flags&FlagUDP != 0 && l.Fragment == 0 && l.Flags&FlagFragment == 0 {
		fail("gopacket found no UDP")
	}
}
