package stamp

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	clitable "github.com/linerate/linerate/appliance/cli/table"
	"github.com/linerate/linerate/appliance/offload"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/appliance/stats"
	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/plugins"
	"github.com/linerate/linerate/plugins/stamp/bpf"
	"google.golang.org/protobuf/encoding/protojson"
)

func init() {
	plugins.Register(plugins.Kind{Name: "stamp.collector",
		Summary: "STAMP Collector: takes T4 of reflected test packets, keeps bounded per-session records and delay, jitter and loss metrics",
		New:     newCollector})
}

// Drop reasons of the STAMP stages.
var (
	reasonShort         = packet.RegisterReason("stamp_short")             // a UDP payload shorter than the base test packet
	reasonUnknown       = packet.RegisterReason("stamp_unknown_session")   // an SSID no session has (or in the other mode)
	reasonBadHMAC       = packet.RegisterReason("stamp_bad_hmac")          // the base packet's or the HMAC TLV's HMAC does not verify
	reasonTLVOverrun    = packet.RegisterReason("stamp_tlv_overrun")       // a TLV runs past the packet
	reasonWrongSource   = packet.RegisterReason("stamp_wrong_source")      // a reply not from the session's reflector, a test packet not from its pinned sender
	reasonNotAllowed    = packet.RegisterReason("stamp_not_allowed")       // a source outside the reflector's allowed prefixes
	reasonRateLimited   = packet.RegisterReason("stamp_rate_limited")      // over the reflector's per-source rate
	reasonReplyTooBig   = packet.RegisterReason("stamp_reply_too_big")     // the reply would be larger than the request
	reasonNotRunning    = packet.RegisterReason("stamp_session_stopped")   // a session that exists but is stopped
	reasonNoReply       = packet.RegisterReason("stamp_no_reply")          // a Return Path Control Code asked for no reply
	reasonBadPath       = packet.RegisterReason("stamp_bad_return_path")   // a return path that does not fit the packet
	reasonWrongCollecto = packet.RegisterReason("stamp_wrong_collector")   // replies of one session reach two collector stages
	reasonReflected     = packet.RegisterReason("stamp_reflected")         // a Session-Reflector's packet no sender session here waits for
	reasonBadSource     = packet.RegisterReason("stamp_bad_source")        // a source no reply may go to: multicast, broadcast, unspecified, loopback
	reasonGroupDest     = packet.RegisterReason("stamp_group_destination") // a request to a multicast or broadcast address, IP or MAC
)

type collectorConfig struct {
	Port        *int   `toml:"port"`
	CheckSource *bool  `toml:"check_source"`
	Report      string `toml:"report"`
	Offload     string `toml:"offload"`
	// IPFIXInterval is how often the sessions' results go to the [ipfix]
	// collectors (ipfix.go); default 10s.
	IPFIXInterval config.Duration `toml:"ipfix_interval"`
}

// collector is the stamp.collector stage: it takes the reflected test
// packets of the sender sessions, timestamps them (T4 is the rx time), checks
// them, and turns them into records and metrics. Anything else passes.
type collector struct {
	name     string
	reg      *Registry
	inst     int
	port     int // the one port replies come to; 0 any; -1 each session's src_port
	checkSrc bool
	report   *reportSink
	ipfix    *ipfixState // nil without an [ipfix] table

	cRecords, cDup, cReorder, cUnsync, cLost *stats.Counter
	hRTT, hFwd, hBwd                         *stats.Histogram
	cache                                    sessionCache[txSession]
	ctab                                     *txTable
	uoff                                     int64
	ports                                    [1 << 10]uint64 // bit p: a session's src_port is p (port -1)

	// A burst's records, put into their FIFOs at its end (putRecs).
	batching bool
	nrec     int
	recs     [packet.MaxBurst]pendingRec
	sink     uint64 // what warmCo read, kept so that its reads stay

	xdp     *coXDP // the in-kernel part, nil without offload
	onEvent func(*bpf.Event)
	tickCtx *plugins.Context
}

// reportSink is where a collector stage's instances write their summaries.
type reportSink struct {
	mu   sync.Mutex
	path string
}

