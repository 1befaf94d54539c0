package ioam

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sort"
	"strconv"
	"strings"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/appliance/stats"
	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/plugins"
)

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

// profile is one encap profile on one lcore: which packets, how often, and the
// header templates it inserts, built once.
type profile struct {
	name     string
	mode     int
	src      []netip.Prefix
	proto    int // -1: any
	sport    int
	dport    int
	needL4   bool
	k, n     uint32
	count    uint32
	hopLimit int // outer; 0 copies

	// The HbH option block (trace, POT, DEX; each 4n-aligned) and the E2E
	// block, with the offsets of their options (-1: absent).
	opts     []byte
	e2eBlock []byte
	traceOff int
	potOff   int
	dexOff   int
	// Templates: the outer IPv6 header and fresh options headers (encap mode),
	// and the fresh options headers alone (inline mode).
	tmplEncap  []byte
	tmplInline []byte
	hbhLen     int
	destLen    int

	trace     *nsState
	plan      *nodePlan // the encapsulating node's own data; nil: none
	nodeAt    int       // its offset in the trace option
	traceType uint32
	incr      bool

	potKey *POTKey

	e2eType uint16
	e2eFmt  TimestampFormat
	seq     uint64

	dexExt uint8

	cInserted *stats.Counter

	// quick: the profile is one quick encapsulates with (see encap.quick),
	// and these are the parse record and scratch of its output for an
	// untagged frame, but for the lengths.
	quick   bool
	layers  packet.Layers
	scratch scratch
}

// lpmEntry is one destination prefix of a profile; the table is sorted
// longest first, so the first match is the longest.
type lpmEntry struct {
	prefix netip.Prefix
	prof   *profile
}

