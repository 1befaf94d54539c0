package route

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket/layers"

	"github.com/linerate/linerate/appliance/packet"
)

// macs no neighbour can have: a link-layer address option or ARP sender with
// one is refused, and nothing is learnt or updated from it.
var badMACs = []struct {
	name string
	mac  packet.MAC
}{
	{"IPv6 all-nodes multicast", packet.MAC{0x33, 0x33, 0, 0, 0, 1}},
	{"IPv4 multicast", packet.MAC{0x01, 0x00, 0x5e, 0, 0, 1}},
	{"broadcast", packet.BroadcastMAC},
	{"zero", packet.MAC{}},
}

// lladdrOpt is a link-layer address option of type typ carrying mac.
func lladdrOpt(typ layers.ICMPv6Opt, mac packet.MAC) layers.ICMPv6Options {
	return layers.ICMPv6Options{{Type: typ, Data: mac[:]}}
}

// TestNeighborRefusesBadLinkAddr: an NS or RS whose source link-layer
// address, an NA or Redirect whose target link-layer address, or an RA
// whose source link-layer address is multicast, broadcast or zero is dropped
// as neighbor_bad_lladdr: it neither makes an entry nor changes one, and an
// NS gets no answer.
func TestNeighborRefusesBadLinkAddr(t *testing.T) {
	const (
		known   = "2001:db8:1::2"  // STALE, host1: must stay so
		pending = "2001:db8:1::7"  // INCOMPLETE: must stay so
		fresh   = "2001:db8:1::9"  // no entry: must get none
		router  = "fe80::2"        // an RA's and an RS's source: must get no entry
		target  = "2001:db8:1::1"  // ours
		far     = "2001:db8:99::1" // a Redirect's destination
	)
	for _, bad := range badMACs {
		for _, c := range []struct {
			name  string
			frame func(t *testing.T) []byte
		}{
			{"NS source lladdr from a known host", func(t *testing.T) []byte {
				return nsWith(t, known, target, lladdrOpt(layers.ICMPv6OptSourceAddress, bad.mac))
			}},
			{"NS source lladdr from a new host", func(t *testing.T) []byte {
				return nsWith(t, fresh, target, lladdrOpt(layers.ICMPv6OptSourceAddress, bad.mac))
			}},
			{"solicited NA target lladdr", func(t *testing.T) []byte {
				na := &layers.ICMPv6NeighborAdvertisement{Flags: 0x60, TargetAddress: ip(pending),
					Options: lladdrOpt(layers.ICMPv6OptTargetAddress, bad.mac)}
				return ndFrame(t, host1, mac0, pending, target, 255, na, packet.ICMPv6NeighborAdvert)
			}},
			{"override NA target lladdr", func(t *testing.T) []byte {
				na := &layers.ICMPv6NeighborAdvertisement{Flags: 0x20, TargetAddress: ip(known),
					Options: lladdrOpt(layers.ICMPv6OptTargetAddress, bad.mac)}
				return ndFrame(t, host1, packet.MulticastMAC(packet.AllNodes), known, "ff02::1", 255, na, packet.ICMPv6NeighborAdvert)
			}},
			{"RS source lladdr", func(t *testing.T) []byte {
				rs := &layers.ICMPv6RouterSolicitation{Options: lladdrOpt(layers.ICMPv6OptSourceAddress, bad.mac)}
				return ndFrame(t, host1, packet.MulticastMAC(a16("ff02::2")), router, "ff02::2", 255, rs, packet.ICMPv6RouterSolicit)
			}},
			{"RA source lladdr", func(t *testing.T) []byte {
				ra := &layers.ICMPv6RouterAdvertisement{HopLimit: 64, RouterLifetime: 1800,
					Options: lladdrOpt(layers.ICMPv6OptSourceAddress, bad.mac)}
				return ndFrame(t, host1, packet.MulticastMAC(packet.AllNodes), router, "ff02::1", 255, ra, packet.ICMPv6RouterAdvert)
			}},
			{"Redirect target lladdr", func(t *testing.T) []byte {
				rd := &layers.ICMPv6Redirect{TargetAddress: ip(fresh), DestinationAddress: ip(far),
					Options: lladdrOpt(layers.ICMPv6OptTargetAddress, bad.mac)}
				return ndFrame(t, host1, mac0, "fe80::2", target, 255, rd, packet.ICMPv6Redirect)
			}},
		} {
			t.Run(bad.name+"/"+c.name, func(t *testing.T) {
				h := newHarness(t)
				n := h.build("neighbor", "")
				tb := h.routed().Neighbors()
				now := h.Clock.Now()
				if !tb.Learn(port0, a16(known), host1, h.routed().Learn, false, now) || !tb.Resolve(port0, a16(pending), now) {
					t.Fatal("setup")
				}
				h.Env.TakeEmitted()
				o := h.run(port0, [][]byte{c.frame(t)}, n)
				defer o.Free()
				if o.Dropped["neighbor_bad_lladdr"] != 1 || len(o.Forwarded) != 0 {
					t.Errorf("outcome %+v, want dropped as neighbor_bad_lladdr", o)
				}
				now = h.Clock.Now()
				if m, st, ok := tb.Lookup(port0, a16(known), now); !ok || m != host1 || st != Stale {
					t.Errorf("%s: %v %v %v, want %v STALE", known, m, st, ok, host1)
				}
				if _, st, ok := tb.Lookup(port0, a16(pending), now); !ok || st != Incomplete {
					t.Errorf("%s: %v %v, want INCOMPLETE", pending, st, ok)
				}
				for _, a := range []string{fresh, router} {
					if m, st, ok := tb.Lookup(port0, a16(a), now); ok {
						t.Errorf("%s learnt: %v %v", a, m, st)
					}
				}
			})
		}
	}
}