func newCollector(s *plugins.Setup) (plugins.Stage, error) {
	var c collectorConfig
	if err := s.Config.Decode(&c); err != nil {
		return nil, err
	}
	port := -1
	if c.Port != nil {
		if port = *c.Port; port < 0 || port > 65535 {
			return nil, fmt.Errorf("stamp.collector: port %d is outside 0..65535", port)
		}
	}
	st := &collector{name: s.Name, reg: registryOf(s), inst: s.Instance, port: port,
		checkSrc: c.CheckSource == nil || *c.CheckSource,
		cRecords: s.Counters.New("records", "reflected test packets measured"),
		cDup:     s.Counters.New("duplicates", "replies with a sequence number seen before"),
		cReorder: s.Counters.New("reordered", "replies after a later sequence number"),
		cUnsync:  s.Counters.New("unsynchronized", "records with an S bit of 0: one-way delays only indicative"),
		cLost:    s.Counters.New("records_lost", "records the session FIFO had no room for"),
		hRTT:     s.Histograms("rtt", "STAMP round-trip delay (T4−T1)−(T3−T2), all sessions", "ns"),
		hFwd:     s.Histograms("forward_delay", "STAMP one-way delay T2−T1, all sessions", "ns"),
		hBwd:     s.Histograms("backward_delay", "STAMP one-way delay T4−T3, all sessions", "ns"),
	}
	if c.IPFIXInterval != 0 && time.Duration(c.IPFIXInterval) < time.Second {
		return nil, fmt.Errorf("stamp.collector: ipfix_interval %v is below 1s", time.Duration(c.IPFIXInterval))
	}
	var err error
	if st.ipfix, err = setupIPFIX(s, time.Duration(c.IPFIXInterval)); err != nil {
		return nil, err
	}
	if c.Report != "" {
		st.report = s.Shared("stamp.collector/report", func() any { return &reportSink{path: c.Report} }).(*reportSink)
	}
	st.reg.addCollector(s.Name)
	mode, err := offload.ParseMode(c.Offload)
	if err != nil {
		return nil, fmt.Errorf("stamp.collector: %w", err)
	}
	if mode != offload.Off {
		if err := st.askXDP(s, mode); err != nil {
			return nil, err
		}
	}
	return st, nil
}

// ssidOf finds the SSID of a test packet, and whether it is in authenticated
// mode: in unauthenticated mode it is at octet 14, where an authenticated
// packet has MBZ octets, and the SSID is never zero (RFC 8972 §3).
func ssidOf(pay []byte) (uint16, bool) {
	if id := binary.BigEndian.Uint16(pay[14:]); id != 0 {
		return id, false
	}
	if len(pay) >= BaseAuthLen {
		return binary.BigEndian.Uint16(pay[26:]), true
	}
	return 0, false
}

// follows reports whether dst is a port replies come to.
func (c *collector) follows(dst uint16) bool {
	switch c.port {
	case -1:
		return c.ports[dst>>6]&(1<<(dst&63)) != 0
	case 0:
		return true
	}
	return int(dst) == c.port
}

// Process takes replies: reflected packets to a session's sender. Test
// packets (a reflector's business), and replies to other addresses (one
// this node's reflector made), pass.
func (c *collector) Process(ctx *plugins.Context, b *packet.Burst) {
	t := c.reg.tx.Load()
	if t != c.ctab {
		c.ctab = t
		c.cache.clear()
		c.ports = [1 << 10]uint64{}
		for _, s := range t.m {
			p := s.cfg.SrcPort
			c.ports[p>>6] |= 1 << (p & 63)
		}
	}
	tai := 37
	if st := ctx.Clock.Sync(); st.TAIOffset != 0 {
		tai = st.TAIOffset
	}
	c.uoff = ctx.Clock.UnixOffset()
	multi := ctx.Env.NumInstances() > 1
	if c.warmCo(ctx, b, t, multi) {
		c.batching = true
		defer c.endBatch()
	}
	for i := 0; i < b.N; i++ {
		h := b.H[i]
		p := h.P()
		l, err := p.ParseLayers()
		if err != nil || l.Flags&packet.FlagUDP == 0 {
			continue
		}
		data := p.Data()
		u := packet.UDP(data[l.L4:l.End])
		dport := u.DstPort()
		if !c.follows(dport) {
			continue
		}
		if srh := l.SRH(data); srh != nil && srh.SegmentsLeft() > 0 {
			continue // not at its final destination yet
		}
		pay := u[packet.UDPLen:u.Length()]
		if len(pay) < BaseLen {
			p.Drop(reasonShort)
			continue
		}
		id, auth := ssidOf(pay)
		if !reflected(pay, auth) {
			continue // a test packet: a reflector's
		}
		s := c.cache.lookup(id)
		if s == nil {
			s = t.get(id)
			c.cache.put(id, s)
		}
		if s == nil || s.cfg.Auth != auth || (c.port < 0 && dport != s.cfg.SrcPort) {
			p.Drop(reasonUnknown)
			continue
		}
		if !s.toSender(data, l) {
			continue // a reply to another node's sender
		}
		if c.checkSrc && !s.fromReflector(data, l) {
			p.Drop(reasonWrongSource)
			continue
		}
		if key := sessionKey(id); multi && !ctx.Mine(key) {
			ctx.Handoff(h, ctx.Owner(key))
			continue
		}
		if r := c.take(ctx, s, p, data, l, pay, tai); r != 0 {
			p.Drop(r)
			continue
		}
		ctx.Env.Free(h)
		p.Consume()
	}
}

