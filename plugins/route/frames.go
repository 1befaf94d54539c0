package route

import (
	"github.com/linerate/linerate/appliance/packet"
)

// Frames linerate makes itself: solicitations to resolve next hops and ICMP
// errors. Each is written into a fresh buffer of the output port's pool, and
// marked local.

const (
	ethLen     = packet.EthernetMinLen
	minFrame   = 60 // Ethernet minimum without FCS
	nsLen      = ethLen + packet.IPv6Len + packet.NDPNeighborSolicitLen + packet.NDPLinkAddrOptLen
	arpLen     = ethLen + packet.ARPLen
	icmp4Quote = 576 - packet.IPv4MinLen - packet.ICMPv4MinLen // RFC 1812 §4.3.2.3
	defaultTTL = 64
)

// alloc takes a buffer from p's pool and opens n bytes of data.
func alloc(p *Port, n int) (packet.Handle, []byte, bool) {
	if p.Pool == nil {
		return 0, nil, false
	}
	h, ok := p.Pool.AllocOne()
	if !ok {
		return 0, nil, false
	}
	q := h.P()
	d, err := q.Append(n)
	if err != nil {
		p.Pool.FreeOne(h)
		return 0, nil, false
	}
	q.SetFlag(packet.FlagLocal)
	return h, d, true
}

// addressedTo reports whether frame d is for a port with MAC mac: to that MAC,
// or to a group (multicast, broadcast). Routed ports are promiscuous (a
// configured MAC differs from the NIC's), so frames between other hosts on
// the link reach the stages too; they are no business of a router's. A zero
// mac (a port routed mode gave none) takes every frame.
func addressedTo(mac packet.MAC, d []byte) bool {
	if len(d) < ethLen || mac == (packet.MAC{}) {
		return true
	}
	dm := packet.Ethernet(d).Dst()
	return dm[0]&1 != 0 || dm == mac
}

// putEth writes an untagged Ethernet header.
func putEth(d []byte, dst, src packet.MAC, typ uint16) {
	e := packet.Ethernet(d)
	e.SetDst(dst)
	e.SetSrc(src)
	d[12], d[13] = byte(typ>>8), byte(typ)
}

// buildNS makes a Neighbor Solicitation for target from port p: multicast to
// its solicited-node group to resolve it, or unicast to mac to confirm it (RFC
// 4861 §7.2.2, §7.3.3).
func buildNS(p *Port, target [16]byte, mac packet.MAC) (packet.Handle, bool) {
	src, ok := p.Source6(target)
	if !ok {
		return 0, false
	}
	h, d, ok := alloc(p, nsLen)
	if !ok {
		return 0, false
	}
	dst := target
	if mac == (packet.MAC{}) {
		dst = packet.SolicitedNode(target)
		mac = packet.MulticastMAC(dst)
	}
	putEth(d, mac, p.MAC, packet.EtherTypeIPv6)
	ip := packet.IPv6(d[ethLen:])
	ip.Encode(&packet.IPv6Fields{PayloadLength: packet.NDPNeighborSolicitLen + packet.NDPLinkAddrOptLen,
		NextHeader: packet.ProtocolICMPv6, HopLimit: 255, Src: src, Dst: dst})
	m := d[ethLen+packet.IPv6Len:]
	f := packet.NDPFields{Type: packet.ICMPv6NeighborSolicit, Target: target}
	if _, err := f.Encode(m); err != nil {
		packet.FreeOne(h)
		return 0, false
	}
	packet.PutNDPLinkAddr(m[packet.NDPNeighborSolicitLen:], packet.NDPOptSourceLinkAddr, p.MAC)
	icmp := packet.ICMPv6(m)
	icmp.SetChecksum(icmp.CalculateChecksum(src, dst))
	return h, true
}

// buildARPRequest makes an ARP request for target from port p: broadcast to
// resolve it, or unicast to mac to confirm it (RFC 1122 §2.3.2.1).
func buildARPRequest(p *Port, target [4]byte, mac packet.MAC) (packet.Handle, bool) {
	src, ok := p.Source4(target)
	if !ok {
		return 0, false
	}
	h, d, ok := alloc(p, minFrame)
	if !ok {
		return 0, false
	}
	if mac == (packet.MAC{}) {
		mac = packet.BroadcastMAC
	}
	putEth(d, mac, p.MAC, packet.EtherTypeARP)
	packet.ARP(d[ethLen:]).Encode(&packet.ARPFields{Op: packet.ARPRequest, SenderMAC: p.MAC, SenderIP: src, TargetIP: target})
	clear(d[arpLen:])
	return h, true
}

// solicit makes the solicitation for s: NS for IPv6, ARP for IPv4-mapped.
func solicit(p *Port, s Solicit) (packet.Handle, bool) {
	if isMapped(s.Addr) {
		return buildARPRequest(p, [4]byte(s.Addr[12:]), s.MAC)
	}
	return buildNS(p, s.Addr, s.MAC)
}

func isMapped(a [16]byte) bool {
	return a[10] == 0xff && a[11] == 0xff && [10]byte(a[:10]) == [10]byte{}
}

