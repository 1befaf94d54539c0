package stamp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/linerate/linerate/appliance/packet"
)

// SenderSession is a Session-Sender session as the config file and the
// control API give it. Zero fields take the sender stage's defaults.
type SenderSession struct {
	SSID  uint16
	Stage string // the stamp.sender stage that transmits it; "" for the only one

	Src           netip.Addr   // source address of the test packets
	Reflector     netip.Addr   // the Session-Reflector's address: the final destination
	SrcPort       uint16       // sender's UDP port (the collector's)
	ReflectorPort uint16       // default 862
	Segments      []netip.Addr // forward SID list in travel order: an SRH when set

	Interval time.Duration // between test packets
	Count    uint64        // stop after this many (0: no limit)
	Duration time.Duration // stop after this long (0: no limit)

	PTP      bool // truncated PTPv2 timestamps instead of NTP
	Auth     bool // authenticated mode (RFC 8762 §4.2.2)
	Key      *Key // authenticated mode and the HMAC TLV
	HMACTLV  bool // add an HMAC TLV (added anyway in authenticated mode with TLVs)
	TLVs     TLVSpec
	Padding  int  // Extra Padding TLV of this many octets (0: none)
	Stateful bool // the reflector keeps its own sequence: loss splits by direction

	HopLimit uint8
	DSCP     uint8
	SrcMAC   [6]byte
	DstMAC   [6]byte
	VLAN     uint16

	Start   bool // start when the engine starts (config sessions)
	Records int  // record FIFO size
}

// TLVSpec says which TLVs a sender puts in its test packets.
type TLVSpec struct {
	TimestampInfo     bool
	Location          bool
	DirectMeasurement bool
	FollowUp          bool
	DestinationNode   bool // a Destination Node Address TLV naming the reflector
	AccessReport      bool
	AccessID          uint8 // 1: 3GPP, 2: non-3GPP
	ReturnCode        uint8 // 1: network available, 2: unavailable
	CoS               bool
	CoSDSCP           uint8        // DSCP1: what the reflected packet should carry
	ReturnPath        []netip.Addr // a Return Path TLV with this SRv6 segment list
	ReturnControlCode *uint32      // a Return Path TLV with this Control Code
}

// ReflectorSession is a Session-Reflector session.
type ReflectorSession struct {
	SSID       uint16
	Stage      string
	Stateful   bool         // keep a sequence of its own (RFC 8762 §4.2)
	Sender     netip.Addr   // answer only this sender (unset: any allowed source)
	Source     netip.Addr   // reply source (unset: the address the test packet came to)
	ReturnPath []netip.Addr // SRv6 return path in travel order (unset: straight back)
	PTP        *bool        // reply timestamp format (unset: the sender's)
	Auth       bool
	Key        *Key
	Start      bool
}

// Timestamp formats.
const (
	formatNTP = iota
	formatPTP
)

// txSession is a sender session at run time.
type txSession struct {
	id    uint16
	stage string
	cfg   SenderSession

	// The frame every test packet starts from; per packet only the sequence
	// number, the timestamp, the Error Estimate, the HMACs, the Direct
	// Measurement counter and the UDP checksum change.
	tmpl      []byte
	l3, l4    int
	pay       int // offset of the STAMP payload
	ipv4      bool
	pseudo    uint16 // UDP pseudo-header sum, the UDP length included
	lay       *layout
	rlay      *layout // the layout replies come in
	hmacTLV   int     // payload offset of the HMAC TLV, or -1
	dmOff     int     // payload offset of the Direct Measurement value, or -1
	interval  int64
	finalDst  netip.Addr
	replySrc  [16]byte // the address replies come from (the reflector)
	replySrc4 [4]byte
	src16     [16]byte // the address replies go to (the session's source)
	src4      [4]byte

	// Control → lcore. ctl holds the run generation (upper bits) and the
	// running bit; Start bumps the generation, Stop clears the bit.
	ctl atomic.Uint64

	// Owned by the sender stage's owner lcore.
	tx struct {
		gen     uint64
		seq     uint32
		next    int64
		started int64
		sent    uint64
		mac     *mac
	}
	sent    atomic.Uint64 // published tx.sent, for the collector's loss and the API
	sentGen atomic.Uint64 // the generation sent counts
	// runStart is tx.started, published before sentGen: where the IPFIX
	// export's first interval of a run begins.
	runStart atomic.Int64

	// Owned by the collector stage's owner lcore; col is the collector
	// instance that measures the session. rx is its hot record (~740 bytes,
	// out of line: the sender's fields stay dense, a few cache lines a
	// session), and rx.cold the 28 KiB a reply does not touch.
	rx  *collectorState
	col atomic.Pointer[collector]
	// ipfixPrev is the session at the last IPFIX interval's end (ipfix.go).
	ipfixPrev *ipfixPrev

	// Records leave through a bounded FIFO: the collector's lcore produces, the
	// control plane consumes under fifoMu (GetStampSessionResults and the
	// stream both drain it).
	fifo     *recFIFO
	fifoMu   sync.Mutex
	fifoLost atomic.Uint64
	created  time.Time
	fromAPI  bool
}