// TestNeighborARPBadSender: an ARP request or reply whose sender is
// multicast, broadcast or zero is dropped as neighbor_bad_lladdr and teaches
// nothing.
func TestNeighborARPBadSender(t *testing.T) {
	for _, bad := range badMACs {
		for _, op := range []uint16{layers.ARPRequest, layers.ARPReply} {
			t.Run(fmt.Sprintf("%s/op %d", bad.name, op), func(t *testing.T) {
				h := newHarness(t)
				n := h.build("neighbor", "")
				tb := h.routed().Neighbors()
				tb.Resolve(port0, a16("::ffff:192.0.2.2"), h.Clock.Now())
				a := serialize(t, eth(host1, packet.BroadcastMAC, layers.EthernetTypeARP), &layers.ARP{AddrType: layers.LinkTypeEthernet,
					Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4, Operation: op,
					SourceHwAddress: bad.mac[:], SourceProtAddress: ip("192.0.2.2").To4(), DstHwAddress: make([]byte, 6), DstProtAddress: ip("192.0.2.1").To4()})
				o := h.run(port0, [][]byte{a}, n)
				defer o.Free()
				if o.Dropped["neighbor_bad_lladdr"] != 1 {
					t.Errorf("outcome %+v, want dropped as neighbor_bad_lladdr", o)
				}
				if _, st, _ := tb.Lookup(port0, a16("::ffff:192.0.2.2"), h.Clock.Now()); st != Incomplete {
					t.Errorf("192.0.2.2 is %v, want INCOMPLETE", st)
				}
			})
		}
	}
}

// nsWith is a Neighbor Solicitation from src (whose MAC is host1) for target
// with the options given.
func nsWith(t *testing.T, src, target string, opts layers.ICMPv6Options) []byte {
	dst := packet.SolicitedNode(a16(target))
	ns := &layers.ICMPv6NeighborSolicitation{TargetAddress: ip(target), Options: opts}
	return ndFrame(t, host1, packet.MulticastMAC(dst), src, netip.AddrFrom16(dst).String(), 255, ns, packet.ICMPv6NeighborSolicit)
}

// TestTableRefusesBadMAC: the cache itself takes no multicast, broadcast or
// zero MAC from a solicitation or an advertisement, whoever the caller: no
// new entry, no change to an old one.
func TestTableRefusesBadMAC(t *testing.T) {
	now := int64(1e9)
	for _, bad := range badMACs {
		tb := NewTable(DefaultParams)
		known, pending, fresh := a16("2001:db8::2"), a16("2001:db8::3"), a16("2001:db8::4")
		tb.Learn(1, known, macA, always, false, now)
		tb.Resolve(1, pending, now)
		if tb.Learn(1, fresh, bad.mac, always, false, now) {
			t.Errorf("%s: Learn made an entry", bad.name)
		}
		tb.Learn(1, known, bad.mac, always, false, now)
		tb.Learn(1, pending, bad.mac, always, false, now)
		tb.Advert(1, known, bad.mac, true, true, true, false, false, now)
		tb.Advert(1, pending, bad.mac, true, true, true, false, false, now)
		if m, st := state(t, tb, 1, known, now); m != macA || st != Stale {
			t.Errorf("%s: the known entry became %v %v", bad.name, m, st)
		}
		if _, st := state(t, tb, 1, pending, now); st != Incomplete {
			t.Errorf("%s: the pending entry became %v", bad.name, st)
		}
		if _, st := state(t, tb, 1, fresh, now); st != Free {
			t.Errorf("%s: a new entry %v", bad.name, st)
		}
	}
}

// TestNeighborRedirect: a router ignores Redirects (RFC 4861 §8.1), learning
// nothing from one, and drops one that is not well formed.
func TestNeighborRedirect(t *testing.T) {
	h := newHarness(t)
	n := h.build("neighbor", "")
	rd := &layers.ICMPv6Redirect{TargetAddress: ip("2001:db8:1::9"), DestinationAddress: ip("2001:db8:99::1"),
		Options: lladdrOpt(layers.ICMPv6OptTargetAddress, host2)}
	good := ndFrame(t, host1, mac0, "fe80::2", "2001:db8:1::1", 255, rd, packet.ICMPv6Redirect)
	// Code 1, the checksum made again.
	bad := ndFrame(t, host1, mac0, "fe80::2", "2001:db8:1::1", 255, rd, packet.ICMPv6Redirect)
	bad[14+40+1] = 1
	icmp := packet.ICMPv6(bad[14+40:])
	icmp.SetChecksum(icmp.CalculateChecksum(a16("fe80::2"), a16("2001:db8:1::1")))
	if !icmp.IsChecksumValid(a16("fe80::2"), a16("2001:db8:1::1")) {
		t.Fatal("checksum")
	}
	o := h.run(port0, [][]byte{good, bad}, n)
	if o.Consumed != 1 || o.Dropped["neighbor_invalid"] != 1 {
		t.Errorf("outcome %+v, want one consumed and one neighbor_invalid", o)
	}
	o.Free()
	if m, st, ok := h.routed().Neighbors().Lookup(port0, a16("2001:db8:1::9"), h.Clock.Now()); ok {
		t.Errorf("learnt from a Redirect: %v %v", m, st)
	}
}
