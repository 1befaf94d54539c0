package ioam

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/plugins"
)

// ioam.encap's keys, and the profiles built from them: which packets, and
// the header templates and node plans they get.
func init() {
	plugins.Register(plugins.Kind{Name: "ioam.encap", Summary: "IOAM encapsulating node: add trace, POT, E2E and DEX options by profile (IPv6-in-IPv6 or inline), with its own node data", New: newEncap})
}

type encapConfig struct {
	nodeConfig
	exportConfig
	// Mode is the default of the profiles: "auto" (inline for packets linerate
	// made, encap for forwarded ones), "encap" or "inline".
	Mode string `toml:"mode"`
	// InlineTransit allows inline insertion into forwarded packets, which
	// breaks RFC 8200 §4 (no node but the source adds extension headers): a
	// lab option.
	InlineTransit bool            `toml:"inline_transit"`
	Src           config.Addr     `toml:"src"`       // outer source of encap mode
	Dst           config.Addr     `toml:"dst"`       // outer destination: the decapsulating node
	HopLimit      int             `toml:"hop_limit"` // outer hop limit; 0 copies the inner one
	Seed          uint64          `toml:"seed"`      // POT random numbers; 0 draws one
	Profiles      []profileConfig `toml:"profiles"`
}

type profileConfig struct {
	Name     string          `toml:"name"`
	Mode     string          `toml:"mode"`
	Src      config.Addr     `toml:"src"`
	Dst      config.Addr     `toml:"dst"`
	HopLimit *int            `toml:"hop_limit"`
	MatchDst []config.Prefix `toml:"match_dst"`
	MatchSrc []config.Prefix `toml:"match_src"`
	Proto    *int            `toml:"proto"`
	SrcPort  *int            `toml:"src_port"`
	DstPort  *int            `toml:"dst_port"`
	// Rate is the insertion rate "k/n": k packets out of every n.
	Rate  string              `toml:"rate"`
	Trace *traceProfileConfig `toml:"trace"`
	POT   *potProfileConfig   `toml:"pot"`
	E2E   *e2eProfileConfig   `toml:"e2e"`
	DEX   *dexProfileConfig   `toml:"dex"`
}

type traceProfileConfig struct {
	Namespace Uint64 `toml:"namespace"`
	Type      Uint64 `toml:"type"`
	Option    string `toml:"option"` // "preallocated" (default) or "incremental"
	Size      int    `toml:"size"`   // node data bytes (pre-allocated) or the most allowed (incremental)
	Hops      int    `toml:"hops"`   // or: room for this many nodes' data
	Fill      *bool  `toml:"fill"`   // the encapsulating node adds its own data (default true)
	Loopback  bool   `toml:"loopback"`
	Active    bool   `toml:"active"`
}

type potProfileConfig struct {
	Namespace Uint64 `toml:"namespace"`
	KeyFile   string `toml:"key_file"`
}

type e2eProfileConfig struct {
	Namespace Uint64 `toml:"namespace"`
	Type      Uint64 `toml:"type"`
}

type dexProfileConfig struct {
	Namespace Uint64  `toml:"namespace"`
	Type      Uint64  `toml:"type"`
	FlowID    *Uint64 `toml:"flow_id"`
	Sequence  bool    `toml:"sequence"`
}

const (
	modeAuto = iota
	modeEncap
	modeInline
)

func parseMode(s string, def int) (int, error) {
	switch strings.ToLower(s) {
	case "":
		return def, nil
	case "auto":
		return modeAuto, nil
	case "encap":
		return modeEncap, nil
	case "inline":
		return modeInline, nil
	}
	return 0, fmt.Errorf("mode %q: use \"auto\", \"encap\" or \"inline\"", s)
}