// toSender checks that a reply is addressed to the session's source.
func (s *txSession) toSender(data []byte, l *packet.Layers) bool {
	if l.IPVersion == 4 {
		return s.ipv4 && packet.IPv4(data[l.L3:l.End]).Dst() == s.src4
	}
	return !s.ipv4 && packet.IPv6(data[l.L3:l.End]).Dst() == s.src16
}

// fromReflector checks that a reply comes from the session's reflector.
func (s *txSession) fromReflector(data []byte, l *packet.Layers) bool {
	if l.IPVersion == 4 {
		return s.ipv4 && packet.IPv4(data[l.L3:l.End]).Src() == s.replySrc4
	}
	return !s.ipv4 && packet.IPv6(data[l.L3:l.End]).Src() == s.replySrc
}

// take measures one reply on the session's owner lcore; it returns a drop
// reason, or 0 when the packet became a record.
func (c *collector) take(ctx *plugins.Context, s *txSession, p *packet.Packet, data []byte, l *packet.Layers,
	pay []byte, tai int) packet.Reason {
	if owner := s.col.Load(); owner != c {
		if owner != nil && owner.name != c.name {
			return reasonWrongCollecto
		}
		s.col.Store(c)
	}
	if gen := s.sentGen.Load(); gen != s.rx.gen {
		s.rx.reset()
		s.rx.gen = gen
	}
	lay := s.rlay
	if s.cfg.Auth && !s.rx.mac.verify(pay[HMACCovered:BaseAuthLen], pay[:HMACCovered], nil) {
		return reasonBadHMAC
	}
	var r Record
	// TLVs: structure first, then the HMAC TLV, then their content.
	it := NewTLVIter(pay[lay.base:])
	hmacAt, misplaced := -1, false
	for tv, ok := it.Next(); ok; tv, ok = it.Next() {
		f := tv.Flags()
		if hmacAt >= 0 && tv.Type() != TLVExtraPadding {
			misplaced = true // only Extra Padding may follow the HMAC TLV (RFC 8972 §4.8)
		}
		if f&FlagU != 0 {
			r.Flags |= RecTLVUnrecognized
		}
		if f&FlagM != 0 {
			r.Flags |= RecTLVMalformed
		}
		if f&FlagI != 0 {
			r.Flags |= RecTLVIntegrity
		}
		switch tv.Type() {
		case TLVHMAC:
			hmacAt = lay.base + it.Off()
		case TLVDirectMeasurement:
			if f&(FlagU|FlagM|FlagI) == 0 {
				if dm, err := DecodeDirectMeasurement(tv.Value()); err == nil {
					r.DirectMeasurement, r.Flags = dm, r.Flags|RecDirectMeasurement
				}
			}
		case TLVClassOfService:
			if f&(FlagU|FlagM|FlagI) == 0 {
				if cos, err := DecodeClassOfService(tv.Value()); err == nil {
					r.CoS, r.Flags = cos, r.Flags|RecCoS
				}
			}
		}
	}
	if it.Err() != nil {
		return reasonTLVOverrun
	}
	// A session that sends an HMAC TLV takes only replies whose HMAC TLV is
	// there, last, and verifies: its flags (I included) and its values are
	// the reflector's only then. One that does not send it still checks one
	// that comes, when it has a key.
	if hmacAt < 0 && s.hmacTLV >= 0 {
		return reasonBadHMAC
	}
	if hmacAt >= 0 && s.rx.mac != nil {
		tv := TLV(pay[hmacAt:])
		if misplaced || tv.Len() != HMACLen ||
			!s.rx.mac.verify(pay[hmacAt+TLVHeaderLen:hmacAt+TLVHeaderLen+HMACLen], pay[:4], pay[lay.base:hmacAt]) {
			return reasonBadHMAC
		}
	}
	var hop uint8
	if l.IPVersion == 4 {
		hop = packet.IPv4(data[l.L3:]).TTL()
	} else {
		hop = packet.IPv6(data[l.L3:]).HopLimit()
	}
	c.record(s, &r, pay, hop, p.RxTime+c.uoff, tai)
	return 0
}

