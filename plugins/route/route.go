package route

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/appliance/stats"
	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/plugins"
)

var (
	reasonNoRoute     = packet.RegisterReason("route_no_route")     // no route to the destination
	reasonHopLimit    = packet.RegisterReason("route_hop_limit")    // hop limit or TTL expired
	reasonUnresolved  = packet.RegisterReason("route_unresolved")   // next hop unresolved, hold queue full
	reasonTooBig      = packet.RegisterReason("route_too_big")      // larger than the output port's MTU, and not to be fragmented
	reasonNotForUs    = packet.RegisterReason("route_not_for_us")   // a unicast frame to another MAC
	reasonScope       = packet.RegisterReason("route_scope")        // a link-local address, not forwarded
	reasonBadChecksum = packet.RegisterReason("route_bad_checksum") // IPv4 header checksum
	reasonSourceRoute = packet.RegisterReason("route_source_route") // IPv4 LSRR or SSRR, and accept_source_route = false
)

type routeConfig struct {
	Hold     int             `toml:"hold"`
	HoldTime config.Duration `toml:"hold_time"`
	// AcceptSourceRoute routes IPv4 packets with a source route option by
	// their destination; by default they are dropped, as Linux does.
	AcceptSourceRoute bool `toml:"accept_source_route"`
}

// heldPacket waits for its next hop's link-layer address.
type heldPacket struct {
	h        packet.Handle
	port     uint16
	next     [16]byte
	deadline int64
}

// forwarder is the route stage: routed forwarding of IPv6 and IPv4 (RFC 8200,
// RFC 1812). It looks the destination up in the route table, decrements the
// hop limit or TTL (patching the IPv4 checksum incrementally), rewrites the
// MACs from the neighbour cache and forwards. Packets for linerate's own
// addresses, multicast and non-IP traffic go on to the next stages; errors
// answer with rate-limited ICMP.
type forwarder struct {
	rt       *Routed
	table    *Table
	ports    []*Port
	pool     packet.Pool
	held     []heldPacket
	holdN    int
	holdTime int64
	lastGen  uint64
	check    int64
	report   bool
	srr      bool // accept_source_route

	// The burst's route lookups, made together before its packets are
	// routed one by one (lookupBurst), by packet index; cur is the packet
	// being routed.
	pre    [packet.MaxBurst]*NextHop
	preDst [packet.MaxBurst][16]byte // what was looked up, IPv4 mapped
	preOK  [packet.MaxBurst]bool
	cur    int
	// The burst's next hops, looked up in the neighbour cache together
	// (LookupBurst) once its routes are known: for packet i when nbOK[i],
	// nbKey[nbPos[i]] and nbRes[nbPos[i]]. nbFresh goes false when the stage
	// itself changes the cache (Resolve, Use) during the burst: the packets
	// after then look their next hops up again, as one at a time they would.
	nbKey   [packet.MaxBurst]Key
	nbRes   [packet.MaxBurst]Found
	nbPos   [packet.MaxBurst]uint8
	nbOK    [packet.MaxBurst]bool
	nbFresh bool

	forwarded, local, held6, released, expired *stats.Counter
	resolutions                                *stats.Counter
	fragmented, fragments, fragFailed          *stats.Counter
	routesAdded, routesRemoved                 *stats.Counter
	errs                                       *ErrorSender
}

func init() {
	plugins.Register(plugins.Kind{Name: "route", Summary: "routed forwarding: longest-prefix match, hop limit, MAC rewrite from the neighbour cache, ICMP errors", New: newForwarder})
}