func newEncap(s *plugins.Setup) (plugins.Stage, error) {
	var c encapConfig
	if err := s.Config.Decode(&c); err != nil {
		return nil, err
	}
	n, err := c.nodeConfig.build("ioam.encap", s)
	if err != nil {
		return nil, err
	}
	seed := c.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	e := &encap{node: n, inlineTransit: c.InlineTransit, rng: rand.New(rand.NewPCG(seed, uint64(s.Instance))),
		lcore: uint64(s.Instance), lcores: uint64(max(s.NumInstances, 1))}
	if n.egress != packet.NoPort {
		if pi, ok := s.Ports.Port(c.EgressPort); ok {
			e.mtu = pi.MTU
		}
	}
	def, err := parseMode(c.Mode, modeAuto)
	if err != nil {
		return nil, fmt.Errorf("ioam.encap: %w", err)
	}
	if c.HopLimit < 0 || c.HopLimit > 255 {
		return nil, fmt.Errorf("ioam.encap: hop_limit %d is outside 0..255", c.HopLimit)
	}
	if len(c.Profiles) == 0 {
		return nil, fmt.Errorf("ioam.encap needs at least one [[profiles]] table")
	}
	if err := c.exportConfig.check("ioam.encap"); err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for i := range c.Profiles {
		pc := &c.Profiles[i]
		if pc.Name == "" {
			pc.Name = "profile" + strconv.Itoa(i)
		}
		if names[pc.Name] {
			return nil, fmt.Errorf("ioam.encap: profile %q declared twice", pc.Name)
		}
		names[pc.Name] = true
		pr, err := e.buildProfile(s, &c, pc, def)
		if err != nil {
			return nil, fmt.Errorf("ioam.encap: profile %q: %w", pc.Name, err)
		}
		if len(pc.MatchDst) == 0 {
			e.defaults = append(e.defaults, pr)
		}
		for _, px := range pc.MatchDst {
			if !px.Addr().Is6() || px.Addr().Is4In6() {
				return nil, fmt.Errorf("ioam.encap: profile %q: match_dst %s is not an IPv6 prefix", pc.Name, px)
			}
			e.lpm = append(e.lpm, lpmEntry{prefix: px.Prefix, prof: pr})
		}
		if pr.trace != nil && pr.opts[pr.traceOff+OptionHeaderLen+2]&0x02 != 0 {
			e.receiveLoop = true
		}
	}
	sort.SliceStable(e.lpm, func(i, j int) bool { return e.lpm[i].prefix.Bits() > e.lpm[j].prefix.Bits() })
	if len(e.lpm) == 0 && len(e.defaults) == 1 {
		e.defaults[0].setQuick()
	}
	if e.receiveLoop {
		if !c.Src.IsValid() {
			return nil, fmt.Errorf("ioam.encap: a profile with loopback needs src, the address looped-back copies return to")
		}
		e.loopAddr = c.Src.As16()
		var err error
		if e.exp, err = setupExport(s, &c.exportConfig); err != nil {
			return nil, err
		}
	}
	cs := s.Counters
	e.cEncap = cs.New("encapsulated", "packets given IOAM in an outer IPv6 header")
	e.cInline = cs.New("inline", "packets given IOAM in a new Hop-by-Hop header")
	e.cGrown = cs.New("inline_grown", "packets whose existing Hop-by-Hop header grew by the IOAM options")
	e.cNoMatch = cs.New("no_match", "packets no profile matched")
	e.cRate = cs.New("not_sampled", "packets a profile matched but its rate skipped")
	e.cNotIPv6 = cs.New("not_ipv6", "packets that are not IPv6, passed as they are")
	e.cNotLocal = cs.New("not_local", "forwarded packets an inline profile skipped (inline_transit is off)")
	e.cMTU = cs.New("mtu_skipped", "packets left without IOAM: with it they would exceed the egress MTU")
	e.cNoRoom = cs.New("no_room", "packets left without IOAM: no buffer room, or headers at their limit")
	e.cLoopRecv = cs.New("loopback_received", "looped-back copies that came home, consumed")
	e.cDropped = cs.New("export_dropped", "records lost to a full export ring")
	return e, nil
}

