package stamp

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/linerate/linerate/appliance/clock"
	"github.com/linerate/linerate/config"
)

// senderDefaults are a sender stage's values for what a session leaves unset.
type senderDefaults struct {
	stage         string
	src           netip.Addr
	srcPort       uint16
	reflectorPort uint16
	interval      time.Duration
	hopLimit      uint8
	srcMAC        [6]byte
	dstMAC        [6]byte
	vlan          uint16
	ptp           bool
	records       int
	keyDir        string
}

func (d *senderDefaults) apply(c *SenderSession) {
	if c.Stage == "" {
		c.Stage = d.stage
	}
	if !c.Src.IsValid() {
		c.Src = d.src
	}
	if c.SrcPort == 0 {
		c.SrcPort = d.srcPort
	}
	if c.ReflectorPort == 0 {
		c.ReflectorPort = d.reflectorPort
	}
	if c.Interval == 0 {
		c.Interval = d.interval
	}
	if c.HopLimit == 0 {
		c.HopLimit = d.hopLimit
	}
	if c.SrcMAC == ([6]byte{}) {
		c.SrcMAC = d.srcMAC
	}
	if c.DstMAC == ([6]byte{}) {
		c.DstMAC = d.dstMAC
	}
	if c.VLAN == 0 {
		c.VLAN = d.vlan
	}
	if c.Records == 0 {
		c.Records = d.records
	}
}

// reflectorDefaults are a reflector stage's values for its sessions.
type reflectorDefaults struct {
	stage  string
	keyDir string
	port   uint16
}

func (d *reflectorDefaults) apply(c *ReflectorSession) {
	if c.Stage == "" {
		c.Stage = d.stage
	}
}

// clockConfig are the keys that override what adjtimex says of the clock:
// the S bit and the Error Estimate (RFC 8762 §4.2.1).
type clockConfig struct {
	Synchronized *bool           `toml:"synchronized"`
	ClockError   config.Duration `toml:"clock_error"`
}

// errEstSource makes Error Estimates from the clock's sync state, or from the
// config's override. A stage refreshes it once per burst; per packet it is
// two loads.
type errEstSource struct {
	clk    clock.Clock
	sync   *bool
	errNs  int64
	fixed  bool
	last   clock.SyncState
	primed bool
	ee     [2]ErrorEstimate // by format
	tai    int              // TAI − UTC, seconds
	uoff   int64            // the clock's Unix offset at the last refresh
}

func newErrEstSource(c clock.Clock, cc clockConfig) *errEstSource {
	e := &errEstSource{clk: c, sync: cc.Synchronized, errNs: int64(time.Duration(cc.ClockError))}
	e.fixed = cc.Synchronized != nil && cc.ClockError > 0
	e.refresh()
	return e
}

// refresh reads the clock's published sync state and Unix offset (atomic
// loads) and recomputes the Error Estimates when the state changed.
func (e *errEstSource) refresh() {
	e.uoff = e.clk.UnixOffset()
	var st clock.SyncState
	if !e.fixed {
		st = e.clk.Sync()
	}
	if e.primed && st == e.last {
		return
	}
	e.last, e.primed = st, true
	sync := st.Synchronized
	if e.sync != nil {
		sync = *e.sync
	}
	errNs := st.ErrorNs
	if e.errNs > 0 {
		errNs = e.errNs
	}
	e.ee[formatNTP] = ErrorEstimateFor(sync, false, errNs)
	e.ee[formatPTP] = ErrorEstimateFor(sync, true, errNs)
	e.tai = st.TAIOffset
	if e.tai == 0 {
		e.tai = 37
	}
	if e.fixed {
		e.tai = 37
		if t := e.clk.Sync().TAIOffset; t != 0 {
			e.tai = t
		}
	}
}

// wire encodes monotonic time mono in format, with the offsets of the last
// refresh.
func (e *errEstSource) wire(mono int64, format int) uint64 {
	u := mono + e.uoff
	if format == formatPTP {
		return clock.PTP(u + int64(e.tai)*1e9)
	}
	return clock.NTP(u)
}

// unixTime decodes a wire timestamp whose Error Estimate has Z = ptp.
func unixTime(ts uint64, ptp bool, taiOffset int) int64 {
	if ptp {
		return clock.FromPTP(ts) - int64(taiOffset)*1e9
	}
	return clock.FromNTP(ts)
}