func newForwarder(s *plugins.Setup) (plugins.Stage, error) {
	c := routeConfig{Hold: 256, HoldTime: config.Duration(3 * time.Second)}
	if err := s.Config.Decode(&c); err != nil {
		return nil, err
	}
	if c.Hold < 0 || c.Hold > 65536 {
		return nil, fmt.Errorf("hold %d: want 0 to 65536 packets", c.Hold)
	}
	rt, err := Shared(s)
	if err != nil {
		return nil, err
	}
	f := &forwarder{rt: rt, ports: rt.Ports, held: make([]heldPacket, c.Hold), holdTime: int64(c.HoldTime),
		report: rt.reporter("route"), srr: c.AcceptSourceRoute}
	if c.Hold > 0 {
		room := 2048
		for _, p := range rt.Ports {
			if p != nil && p.Pool != nil {
				room = max(room, p.Pool.DataRoom())
			}
		}
		if f.pool, err = s.Pool("route.hold."+s.Name, c.Hold*s.NumInstances, room); err != nil {
			return nil, fmt.Errorf("hold pool: %w", err)
		}
	}
	cs := s.Counters
	f.forwarded = cs.New("forwarded", "packets routed")
	f.local = cs.New("local", "packets for linerate's own addresses, passed on")
	f.held6 = cs.New("held", "packets held while their next hop resolved")
	f.released = cs.New("released", "held packets sent once their next hop resolved")
	f.expired = cs.New("hold_expired", "held packets freed: their next hop did not resolve in hold_time")
	f.resolutions = cs.New("resolutions", "next hops this stage started resolving")
	f.errs = newErrorSender(rt, cs)
	f.fragmented = cs.New("fragmented", "IPv4 packets without Don't Fragment split to fit the output port's MTU")
	f.fragments = cs.New("fragments", "the fragments those made")
	f.fragFailed = cs.New("fragments_failed", "packets dropped half fragmented: no buffer in the output port's pool")
	if f.report {
		f.routesAdded = cs.New("routes_added", "static routes added at run time or replaced")
		f.routesRemoved = cs.New("routes_removed", "static routes deleted at run time or replaced")
	}
	return f, nil
}

func (f *forwarder) Start(ctx *plugins.Context) error {
	f.table = f.rt.Neighbors()
	return nil
}

func (f *forwarder) routed() *Routed { return f.rt }

// Held is the number of packets waiting for resolution.
func (f *forwarder) Held() int { return f.holdN }

func (f *forwarder) Stop(ctx *plugins.Context) {
	for _, e := range f.held[:f.holdN] {
		ctx.Env.Free(e.h)
	}
	f.holdN = 0
}

func (f *forwarder) Process(ctx *plugins.Context, b *packet.Burst) {
	fib := f.rt.fib.Load()
	f.lookupBurst(fib, b)
	f.neighborBurst(ctx, b)
	for i := 0; i < b.N; i++ {
		f.cur = i
		f.route(ctx, fib, b.H[i].P())
	}
}

// lookupBurst looks up the destinations of the burst's IP packets together
// (FIB.Lookup4Burst, Lookup6Burst): their table reads overlap, which makes a
// lookup in a large table with scattered traffic about 3 times cheaper than
// one at a time. Packets route drops before its lookup cost a wasted one.
func (f *forwarder) lookupBurst(fib *FIB, b *packet.Burst) {
	var d4 [packet.MaxBurst]uint32
	var d6 [packet.MaxBurst][16]byte
	var i4, i6 [packet.MaxBurst]uint8
	var nh [packet.MaxBurst]*NextHop
	n4, n6 := 0, 0
	for i := 0; i < b.N; i++ {
		f.preOK[i] = false
		p := b.H[i].P()
		l, _ := p.ParseLayers()
		if l.VLANs != 0 {
			continue
		}
		switch d := p.Data(); l.IPVersion {
		case 6:
			d6[n6], i6[n6] = packet.IPv6(d[l.L3:l.End]).Dst(), uint8(i)
			n6++
		case 4:
			a := packet.IPv4(d[l.L3:l.End]).Dst()
			d4[n4], i4[n4] = binary.BigEndian.Uint32(a[:]), uint8(i)
			n4++
		}
	}
	fib.Lookup4Burst(d4[:n4], nh[:n4])
	for k, i := range i4[:n4] {
		var a [4]byte
		binary.BigEndian.PutUint32(a[:], d4[k])
		f.pre[i], f.preDst[i], f.preOK[i] = nh[k], mapped4(a), true
	}
	fib.Lookup6Burst(d6[:n6], nh[:n6])
	for k, i := range i6[:n6] {
		f.pre[i], f.preDst[i], f.preOK[i] = nh[k], d6[k], true
	}
}

