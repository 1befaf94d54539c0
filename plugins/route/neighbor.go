package route

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"time"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/appliance/stats"
	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/plugins"
)

var (
	reasonNDInvalid   = packet.RegisterReason("neighbor_invalid")      // failed RFC 4861 §7.1 / RFC 826 validation
	reasonNDNotOurs   = packet.RegisterReason("neighbor_not_ours")     // solicits or requests another node's address
	reasonNDRateLimit = packet.RegisterReason("neighbor_rate_limited") // a reply over reply_rate
	reasonNDBadLLAddr = packet.RegisterReason("neighbor_bad_lladdr")   // a link-layer address no neighbour has: multicast, broadcast, zero
)

// neighborConfig is the neighbor stage's table.
type neighborConfig struct {
	MaxEntries    int               `toml:"max_entries"`
	ReachableTime config.Duration   `toml:"reachable_time"`
	RetransTime   config.Duration   `toml:"retrans_time"`
	StaleTime     config.Duration   `toml:"stale_time"`
	LearnRate     config.PacketRate `toml:"learn_rate"`
	ReplyRate     config.PacketRate `toml:"reply_rate"`
}

// neighbor answers Neighbor Solicitations (RFC 4861) and ARP requests (RFC 826)
// for the ports' own addresses, learns neighbours from solicitations,
// advertisements and ARP, and sends the solicitations that resolve and confirm
// next hops. Packets that are not NDP or ARP go on unchanged.
type neighbor struct {
	rt     *Routed
	table  *Table
	ports  []*Port
	reply  *Limiter // per lcore
	report bool

	solicits [64]Solicit

	nsIn, naOut, naIn, arpReqIn, arpReplyOut, arpIn, rsIn, raIn   *stats.Counter
	learned, dupAddr, solicitsOut, solicitFail                    *stats.Counter
	entriesCreated, entriesRemoved, entriesEvicted, entriesFailed *stats.Counter
}

func init() {
	plugins.Register(plugins.Kind{Name: "neighbor", Summary: "answer NDP and ARP for the ports' addresses; learn and resolve neighbours (routed mode)", New: newNeighbor})
}

func newNeighbor(s *plugins.Setup) (plugins.Stage, error) {
	c := neighborConfig{MaxEntries: DefaultParams.Capacity, ReachableTime: config.Duration(DefaultParams.ReachableTime),
		RetransTime: config.Duration(DefaultParams.RetransTime), StaleTime: config.Duration(DefaultParams.StaleTime),
		LearnRate: 1000, ReplyRate: 100_000}
	if err := s.Config.Decode(&c); err != nil {
		return nil, err
	}
	switch {
	case c.MaxEntries < ways || c.MaxEntries > 1<<24:
		return nil, fmt.Errorf("max_entries %d: want %d to %d", c.MaxEntries, ways, 1<<24)
	case c.ReachableTime < config.Duration(time.Second) || c.RetransTime < config.Duration(10*time.Millisecond):
		return nil, fmt.Errorf("reachable_time must be at least 1s and retrans_time at least 10ms")
	case c.StaleTime < c.ReachableTime:
		return nil, fmt.Errorf("stale_time %v is shorter than reachable_time %v", c.StaleTime, c.ReachableTime)
	}
	rt, err := Shared(s)
	if err != nil {
		return nil, err
	}
	p := DefaultParams
	p.Capacity, p.ReachableTime, p.RetransTime, p.StaleTime = c.MaxEntries, int64(c.ReachableTime), int64(c.RetransTime), int64(c.StaleTime)
	if err := rt.configure(p, s.Config.Where()); err != nil {
		return nil, err
	}
	rt.Learn.Set(uint64(c.LearnRate), max(int(c.LearnRate/10), 1))
	n := &neighbor{rt: rt, ports: rt.Ports, reply: NewLimiter(uint64(c.ReplyRate), max(int(c.ReplyRate/100), packet.MaxBurst)),
		report: rt.reporter("neighbor")}
	cs := s.Counters
	n.nsIn = cs.New("ns_received", "Neighbor Solicitations for a port's address")
	n.naOut = cs.New("na_sent", "Neighbor Advertisements sent in answer")
	n.naIn = cs.New("na_received", "Neighbor Advertisements received")
	n.arpReqIn = cs.New("arp_requests_received", "ARP requests for a port's address")
	n.arpReplyOut = cs.New("arp_replies_sent", "ARP replies sent")
	n.arpIn = cs.New("arp_replies_received", "ARP replies received")
	n.rsIn = cs.New("rs_received", "Router Solicitations received")
	n.raIn = cs.New("ra_received", "Router Advertisements received")
	n.learned = cs.New("learned", "neighbour entries made from solicitations and requests")
	n.dupAddr = cs.New("duplicate_address", "advertisements or ARP from another node for one of our addresses")
	n.solicitsOut = cs.New("solicits_sent", "solicitations and ARP requests sent to resolve or confirm a neighbour")
	n.solicitFail = cs.New("solicits_failed", "solicitations not sent: no buffer or no source address")
	if n.report {
		n.entriesCreated = cs.New("entries_created", "neighbour entries made (the cache holds created − removed)")
		n.entriesRemoved = cs.New("entries_removed", "neighbour entries removed, evicted and failed included")
		n.entriesEvicted = cs.New("entries_evicted", "neighbour entries evicted to make room")
		n.entriesFailed = cs.New("resolutions_failed", "neighbours that did not answer their solicitations")
	}
	return n, nil
}