func parseFormat(s string) (int, error) {
	switch strings.ToLower(s) {
	case "", "ntp":
		return formatNTP, nil
	case "ptp", "ptpv2":
		return formatPTP, nil
	}
	return 0, fmt.Errorf("timestamp %q: ntp or ptp", s)
}

// senderSessionConfig is a session table under a stamp.sender stage.
type senderSessionConfig struct {
	SSID              int               `toml:"ssid"`
	Src               config.Addr       `toml:"src"`
	Reflector         config.Addr       `toml:"reflector"`
	SrcPort           int               `toml:"src_port"`
	ReflectorPort     int               `toml:"reflector_port"`
	Segments          []config.Addr     `toml:"segments"`
	Interval          config.Duration   `toml:"interval"`
	Rate              config.PacketRate `toml:"rate"`
	Count             uint64            `toml:"count"`
	Duration          config.Duration   `toml:"duration"`
	Timestamp         string            `toml:"timestamp"`
	Authenticated     bool              `toml:"authenticated"`
	KeyFile           string            `toml:"key_file"`
	HMACTLV           bool              `toml:"hmac_tlv"`
	TLVs              []string          `toml:"tlvs"`
	CoSDSCP           *int              `toml:"cos_dscp"`
	AccessID          int               `toml:"access_id"`
	ReturnCode        int               `toml:"return_code"`
	ReturnPath        []config.Addr     `toml:"return_path"`
	ReturnControlCode *int              `toml:"return_control_code"`
	Padding           int               `toml:"padding"`
	ReflectorMode     string            `toml:"reflector_mode"`
	HopLimit          int               `toml:"hop_limit"`
	DSCP              int               `toml:"dscp"`
	SrcMAC            config.MAC        `toml:"src_mac"`
	DstMAC            config.MAC        `toml:"dst_mac"`
	VLAN              int               `toml:"vlan"`
	Start             *bool             `toml:"start"`
	Records           int               `toml:"records"`
}

func addrs(in []config.Addr) []netip.Addr {
	var out []netip.Addr
	for _, a := range in {
		out = append(out, a.Addr)
	}
	return out
}

// toSession converts a config table; errors name the offending key.
func (c *senderSessionConfig) toSession() (SenderSession, error) {
	s := SenderSession{Src: c.Src.Addr, Reflector: c.Reflector.Addr, Segments: addrs(c.Segments),
		Interval: time.Duration(c.Interval), Count: c.Count, Duration: time.Duration(c.Duration),
		Auth: c.Authenticated, HMACTLV: c.HMACTLV, Padding: c.Padding, SrcMAC: c.SrcMAC, DstMAC: c.DstMAC,
		Start: c.Start == nil || *c.Start, Records: c.Records}
	if c.SSID < 1 || c.SSID > 65535 {
		return s, fmt.Errorf("ssid %d: 1..65535", c.SSID)
	}
	s.SSID = uint16(c.SSID)
	for _, p := range []struct {
		v   int
		dst *uint16
		key string
	}{{c.SrcPort, &s.SrcPort, "src_port"}, {c.ReflectorPort, &s.ReflectorPort, "reflector_port"}} {
		if p.v < 0 || p.v > 65535 {
			return s, fmt.Errorf("%s %d: 0..65535", p.key, p.v)
		}
		*p.dst = uint16(p.v)
	}
	if c.Rate > 0 {
		if c.Interval > 0 {
			return s, errors.New("set interval or rate, not both")
		}
		s.Interval = time.Duration(float64(time.Second) / float64(c.Rate))
	}
	f, err := parseFormat(c.Timestamp)
	if err != nil {
		return s, err
	}
	s.PTP = f == formatPTP
	if c.KeyFile != "" {
		if s.Key, err = LoadKey(c.KeyFile); err != nil {
			return s, err
		}
	}
	if err := parseTLVNames(c.TLVs, &s.TLVs); err != nil {
		return s, err
	}
	if c.CoSDSCP != nil {
		if *c.CoSDSCP < 0 || *c.CoSDSCP > 63 {
			return s, fmt.Errorf("cos_dscp %d: 0..63", *c.CoSDSCP)
		}
		s.TLVs.CoS, s.TLVs.CoSDSCP = true, uint8(*c.CoSDSCP)
	}
	if c.AccessID != 0 || c.ReturnCode != 0 {
		if c.AccessID < 0 || c.AccessID > 15 || c.ReturnCode < 0 || c.ReturnCode > 255 {
			return s, errors.New("access_id is 1 or 2 and return_code 1 or 2")
		}
		s.TLVs.AccessReport, s.TLVs.AccessID, s.TLVs.ReturnCode = true, uint8(c.AccessID), uint8(c.ReturnCode)
	}
	s.TLVs.ReturnPath = addrs(c.ReturnPath)
	if c.ReturnControlCode != nil {
		if *c.ReturnControlCode < 0 {
			return s, errors.New("return_control_code must not be negative")
		}
		cc := uint32(*c.ReturnControlCode)
		s.TLVs.ReturnControlCode = &cc
	}
	switch strings.ToLower(c.ReflectorMode) {
	case "", "stateless":
	case "stateful":
		s.Stateful = true
	default:
		return s, fmt.Errorf("reflector_mode %q: stateless or stateful", c.ReflectorMode)
	}
	if c.HopLimit < 0 || c.HopLimit > 255 {
		return s, fmt.Errorf("hop_limit %d: 1..255", c.HopLimit)
	}
	s.HopLimit = uint8(c.HopLimit)
	if c.DSCP < 0 || c.DSCP > 63 {
		return s, fmt.Errorf("dscp %d: 0..63", c.DSCP)
	}
	s.DSCP = uint8(c.DSCP)
	if c.VLAN < 0 || c.VLAN > 4094 {
		return s, fmt.Errorf("vlan %d: 0..4094", c.VLAN)
	}
	s.VLAN = uint16(c.VLAN)
	return s, nil
}

