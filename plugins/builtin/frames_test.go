package builtin

import (
	"encoding/binary"
	"net/netip"

	"github.com/linerate/linerate/appliance/packet"
)

// frame describes a test frame: Ethernet, an optional VLAN tag, IPv4 or IPv6
// (with an optional Hop-by-Hop header and SRH), and UDP or another upper layer.
// Checksums are left zero: the stages under test do not read them.
type frame struct {
	v4           bool
	vlan         uint16
	src, dst     string
	proto        uint8 // upper layer; 0 means UDP
	sport, dport uint16
	hbh          bool
	srh          int // segments of an SRH; 0 = no SRH
	payload      int
	etherType    uint16 // non-zero: a non-IP frame of this EtherType
}

var (
	macA = [6]byte{2, 0, 0, 0, 0, 0xa}
	macB = [6]byte{2, 0, 0, 0, 0, 0xb}
)

func (f frame) bytes() []byte {
	d := make([]byte, 0, 256)
	d = append(d, macB[:]...) // destination
	d = append(d, macA[:]...) // source
	if f.vlan != 0 {
		d = binary.BigEndian.AppendUint16(d, packet.EtherTypeVLAN)
		d = binary.BigEndian.AppendUint16(d, f.vlan)
	}
	if f.etherType != 0 {
		d = binary.BigEndian.AppendUint16(d, f.etherType)
		return append(d, make([]byte, 46)...)
	}
	proto := f.proto
	if proto == 0 {
		proto = packet.ProtocolUDP
	}
	var upper []byte
	if proto == packet.ProtocolUDP {
		upper = make([]byte, 8+f.payload)
		binary.BigEndian.PutUint16(upper[0:], f.sport)
		binary.BigEndian.PutUint16(upper[2:], f.dport)
		binary.BigEndian.PutUint16(upper[4:], uint16(len(upper)))
	} else {
		upper = make([]byte, max(f.payload, 8))
	}
	src, dst := netip.MustParseAddr(f.src), netip.MustParseAddr(f.dst)
	if f.v4 {
		d = binary.BigEndian.AppendUint16(d, packet.EtherTypeIPv4)
		ip := make([]byte, 20)
		ip[0] = 0x45
		binary.BigEndian.PutUint16(ip[2:], uint16(20+len(upper)))
		ip[8] = 64
		ip[9] = proto
		s, t := src.As4(), dst.As4()
		copy(ip[12:], s[:])
		copy(ip[16:], t[:])
		d = append(d, ip...)
		return append(d, upper...)
	}
	var ext []byte
	next := proto
	if f.srh > 0 {
		n := f.srh
		r := make([]byte, 8+16*n)
		r[0] = next
		r[1] = uint8(2 * n)
		r[2] = packet.RoutingTypeSRH
		r[3] = uint8(n - 1) // segments left
		r[4] = uint8(n - 1) // last entry
		for i := 0; i < n; i++ {
			seg := dst.As16()
			seg[15] += byte(i)
			copy(r[8+16*i:], seg[:])
		}
		ext = r
		next = packet.ProtocolRouting
	}
	if f.hbh {
		h := []byte{next, 0, 1, 4, 0, 0, 0, 0} // PadN over the six option bytes
		ext = append(h, ext...)
		next = packet.ProtocolHopByHop
	}
	d = binary.BigEndian.AppendUint16(d, packet.EtherTypeIPv6)
	ip := make([]byte, 40)
	ip[0] = 0x60
	binary.BigEndian.PutUint16(ip[4:], uint16(len(ext)+len(upper)))
	ip[6] = next
	ip[7] = 64
	s, t := src.As16(), dst.As16()
	copy(ip[8:], s[:])
	copy(ip[24:], t[:])
	d = append(d, ip...)
	d = append(d, ext...)
	return append(d, upper...)
}

// udp6 is a plain IPv6/UDP frame between the documentation prefixes.
func udp6(sport, dport uint16) frame {
	return frame{src: "2001:db8:1::1", dst: "2001:db8:2::1", sport: sport, dport: dport, payload: 32}
}