func checkNS(v Uint64, what string) (uint16, error) {
	if v > 0xFFFF {
		return 0, fmt.Errorf("%s namespace %d does not fit 16 bits", what, v)
	}
	return uint16(v), nil
}

func (e *encap) buildProfile(s *plugins.Setup, c *encapConfig, pc *profileConfig, def int) (*profile, error) {
	pr := &profile{name: pc.Name, proto: -1, sport: -1, dport: -1, traceOff: -1, potOff: -1, dexOff: -1, k: 1, n: 1}
	var err error
	if pr.mode, err = parseMode(pc.Mode, def); err != nil {
		return nil, err
	}
	for _, px := range pc.MatchSrc {
		if !px.Addr().Is6() {
			return nil, fmt.Errorf("match_src %s is not an IPv6 prefix", px)
		}
		pr.src = append(pr.src, px.Prefix)
	}
	for _, f := range []struct {
		v   *int
		dst *int
		max int
		n   string
	}{{pc.Proto, &pr.proto, 255, "proto"}, {pc.SrcPort, &pr.sport, 65535, "src_port"}, {pc.DstPort, &pr.dport, 65535, "dst_port"}} {
		if f.v != nil {
			if *f.v < 0 || *f.v > f.max {
				return nil, fmt.Errorf("%s %d is outside 0..%d", f.n, *f.v, f.max)
			}
			*f.dst = *f.v
			pr.needL4 = true
		}
	}
	if pc.Rate != "" {
		ks, ns, ok := strings.Cut(pc.Rate, "/")
		k, err1 := strconv.ParseUint(strings.TrimSpace(ks), 10, 32)
		n, err2 := strconv.ParseUint(strings.TrimSpace(ns), 10, 32)
		if !ok || err1 != nil || err2 != nil || n == 0 || k > n {
			return nil, fmt.Errorf("rate %q: write \"k/n\" with 0 ≤ k ≤ n, n ≥ 1 (\"1/100\": one packet in a hundred)", pc.Rate)
		}
		pr.k, pr.n = uint32(k), uint32(n)
	}
	pr.hopLimit = c.HopLimit
	if pc.HopLimit != nil {
		if *pc.HopLimit < 0 || *pc.HopLimit > 255 {
			return nil, fmt.Errorf("hop_limit %d is outside 0..255", *pc.HopLimit)
		}
		pr.hopLimit = *pc.HopLimit
	}
	if pc.Trace == nil && pc.POT == nil && pc.E2E == nil && pc.DEX == nil {
		return nil, fmt.Errorf("names no option: add trace, pot, e2e or dex")
	}
	var opts []byte
	if t := pc.Trace; t != nil {
		ns, err := checkNS(t.Namespace, "trace")
		if err != nil {
			return nil, err
		}
		st := e.ns.lookup(ns)
		if st == nil {
			return nil, fmt.Errorf("trace namespace %d is not among the stage's namespaces", ns)
		}
		tt := uint32(t.Type)
		if t.Type > 0xFFFFFF || tt == 0 {
			return nil, fmt.Errorf("trace type %#x must be a nonzero 24-bit value", uint64(t.Type))
		}
		if tt&(TraceUndefined|TraceReserved) != 0 {
			return nil, fmt.Errorf("trace type %#06x sets bits 12-21 or 23, which an encapsulating node must leave clear (RFC 9197 §4.4.1)", tt)
		}
		switch strings.ToLower(t.Option) {
		case "", "preallocated", "pre-allocated":
		case "incremental":
			pr.incr = true
		default:
			return nil, fmt.Errorf("trace option %q: use \"preallocated\" or \"incremental\"", t.Option)
		}
		pl := &nodePlan{}
		if !pl.build(&st.Namespace, tt, e.eg) {
			return nil, fmt.Errorf("trace type %#06x: node data too large", tt)
		}
		if t.Size == 0 && t.Hops == 0 {
			return nil, fmt.Errorf("trace needs hops (room for that many nodes' data, %d bytes each) or size (bytes of node data, a multiple of 4 up to %d)",
				pl.size, MaxTraceData)
		}
		if t.Hops < 0 {
			return nil, fmt.Errorf("trace hops %d: want at least 1", t.Hops)
		}
		size := t.Size
		if t.Hops > 0 {
			if size != 0 {
				return nil, fmt.Errorf("set trace size or hops, not both")
			}
			size = t.Hops * pl.size
		}
		if size <= 0 || size%4 != 0 || size > MaxTraceData || size < pl.size {
			return nil, fmt.Errorf("trace size %d: a multiple of 4 from one node's data (%d) to %d bytes", size, pl.size, MaxTraceData)
		}
		fill := t.Fill == nil || *t.Fill
		var flags uint8
		if t.Loopback {
			flags |= FlagLoopback
		}
		if t.Active {
			flags |= FlagActive
		}
		pr.trace, pr.traceType = st, tt
		var body []byte
		if pr.incr {
			data := 0
			rem := size / 4
			if fill {
				data = pl.size
				rem -= pl.words
			}
			body = make([]byte, TraceHeaderLen+data)
			Trace(body).Encode(ns, tt, flags, rem)
			if fill {
				copy(body[TraceHeaderLen:], pl.image[:pl.size])
				pr.nodeAt = OptionHeaderLen + TraceHeaderLen
			}
		} else {
			body = make([]byte, TraceHeaderLen+size)
			rem := size / 4
			if fill {
				rem -= pl.words
				copy(body[TraceHeaderLen+rem*4:], pl.image[:pl.size])
				pr.nodeAt = OptionHeaderLen + TraceHeaderLen + rem*4
			}
			Trace(body).Encode(ns, tt, flags, rem)
		}
		if fill {
			pr.plan = pl
		}
		ioamType := TypePreallocatedTrace
		if pr.incr {
			ioamType = TypeIncrementalTrace
		}
		pr.traceOff = len(opts)
		opts = appendOption(opts, OptionTypeChanging, ioamType, body)
	}
	if pp := pc.POT; pp != nil {
		ns, err := checkNS(pp.Namespace, "pot")
		if err != nil {
			return nil, err
		}
		if pp.KeyFile == "" {
			return nil, fmt.Errorf("pot needs a key_file")
		}
		if pr.potKey, err = LoadPOTKey(pp.KeyFile); err != nil {
			return nil, err
		}
		body := make([]byte, POTLen)
		POT(body).Encode(ns, 0, 0)
		pr.potOff = len(opts)
		opts = appendOption(opts, OptionTypeChanging, TypePOT, body)
	}
	if dp := pc.DEX; dp != nil {
		ns, err := checkNS(dp.Namespace, "dex")
		if err != nil {
			return nil, err
		}
		if dp.Type > 0xFFFFFF {
			return nil, fmt.Errorf("dex type %#x does not fit 24 bits", uint64(dp.Type))
		}
		var flow uint32
		if dp.FlowID != nil {
			if *dp.FlowID > 0xFFFFFFFF {
				return nil, fmt.Errorf("dex flow_id does not fit 32 bits")
			}
			pr.dexExt |= DEXFlowID
			flow = uint32(*dp.FlowID)
		}
		if dp.Sequence {
			pr.dexExt |= DEXSequence
		}
		body := make([]byte, DEXLen(pr.dexExt))
		DEX(body).Encode(ns, pr.dexExt, uint32(dp.Type), flow, 0)
		pr.dexOff = len(opts)
		opts = appendOption(opts, OptionTypeStatic, TypeDEX, body)
	}
	if ep := pc.E2E; ep != nil {
		ns, err := checkNS(ep.Namespace, "e2e")
		if err != nil {
			return nil, err
		}
		if ep.Type > 0xFFFF || uint16(ep.Type)&^e2eKnown != 0 || ep.Type == 0 {
			return nil, fmt.Errorf("e2e type %#x: set bits 0-3 only (0x8000 seq64, 0x4000 seq32, 0x2000 seconds, 0x1000 fraction)", uint64(ep.Type))
		}
		pr.e2eType = uint16(ep.Type)
		pr.e2eFmt = TimestampPTP
		if st := e.ns.lookup(ns); st != nil {
			pr.e2eFmt = st.Timestamp
		}
		body := make([]byte, 4+E2EDataLen(pr.e2eType))
		E2E(body).Encode(ns, pr.e2eType, &E2EFields{})
		pr.e2eBlock = appendOption(nil, OptionTypeStatic, TypeE2E, body)
	}
	pr.opts = opts
	if len(opts) > 0 {
		pr.hbhLen = freshHeaderLen(len(opts))
	}
	if pr.e2eBlock != nil {
		pr.destLen = freshHeaderLen(len(pr.e2eBlock))
	}
	if pr.hbhLen > maxOptionsHeader || pr.destLen > maxOptionsHeader {
		return nil, ErrHeaderTooLong
	}
	// The inline template: HbH then Dest; the caller sets the last next header.
	pr.tmplInline = make([]byte, pr.hbhLen+pr.destLen)
	if pr.hbhLen > 0 {
		next := uint8(packet.ProtocolIPv6)
		if pr.destLen > 0 {
			next = packet.ProtocolDestOpts
		}
		putFreshHeader(pr.tmplInline[:pr.hbhLen], next, opts)
	}
	if pr.destLen > 0 {
		putFreshHeader(pr.tmplInline[pr.hbhLen:], packet.ProtocolIPv6, pr.e2eBlock)
	}
	if pr.mode != modeInline {
		src, dst := c.Src, c.Dst
		if pc.Src.IsValid() {
			src = pc.Src
		}
		if pc.Dst.IsValid() {
			dst = pc.Dst
		}
		if !src.IsValid() || !dst.IsValid() || !src.Is6() || !dst.Is6() || src.Is4In6() || dst.Is4In6() {
			return nil, fmt.Errorf("encap and auto modes need IPv6 src and dst addresses for the outer header")
		}
		pr.tmplEncap = make([]byte, packet.IPv6Len+len(pr.tmplInline))
		first := uint8(packet.ProtocolHopByHop)
		if pr.hbhLen == 0 {
			first = packet.ProtocolDestOpts
		}
		packet.IPv6(pr.tmplEncap).Encode(&packet.IPv6Fields{NextHeader: first, HopLimit: 64, Src: src.As16(), Dst: dst.As16()})
		copy(pr.tmplEncap[packet.IPv6Len:], pr.tmplInline)
	}
	pr.fields = pr.potKey != nil || pr.dexExt&DEXSequence != 0 || pr.e2eType != 0
	pr.hbhOnly = pr.hbhLen > 0 && pr.destLen == 0
	pr.nodeOff = pr.traceOff + pr.nodeAt
	pr.cInserted = s.Counters.New("profile_"+sanitize(pc.Name), "packets profile "+pc.Name+" gave IOAM")
	return pr, nil
}

// setQuick marks the profile for encap.quick when it fits: every packet,
// IPv6-in-IPv6 (or auto), and no per-packet field but the node data.
func (pr *profile) setQuick() {
	if pr.src != nil || pr.needL4 || pr.k != 1 || pr.n != 1 || pr.mode == modeInline || pr.fields {
		return
	}
	pr.layers14, pr.scratch14 = pr.encapRecord(14), pr.encapScratch(14)
	pr.quick = true
}

// sanitize makes a profile name fit a counter name.
func sanitize(s string) string {
	b := []byte(strings.ToLower(s))
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			b[i] = '_'
		}
	}
	return string(b)
}

// appendOption appends an IPv6 IOAM option with body.
func appendOption(b []byte, optType, ioamType uint8, body []byte) []byte {
	var h [OptionHeaderLen]byte
	PutOptionHeader(h[:], optType, ioamType, len(body))
	b = append(b, h[:]...)
	return append(b, body...)
}