// Start checks what only open ports know, and takes the cache.
func (n *neighbor) Start(ctx *plugins.Context) error {
	for _, p := range n.ports {
		if p != nil && len(p.Addrs) > 0 && p.MAC == (packet.MAC{}) {
			return fmt.Errorf("neighbor: port %q has addresses but no MAC to answer with: set its mac", p.Name)
		}
	}
	n.table = n.rt.Neighbors()
	return nil
}

// routed lets the control service find the engine's tables.
func (n *neighbor) routed() *Routed { return n.rt }

func (n *neighbor) Process(ctx *plugins.Context, b *packet.Burst) {
	for i := 0; i < b.N; i++ {
		p := b.H[i].P()
		d := p.Data()
		if len(d) < ethLen || int(p.InPort) >= len(n.ports) || n.ports[p.InPort] == nil {
			continue
		}
		switch binary.BigEndian.Uint16(d[12:]) {
		case packet.EtherTypeARP:
			if !addressedTo(n.ports[p.InPort].MAC, d) {
				p.Drop(reasonNotForUs) // another host's reply teaches us nothing
				continue
			}
			n.arp(ctx, p, d)
		case packet.EtherTypeIPv6:
			// NDP comes straight after the IPv6 header: a hop limit of 255 and
			// no extension headers is what a valid one looks like.
			if len(d) >= ethLen+packet.IPv6Len+packet.ICMPv6MinLen && d[ethLen+6] == packet.ProtocolICMPv6 {
				if t := d[ethLen+packet.IPv6Len]; t >= packet.ICMPv6RouterSolicit && t <= packet.ICMPv6Redirect {
					if !addressedTo(n.ports[p.InPort].MAC, d) {
						p.Drop(reasonNotForUs)
						continue
					}
					n.ndp(ctx, p, d)
				}
			}
		}
	}
}

// consume frees a packet the stage is done with.
func consume(ctx *plugins.Context, p *packet.Packet) {
	ctx.Env.Free(p.Handle())
	p.Consume()
}