// neighborBurst looks up the next hops of the burst's routed packets in the
// neighbour cache together (Table.LookupBurst): in a cache larger than the
// CPU's caches, each lookup is a chain of misses, and a burst's chains
// overlap. Consecutive packets to the same next hop share a lookup. A packet
// that route drops before its next hop cost a wasted one.
func (f *forwarder) neighborBurst(ctx *plugins.Context, b *packet.Burst) {
	f.nbFresh = f.table != nil
	if !f.nbFresh {
		return
	}
	n := 0
	for i := 0; i < b.N; i++ {
		f.nbOK[i] = false
		nh := f.pre[i]
		if !f.preOK[i] || nh == nil || nh.Kind == Local {
			continue
		}
		out := f.port(nh.Port)
		if out == nil {
			continue
		}
		next := f.preDst[i]
		if nh.Kind == Gateway {
			next = nh.Via
		}
		k := Key{Port: out.ID, Addr: next}
		f.nbOK[i] = true
		// A run of packets to one next hop (a gateway's) looks it up once.
		if n > 0 && f.nbKey[n-1] == k {
			f.nbPos[i] = uint8(n - 1)
			continue
		}
		f.nbKey[n], f.nbPos[i] = k, uint8(n)
		n++
	}
	f.table.LookupBurst(f.nbKey[:n], f.nbRes[:n], ctx.Now)
}

// neighbor is Table.Lookup of next on port: the burst's lookup of the packet
// being routed when it made the same one and the stage has not changed the
// cache since, or a new one.
func (f *forwarder) neighbor(port uint16, next [16]byte, now int64) (packet.MAC, State, bool) {
	if i := f.cur; f.nbFresh && f.nbOK[i] && f.nbKey[f.nbPos[i]] == (Key{Port: port, Addr: next}) {
		r := &f.nbRes[f.nbPos[i]]
		return r.MAC, r.State, r.OK
	}
	return f.table.Lookup(port, next, now)
}

// lookup6 is the burst's lookup of the packet being routed, or a new one.
func (f *forwarder) lookup6(fib *FIB, dst [16]byte) (*NextHop, bool) {
	if i := f.cur; f.preOK[i] && f.preDst[i] == dst {
		return f.pre[i], f.pre[i] != nil
	}
	return fib.Lookup6(dst)
}

func (f *forwarder) lookup4(fib *FIB, dst [4]byte) (*NextHop, bool) {
	if i := f.cur; f.preOK[i] && f.preDst[i] == mapped4(dst) {
		return f.pre[i], f.pre[i] != nil
	}
	return fib.Lookup4(dst)
}

func (f *forwarder) port(id uint16) *Port {
	if int(id) < len(f.ports) {
		return f.ports[id]
	}
	return nil
}

func (f *forwarder) route(ctx *plugins.Context, fib *FIB, p *packet.Packet) {
	d := p.Data()
	in := f.port(p.InPort)
	// Another host's frame, whatever it carries (VLAN-tagged, non-IP): not
	// routed, nor passed on for punt to readdress to the host.
	if in != nil && !addressedTo(in.MAC, d) {
		p.Drop(reasonNotForUs)
		return
	}
	l, err := p.ParseLayers()
	if l.VLANs != 0 || l.IPVersion == 0 && (err == nil || l.EtherType != packet.EtherTypeIPv6 && l.EtherType != packet.EtherTypeIPv4) {
		return // not routed: for the stages after
	}
	if l.IPVersion == 0 {
		p.Drop(packet.ReasonMalformed) // a broken IP header
		return
	}
	// A fault past the IP header (a first fragment's UDP length, an odd
	// extension header) is the destination's business, not a router's.
	if packet.Ethernet(d).Dst()[0]&1 != 0 {
		return // multicast and broadcast: for the stages after
	}
	if l.IPVersion == 6 {
		f.route6(ctx, fib, p, in, d, l)
	} else {
		f.route4(ctx, fib, p, in, d, l)
	}
}