const ctlRunning = 1

// describe names the session for reports.
func (s *txSession) describe() string {
	c := &s.cfg
	d := fmt.Sprintf("STAMP session %d: %s → %s", s.id, c.Src, c.Reflector)
	if len(c.Segments) > 0 {
		d += fmt.Sprintf(" via %v", c.Segments)
	}
	mode := "stateless"
	if c.Stateful {
		mode = "stateful"
	}
	ts := "NTP"
	if c.PTP {
		ts = "PTP"
	}
	auth := "unauthenticated"
	if c.Auth {
		auth = "authenticated"
	}
	return fmt.Sprintf("%s (%s reflector, %s, %s, every %v)", d, mode, ts, auth, c.Interval)
}

func (s *txSession) running() bool { return s.ctl.Load()&ctlRunning != 0 }

// start begins a new run: the sequence restarts at zero.
func (s *txSession) start() error {
	for {
		c := s.ctl.Load()
		if c&ctlRunning != 0 {
			return fmt.Errorf("SSID %d: %w", s.id, ErrRunning)
		}
		if s.ctl.CompareAndSwap(c, (c>>1+1)<<1|ctlRunning) {
			return nil
		}
	}
}

func (s *txSession) stop() error {
	for {
		c := s.ctl.Load()
		if c&ctlRunning == 0 {
			return fmt.Errorf("SSID %d: %w", s.id, ErrNotRunning)
		}
		if s.ctl.CompareAndSwap(c, c&^ctlRunning) {
			return nil
		}
	}
}

// rfSession is a reflector session at run time.
type rfSession struct {
	id    uint16
	stage string
	cfg   ReflectorSession
	// Return SRHs, wire order, with Segment List[0] left for the sender's
	// address (srh) or holding it already (srhPinned, for a pinned sender);
	// srhLast is for a return path that already ends at the sender.
	srh      []byte
	srhLast  []byte
	format   int      // formatNTP, formatPTP, or -1: the sender's
	pinned   bool     // cfg.Sender is set: answer only it
	sender   [16]byte // cfg.Sender, IPv4 mapped
	retLast  [16]byte // the return path's last segment
	running  atomic.Bool
	received atomic.Uint64 // published counters, for the API
	replied  atomic.Uint64
	// kseq is the XDP program's sequence of a stateful session its stage
	// offloads (bpf.Reflector.Seq): the stage numbers the packets it
	// answers from the same counter. nil: st.seq.
	kseq atomic.Pointer[uint32]

	// Owned by the session's owner lcore.
	st struct {
		seq      uint32 // the reflector's own sequence (stateful)
		rx, tx   uint32 // in-profile packets, for the Direct Measurement TLV
		replied  uint64
		lastSeq  uint32 // Follow-Up Telemetry: the previous reflected packet
		lastTS   uint64
		haveLast bool
		mac      *mac
	}
	fromAPI bool
}