// ndp handles one ND message (RFC 4861 §6.1.1, §7.1).
func (n *neighbor) ndp(ctx *plugins.Context, p *packet.Packet, d []byte) {
	ip := packet.IPv6(d[ethLen:])
	if ip.Validate() != nil || ip.HopLimit() != 255 {
		p.Drop(reasonNDInvalid)
		return
	}
	m := ip.Payload()
	src, dst := ip.Src(), ip.Dst()
	if !packet.ICMPv6(m).IsChecksumValid(src, dst) {
		p.Drop(reasonNDInvalid)
		return
	}
	in := n.ports[p.InPort]
	unspecified := src == [16]byte{}
	switch m[0] {
	case packet.ICMPv6NeighborSolicit:
		ns := packet.NDPNeighborSolicit(m)
		if ns.Validate() != nil || ns.Target()[0] == 0xff {
			p.Drop(reasonNDInvalid)
			return
		}
		sll, hasSLL := ns.Options().LinkAddr(packet.NDPOptSourceLinkAddr)
		if unspecified && (dst != packet.SolicitedNode(ns.Target()) || hasSLL) {
			p.Drop(reasonNDInvalid)
			return
		}
		if hasSLL && !neighborMAC(sll) {
			p.Drop(reasonNDBadLLAddr) // nor answered: the answer would go to that MAC
			return
		}
		target := ns.Target()
		if !in.Owns6(target) {
			p.Drop(reasonNDNotOurs)
			return
		}
		n.nsIn.Inc()
		if !unspecified && hasSLL {
			if n.table.Learn(in.ID, src, sll, n.rt.Learn, true, ctx.Now) {
				n.learned.Inc()
			}
		}
		if !n.reply.Allow(ctx.Now) {
			p.Drop(reasonNDRateLimit)
			return
		}
		n.advertise(p, in, target, src, unspecified)
	case packet.ICMPv6NeighborAdvert:
		na := packet.NDPNeighborAdvert(m)
		if na.Validate() != nil || na.Target()[0] == 0xff || dst[0] == 0xff && na.Solicited() {
			p.Drop(reasonNDInvalid)
			return
		}
		tll, hasTLL := na.Options().LinkAddr(packet.NDPOptTargetLinkAddr)
		if hasTLL && !neighborMAC(tll) {
			p.Drop(reasonNDBadLLAddr)
			return
		}
		n.naIn.Inc()
		target := na.Target()
		if in.Owns6(target) {
			n.dupAddr.Inc()
			ctx.Log.Warn("another node advertises one of our addresses", "port", in.Name,
				"address", netip.AddrFrom16(target).String(), "mac", packet.Ethernet(d).Src().String())
		} else {
			n.table.Advert(in.ID, target, tll, hasTLL, na.Solicited(), na.Override(), na.Router(), true, ctx.Now)
		}
		consume(ctx, p)
	case packet.ICMPv6RouterSolicit, packet.ICMPv6RouterAdvert:
		// Hosts' and other routers' link-layer addresses, learnt as a
		// solicitation's (§6.2.6, §6.3.4). linerate sends no advertisements.
		var opts packet.NDPOptions
		if m[0] == packet.ICMPv6RouterSolicit {
			rs := packet.NDPRouterSolicit(m)
			if rs.Validate() != nil {
				p.Drop(reasonNDInvalid)
				return
			}
			n.rsIn.Inc()
			opts = rs.Options()
		} else {
			ra := packet.NDPRouterAdvert(m)
			if ra.Validate() != nil || !ip.SrcAddr().IsLinkLocalUnicast() {
				p.Drop(reasonNDInvalid)
				return
			}
			n.raIn.Inc()
			opts = ra.Options()
		}
		sll, ok := opts.LinkAddr(packet.NDPOptSourceLinkAddr)
		if ok && !neighborMAC(sll) {
			p.Drop(reasonNDBadLLAddr)
			return
		}
		if ok && !unspecified {
			if n.table.Learn(in.ID, src, sll, n.rt.Learn, true, ctx.Now) {
				n.learned.Inc()
			}
		}
		consume(ctx, p)
	default:
		// Redirects are for hosts; a router ignores them (RFC 4861 §8.1),
		// but counts those no host should believe either.
		if len(m) < redirectLen || m[1] != 0 || packet.NDPOptions(m[redirectLen:]).Validate() != nil {
			p.Drop(reasonNDInvalid)
			return
		}
		if tll, ok := packet.NDPOptions(m[redirectLen:]).LinkAddr(packet.NDPOptTargetLinkAddr); ok && !neighborMAC(tll) {
			p.Drop(reasonNDBadLLAddr)
			return
		}
		consume(ctx, p)
	}
}

// redirectLen is a Redirect's fixed part (RFC 4861 §4.5): type, code,
// checksum, reserved, target and destination addresses.
const redirectLen = 40

