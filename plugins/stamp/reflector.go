package stamp

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"
	"sync/atomic"

	"github.com/linerate/linerate/appliance/offload"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/appliance/stats"
	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/plugins"
)

func init() {
	plugins.Register(plugins.Kind{Name: "stamp.reflector",
		Summary: "STAMP Session-Reflector, stateless or stateful: reflects test packets in place, TLVs and return paths (SRH) included",
		New:     newReflector})
}

type reflectorConfig struct {
	Port           int                      `toml:"port"`
	Forward        string                   `toml:"forward"`
	MAC            string                   `toml:"mac"`
	Addresses      []config.Addr            `toml:"addresses"`
	Allow          []config.Prefix          `toml:"allow"`
	Unknown        string                   `toml:"unknown"`
	RateLimit      config.PacketRate        `toml:"rate_limit"`
	RateBurst      int                      `toml:"rate_burst"`
	HopLimit       int                      `toml:"hop_limit"`
	Timestamp      string                   `toml:"timestamp"`
	Synchronized   *bool                    `toml:"synchronized"`
	ClockError     config.Duration          `toml:"clock_error"`
	KeyDir         string                   `toml:"key_dir"`
	ReturnPathTLV  *bool                    `toml:"return_path_tlv"`
	ClassOfService *bool                    `toml:"class_of_service"`
	SyncSource     int                      `toml:"sync_source"`
	Sessions       []reflectorSessionConfig `toml:"sessions"`
	Offload        string                   `toml:"offload"`
}

// pending is a reply built in the first pass over a burst, finished in the
// second once T3 is read.
type pending struct {
	h      packet.Handle
	s      *rfSession // nil: stateless reflection of an unknown SSID
	auth   bool
	format int
	l4     int    // offset of the UDP header
	udpLen int    // UDP length
	pseudo uint16 // pseudo-header sum
	fu     int    // payload offset of the Follow-Up Telemetry value, or -1
	hmac   int    // payload offset of the HMAC TLV, or -1
	rseq   uint32
}

// reflector is the stamp.reflector stage. It turns test packets into
// reflected packets in place: the payload changes layout, the headers swap
// and the return path's SRH replaces whatever extension headers came in.
// T3 is written in a second pass, after the whole burst is built, right
// before the packets leave the stage: the latest point a stage has. What
// follows in the chain (a link, a forward) and the engine's tx flush at the
// end of the loop come after it.
type reflector struct {
	name       string
	reg        *Registry
	port       uint16
	toIn       bool
	fwd        bool
	out        uint16
	swapMAC    bool
	addrs      []netip.Addr
	addrs16    [][16]byte // addrs, IPv4 mapped
	bcast      [][4]byte  // the directed broadcasts of the ports' IPv4 prefixes
	allow      []netip.Prefix
	reflectAll bool // unknown SSIDs: reflect statelessly
	limiter    *srcLimiter
	hopLimit   uint8
	format     int // for unknown SSIDs: formatNTP, formatPTP or -1 (the sender's)
	ee         *errEstSource
	rpTLV      bool
	cos        bool
	syncSrc    uint8 // 0: from the clock

	np     int
	pend   [packet.MaxBurst]pending
	cache  sessionCache[rfSession]
	ctab   *rfTable
	segBuf [packet.SRHMaxSegments][16]byte
	srhBuf [8 + 16*packet.SRHMaxSegments]byte
	sink   uint64 // what warmRf read, kept so that its reads stay

	cReflected, cTLVs, cMalformed, cIntegrity *stats.Counter

	xdp *rfXDP // the in-kernel part, nil without offload
}

type rfConfigResult struct{ err error }