// buildTx validates a sender session and prebuilds its template.
func buildTx(c SenderSession, d *senderDefaults) (*txSession, error) {
	d.apply(&c)
	if c.SSID == 0 {
		return nil, errors.New("ssid must be 1..65535 (RFC 8972 §3: non-zero)")
	}
	if !c.Src.IsValid() || !c.Reflector.IsValid() {
		return nil, errors.New("src and reflector addresses are required")
	}
	if c.Src.Is4() != c.Reflector.Is4() {
		return nil, errors.New("src and reflector must be the same address family")
	}
	if c.Src.Is4() && (len(c.Segments) > 0 || len(c.TLVs.ReturnPath) > 0) {
		return nil, errors.New("segments need IPv6")
	}
	if len(c.Segments) > packet.SRHMaxSegments-1 {
		return nil, fmt.Errorf("%d segments: at most %d", len(c.Segments), packet.SRHMaxSegments-1)
	}
	for _, a := range c.Segments {
		if !a.Is6() || a.Is4In6() {
			return nil, fmt.Errorf("segment %s is not an IPv6 address", a)
		}
	}
	if c.Interval <= 0 {
		return nil, errors.New("interval must be positive")
	}
	if c.Interval < time.Microsecond {
		return nil, fmt.Errorf("interval %v: at least 1µs (1 Mpps per session)", c.Interval)
	}
	if c.Auth && c.Key == nil {
		return nil, errors.New("authenticated mode needs a key")
	}
	if c.HMACTLV && c.Key == nil {
		return nil, errors.New("the HMAC TLV needs a key")
	}
	if c.Padding < 0 || c.Padding > 1400 {
		return nil, fmt.Errorf("padding %d is outside 0..1400", c.Padding)
	}
	if c.DSCP > 63 || c.TLVs.CoSDSCP > 63 {
		return nil, errors.New("DSCP values are 0..63")
	}
	if c.Records <= 0 {
		c.Records = defaultRecords
	}
	if c.Records > maxRecords {
		return nil, fmt.Errorf("records %d is above %d", c.Records, maxRecords)
	}
	s := &txSession{id: c.SSID, stage: c.Stage, cfg: c, hmacTLV: -1, dmOff: -1, interval: int64(c.Interval),
		rx: &collectorState{cold: newCollectorCold()}, fifo: newRecFIFO(c.Records), created: time.Now()}
	s.lay, s.rlay = layouts(c.Auth)
	if c.Key != nil {
		s.tx.mac = c.Key.newMAC()
		s.rx.mac = c.Key.newMAC()
	}
	payload, hmacOff, dmOff, err := buildPayload(&c)
	if err != nil {
		return nil, err
	}
	s.hmacTLV, s.dmOff = hmacOff, dmOff
	if err := s.buildFrame(payload); err != nil {
		return nil, err
	}
	if c.Reflector.Is4() {
		s.replySrc4, s.src4 = c.Reflector.As4(), c.Src.As4()
	} else {
		s.replySrc, s.src16 = c.Reflector.As16(), c.Src.As16()
	}
	return s, nil
}

// Record FIFO sizes.
const (
	defaultRecords = 4096
	maxRecords     = 1 << 20
)