func (f *forwarder) route6(ctx *plugins.Context, fib *FIB, p *packet.Packet, in *Port, d []byte, l *packet.Layers) {
	ip := packet.IPv6(d[l.L3:l.End])
	dst := ip.Dst()
	if dst[0] == 0xff {
		return
	}
	nh, ok := f.lookup6(fib, dst)
	if !ok {
		f.icmpError(ctx, in, d, l, packet.ICMPv6DstUnreachable, packet.ICMPv6NoRoute, 0)
		p.Drop(reasonNoRoute)
		return
	}
	if nh.Kind == Local {
		f.local.Inc()
		return
	}
	src := ip.Src()
	if dst[0] == 0xfe && dst[1]&0xc0 == 0x80 || src[0] == 0xfe && src[1]&0xc0 == 0x80 {
		if src[0] == 0xfe {
			f.icmpError(ctx, in, d, l, packet.ICMPv6DstUnreachable, packet.ICMPv6BeyondScope, 0)
		}
		p.Drop(reasonScope)
		return
	}
	if ip.HopLimit() <= 1 {
		f.icmpError(ctx, in, d, l, packet.ICMPv6TimeExceeded, packet.ICMPv6HopLimitExceeded, 0)
		p.Drop(reasonHopLimit)
		return
	}
	out := f.port(nh.Port)
	if out == nil {
		p.Drop(packet.ReasonNoPort)
		return
	}
	if out.MTU > 0 && int(l.End-uint32(l.L3)) > out.MTU {
		f.icmpError(ctx, in, d, l, packet.ICMPv6PacketTooBig, 0, uint32(out.MTU))
		p.Drop(reasonTooBig)
		return
	}
	next := dst
	if nh.Kind == Gateway {
		next = nh.Via
	}
	mac, ok := f.resolve(ctx, out, next)
	if !ok {
		f.hold(ctx, p, in, out.ID, next)
		return
	}
	ip.SetHopLimit(ip.HopLimit() - 1)
	e := packet.Ethernet(d)
	e.SetDst(mac)
	e.SetSrc(out.MAC)
	f.forwarded.Inc()
	p.Forward(out.ID)
}