// advertise turns the Neighbor Solicitation in p into the Advertisement that
// answers it, in place, and sends it back out of its port (RFC 4861 §7.2.4):
// to the soliciting address, or to all nodes for a duplicate address check.
func (n *neighbor) advertise(p *packet.Packet, in *Port, target, src [16]byte, dad bool) {
	const naLen = packet.NDPNeighborAdvertLen + packet.NDPLinkAddrOptLen
	want := ethLen + packet.IPv6Len + naLen
	if l := p.Len(); l > want {
		_ = p.Trim(l - want)
	} else if _, err := p.Append(want - l); err != nil {
		p.Drop(packet.ReasonNoBuffer)
		return
	}
	d := p.Data()
	e := packet.Ethernet(d)
	dstMAC, dst := e.Src(), src
	flags := uint32(packet.NDPFlagRouter|packet.NDPFlagSolicited|packet.NDPFlagOverride) << 24
	if dad {
		dst, dstMAC = packet.AllNodes, packet.MulticastMAC(packet.AllNodes)
		flags &^= packet.NDPFlagSolicited << 24
	}
	e.SetDst(dstMAC)
	e.SetSrc(in.MAC)
	packet.IPv6(d[ethLen:]).Encode(&packet.IPv6Fields{PayloadLength: naLen, NextHeader: packet.ProtocolICMPv6, HopLimit: 255,
		Src: target, Dst: dst})
	m := d[ethLen+packet.IPv6Len:]
	f := packet.NDPFields{Type: packet.ICMPv6NeighborAdvert, Rest: flags, Target: target}
	_, _ = f.Encode(m) // the room was made above
	packet.PutNDPLinkAddr(m[packet.NDPNeighborAdvertLen:], packet.NDPOptTargetLinkAddr, in.MAC)
	icmp := packet.ICMPv6(m)
	icmp.SetChecksum(icmp.CalculateChecksum(target, dst))
	n.naOut.Inc()
	p.Forward(p.InPort)
}

// arp handles one ARP packet (RFC 826 "Packet Reception", RFC 5227).
func (n *neighbor) arp(ctx *plugins.Context, p *packet.Packet, d []byte) {
	a := packet.ARP(d[ethLen:])
	if a.Validate() != nil {
		p.Drop(reasonNDInvalid)
		return
	}
	in := n.ports[p.InPort]
	sha, spa, tpa := a.SenderMAC(), a.SenderIP(), a.TargetIP()
	if !neighborMAC(sha) {
		p.Drop(reasonNDBadLLAddr)
		return
	}
	ours := in.Owns4(tpa)
	if in.Owns4(spa) {
		n.dupAddr.Inc()
		ctx.Log.Warn("another node claims one of our addresses", "port", in.Name, "address", netip.AddrFrom4(spa).String(), "mac", sha.String())
		consume(ctx, p)
		return
	}
	// A probe (sender 0.0.0.0) teaches nothing; others update the cache, and
	// make an entry when we are the target.
	if spa != ([4]byte{}) {
		key := mapped4(spa)
		if a.Op() == packet.ARPReply {
			n.table.Advert(in.ID, key, sha, true, ours, true, false, true, ctx.Now)
		} else {
			var create *Limiter
			if ours {
				create = n.rt.Learn
			}
			if n.table.Learn(in.ID, key, sha, create, true, ctx.Now) {
				n.learned.Inc()
			}
		}
	}
	switch {
	case a.Op() == packet.ARPReply:
		n.arpIn.Inc()
		consume(ctx, p)
	case a.Op() != packet.ARPRequest:
		p.Drop(reasonNDInvalid)
	case !ours:
		p.Drop(reasonNDNotOurs)
	case !n.reply.Allow(ctx.Now):
		n.arpReqIn.Inc()
		p.Drop(reasonNDRateLimit)
	default:
		n.arpReqIn.Inc()
		e := packet.Ethernet(d)
		e.SetDst(sha)
		e.SetSrc(in.MAC)
		a.SetOp(packet.ARPReply)
		a.SetTarget(sha, spa)
		a.SetSender(in.MAC, tpa)
		n.arpReplyOut.Inc()
		p.Forward(p.InPort)
	}
}

// Tick sends the solicitations the cache's scan finds due, and publishes the
// cache's counters.
func (n *neighbor) Tick(ctx *plugins.Context) {
	for _, s := range n.table.Scan(ctx.Now, n.solicits[:0]) {
		port := n.rt.Port(s.Port)
		if port == nil {
			continue
		}
		h, ok := solicit(port, s)
		if !ok {
			n.solicitFail.Inc()
			continue
		}
		if ctx.Emit(h, s.Port) {
			n.solicitsOut.Inc()
		}
	}
	if n.report {
		st := n.table.Stats()
		mirror(n.entriesCreated, st.Created)
		mirror(n.entriesRemoved, st.Removed)
		mirror(n.entriesEvicted, st.Evicted)
		mirror(n.entriesFailed, st.Failed)
	}
}

// mirror brings a counter up to v, a count kept elsewhere that only grows.
func mirror(c *stats.Counter, v uint64) {
	if l := c.Local(); v > l {
		c.Add(v - l)
	}
}