// buildPayload writes the base packet (sequence, timestamp and Error
// Estimate left for each packet) and the TLVs, and returns the HMAC TLV's and
// the Direct Measurement value's offsets.
func buildPayload(c *SenderSession) (p []byte, hmacOff, dmOff int, err error) {
	l, _ := layouts(c.Auth)
	p = make([]byte, l.base)
	binary.BigEndian.PutUint16(p[l.ssid:], c.SSID)
	hmacOff, dmOff = -1, -1
	t := &c.TLVs
	// Sender TLVs carry U = 1 and M = I = 0 (RFC 8972 §4).
	if t.Location {
		p = AppendTLV(p, FlagU, TLVLocation, LocationRequest())
	}
	if t.TimestampInfo {
		p = AppendTLV(p, FlagU, TLVTimestampInfo, make([]byte, TimestampInfoLen))
	}
	if t.CoS {
		v := ClassOfService{DSCP1: t.CoSDSCP}.Encode()
		p = AppendTLV(p, FlagU, TLVClassOfService, v[:])
	}
	if t.DirectMeasurement {
		dmOff = len(p) + TLVHeaderLen
		p = AppendTLV(p, FlagU, TLVDirectMeasurement, make([]byte, DirectMeasurementLen))
	}
	if t.AccessReport {
		id, rc := t.AccessID, t.ReturnCode
		if id == 0 {
			id = 1
		}
		if rc == 0 {
			rc = 1
		}
		if id != 1 && id != 2 {
			return nil, 0, 0, fmt.Errorf("access report id %d: 1 (3GPP) or 2 (non-3GPP)", id)
		}
		v := AccessReport{ID: id, ReturnCode: rc}.Encode()
		p = AppendTLV(p, FlagU, TLVAccessReport, v[:])
	}
	if t.FollowUp {
		p = AppendTLV(p, FlagU, TLVFollowUpTelemetry, make([]byte, FollowUpTelemetryLen))
	}
	if t.DestinationNode {
		p = AppendTLV(p, FlagU, TLVDestinationNodeAddress, DestinationNodeAddress(c.Reflector))
	}
	switch {
	case t.ReturnControlCode != nil && len(t.ReturnPath) > 0:
		return nil, 0, 0, errors.New("a Return Path TLV holds a Control Code or a segment list, not both (RFC 9503 §4.1)")
	case t.ReturnControlCode != nil:
		p = AppendTLV(p, FlagU, TLVReturnPath, ReturnPathControlCode(*t.ReturnControlCode))
	case len(t.ReturnPath) > 0:
		for _, a := range t.ReturnPath {
			if !a.Is6() || a.Is4In6() {
				return nil, 0, 0, fmt.Errorf("return path segment %s is not an IPv6 address", a)
			}
		}
		p = AppendTLV(p, FlagU, TLVReturnPath, ReturnPathSRv6(t.ReturnPath))
	}
	hasTLVs := len(p) > l.base
	// Authenticated base packets authenticate their TLVs too (RFC 8972 §4.8),
	// unless the only one is Extra Padding.
	if c.HMACTLV || (c.Auth && hasTLVs) {
		hmacOff = len(p)
		p = AppendTLV(p, FlagU, TLVHMAC, make([]byte, HMACLen))
	}
	if c.Padding > 0 {
		p = AppendTLV(p, FlagU, TLVExtraPadding, make([]byte, c.Padding))
	}
	if len(p) > 0xffff-packet.UDPLen {
		return nil, 0, 0, errors.New("test packet too large")
	}
	return p, hmacOff, dmOff, nil
}

// buildFrame writes the Ethernet, IP (with the SRH) and UDP headers in front
// of payload.
func (s *txSession) buildFrame(payload []byte) error {
	c := &s.cfg
	path := append([]netip.Addr(nil), c.Segments...)
	if len(path) == 0 || path[len(path)-1] != c.Reflector {
		path = append(path, c.Reflector)
	}
	s.finalDst = c.Reflector
	var srh []byte
	if len(path) > 1 {
		f := packet.SRHFields{NextHeader: packet.ProtocolUDP, SegmentsLeft: uint8(len(path) - 1)}
		for i := len(path) - 1; i >= 0; i-- {
			f.Segments = append(f.Segments, path[i].As16())
		}
		srh = make([]byte, f.Len())
		if _, err := packet.PutSRH(srh, &f); err != nil {
			return fmt.Errorf("segment list: %w", err)
		}
	}
	l2 := 14
	if c.VLAN != 0 {
		l2 = 18
	}
	ipLen := 40
	if c.Src.Is4() {
		ipLen = 20
		s.ipv4 = true
	}
	udpLen := packet.UDPLen + len(payload)
	n := l2 + ipLen + len(srh) + udpLen
	d := make([]byte, n)
	copy(d[0:6], c.DstMAC[:])
	copy(d[6:12], c.SrcMAC[:])
	et := 12
	if c.VLAN != 0 {
		binary.BigEndian.PutUint16(d[12:], packet.EtherTypeVLAN)
		binary.BigEndian.PutUint16(d[14:], c.VLAN)
		et = 16
	}
	s.l3 = l2
	s.l4 = l2 + ipLen + len(srh)
	s.pay = s.l4 + packet.UDPLen
	if s.ipv4 {
		binary.BigEndian.PutUint16(d[et:], packet.EtherTypeIPv4)
		ip := d[l2 : l2+20]
		ip[0] = 0x45
		ip[1] = c.DSCP << 2
		binary.BigEndian.PutUint16(ip[2:], uint16(20+udpLen))
		ip[6] = 0x40 // DF
		ip[8] = c.HopLimit
		ip[9] = packet.ProtocolUDP
		s4, d4 := c.Src.As4(), c.Reflector.As4()
		copy(ip[12:16], s4[:])
		copy(ip[16:20], d4[:])
		binary.BigEndian.PutUint16(ip[10:], ^packet.Checksum(ip, 0))
		s.pseudo = packet.PseudoHeaderChecksum(packet.ProtocolUDP, s4[:], d4[:], uint32(udpLen))
	} else {
		binary.BigEndian.PutUint16(d[et:], packet.EtherTypeIPv6)
		ip := packet.IPv6(d[l2 : l2+40])
		d[l2] = 0x60
		ip.SetTrafficClass(c.DSCP << 2)
		ip.SetPayloadLength(uint16(len(srh) + udpLen))
		if len(srh) > 0 {
			ip.SetNextHeader(packet.ProtocolRouting)
		} else {
			ip.SetNextHeader(packet.ProtocolUDP)
		}
		ip.SetHopLimit(c.HopLimit)
		ip.SetSrc(c.Src.As16())
		ip.SetDst(path[0].As16())
		copy(d[l2+40:], srh)
		s16, f16 := c.Src.As16(), c.Reflector.As16()
		// The pseudo-header names the final destination (RFC 8200 §8.1).
		s.pseudo = packet.PseudoHeaderChecksum(packet.ProtocolUDP, s16[:], f16[:], uint32(udpLen))
	}
	u := packet.UDP(d[s.l4:])
	u.SetSrcPort(c.SrcPort)
	u.SetDstPort(c.ReflectorPort)
	u.SetLength(uint16(udpLen))
	copy(d[s.pay:], payload)
	s.tmpl = d
	return nil
}