func (f *forwarder) route4(ctx *plugins.Context, fib *FIB, p *packet.Packet, in *Port, d []byte, l *packet.Layers) {
	ip := packet.IPv4(d[l.L3:l.End])
	if !ip.IsChecksumValid() {
		p.Drop(reasonBadChecksum)
		return
	}
	// A source route steers a packet around filters and past the path its
	// destination would take (RFC 7126 §4.3): dropped wherever it goes, as
	// Linux does by default, and so is a packet whose options hide what
	// they hold.
	if l.Flags&packet.FlagIPv4Options != 0 {
		switch srr, ok := sourceRoute4(ip.Options()); {
		case !ok:
			p.Drop(packet.ReasonMalformed)
			return
		case srr && !f.srr:
			p.Drop(reasonSourceRoute)
			return
		}
	}
	dst := ip.Dst()
	if dst[0] >= 224 {
		return // multicast and broadcast
	}
	nh, ok := f.lookup4(fib, dst)
	if !ok {
		f.icmpError(ctx, in, d, l, packet.ICMPv4DstUnreachable, packet.ICMPv4NetUnreachable, 0)
		p.Drop(reasonNoRoute)
		return
	}
	if nh.Kind == Local {
		f.local.Inc()
		return
	}
	if ip.TTL() <= 1 {
		f.icmpError(ctx, in, d, l, packet.ICMPv4TimeExceeded, packet.ICMPv4TTLExceeded, 0)
		p.Drop(reasonHopLimit)
		return
	}
	out := f.port(nh.Port)
	if out == nil {
		p.Drop(packet.ReasonNoPort)
		return
	}
	if out.MTU > 0 && int(ip.TotalLength()) > out.MTU && (ip.Flags()&packet.IPv4FlagDontFragment != 0 || out.MTU < minMTU4) {
		// Don't Fragment: the sender hears the MTU (RFC 1191). Without it
		// the packet is fragmented on its way out.
		if out.MTU >= minMTU4 {
			f.icmpError(ctx, in, d, l, packet.ICMPv4DstUnreachable, packet.ICMPv4FragNeeded, uint32(out.MTU))
		}
		p.Drop(reasonTooBig)
		return
	}
	next := mapped4(dst)
	if nh.Kind == Gateway {
		next = nh.Via
	}
	mac, ok := f.resolve(ctx, out, next)
	if !ok {
		f.hold(ctx, p, in, out.ID, next)
		return
	}
	ip.DecTTL()
	e := packet.Ethernet(d)
	e.SetDst(mac)
	e.SetSrc(out.MAC)
	if !f.fits4(ctx, p, out, int(l.L3)) {
		p.Drop(packet.ReasonNoBuffer)
		return
	}
	f.forwarded.Inc()
	p.Forward(out.ID)
}

// fits4 fragments a routed IPv4 packet larger than out's MTU; the packet
// itself becomes the first fragment. False means out's pool had no buffer for
// a fragment: the caller drops p.
func (f *forwarder) fits4(ctx *plugins.Context, p *packet.Packet, out *Port, l3 int) bool {
	if out.MTU == 0 || int(packet.IPv4(p.Data()[l3:]).TotalLength()) <= out.MTU {
		return true
	}
	n, ok := f.fragment(ctx, p, out, l3)
	f.fragments.Add(uint64(n - 1))
	if !ok {
		f.fragFailed.Inc()
		return false
	}
	f.fragments.Inc()
	f.fragmented.Inc()
	return true
}

// resolve gives the link-layer address of next on out, starting resolution
// when the cache has no entry, and a probe when it has a stale one.
func (f *forwarder) resolve(ctx *plugins.Context, out *Port, next [16]byte) (packet.MAC, bool) {
	mac, st, ok := f.neighbor(out.ID, next, ctx.Now)
	if ok && st.HasMAC() {
		if st == Stale {
			f.table.Use(out.ID, next, ctx.Now)
			f.nbFresh = false
		}
		return mac, true
	}
	if !ok && f.table.Resolve(out.ID, next, ctx.Now) {
		f.nbFresh = false // it may have evicted a neighbour of the burst's
		f.resolutions.Inc()
		if h, ok := solicit(out, Solicit{Port: out.ID, Addr: next}); ok {
			ctx.Emit(h, out.ID)
		}
	}
	return packet.MAC{}, false
}

// hold keeps p until its next hop resolves: the packet itself when it came
// from an internal port or was made here, otherwise a copy, so that no port's
// rx buffers wait on a neighbour.
func (f *forwarder) hold(ctx *plugins.Context, p *packet.Packet, in *Port, port uint16, next [16]byte) {
	if f.holdN == len(f.held) {
		p.Drop(reasonUnresolved)
		return
	}
	h := p.Handle()
	if in != nil && !in.Internal {
		q, ok := f.pool.AllocOne()
		if !ok {
			p.Drop(packet.ReasonNoBuffer)
			return
		}
		if err := q.P().CopyFrom(p, f.pool.Headroom()); err != nil {
			f.pool.FreeOne(q)
			p.Drop(packet.ReasonTooBig)
			return
		}
		ctx.Env.Free(h)
		h = q
	}
	p.Consume()
	ctx.Hold(h)
	f.held[f.holdN] = heldPacket{h: h, port: port, next: next, deadline: ctx.Now + f.holdTime}
	f.holdN++
	f.held6.Inc()
}