// encap is an IOAM encapsulating node: it picks a profile per packet (longest
// destination prefix, then flow fields, then the k-out-of-n rate) and inserts
// the profile's template, IPv6-in-IPv6 or inline, through InsertGap, then
// writes the per-packet fields: its own node data, the POT random and first
// cumulative value, E2E sequence numbers and timestamps, the DEX sequence.
type encap struct {
	*node
	lpm           []lpmEntry
	defaults      []*profile
	inlineTransit bool
	mtu           int
	rng           *rand.Rand
	lcore         uint64
	lcores        uint64
	loopAddr      [16]byte
	receiveLoop   bool
	exp           *exportState
	rec           Record
	scan          scan
	vals          hopValues

	cEncap, cInline, cGrown, cNoMatch, cRate, cNotIPv6, cNotLocal, cMTU, cNoRoom, cLoopRecv, cExportDropped *stats.Counter
	lastDropped                                                                                             uint64
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
		if c.Export {
			ex, r := setupExport(s, &c.exportConfig)
			e.exp = &exportState{ex: ex, ring: r}
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
	e.cExportDropped = cs.New("export_dropped", "records lost to a full export ring")
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
	pr.cInserted = s.Counters.New("profile_"+sanitize(pc.Name), "packets profile "+pc.Name+" gave IOAM")
	return pr, nil
}

// setQuick marks the profile for encap.quick when it fits: every packet,
// IPv6-in-IPv6 (or auto), a Hop-by-Hop header alone, and no per-packet field
// but the node data.
func (pr *profile) setQuick() {
	if pr.src != nil || pr.needL4 || pr.k != 1 || pr.n != 1 || pr.mode == modeInline || pr.hbhLen == 0 || pr.destLen != 0 ||
		pr.potKey != nil || pr.dexExt&DEXSequence != 0 || pr.e2eType != 0 || len(pr.tmplEncap) > 0xFFFF {
		return
	}
	const l3 = 14
	hbh := l3 + packet.IPv6Len
	n := len(pr.tmplEncap)
	pr.layers = packet.Layers{EtherType: packet.EtherTypeIPv6, L3: l3, IPVersion: 6, Flags: packet.FlagIPv6,
		HopByHop: uint16(hbh), NumExt: 1, L4: uint16(l3 + n), Proto: packet.ProtocolIPv6}
	pr.scratch = scratch{magic: scratchMagic, hbh: uint16(hbh)}
	opts := hbh + 4
	if pr.traceOff >= 0 {
		pr.scratch.traces, pr.scratch.trace = 1, uint16(opts+pr.traceOff)
	}
	if pr.dexOff >= 0 {
		pr.scratch.dex = uint16(opts + pr.dexOff)
	}
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

// Start starts the export of looped-back records.
func (e *encap) Start(ctx *plugins.Context) error {
	if e.exp != nil {
		return e.exp.ex.start()
	}
	return nil
}

// Stop stops the export.
func (e *encap) Stop(ctx *plugins.Context) {
	if e.exp != nil {
		e.exp.ex.stop()
	}
}

func (e *encap) exporterOf() *exporter {
	if e.exp == nil {
		return nil
	}
	return e.exp.ex
}

// Process gives IOAM to the packets its profiles select.
func (e *encap) Process(ctx *plugins.Context, b *packet.Burst) {
	e.begin()
	var quick *profile
	if len(e.defaults) == 1 && e.defaults[0].quick && !e.receiveLoop {
		quick = e.defaults[0]
	}
	for i := 0; i < b.N; i++ {
		if quick == nil || !e.quick(ctx, b.H[i].P(), quick) {
			e.one(ctx, b, i)
		}
	}
	if e.exp != nil {
		e.exp.countDropped(e.cExportDropped, &e.lastDropped)
	}
}

// match picks the profile for a packet: the longest destination prefix whose
// profile's flow fields match, else the first profile without a prefix that
// matches.
func (e *encap) match(p *packet.Packet, d []byte, l3 int) *profile {
	if len(e.lpm) == 0 && len(e.defaults) == 1 && !e.defaults[0].needL4 && e.defaults[0].src == nil {
		return e.defaults[0]
	}
	var dst netip.Addr
	if len(e.lpm) > 0 {
		dst = netip.AddrFrom16([16]byte(d[l3+24 : l3+40]))
	}
	for i := range e.lpm {
		if e.lpm[i].prefix.Contains(dst) && e.lpm[i].prof.flowMatch(p, d, l3) {
			return e.lpm[i].prof
		}
	}
	for _, pr := range e.defaults {
		if pr.flowMatch(p, d, l3) {
			return pr
		}
	}
	return nil
}

// flowMatch checks the source prefix, protocol and ports.
func (pr *profile) flowMatch(p *packet.Packet, d []byte, l3 int) bool {
	if pr.src != nil {
		src := netip.AddrFrom16([16]byte(d[l3+8 : l3+24]))
		ok := false
		for _, px := range pr.src {
			if px.Contains(src) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	if !pr.needL4 {
		return true
	}
	l, err := p.ParseLayers()
	if err != nil || l.IPVersion != 6 {
		return false
	}
	if pr.proto >= 0 && int(l.Proto) != pr.proto {
		return false
	}
	if pr.sport >= 0 || pr.dport >= 0 {
		if l.Proto != packet.ProtocolUDP && l.Proto != packet.ProtocolTCP || l.Flags&packet.FlagLaterFragment != 0 || int(l.L4)+4 > len(d) {
			return false
		}
		if pr.sport >= 0 && int(binary.BigEndian.Uint16(d[l.L4:])) != pr.sport {
			return false
		}
		if pr.dport >= 0 && int(binary.BigEndian.Uint16(d[l.L4+2:])) != pr.dport {
			return false
		}
	}
	return true
}

func (e *encap) one(ctx *plugins.Context, b *packet.Burst, i int) {
	p := b.H[i].P()
	d := p.Data()
	l3 := ipv6At14(p, d)
	if l3 < 0 {
		e.cNotIPv6.Inc()
		return
	}
	if e.receiveLoop && d[l3+6] == packet.ProtocolHopByHop && [16]byte(d[l3+24:l3+40]) == e.loopAddr && e.loopedBack(ctx, b.H[i], d, l3) {
		return
	}
	pr := e.match(p, d, l3)
	if pr == nil {
		e.cNoMatch.Inc()
		return
	}
	if pr.n > 1 {
		c := pr.count
		if pr.count++; pr.count == pr.n {
			pr.count = 0
		}
		if c >= pr.k {
			e.cRate.Inc()
			return
		}
	} else if pr.k == 0 {
		e.cRate.Inc()
		return
	}
	local := p.Flags()&packet.FlagLocal != 0
	mode := pr.mode
	if mode == modeAuto {
		mode = modeEncap
		if local {
			mode = modeInline
		}
	}
	if mode == modeInline && !local && !e.inlineTransit {
		e.cNotLocal.Inc()
		return
	}
	ipLen := packet.IPv6Len + int(binary.BigEndian.Uint16(d[l3+4:]))
	if l3+ipLen > len(d) {
		p.Drop(reasonHbHTooLong)
		return
	}
	if mode == modeEncap {
		e.encapsulate(ctx, b, i, pr, l3, ipLen)
		return
	}
	e.inline(ctx, b, i, pr, l3, ipLen)
}

// quick is encapsulate with profile pr, the only one (see setQuick), for an
// untagged IPv6 frame with headroom for the outer headers: one gives it the
// same bytes, parse record and scratch, through more general steps. It
// reports false, having changed nothing, to leave the packet to one.
func (e *encap) quick(ctx *plugins.Context, p *packet.Packet, pr *profile) bool {
	const l3 = 14
	d := p.Data()
	if len(d) < l3+packet.IPv6Len || d[12] != 0x86 || d[13] != 0xDD || d[l3]>>4 != 6 || p.LayersValid() ||
		pr.mode == modeAuto && p.Flags()&packet.FlagLocal != 0 {
		return false
	}
	ipLen := packet.IPv6Len + (int(d[l3+4])<<8 | int(d[l3+5]))
	n := len(pr.tmplEncap)
	if l3+ipLen > len(d) || ipLen+n > 0xFFFF+packet.IPv6Len || (e.mtu > 0 && ipLen+n > e.mtu) ||
		n > p.Headroom() || l3 > len(d)-l3 {
		return false
	}
	if _, err := p.Prepend(n); err != nil {
		return false
	}
	d = p.Data()
	// InsertGap's move of the smaller side, the head, then the template.
	moveHead(d, 0, n, l3)
	hl := pr.writeOuter(d[l3:l3+n], d[l3+n:], ipLen)
	if pr.plan != nil {
		e.writeNode(ctx, p, pr.plan, &e.vals, d[l3+packet.IPv6Len+4+pr.traceOff+pr.nodeAt:], hl)
	}
	pr.seq++
	l := p.Layers()
	*l = pr.layers
	end := l3 + n + ipLen
	l.Len, l.End = uint32(len(d)), uint32(end)
	if end < len(d) {
		l.Flags |= packet.FlagTrailer
	}
	p.SetFlag(packet.FlagLayers)
	c := scratchOf(p)
	*c = pr.scratch
	c.winOff, c.winLen = uint16(p.Offset()), uint16(p.Len())
	e.cEncap.Inc()
	pr.cInserted.Inc()
	return true
}

// writeOuter writes the outer IPv6 header and options into gap, in front of
// the inner header: the profile's template, with the inner header's version,
// traffic class and flow label, the payload length of an inner packet of
// ipLen bytes, and the hop limit, which it returns.
func (pr *profile) writeOuter(gap, inner []byte, ipLen int) uint8 {
	copy(gap, pr.tmplEncap)
	copy(gap[:4], inner[:4])
	binary.BigEndian.PutUint16(gap[4:], uint16(len(pr.tmplEncap)-packet.IPv6Len+ipLen))
	hl := inner[7]
	if pr.hopLimit != 0 {
		hl = uint8(pr.hopLimit)
	}
	gap[7] = hl
	return hl
}

// encapsulate puts the packet in an outer IPv6 header with the profile's
// options: the kernel's ip6ip6 encapsulation (ioam6_do_encap), the outer
// header a copy of the inner one but for the addresses and next header.
func (e *encap) encapsulate(ctx *plugins.Context, b *packet.Burst, i int, pr *profile, l3, ipLen int) {
	n := len(pr.tmplEncap)
	if ipLen+n > 0xFFFF+packet.IPv6Len || (e.mtu > 0 && ipLen+n > e.mtu) {
		e.cMTU.Inc()
		return
	}
	p := b.H[i].P()
	valid := p.LayersValid()
	var old packet.Layers
	if valid {
		old = *p.Layers()
	}
	gap, ok := insertHead(p, l3, n)
	if !ok {
		var err error
		if gap, err = b.InsertGap(i, l3, n, ctx.Env); err != nil {
			e.cNoRoom.Inc()
			return
		}
		p = b.H[i].P()
	}
	d := p.Data()
	hl := pr.writeOuter(gap, d[l3+n:], ipLen)
	e.fill(ctx, p, pr, d, l3+packet.IPv6Len+4, l3+packet.IPv6Len+pr.hbhLen+4, hl)
	e.encapLayers(p, d, pr, l3, n, ipLen, valid, &old)
	e.cEncap.Inc()
	pr.cInserted.Inc()
}

// encapLayers writes the Layers record and the scratch of an encapsulated
// packet from what encap knows, without a parse: the engine's own parse would
// find the outer header, its options headers, and IPv6 as the upper layer.
func (e *encap) encapLayers(p *packet.Packet, d []byte, pr *profile, l3, n, ipLen int, valid bool, old *packet.Layers) {
	l := p.Layers()
	if valid {
		*l = packet.Layers{EtherType: old.EtherType, VLAN: old.VLAN, VLANs: old.VLANs}
	} else {
		*l = packet.Layers{EtherType: packet.EtherTypeIPv6}
		for v := 0; v < (l3-14)/4 && v < packet.MaxVLANTags; v++ {
			l.VLAN[v] = binary.BigEndian.Uint16(d[14+4*v:])
			l.VLANs++
		}
	}
	end := l3 + n + ipLen
	l.Len, l.End = uint32(len(d)), uint32(end)
	l.L3, l.IPVersion = uint16(l3), 6
	l.Flags = packet.FlagIPv6
	if end < len(d) {
		l.Flags |= packet.FlagTrailer
	}
	hbh := l3 + packet.IPv6Len
	if pr.hbhLen > 0 {
		l.HopByHop = uint16(hbh)
		l.NumExt++
	}
	if pr.destLen > 0 {
		// No Routing header follows: the parse calls it the final
		// destination's.
		l.DestOpts2 = uint16(hbh + pr.hbhLen)
		l.NumExt++
	}
	l.L4, l.Proto = uint16(l3+n), packet.ProtocolIPv6
	p.SetFlag(packet.FlagLayers)
	if pr.hbhLen > 0 && pr.destLen == 0 {
		c := scratchOf(p)
		opts := hbh + 4
		*c = scratch{magic: scratchMagic, hbh: uint16(hbh), winOff: uint16(p.Offset()), winLen: uint16(p.Len())}
		if pr.traceOff >= 0 {
			c.traces, c.trace = 1, uint16(opts+pr.traceOff)
		}
		if pr.potOff >= 0 {
			c.pot = uint16(opts + pr.potOff)
		}
		if pr.dexOff >= 0 {
			c.dex = uint16(opts + pr.dexOff)
		}
	}
}

// inline adds the profile's options to the packet itself: a new Hop-by-Hop
// header, or its options appended to the existing one.
func (e *encap) inline(ctx *plugins.Context, b *packet.Burst, i int, pr *profile, l3, ipLen int) {
	p := b.H[i].P()
	d := p.Data()
	valid := p.LayersValid()
	hasHbH := d[l3+6] == packet.ProtocolHopByHop
	hl := d[l3+7]
	if !hasHbH {
		n := len(pr.tmplInline)
		if ipLen+n > 0xFFFF+packet.IPv6Len || (e.mtu > 0 && ipLen+n > e.mtu) {
			e.cMTU.Inc()
			return
		}
		at := l3 + packet.IPv6Len
		gap, err := b.InsertGap(i, at, n, ctx.Env)
		if err != nil {
			e.cNoRoom.Inc()
			return
		}
		p = b.H[i].P()
		d = p.Data()
		copy(gap, pr.tmplInline)
		next := d[l3+6]
		last := 0
		if pr.hbhLen > 0 && pr.destLen > 0 {
			last = pr.hbhLen
		}
		gap[last] = next
		first := uint8(packet.ProtocolHopByHop)
		if pr.hbhLen == 0 {
			first = packet.ProtocolDestOpts
		}
		d[l3+6] = first
		addPayloadLength(d, l3, n)
		e.fill(ctx, p, pr, d, at+4, at+pr.hbhLen+4, hl)
		if valid && pr.destLen == 0 {
			l := p.Layers()
			shiftLayers(l, at, n)
			l.HopByHop = uint16(at)
			l.NumExt++
			p.SetFlag(packet.FlagLayers)
			var s scan
			if scanPacket(d, l3, &s) == nil {
				storeScratch(p, &s)
			}
		}
		e.cInline.Inc()
		pr.cInserted.Inc()
		return
	}
	// Grow the existing Hop-by-Hop header (the kernel leaves such packets
	// alone), then add E2E in a Destination Options header after it. A
	// header whose options run past it cannot take more: the packet is
	// malformed, and the kernel would drop it.
	hbh := l3 + packet.IPv6Len
	if err := checkHeader(d, hbh, l3+ipLen); err != nil {
		p.Drop(dropReason(err))
		return
	}
	if next := hbh + (int(d[hbh+1])+1)*8; pr.destLen > 0 && d[hbh] == packet.ProtocolDestOpts {
		if err := checkHeader(d, next, l3+ipLen); err != nil {
			p.Drop(dropReason(err))
			return
		}
	}
	if ipLen+len(pr.opts)+8+pr.destLen > 0xFFFF+packet.IPv6Len || (e.mtu > 0 && ipLen+len(pr.opts)+8+pr.destLen > e.mtu) {
		e.cMTU.Inc()
		return
	}
	optsAt, destAt := -1, -1
	if len(pr.opts) > 0 {
		at, added, err := growHeader(b, i, hbh, pr.opts, ctx.Env)
		if err != nil {
			e.cNoRoom.Inc()
			return
		}
		p = b.H[i].P()
		d = p.Data()
		addPayloadLength(d, l3, added)
		optsAt = at
	}
	if pr.destLen > 0 {
		hlen := (int(d[hbh+1]) + 1) * 8
		next := hbh + hlen
		if d[hbh] == packet.ProtocolDestOpts {
			at, added, err := growHeader(b, i, next, pr.e2eBlock, ctx.Env)
			if err != nil {
				e.cNoRoom.Inc()
				return
			}
			p = b.H[i].P()
			d = p.Data()
			addPayloadLength(d, l3, added)
			destAt = at
		} else {
			gap, err := b.InsertGap(i, next, pr.destLen, ctx.Env)
			if err != nil {
				e.cNoRoom.Inc()
				return
			}
			p = b.H[i].P()
			d = p.Data()
			putFreshHeader(gap, d[hbh], pr.e2eBlock)
			d[hbh] = packet.ProtocolDestOpts
			addPayloadLength(d, l3, pr.destLen)
			destAt = next + 4
		}
	}
	e.fill(ctx, p, pr, d, optsAt, destAt, hl)
	e.cGrown.Inc()
	pr.cInserted.Inc()
}

// fill writes the per-packet fields of the profile's options: opts is the
// offset of the HbH option block in d, e2e that of the E2E block (-1 or
// unused when the profile has none).
func (e *encap) fill(ctx *plugins.Context, p *packet.Packet, pr *profile, d []byte, opts, e2e int, hopLimit uint8) {
	if pr.plan != nil && opts >= 0 {
		e.writeNode(ctx, p, pr.plan, &e.vals, d[opts+pr.traceOff+pr.nodeAt:], hopLimit)
	}
	if pr.potKey != nil && opts >= 0 {
		pot := POT(d[opts+pr.potOff+OptionHeaderLen:])
		r := pr.potKey.Random(e.rng)
		pot.SetRandom(r)
		pot.SetCumulative(pr.potKey.Update(r, 0))
	}
	if pr.dexExt&DEXSequence != 0 && opts >= 0 {
		DEX(d[opts+pr.dexOff+OptionHeaderLen:]).SetSequence(uint32(pr.seq*e.lcores + e.lcore))
	}
	if pr.e2eType != 0 && pr.destLen > 0 && e2e >= 0 {
		var f E2EFields
		seq := pr.seq*e.lcores + e.lcore
		f.Seq64, f.Seq32 = seq, uint32(seq)
		if pr.e2eType&(E2ESeconds|E2EFraction) != 0 {
			t := e.now(ctx)
			f.Seconds, f.Fraction = t.sec[pr.e2eFmt], t.frac[pr.e2eFmt]
		}
		ee := E2E(d[e2e+OptionHeaderLen:])
		ee.Encode(ee.NamespaceID(), pr.e2eType, &f)
	}
	pr.seq++
}

// loopedBack consumes a looped-back copy addressed to this node and records
// it. It reports false for packets that are not one.
func (e *encap) loopedBack(ctx *plugins.Context, h packet.Handle, d []byte, l3 int) bool {
	p := h.P()
	s := &e.scan
	if scanPacket(d, l3, s) != nil || !isLoopedBack(s) {
		return false
	}
	e.cLoopRecv.Inc()
	if e.exp != nil {
		r := &e.rec
		*r = Record{Mono: ctx.Now, Unix: ctx.Now + ctx.Clock.UnixOffset(), Role: RoleLoopback, Lcore: uint8(ctx.Instance), Len: uint16(p.Len())}
		r.setAddrs(d, s)
		opt := Option(d[s.trace[0]:])
		tr := Trace(opt.Body())
		r.Have = HaveTrace
		r.TraceNS, r.TraceOption, r.TraceFlags, r.TraceType = tr.NamespaceID(), opt.IOAMType(), tr.Flags(), tr.TraceType()
		r.NodeLen, r.RemLen = uint8(tr.NodeLen()), uint8(tr.RemainingLen())
		if ns := e.ns.lookup(r.TraceNS); ns != nil {
			r.Format = ns.Timestamp
		}
		data := tr.Data()
		if opt.IOAMType() == TypePreallocatedTrace {
			data = data[min(tr.RemainingLen()*4, len(data)):]
		}
		r.DataLen = uint8(copy(r.Data[:], data))
		e.exp.ring.Offer(r)
	}
	p.Consume()
	ctx.Env.Free(h)
	return true
}