// buildRf validates a reflector session and prebuilds its return SRH.
func buildRf(c ReflectorSession, d *reflectorDefaults) (*rfSession, error) {
	d.apply(&c)
	if c.SSID == 0 {
		return nil, errors.New("ssid must be 1..65535 (RFC 8972 §3: non-zero)")
	}
	if c.Auth && c.Key == nil {
		return nil, errors.New("authenticated mode needs a key")
	}
	if len(c.ReturnPath) > packet.SRHMaxSegments-1 {
		return nil, fmt.Errorf("%d return segments: at most %d", len(c.ReturnPath), packet.SRHMaxSegments-1)
	}
	for _, a := range c.ReturnPath {
		if !a.Is6() || a.Is4In6() {
			return nil, fmt.Errorf("return segment %s is not an IPv6 address", a)
		}
	}
	if c.Sender.IsValid() && c.Sender.Is4() && len(c.ReturnPath) > 0 {
		return nil, errors.New("a return path needs an IPv6 sender")
	}
	s := &rfSession{id: c.SSID, stage: c.Stage, cfg: c, format: -1}
	if c.Sender.IsValid() {
		s.pinned, s.sender = true, as16(c.Sender)
	}
	if n := len(c.ReturnPath); n > 0 {
		s.retLast = c.ReturnPath[n-1].As16()
	}
	if c.PTP != nil {
		s.format = formatNTP
		if *c.PTP {
			s.format = formatPTP
		}
	}
	if c.Key != nil {
		s.st.mac = c.Key.newMAC()
	}
	if len(c.ReturnPath) > 0 {
		var err error
		if s.srh, err = returnSRH(c.ReturnPath, true); err != nil {
			return nil, err
		}
		if s.srhLast, err = returnSRH(c.ReturnPath, false); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// returnSRH builds an SRH for path (travel order). With toSender, Segment
// List[0] is a slot for the sender's address, the final segment; without, the
// path's last segment is the final one.
func returnSRH(path []netip.Addr, toSender bool) ([]byte, error) {
	if !toSender && len(path) == 1 {
		return nil, nil // straight to the one segment: no SRH
	}
	f := packet.SRHFields{NextHeader: packet.ProtocolUDP}
	if toSender {
		f.Segments = append(f.Segments, [16]byte{})
	}
	for i := len(path) - 1; i >= 0; i-- {
		f.Segments = append(f.Segments, path[i].As16())
	}
	f.SegmentsLeft = uint8(len(f.Segments) - 1)
	b := make([]byte, f.Len())
	_, err := packet.PutSRH(b, &f)
	return b, err
}
