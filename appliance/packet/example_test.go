package packet_test

import (
	"fmt"
	"net/netip"

	"github.com/linerate/linerate/appliance/packet"
)

// A source builds IPv6 + SRH + UDP for the path 2001:db8::1 → ::2 → ::3: the
// list goes in reverse, the destination address is the first segment, and
// Segments Left indexes it.
func ExamplePutSRH() {
	path := []string{"2001:db8::1", "2001:db8::2", "2001:db8::3"}
	f := packet.SRHFields{NextHeader: packet.ProtocolUDP, SegmentsLeft: uint8(len(path) - 1)}
	for i := len(path) - 1; i >= 0; i-- {
		f.Segments = append(f.Segments, netip.MustParseAddr(path[i]).As16())
	}
	buf := make([]byte, 64)
	n, err := packet.PutSRH(buf, &f)
	if err != nil {
		panic(err)
	}
	srh := packet.SRH(buf[:n])
	active, _ := srh.ActiveSegment()
	fmt.Println(n, srh.LastEntry(), netip.AddrFrom16(active), srh.SegmentAddr(0))
	// Output: 56 2 2001:db8::1 2001:db8::3
}

// A stage parses once and leaves the record in the packet's Scratch area; the
// stages after it read it without parsing again.
func ExampleParse() {
	data := []byte{
		2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x86, 0xdd, // Ethernet
		0x60, 0, 0, 0, 0, 8, packet.ProtocolUDP, 64, // IPv6: 8 bytes of UDP
		0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1,
		0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2,
		0x03, 0x7a, 0x03, 0x7b, 0, 8, 0, 0, // UDP 890 → 891
	}
	var l packet.Layers
	if err := packet.Parse(data, &l); err != nil {
		panic(err)
	}
	u := l.UDP(data)
	fmt.Println(l.L3, l.L4, l.Proto, u.SrcPort(), u.DstPort(), l.IPv6(data).DstAddr())
	// Output: 14 54 17 890 891 2001:db8::2
}