// TLV names in a session's tlvs list.
var tlvNames = []string{"timestamp_info", "location", "direct_measurement", "follow_up_telemetry",
	"destination_node_address", "access_report", "class_of_service", "hmac"}

func parseTLVNames(list []string, t *TLVSpec) error {
	for _, n := range list {
		switch n {
		case "timestamp_info":
			t.TimestampInfo = true
		case "location":
			t.Location = true
		case "direct_measurement":
			t.DirectMeasurement = true
		case "follow_up_telemetry":
			t.FollowUp = true
		case "destination_node_address":
			t.DestinationNode = true
		case "access_report":
			t.AccessReport = true
		case "class_of_service":
			t.CoS = true
		case "hmac":
			// handled by the caller through hmac_tlv; accepted here too
		default:
			return fmt.Errorf("tlvs: unknown TLV %q (have %s)", n, strings.Join(tlvNames, ", "))
		}
	}
	return nil
}

// reflectorSessionConfig is a session table under a stamp.reflector stage.
type reflectorSessionConfig struct {
	SSID          int           `toml:"ssid"`
	Mode          string        `toml:"mode"`
	Sender        config.Addr   `toml:"sender"`
	Source        config.Addr   `toml:"source"`
	ReturnPath    []config.Addr `toml:"return_path"`
	Timestamp     string        `toml:"timestamp"`
	Authenticated bool          `toml:"authenticated"`
	KeyFile       string        `toml:"key_file"`
	Start         *bool         `toml:"start"`
}

func (c *reflectorSessionConfig) toSession() (ReflectorSession, error) {
	s := ReflectorSession{Sender: c.Sender.Addr, Source: c.Source.Addr, ReturnPath: addrs(c.ReturnPath),
		Auth: c.Authenticated, Start: c.Start == nil || *c.Start}
	if c.SSID < 1 || c.SSID > 65535 {
		return s, fmt.Errorf("ssid %d: 1..65535", c.SSID)
	}
	s.SSID = uint16(c.SSID)
	switch strings.ToLower(c.Mode) {
	case "", "stateless":
	case "stateful":
		s.Stateful = true
	default:
		return s, fmt.Errorf("mode %q: stateless or stateful", c.Mode)
	}
	switch strings.ToLower(c.Timestamp) {
	case "", "mirror":
	default:
		f, err := parseFormat(c.Timestamp)
		if err != nil {
			return s, fmt.Errorf("%w (or mirror)", err)
		}
		ptp := f == formatPTP
		s.PTP = &ptp
	}
	if c.KeyFile != "" {
		k, err := LoadKey(c.KeyFile)
		if err != nil {
			return s, err
		}
		s.Key = k
	}
	return s, nil
}