// Tick releases held packets whose next hop resolved, expires the others after
// hold_time, and publishes the route table's counters.
func (f *forwarder) Tick(ctx *plugins.Context) {
	if f.report {
		a, r := f.rt.RouteStats()
		mirror(f.routesAdded, a)
		mirror(f.routesRemoved, r)
	}
	if f.holdN == 0 {
		return
	}
	g := f.table.Gen()
	if g == f.lastGen && ctx.Now < f.check {
		return
	}
	f.lastGen, f.check = g, ctx.Now+int64(10*time.Millisecond)
	j := 0
	for _, e := range f.held[:f.holdN] {
		mac, st, ok := f.table.Lookup(e.port, e.next, ctx.Now)
		switch {
		case ok && st.HasMAC():
			f.release(ctx, e, mac)
			continue
		case ctx.Now >= e.deadline:
			f.expire(ctx, e)
			continue
		case !ok && f.table.Resolve(e.port, e.next, ctx.Now):
			// The entry failed, or never got in: try again.
			f.resolutions.Inc()
			if out := f.port(e.port); out != nil {
				if h, ok := solicit(out, Solicit{Port: e.port, Addr: e.next}); ok {
					ctx.Emit(h, e.port)
				}
			}
		}
		f.held[j] = e
		j++
	}
	clear(f.held[j:f.holdN])
	f.holdN = j
}

// release finishes forwarding a held packet.
func (f *forwarder) release(ctx *plugins.Context, e heldPacket, mac packet.MAC) {
	p := e.h.P()
	l, _ := p.ParseLayers()
	out := f.port(e.port)
	if l.IPVersion == 0 || out == nil {
		ctx.Env.Free(e.h)
		return
	}
	d := p.Data()
	if l.IPVersion == 6 {
		ip := packet.IPv6(d[l.L3:l.End])
		ip.SetHopLimit(ip.HopLimit() - 1)
	} else {
		packet.IPv4(d[l.L3:l.End]).DecTTL()
	}
	eth := packet.Ethernet(d)
	eth.SetDst(mac)
	eth.SetSrc(out.MAC)
	if l.IPVersion == 4 && !f.fits4(ctx, p, out, int(l.L3)) {
		ctx.Env.Free(e.h) // counted in fragments_failed
		return
	}
	if ctx.Emit(e.h, e.port) {
		f.released.Inc()
		f.forwarded.Inc()
	}
}

// expire frees a held packet whose next hop never answered, telling its
// sender the address is unreachable (RFC 4861 §7.2.2, RFC 1812 §5.2.7.1).
func (f *forwarder) expire(ctx *plugins.Context, e heldPacket) {
	p := e.h.P()
	if l, _ := p.ParseLayers(); l.IPVersion != 0 {
		in := f.port(p.InPort)
		if l.IPVersion == 6 {
			f.icmpError(ctx, in, p.Data(), l, packet.ICMPv6DstUnreachable, packet.ICMPv6AddressUnreachable, 0)
		} else {
			f.icmpError(ctx, in, p.Data(), l, packet.ICMPv4DstUnreachable, packet.ICMPv4HostUnreachable, 0)
		}
	}
	f.expired.Inc()
	ctx.Env.Free(e.h)
}

// icmpError sends an ICMP error about the packet in d (see ErrorSender.Send).
func (f *forwarder) icmpError(ctx *plugins.Context, in *Port, d []byte, l *packet.Layers, typ, code uint8, rest uint32) {
	f.errs.Send(ctx, in, d, l, typ, code, rest)
}