// icmp6ErrorAllowed says whether an ICMPv6 error may answer the packet ip
// carried in frame d (RFC 4443 §2.4 (e)): not for an error or a redirect, not
// for a multicast destination (Packet Too Big aside) or source, not for an
// unspecified source.
func icmp6ErrorAllowed(d []byte, l *packet.Layers, typ uint8) bool {
	ip := packet.IPv6(d[l.L3:l.End])
	src, dst := ip.Src(), ip.Dst()
	if src[0] == 0xff || src == ([16]byte{}) || dst[0] == 0xff && typ != packet.ICMPv6PacketTooBig {
		return false
	}
	if packet.Ethernet(d).Dst()[0]&1 != 0 && typ != packet.ICMPv6PacketTooBig {
		return false
	}
	if l.Proto == packet.ProtocolICMPv6 && l.Flags&packet.FlagLaterFragment == 0 && l.L4 != 0 && int(l.L4) < int(l.End) {
		if t := d[l.L4]; t < 128 || t == packet.ICMPv6Redirect {
			return false
		}
	}
	return true
}

// buildICMPv6Error makes an ICMPv6 error of type typ and code, with rest as the
// first body word, answering the IPv6 packet in frame d that arrived on port
// in. It quotes as much of the packet as fits in the minimum MTU (RFC 4443
// §2.4 (c)).
func buildICMPv6Error(in *Port, d []byte, l *packet.Layers, typ, code uint8, rest uint32) (packet.Handle, bool) {
	ip := packet.IPv6(d[l.L3:l.End])
	dst := ip.Src()
	src, ok := in.Source6(dst)
	if !ok {
		return 0, false
	}
	quote := min(len(ip), packet.ICMPv6ErrorMaxLen-packet.ICMPv6MinLen)
	n := ethLen + packet.IPv6Len + packet.ICMPv6MinLen + quote
	h, out, ok := alloc(in, n)
	if !ok {
		return 0, false
	}
	putEth(out, packet.Ethernet(d).Src(), in.MAC, packet.EtherTypeIPv6)
	oip := packet.IPv6(out[ethLen:])
	oip.Encode(&packet.IPv6Fields{PayloadLength: uint16(packet.ICMPv6MinLen + quote), NextHeader: packet.ProtocolICMPv6,
		HopLimit: defaultTTL, Src: src, Dst: dst})
	m := packet.ICMPv6(out[ethLen+packet.IPv6Len:])
	m.Encode(&packet.ICMPv6Fields{Type: typ, Code: code, Rest: rest})
	copy(m[packet.ICMPv6MinLen:], ip[:quote])
	m.SetChecksum(m.CalculateChecksum(src, dst))
	return h, true
}

// icmp4ErrorAllowed is icmp6ErrorAllowed for IPv4 (RFC 1812 §4.3.2.7): not for
// an ICMP error, a later fragment, a broadcast or multicast, or a source that
// names no single host.
func icmp4ErrorAllowed(d []byte, l *packet.Layers) bool {
	ip := packet.IPv4(d[l.L3:l.End])
	src, dst := ip.Src(), ip.Dst()
	if src[0] == 0 || src[0] >= 224 || src[0] == 127 || dst[0] >= 224 || dst == [4]byte{255, 255, 255, 255} {
		return false
	}
	if packet.Ethernet(d).Dst()[0]&1 != 0 || l.Flags&packet.FlagLaterFragment != 0 {
		return false
	}
	if l.Proto == packet.ProtocolICMP && l.L4 != 0 && int(l.L4) < int(l.End) {
		if packet.ICMPv4(d[l.L4:min(int(l.L4)+packet.ICMPv4MinLen, int(l.End))]).IsError() {
			return false
		}
	}
	return true
}

// buildICMPv4Error makes an ICMP error for the IPv4 packet in frame d, quoting
// its header and as much data as keeps the error within 576 bytes.
func buildICMPv4Error(in *Port, d []byte, l *packet.Layers, typ, code uint8, rest uint32) (packet.Handle, bool) {
	ip := packet.IPv4(d[l.L3:l.End])
	dst := ip.Src()
	src, ok := in.Source4(dst)
	if !ok {
		return 0, false
	}
	quote := min(len(ip), icmp4Quote)
	n := ethLen + packet.IPv4MinLen + packet.ICMPv4MinLen + quote
	h, out, ok := alloc(in, max(n, minFrame))
	if !ok {
		return 0, false
	}
	putEth(out, packet.Ethernet(d).Src(), in.MAC, packet.EtherTypeIPv4)
	oip := packet.IPv4(out[ethLen:])
	_ = oip.Encode(&packet.IPv4Fields{TotalLength: uint16(n - ethLen), TTL: defaultTTL, Protocol: packet.ProtocolICMP,
		Src: src, Dst: dst})
	oip.SetChecksum(oip.CalculateChecksum())
	m := packet.ICMPv4(out[ethLen+packet.IPv4MinLen : n])
	m.Encode(&packet.ICMPv4Fields{Type: typ, Code: code, Rest: rest})
	copy(m[packet.ICMPv4MinLen:], ip[:quote])
	m.SetChecksum(m.CalculateChecksum())
	clear(out[n:])
	return h, true
}