// record finishes r, the record of reply pay (its TLVs read) that came with
// hop limit hop at T4 (Unix ns), and keeps it: the session's statistics, the
// stage's histograms and counters, the session's FIFO. Both paths end here:
// take's, and the XDP program's through its ring (takeXDP).
func (c *collector) record(s *txSession, r *Record, pay []byte, hop uint8, t4 int64, tai int) {
	lay := s.rlay
	r.SSID = s.id
	r.ReflectorSeq = binary.BigEndian.Uint32(pay[lay.seq:])
	r.Seq = binary.BigEndian.Uint32(pay[lay.sSeq:])
	r.T3Wire = binary.BigEndian.Uint64(pay[lay.ts:])
	r.T2Wire = binary.BigEndian.Uint64(pay[lay.rxTS:])
	r.T1Wire = binary.BigEndian.Uint64(pay[lay.sTS:])
	r.ReflectorErr = ErrorEstimate(binary.BigEndian.Uint16(pay[lay.errEst:]))
	r.SenderErr = ErrorEstimate(binary.BigEndian.Uint16(pay[lay.sErr:]))
	r.SenderTTL = pay[lay.sTTL]
	r.HopLimit = hop
	r.T1 = unixTime(r.T1Wire, r.SenderErr.PTP(), tai)
	r.T2 = unixTime(r.T2Wire, r.ReflectorErr.PTP(), tai)
	r.T3 = unixTime(r.T3Wire, r.ReflectorErr.PTP(), tai)
	r.T4 = t4
	if !r.SenderErr.Synchronized() || !r.ReflectorErr.Synchronized() {
		r.Flags |= RecUnsynchronized
		c.cUnsync.Inc()
	}
	f := s.rx.add(r, s.cfg.Stateful)
	r.Flags |= f
	switch {
	case f&RecDuplicate != 0:
		c.cDup.Inc()
	default:
		if f&RecReordered != 0 {
			c.cReorder.Inc()
		}
		if v := r.RTT(); v >= 0 {
			c.hRTT.Record(uint64(v))
		}
		if v := r.Forward(); v >= 0 {
			c.hFwd.Record(uint64(v))
		}
		if v := r.Backward(); v >= 0 {
			c.hBwd.Record(uint64(v))
		}
	}
	c.cRecords.Inc()
	c.keep(s, r)
}

// metricsOf summarises a session. It runs on the session's collector lcore
// (through host.Host.Do), or anywhere once the engine has stopped.
func metricsOf(s *txSession) Metrics {
	m := Metrics{}
	sent := uint64(0)
	if s.sentGen.Load() == s.rx.gen {
		sent = s.sent.Load()
	}
	m = s.rx.metrics(sent, s.cfg.Stateful)
	m.SSID = s.id
	m.Running = s.running()
	return m
}

// Start starts the IPFIX export.
func (c *collector) Start(ctx *plugins.Context) error {
	if c.ipfix != nil {
		c.ipfix.sh.start()
	}
	return nil
}

// Tick takes the records of replies taken in the kernel (offload), and exports
// the sessions' results over IPFIX once an interval.
func (c *collector) Tick(ctx *plugins.Context) {
	c.xdpTick(ctx)
	if c.ipfix != nil {
		c.ipfixTick(ctx)
	}
}

// Stop writes the report of the sessions this instance measured, and stops
// the IPFIX export.
func (c *collector) Stop(ctx *plugins.Context) {
	if c.ipfix != nil {
		c.ipfixAll(ctx)
		defer c.ipfix.sh.stop()
	}
	if c.report == nil {
		return
	}
	var ms []Metrics
	var ss []*txSession
	for _, s := range c.reg.txSessions() {
		if s.col.Load() == c {
			ms = append(ms, metricsOf(s))
			ss = append(ss, s)
		}
	}
	if len(ms) == 0 {
		return
	}
	c.report.mu.Lock()
	defer c.report.mu.Unlock()
	if c.report.path == "-" {
		// Standard output is the program's: text off its live line, or one
		// record a session under systemd or a JSON log.
		for i := range ms {
			var b bytes.Buffer
			WriteReport(&b, ss[i].describe(), &ms[i], clitable.Options{})
			m, _ := protojson.Marshal(MetricsProto(&ms[i]))
			err := ctx.Report(b.Bytes(), "stamp report", slog.String("session", ss[i].describe()),
				slog.Any("metrics", json.RawMessage(m)))
			if err != nil {
				ctx.Log.Warn("stamp report", "err", err)
				return
			}
		}
		return
	}
	f, err := os.OpenFile(c.report.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		ctx.Log.Warn("stamp report", "file", c.report.path, "err", err)
		return
	}
	defer f.Close()
	for i := range ms {
		WriteReport(f, ss[i].describe(), &ms[i], clitable.Options{})
	}
}