func newReflector(s *plugins.Setup) (plugins.Stage, error) {
	c := reflectorConfig{Port: DefaultPort, HopLimit: 255, MAC: "swap", Unknown: "drop",
		RateLimit: DefaultRateLimit, RateBurst: DefaultRateBurst}
	if err := s.Config.Decode(&c); err != nil {
		return nil, err
	}
	where := s.Config.Where()
	if c.Port < 1 || c.Port > 65535 {
		return nil, fmt.Errorf("stamp.reflector: port %d is outside 1..65535", c.Port)
	}
	if c.HopLimit < 1 || c.HopLimit > 255 {
		return nil, fmt.Errorf("stamp.reflector: hop_limit %d is outside 1..255", c.HopLimit)
	}
	r := &reflector{name: s.Name, reg: registryOf(s), port: uint16(c.Port), hopLimit: uint8(c.HopLimit), format: -1,
		ee:         newErrEstSource(s.Clock, clockConfig{Synchronized: c.Synchronized, ClockError: c.ClockError}),
		rpTLV:      c.ReturnPathTLV == nil || *c.ReturnPathTLV,
		cos:        c.ClassOfService == nil || *c.ClassOfService,
		cReflected: s.Counters.New("reflected", "test packets reflected"),
		cTLVs:      s.Counters.New("tlvs", "TLVs processed"),
		cMalformed: s.Counters.New("tlv_malformed", "test packets with a malformed TLV (reflected with M set)"),
		cIntegrity: s.Counters.New("tlv_integrity", "test packets whose HMAC TLV failed (reflected with I set)")}
	switch c.Forward {
	case "":
	case "in":
		r.toIn = true
	default:
		pi, ok := s.Ports.Port(c.Forward)
		if !ok {
			return nil, fmt.Errorf("stamp.reflector: forward: no port %q", c.Forward)
		}
		r.fwd, r.out = true, pi.ID
	}
	switch c.MAC {
	case "swap":
		r.swapMAC = true
	case "keep":
	default:
		return nil, fmt.Errorf("stamp.reflector: mac %q: swap or keep", c.MAC)
	}
	r.addrs = addrs(c.Addresses)
	for _, a := range r.addrs {
		r.addrs16 = append(r.addrs16, as16(a))
	}
	for _, p := range c.Allow {
		r.allow = append(r.allow, p.Prefix)
	}
	if s.Ports != nil {
		for _, pi := range s.Ports.All() {
			for _, a := range pi.Addrs {
				if a.Addr().Is4() && a.Bits() <= 30 {
					r.bcast = append(r.bcast, lastAddr4(a))
				}
			}
		}
	}
	switch c.Unknown {
	case "drop":
	case "reflect":
		if len(r.allow) == 0 {
			return nil, fmt.Errorf("stamp.reflector: unknown = \"reflect\" answers strangers: set allow to the prefixes it may answer")
		}
		r.reflectAll = true
	default:
		return nil, fmt.Errorf("stamp.reflector: unknown %q: drop or reflect", c.Unknown)
	}
	switch strings.ToLower(c.Timestamp) {
	case "", "mirror":
	default:
		f, err := parseFormat(c.Timestamp)
		if err != nil {
			return nil, fmt.Errorf("stamp.reflector: %w (or mirror)", err)
		}
		r.format = f
	}
	if c.RateLimit > 0 {
		if c.RateBurst < 1 {
			return nil, fmt.Errorf("stamp.reflector: rate_burst must be at least 1")
		}
		r.limiter = newSrcLimiter(float64(c.RateLimit), float64(c.RateBurst), 4096)
	}
	if c.SyncSource < 0 || c.SyncSource > 255 {
		return nil, fmt.Errorf("stamp.reflector: sync_source %d is outside 0..255", c.SyncSource)
	}
	r.syncSrc = uint8(c.SyncSource)
	d := reflectorDefaults{stage: s.Name, keyDir: c.KeyDir, port: uint16(c.Port)}
	r.reg.addReflector(s.Name, d)
	res := s.Shared("stamp.reflector/config", func() any {
		// Built first and added in one table swap (putRfs).
		rss := make([]*rfSession, 0, len(c.Sessions))
		for i := range c.Sessions {
			sc, err := c.Sessions[i].toSession()
			if err == nil {
				var rs *rfSession
				if rs, err = buildRf(sc, &d); err == nil {
					rs.running.Store(sc.Start)
					rss = append(rss, rs)
				}
			}
			if err != nil {
				return &rfConfigResult{err: fmt.Errorf("%s: sessions[%d]: %w", where, i, err)}
			}
		}
		if i, err := r.reg.putRfs(rss); err != nil {
			return &rfConfigResult{err: fmt.Errorf("%s: sessions[%d]: %w", where, i, err)}
		}
		return &rfConfigResult{}
	}).(*rfConfigResult)
	if res.err != nil {
		return nil, res.err
	}
	mode, err := offload.ParseMode(c.Offload)
	if err != nil {
		return nil, fmt.Errorf("stamp.reflector: %w", err)
	}
	if mode != offload.Off {
		if err := r.askXDP(s, &c, mode); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// The per-source rate limit a reflector has unless its config says
// otherwise: what one source (or one spoofed victim) can make it send.
const (
	DefaultRateLimit = 1000 // test packets per second
	DefaultRateBurst = 100
)

// lastAddr4 is the directed broadcast of an IPv4 prefix.
func lastAddr4(p netip.Prefix) [4]byte {
	a := p.Masked().Addr().As4()
	host := ^uint32(0) >> p.Bits()
	binary.BigEndian.PutUint32(a[:], binary.BigEndian.Uint32(a[:])|host)
	return a
}

// v4mapped reads an IPv4 address as 16 bytes, IPv4 mapped.
func v4mapped(a [4]byte) [16]byte {
	return [16]byte{10: 0xff, 11: 0xff, 12: a[0], 13: a[1], 14: a[2], 15: a[3]}
}

func addr16(a [16]byte, v4 bool) netip.Addr {
	if v4 {
		return netip.AddrFrom4([4]byte(a[12:]))
	}
	return netip.AddrFrom16(a)
}

// as16 is an address as the reflector compares them: IPv4 mapped.
func as16(a netip.Addr) [16]byte {
	if a.Is4() {
		return v4mapped(a.As4())
	}
	return a.As16()
}

func (r *reflector) ours(a [16]byte) bool {
	if len(r.addrs16) == 0 {
		return true
	}
	for i := range r.addrs16 {
		if r.addrs16[i] == a {
			return true
		}
	}
	return false
}

// refuse says why a request must not be answered, whatever its session: a
// source no reply may go to (a group MAC; a multicast, broadcast,
// unspecified or loopback address), or a destination that is not one host
// (multicast or broadcast, at the IP or the MAC level). A reply to those
// would go to many hosts, or nowhere real, from an address not the
// reflector's own.
func (r *reflector) refuse(frame []byte, src, dst [16]byte, v4 bool) packet.Reason {
	switch {
	case frame[6]&1 != 0:
		return reasonBadSource
	case frame[0]&1 != 0:
		return reasonGroupDest
	case v4:
		s, d := [4]byte(src[12:]), [4]byte(dst[12:])
		if s[0] == 0 || s[0] == 127 || s[0] >= 224 || r.broadcast4(s) {
			return reasonBadSource // 0/8, 127/8, multicast, 240/4 and 255.255.255.255
		}
		if d[0] >= 224 || r.broadcast4(d) {
			return reasonGroupDest
		}
	case dst[0] == 0xff:
		return reasonGroupDest
	case src[0] == 0xff || src == [16]byte{} || src == [16]byte{15: 1}:
		return reasonBadSource
	case [12]byte(src[:12]) == [12]byte{10: 0xff, 11: 0xff}:
		// An IPv4-mapped source: the IPv4 rules.
		if s := src[12]; s == 0 || s == 127 || s >= 224 {
			return reasonBadSource
		}
	}
	return 0
}

func (r *reflector) broadcast4(a [4]byte) bool {
	for _, b := range r.bcast {
		if a == b {
			return true
		}
	}
	return false
}

func (r *reflector) allowed(a [16]byte, v4 bool) bool {
	if len(r.allow) == 0 {
		return true
	}
	x := addr16(a, v4)
	for _, p := range r.allow {
		if p.Contains(x) {
			return true
		}
	}
	return false
}

// Process reflects test packets addressed to the reflector and lets every
// other packet pass.
func (r *reflector) Process(ctx *plugins.Context, b *packet.Burst) {
	t := r.reg.rf.Load()
	if t != r.ctab {
		r.ctab = t
		r.cache.clear()
	}
	r.np = 0
	r.ee.refresh()
	r.warmRf(b, t)
	multi := ctx.Env.NumInstances() > 1
	for i := 0; i < b.N; i++ {
		h := b.H[i]
		p := h.P()
		l, err := p.ParseLayers()
		if err != nil || l.Flags&packet.FlagUDP == 0 {
			continue
		}
		data := p.Data()
		u := packet.UDP(data[l.L4:l.End])
		if u.DstPort() != r.port {
			continue
		}
		v4 := l.IPVersion == 4
		var src, dst [16]byte
		if v4 {
			ip := packet.IPv4(data[l.L3:l.End])
			src, dst = v4mapped(ip.Src()), v4mapped(ip.Dst())
		} else {
			if srh := l.SRH(data); srh != nil && srh.SegmentsLeft() > 0 {
				continue // an SRv6 waypoint's business, not ours
			}
			ip := packet.IPv6(data[l.L3:l.End])
			src, dst = ip.Src(), ip.Dst()
		}
		if !r.ours(dst) {
			continue
		}
		pay := u[packet.UDPLen:u.Length()]
		if len(pay) < BaseLen {
			p.Drop(reasonShort)
			continue
		}
		id, auth := ssidOf(pay)
		if reflected(pay, auth) {
			// Never answered: two reflectors would answer each other
			// forever. A reply to a sender session here goes on to its
			// collector.
			if ts := r.reg.tx.Load().get(id); ts == nil || ts.cfg.Auth != auth {
				p.Drop(reasonReflected)
			}
			continue
		}
		if reason := r.refuse(data, src, dst, v4); reason != 0 {
			p.Drop(reason)
			continue
		}
		if !r.allowed(src, v4) {
			p.Drop(reasonNotAllowed)
			continue
		}
		s := r.cache.lookup(id)
		if s == nil {
			s = t.get(id)
			r.cache.put(id, s)
		}
		if s != nil && s.stage != r.name {
			s = nil
		}
		if s == nil {
			if !r.reflectAll || auth {
				p.Drop(reasonUnknown)
				continue
			}
		} else {
			if s.cfg.Auth != auth {
				p.Drop(reasonUnknown)
				continue
			}
			if !s.running.Load() {
				p.Drop(reasonNotRunning)
				continue
			}
			if s.pinned && s.sender != src {
				p.Drop(reasonWrongSource)
				continue
			}
			if key := sessionKey(id); multi && !ctx.Mine(key) {
				ctx.Handoff(h, ctx.Owner(key))
				continue
			}
		}
		// The bucket runs on arrival times: a burst the lcore took late
		// is not a burst the source sent.
		if r.limiter != nil && !r.limiter.allow(src, p.RxTime) {
			p.Drop(reasonRateLimited)
			continue
		}
		if reason := r.reflect(ctx, h, l, s, auth, src, dst); reason != 0 {
			p.Drop(reason)
			continue
		}
		switch {
		case r.toIn:
			p.Forward(p.InPort)
		case r.fwd:
			p.Forward(r.out)
		}
	}
	r.finish(ctx)
}

// tlvOutcome is what the TLVs ask of the reply.
type tlvOutcome struct {
	noReply bool
	segs    int // return path segments in segBuf
	tc      int // reply traffic class, -1: the received DSCP
	fu      int // area offset of the Follow-Up Telemetry value, or -1
	hmac    int // area offset of the HMAC TLV, or -1
}

// reflect builds the reply in place, all but T3, the HMACs and the UDP
// checksum, and queues it for finish.
func (r *reflector) reflect(ctx *plugins.Context, h packet.Handle, l *packet.Layers, s *rfSession, auth bool,
	src, dst [16]byte) packet.Reason {
	p := h.P()
	data := p.Data()
	v4 := l.IPVersion == 4
	slay, rlay := layouts(auth)
	u := packet.UDP(data[l.L4:l.End])
	udpLen := int(u.Length())
	pay := u[packet.UDPLen:udpLen]
	var m *mac
	if s != nil {
		m = s.st.mac
	}
	if auth && !m.verify(pay[HMACCovered:BaseAuthLen], pay[:HMACCovered], nil) {
		return reasonBadHMAC
	}
	// What the reply copies from the test packet, read before anything moves.
	sseq := binary.BigEndian.Uint32(pay[slay.seq:])
	sts := binary.BigEndian.Uint64(pay[slay.ts:])
	serr := ErrorEstimate(binary.BigEndian.Uint16(pay[slay.errEst:]))
	var ttl, tc uint8
	var addrSum uint16 // the pseudo-header's addresses, when the reply just swaps them
	if v4 {
		ip := packet.IPv4(data[l.L3:l.End])
		ttl, tc = ip.TTL(), ip.TOS()
	} else {
		ip := packet.IPv6(data[l.L3:l.End])
		ttl, tc = ip.HopLimit(), ip.TrafficClass()
		// Source and destination are adjacent: one sum over both (the
		// destination is the final one: no segments were left).
		addrSum = packet.Checksum(ip[8:40], 0)
	}
	format := r.format
	if s != nil && s.format >= 0 {
		format = s.format
	}
	if format < 0 {
		format = formatNTP
		if serr.PTP() {
			format = formatPTP
		}
	}
	ee := r.ee.ee[format]
	rseq := sseq
	stateful := s != nil && s.cfg.Stateful
	if s != nil {
		s.st.rx++
		s.st.tx++
		if stateful {
			if k := s.kseq.Load(); k != nil {
				rseq = atomic.AddUint32(k, 1) - 1 // the XDP program's counter
			} else {
				rseq = s.st.seq
				s.st.seq++
			}
		}
	}
	out := tlvOutcome{tc: -1, fu: -1, hmac: -1}
	if len(pay) > slay.base {
		r.cTLVs.Inc()
		out = r.tlvs(p, l, pay, slay.base, s, m, auth, v4, src, dst, tc)
	}
	if out.noReply {
		return reasonNoReply
	}
	// The payload becomes a reflected packet (RFC 8762 §4.3): MBZ zeroed.
	if auth {
		clear(pay[4:16])
		clear(pay[28:HMACCovered])
	} else {
		clear(pay[16:BaseLen])
	}
	binary.BigEndian.PutUint32(pay[rlay.seq:], rseq)
	binary.BigEndian.PutUint16(pay[rlay.errEst:], uint16(ee))
	binary.BigEndian.PutUint64(pay[rlay.rxTS:], r.ee.wire(p.RxTime, format))
	binary.BigEndian.PutUint32(pay[rlay.sSeq:], sseq)
	binary.BigEndian.PutUint64(pay[rlay.sTS:], sts)
	binary.BigEndian.PutUint16(pay[rlay.sErr:], uint16(serr))
	pay[rlay.sTTL] = ttl
	// The return path: from the Return Path TLV, else the session's.
	var srh []byte
	slot0 := false
	switch {
	case out.segs > 0:
		srh = r.tlvSRH(out.segs, src)
	case s != nil && s.srh != nil:
		if s.retLast == src {
			srh = s.srhLast
		} else {
			srh, slot0 = s.srh, true
		}
	}
	if v4 && srh != nil {
		return reasonBadPath
	}
	// Trailing bytes after the IP packet (Ethernet padding) go.
	if end := int(l.End); end < p.Len() {
		_ = p.Trim(p.Len() - end)
	}
	oldL3 := int(l.L4 - l.L3)
	newL3 := 20
	if !v4 {
		newL3 = packet.IPv6Len + len(srh)
	}
	// Never larger than the request (amplification), unless the session pins
	// its sender: then the operator chose the return path for a known peer.
	if newL3 > oldL3 && (s == nil || !s.pinned) {
		return reasonReplyTooBig
	}
	l3 := int(l.L3)
	var err error
	switch {
	case newL3 > oldL3:
		_, err = p.InsertGap(l3, newL3-oldL3)
	case newL3 < oldL3:
		err = p.RemoveGap(l3, oldL3-newL3)
	}
	if err != nil {
		return packet.ReasonNoBuffer
	}
	data = p.Data() // the window moved
	p.InvalidateLayers()
	if r.swapMAC {
		packet.Ethernet(data).SwapMAC()
	}
	l4 := l3 + newL3
	replySrc := dst
	if s != nil && s.cfg.Source.IsValid() {
		if v4 {
			replySrc = v4mapped(s.cfg.Source.As4())
		} else {
			replySrc = s.cfg.Source.As16()
		}
	}
	if out.tc >= 0 {
		tc = uint8(out.tc) << 2
	} else {
		tc &^= 3 // the received DSCP, not its ECN marks
	}
	var pseudo uint16
	if v4 {
		ip := packet.IPv4(data[l3 : l3+20])
		ip[0] = 0x45
		ip[1] = tc
		binary.BigEndian.PutUint16(ip[2:], uint16(20+udpLen))
		binary.BigEndian.PutUint32(ip[4:], 0x4000) // ID 0, DF
		ip[8] = r.hopLimit
		ip[9] = packet.ProtocolUDP
		ip[10], ip[11] = 0, 0
		copy(ip[12:16], replySrc[12:])
		copy(ip[16:20], src[12:])
		binary.BigEndian.PutUint16(ip[10:], ^packet.Checksum(ip, 0))
		pseudo = packet.PseudoHeaderChecksum(packet.ProtocolUDP, replySrc[12:], src[12:], uint32(udpLen))
	} else {
		ip := packet.IPv6(data[l3 : l3+packet.IPv6Len])
		binary.BigEndian.PutUint32(ip[0:], 6<<28|uint32(tc)<<20)
		ip.SetPayloadLength(uint16(len(srh) + udpLen))
		ip.SetHopLimit(r.hopLimit)
		ip.SetSrc(replySrc)
		if srh == nil {
			ip.SetNextHeader(packet.ProtocolUDP)
			ip.SetDst(src)
		} else {
			ip.SetNextHeader(packet.ProtocolRouting)
			x := packet.SRH(data[l3+packet.IPv6Len : l4])
			copy(x, srh)
			if slot0 {
				x.SetSegment(0, src)
			}
			// The first hop, wherever the SRH came from.
			copy(ip[24:40], x[8+16*int(x[3]):])
		}
		if replySrc == dst {
			// The same two addresses, swapped: their sum is the request's.
			pseudo = packet.ChecksumCombine(packet.ChecksumCombine(addrSum, packet.ProtocolUDP), uint16(udpLen))
		} else {
			pseudo = packet.PseudoHeaderChecksum(packet.ProtocolUDP, replySrc[:], src[:], uint32(udpLen))
		}
	}
	ru := packet.UDP(data[l4 : l4+udpLen])
	sport := ru.SrcPort()
	ru.SetSrcPort(r.port)
	ru.SetDstPort(sport)
	e := &r.pend[r.np]
	e.h, e.s, e.auth, e.format, e.l4, e.udpLen, e.pseudo, e.fu, e.hmac, e.rseq = h, s, auth, format, l4, udpLen, pseudo, -1, -1, rseq
	if out.fu >= 0 {
		e.fu = slay.base + out.fu
	}
	if out.hmac >= 0 {
		e.hmac = slay.base + out.hmac
	}
	r.np++
	return 0
}

// tlvSRH builds the SRH of a Return Path TLV's segment list in srhBuf: the
// sender is the final segment unless the list ends there.
func (r *reflector) tlvSRH(n int, sender [16]byte) []byte {
	segs := r.segBuf[:n]
	total := n
	if segs[n-1] != sender {
		total++
	}
	if total == 1 {
		return nil
	}
	b := r.srhBuf[:8+16*total]
	b[0] = packet.ProtocolUDP
	b[1] = uint8(2 * total)
	b[2] = packet.RoutingTypeSRH
	b[3] = uint8(total - 1)
	b[4] = uint8(total - 1)
	b[5], b[6], b[7] = 0, 0, 0
	off := 8
	if total > n {
		copy(b[off:], sender[:])
		off += 16
	}
	for i := n - 1; i >= 0; i-- {
		copy(b[off:], segs[i][:])
		off += 16
	}
	return b
}

// tlvs processes the test packet's TLVs in place, as RFC 8972 §4 and RFC
// 9503 say: a malformed TLV stops the processing (M set), a failed HMAC TLV
// marks them all (I set), an unknown one is copied with U set, and the
// rest are filled in for the reply.
func (r *reflector) tlvs(p *packet.Packet, l *packet.Layers, pay []byte, base int, s *rfSession, m *mac,
	auth, v4 bool, src, dst [16]byte, tc uint8) tlvOutcome {
	out := tlvOutcome{tc: -1, fu: -1, hmac: -1}
	area := pay[base:]
	// Structure first: lengths, and where the HMAC TLV is.
	it := NewTLVIter(area)
	malformed, misplaced, others := false, false, false
	for t, ok := it.Next(); ok; t, ok = it.Next() {
		switch {
		case !t.WellFormed():
			t.SetFlags(t.Flags()&^(FlagU|FlagI) | FlagM)
			malformed = true
		case t.Type() == TLVHMAC:
			if out.hmac < 0 {
				out.hmac = it.Off()
			} else {
				misplaced = true
			}
		case out.hmac >= 0 && t.Type() != TLVExtraPadding:
			misplaced = true
		}
		if t.Type() != TLVExtraPadding && t.Type() != TLVHMAC {
			others = true
		}
		if malformed {
			break
		}
	}
	if it.Err() != nil {
		// The TLV that overruns keeps its bytes; its header, when whole, says M.
		if off := it.Off(); len(area)-off >= TLVHeaderLen {
			area[off] = area[off]&^(FlagU|FlagI) | FlagM
		}
		malformed = true
	}
	if malformed {
		r.cMalformed.Inc()
		out.hmac = -1
		return out
	}
	// The HMAC TLV: verified before any TLV is used (RFC 8972 §4.8), and an
	// authenticated packet with TLVs must have one.
	integrity := true
	switch {
	case misplaced:
		integrity = false
	case out.hmac >= 0 && m != nil:
		integrity = m.verify(area[out.hmac+TLVHeaderLen:out.hmac+TLVHeaderLen+HMACLen], pay[:4], area[:out.hmac])
	case out.hmac < 0 && auth && others:
		integrity = false
	}
	if !integrity {
		r.cIntegrity.Inc()
		it = NewTLVIter(area)
		for t, ok := it.Next(); ok; t, ok = it.Next() {
			t.SetFlags(t.Flags()&^FlagU | FlagI)
		}
		// The reply's HMAC TLV, in its place, is signed all the same: the
		// sender then knows the I flags are the reflector's.
		if misplaced || m == nil {
			out.hmac = -1
		}
		return out
	}
	stateful := s != nil && s.cfg.Stateful
	sawRP := false
	it = NewTLVIter(area)
	for t, ok := it.Next(); ok; t, ok = it.Next() {
		f := t.Flags() &^ (FlagU | FlagM | FlagI)
		v := t.Value()
		switch t.Type() {
		case TLVExtraPadding:
		case TLVLocation:
			binary.BigEndian.PutUint16(v[0:], packet.UDP(p.Data()[l.L4:]).DstPort())
			binary.BigEndian.PutUint16(v[2:], packet.UDP(p.Data()[l.L4:]).SrcPort())
			r.location(v[LocationMinLen:], p.Data(), v4, src, dst)
		case TLVTimestampInfo:
			sync := r.syncSrc
			if sync == 0 {
				sync = SyncLocalFree
				if r.ee.ee[formatNTP].Synchronized() {
					sync = SyncNTP
				}
			}
			in := MethodSWLocal
			if p.Flags()&packet.FlagHWTimestamp != 0 {
				in = MethodHWAssist
			}
			v[0], v[1], v[2], v[3] = sync, in, sync, MethodSWLocal
		case TLVClassOfService:
			cos, _ := DecodeClassOfService(v)
			cos.DSCP2, cos.ECN = tc>>2, tc&3
			if r.cos {
				cos.RP = 0
				out.tc = int(cos.DSCP1)
			} else {
				cos.RP = 1
			}
			e := cos.Encode()
			copy(v, e[:])
		case TLVDirectMeasurement:
			if stateful {
				binary.BigEndian.PutUint32(v[4:], s.st.rx)
				binary.BigEndian.PutUint32(v[8:], s.st.tx)
			} else {
				clear(v[4:12])
			}
		case TLVAccessReport:
			if id := v[0] >> 4; id != 1 && id != 2 {
				f |= FlagU // an invalid Access ID: the TLV is discarded (RFC 8972 §4.6)
			}
		case TLVFollowUpTelemetry:
			out.fu = it.Off() + TLVHeaderLen
		case TLVHMAC:
			if m == nil {
				f |= FlagU // nothing to verify it with
				out.hmac = -1
			}
		case TLVDestinationNodeAddress:
			a, _ := DecodeDestinationNodeAddress(v)
			if a16 := as16(a); a16 != dst && !(len(r.addrs16) > 0 && r.ours(a16)) {
				f |= FlagU // not the intended destination (RFC 9503 §3)
			}
		case TLVReturnPath:
			if sawRP {
				break // only the first counts (RFC 9503 §4)
			}
			sawRP = true
			if !r.returnPath(v, v4, &out) {
				f |= FlagU
			}
		default:
			f |= FlagU
		}
		t.SetFlags(f)
	}
	return out
}

// location fills the Location TLV's sub-TLVs with what the test packet came
// with (RFC 8972 §4.2.2).
func (r *reflector) location(subs, frame []byte, v4 bool, src, dst [16]byte) {
	it := NewTLVIter(subs)
	for t, ok := it.Next(); ok; t, ok = it.Next() {
		f := t.Flags() &^ (FlagU | FlagM | FlagI)
		v := t.Value()
		switch t.Type() {
		case SubSourceMAC:
			t[1] = SubSourceEUI48
			copy(v, frame[6:12])
			v[6], v[7] = 0, 0
		case SubDestinationIP, SubSourceIP:
			a := dst
			if t.Type() == SubSourceIP {
				a = src
			}
			if v4 {
				t[1] = t.Type() + 1 // the IPv4 variant
				copy(v, a[12:])
				clear(v[4:])
			} else {
				t[1] = t.Type() + 2 // the IPv6 variant
				copy(v, a[:])
			}
		default:
			f |= FlagU
		}
		t.SetFlags(f)
	}
}

// returnPath reads the first Return Path TLV. It reports whether the
// reflector can honour it: a Control Code (no reply, or the same link), or
// an SRv6 segment list on IPv6. Return Address and SR-MPLS are refused: a
// reply to an address the sender names would make the reflector an
// amplifier for third parties.
func (r *reflector) returnPath(v []byte, v4 bool, out *tlvOutcome) bool {
	it := NewTLVIter(v)
	for t, ok := it.Next(); ok; t, ok = it.Next() {
		switch t.Type() {
		case SubReturnControlCode:
			if binary.BigEndian.Uint32(t.Value())&ControlCodeReplySameLink == 0 {
				out.noReply = true
			}
			return true
		case SubReturnSRv6:
			if v4 || !r.rpTLV {
				return false
			}
			sv := t.Value()
			n := len(sv) / 16
			if n == 0 || n > len(r.segBuf)-1 {
				return false
			}
			for i := 0; i < n; i++ {
				r.segBuf[i] = [16]byte(sv[i*16 : i*16+16])
			}
			out.segs = n
			return true
		}
	}
	return false
}

// finish writes T3, read once for the burst right before the stage returns,
// the Follow-Up Telemetry, the HMACs and the UDP checksums of the replies.
func (r *reflector) finish(ctx *plugins.Context) {
	if r.np == 0 {
		return
	}
	// T3 is the time the stages after this one (a link) count from.
	t3 := ctx.Stamp()
	var ts [2]uint64
	ts[formatNTP] = r.ee.wire(t3, formatNTP)
	ts[formatPTP] = r.ee.wire(t3, formatPTP)
	for i := 0; i < r.np; i++ {
		e := &r.pend[i]
		d := e.h.P().Data()
		u := d[e.l4 : e.l4+e.udpLen]
		pay := u[packet.UDPLen:]
		_, rlay := layouts(e.auth)
		binary.BigEndian.PutUint64(pay[rlay.ts:], ts[e.format])
		s := e.s
		if e.fu >= 0 {
			v := pay[e.fu : e.fu+FollowUpTelemetryLen]
			if s != nil && s.cfg.Stateful && s.st.haveLast {
				binary.BigEndian.PutUint32(v[0:], s.st.lastSeq)
				binary.BigEndian.PutUint64(v[4:], s.st.lastTS)
				v[12] = MethodSWLocal
				clear(v[13:])
			} else {
				clear(v) // stateless: zeroed (RFC 8972 §4.7)
			}
		}
		if s != nil {
			s.st.lastSeq, s.st.lastTS, s.st.haveLast = e.rseq, ts[e.format], true
			s.st.replied++
			if i+1 == r.np || r.pend[i+1].s != s {
				// Published once per run of one session's packets: atomic
				// stores cost more than the rest of this loop.
				s.received.Store(uint64(s.st.rx))
				s.replied.Store(s.st.replied)
			}
			m := s.st.mac
			if e.hmac >= 0 && m != nil {
				copy(pay[e.hmac+TLVHeaderLen:], m.sum16(pay[:4], pay[rlay.base:e.hmac]))
			}
			if e.auth {
				copy(pay[HMACCovered:BaseAuthLen], m.sum16(pay[:HMACCovered], nil))
			}
		}
		u[6], u[7] = 0, 0
		sum := ^packet.Checksum(u, e.pseudo)
		if sum == 0 {
			sum = 0xffff
		}
		binary.BigEndian.PutUint16(u[6:], sum)
	}
	r.cReflected.Add(uint64(r.np))
	r.np = 0
}
