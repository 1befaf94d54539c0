// Package tester benchmarks a device under test (DUT) as RFC 2544 and FD.io
// CSIT do: for each frame size it finds the NDR and the PDR in one search
// (package search), then measures latency at 10, 50 and 90 % of the PDR.
//
// A test profile is a linerate config file with the tester's own ports (any
// datapath: afpacket, dpdk …), pools and engine settings, and a [test]
// section: the streams (one per direction), the frame sizes and the search.
// The tester makes the pipelines itself: for each trial it runs an engine with
// a generator per stream, paced at the trial's rate, and a sink on each
// stream's rx port that counts what came back, by sequence number, with the
// latency from the generator's tx timestamp to the port's rx timestamp.
package tester

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/tester/search"
)

// Section is the profile's top-level table.
const Section = "test"

func init() {
	config.RegisterSection(config.Section{Name: Section, Check: func(f *config.File, t config.Table) error {
		_, err := decodeTest(f, t)
		return err
	}})
}

// Test is the [test] section.
type Test struct {
	// Algorithm is "mlrsearch" (default; draft-01), "mlrsearch-15"
	// (draft-ietf-bmwg-mlrsearch-15, with Goals), "binary" (RFC 2544, one
	// search per loss ratio) or "both" (mlrsearch and binary), for comparison.
	Algorithm string `toml:"algorithm"`
	// Algorithms, instead of Algorithm, lists the searches to run on the
	// same DUT one after the other, e.g. ["mlrsearch-15", "mlrsearch"] to
	// compare draft-15 with draft-01. The first one's PDR sets the latency
	// trials' loads.
	Algorithms []string `toml:"algorithms"`
	// MaxLoadFrom is a calibration file that `linerate test --calibrate`
	// wrote (relative to the profile's directory): the most the tester
	// itself sustains per frame size caps the search's Max Load, so that
	// the tester's limit is never read as the DUT's.
	MaxLoadFrom string `toml:"max_load_from"`
	// Goals are mlrsearch-15's Search Goals; default CSIT's, one per loss
	// ratio.
	Goals []Goal `toml:"goals"`
	// FrameSizes are Ethernet frame sizes with the FCS, searched in turn.
	FrameSizes []int `toml:"frame_sizes"`
	// IMIX adds CSIT's IMIX (64, 570 and 1518 bytes, 7:4:1) as one more size.
	IMIX bool `toml:"imix"`
	// LossRatios default to [0, 0.005]: NDR and PDR at 0.5 %.
	LossRatios []float64 `toml:"loss_ratios"`
	// FinalDuration is the duration of the trials results rest on (30 s).
	FinalDuration config.Duration `toml:"final_duration"`
	// InitialDuration is MLRsearch's first trials' (1 s).
	InitialDuration config.Duration `toml:"initial_duration"`
	// Precision is the goal's relative width (0.005).
	Precision float64 `toml:"precision"`
	// Phases are MLRsearch's intermediate phases (2).
	Phases int `toml:"phases"`
	// MaxRate bounds the load of the streams together; default the line
	// rate of the tx ports for each frame size.
	MaxRate config.PacketRate `toml:"max_rate"`
	// MinRate is the lowest load tried (default 1 % of the maximum).
	MinRate config.PacketRate `toml:"min_rate"`
	// Warmup is how long learning frames are sent before each frame size's
	// search, at WarmupRate, so MAC tables and neighbours are warm (1 s;
	// "0s" sends none).
	Warmup     config.Duration   `toml:"warmup"`
	WarmupRate config.PacketRate `toml:"warmup_rate"`
	// Drain is how long the rx ports are read after the last packet of a
	// trial was sent; what arrives then is delivered, and counted late.
	Drain config.Duration `toml:"drain"`
	// Latency are the shares of the PDR at which latency is measured, each
	// with a trial of LatencyDuration (default FinalDuration).
	Latency         []float64       `toml:"latency"`
	LatencyDuration config.Duration `toml:"latency_duration"`
	// CatchUp is how long a stall of the tester's lcore its generators make
	// up for afterwards, in bursts (generator catch_up; default 50 ms).
	CatchUp config.Duration `toml:"catch_up"`
	// LinkSpeed is the tx ports' bit rate for the line rate, when the port
	// cannot say (default: the interface's speed, else 10Gbit).
	LinkSpeed config.Rate `toml:"link_speed"`
	Streams   []Stream    `toml:"streams"`
	DUT       DUT         `toml:"dut"`
}

// Algorithms are the searches a profile can list in algorithms.
var Algorithms = []string{"mlrsearch-15", "mlrsearch", "binary"}

// Searches are the searches to run, in order: Algorithms, or Algorithm
// ("both" is mlrsearch then binary).
func (c *Test) Searches() []string {
	switch {
	case len(c.Algorithms) > 0:
		return c.Algorithms
	case c.Algorithm == "both":
		return []string{"mlrsearch", "binary"}
	}
	return []string{c.Algorithm}
}

// Goal is a [[test.goals]] table: one Search Goal of mlrsearch-15.
type Goal struct {
	// Preset starts the goal from a named one: "ndr", "pdr", "rfc2544",
	// "tst009" (search.Preset); the keys set override it.
	Preset               string          `toml:"preset"`
	Name                 string          `toml:"name"`
	LossRatio            *float64        `toml:"loss_ratio"`
	ExceedRatio          *float64        `toml:"exceed_ratio"`
	FinalTrialDuration   config.Duration `toml:"final_trial_duration"`
	DurationSum          config.Duration `toml:"duration_sum"`
	Width                *float64        `toml:"width"`
	InitialTrialDuration config.Duration `toml:"initial_trial_duration"`
}

// SearchGoals are the profile's goals for mlrsearch-15: Goals, or CSIT's
// for LossRatios. A goal without a preset starts from CSIT's PDR.
func (c *Test) SearchGoals() []search.SearchGoal {
	if len(c.Goals) == 0 {
		return search.CSITGoals(c.LossRatios)
	}
	var gs []search.SearchGoal
	for _, g := range c.Goals {
		sg, ok := search.Preset(g.Preset)
		if !ok {
			sg, _ = search.Preset("pdr")
			sg.Name = ""
		}
		set := func(p *float64, v *float64) {
			if v != nil {
				*p = *v
			}
		}
		set(&sg.LossRatio, g.LossRatio)
		set(&sg.ExceedRatio, g.ExceedRatio)
		set(&sg.Width, g.Width)
		if g.FinalTrialDuration > 0 {
			sg.FinalTrialDuration = time.Duration(g.FinalTrialDuration)
		}
		if g.DurationSum > 0 {
			sg.DurationSum = time.Duration(g.DurationSum)
		}
		if g.InitialTrialDuration > 0 {
			sg.InitialTrialDuration = time.Duration(g.InitialTrialDuration)
		}
		if g.Name != "" {
			sg.Name = g.Name
		}
		if sg.Name == "" {
			sg.Name = fmt.Sprintf("loss %g%%", 100*sg.LossRatio)
		}
		gs = append(gs, sg)
	}
	return gs
}

// Stream is one direction of traffic: the generator's flows from port Tx,
// received on port Rx.
type Stream struct {
	Name       string      `toml:"name"`
	Tx         string      `toml:"tx"`
	Rx         string      `toml:"rx"`
	IPVersion  int         `toml:"ip_version"`
	Src        config.Addr `toml:"src"`
	Dst        config.Addr `toml:"dst"`
	SrcMAC     config.MAC  `toml:"src_mac"`
	DstMAC     config.MAC  `toml:"dst_mac"`
	VLAN       int         `toml:"vlan"`
	Flows      int         `toml:"flows"`
	UDPSrcPort int         `toml:"udp_src_port"`
	UDPDstPort int         `toml:"udp_dst_port"`
	// IOAMShare is the share of the stream's plain packets that carry an
	// IOAM pre-allocated trace (RFC 9197) in a Hop-by-Hop header, for a DUT
	// that is an IOAM transit node (IPv6 only): IOAMHops nodes' room of
	// hop limit, node id, interfaces, timestamp and transit delay, in
	// namespace IOAMNamespace. The trace makes those packets larger than
	// their frame size.
	IOAMShare     float64 `toml:"ioam_share"`
	IOAMNamespace int     `toml:"ioam_namespace"`
	IOAMHops      int     `toml:"ioam_hops"`
	// StampShare is the share of the stream's load that is STAMP (RFC 8762)
	// traffic, 0 to 1, as in the seed paper's PDR@0.5 % experiment.
	StampShare float64 `toml:"stamp_share"`
	// StampMode is what the DUT does with it: "reflector" (default) answers
	// the tester's test packets, whose replies the tester collects back on
	// its tx port; "collector" consumes the replies the tester sends it
	// (made by a reflector of the tester's own), counted by [test.dut].
	StampMode string `toml:"stamp_mode"`
	// StampSSID is the STAMP session's id (default 1).
	StampSSID int `toml:"stamp_ssid"`
	// StampSender is, in collector mode, the DUT's Session-Sender address:
	// the replies go to it, from src.
	StampSender config.Addr `toml:"stamp_sender"`
}

// DUT is how to read the device's own counters after each trial.
type DUT struct {
	// Control is the DUT's gRPC address ("unix:/path" or host:port); ""
	// reads nothing.
	Control string `toml:"control"`
	// API is "linerate" (default: the Appliance service's stats) or
	// "srv6pm", the seed paper's southbound API: the results of the
	// Session-Sender session SSID collected during the trial are what it
	// consumed.
	API  string `toml:"api"`
	SSID int    `toml:"ssid"`
	// Consumed names the DUT's stages whose packets are consumed by design
	// (a STAMP collector): what they consumed during a trial is delivered.
	// A stage's consumption is its counter "consumed" when it has one, else
	// the packets it took in and did not drop.
	Consumed []string `toml:"consumed"`
}

// Profile is a loaded test profile.
type Profile struct {
	Path string
	Test Test
	// base is the file's text: the tester's ports, pools and engine; each
	// trial's pipelines are appended to it.
	base []byte
	file *config.File
	// calibration is MaxLoadFrom's content, nil without one.
	calibration *Calibration
}

// IMIX is CSIT's IMIX: 64, 570 and 1518-byte frames, 7:4:1, as the
// generator sends them in turn.
var IMIX = []int{64, 64, 64, 64, 64, 64, 64, 570, 570, 570, 570, 1518}

// IMIXSize is how reports name the IMIX frame size.
const IMIXSize = 0

// genFieldsLen is the generator's sequence and timestamp fields.
const genFieldsLen = 16

// minFrame is the smallest frame that carries the generator's fields.
func minFrame(s Stream) int {
	n := 14 + 20 + 8 + genFieldsLen + 4
	if s.IPVersion == 6 {
		n += 20
	}
	if s.VLAN != 0 {
		n += 4
	}
	return n
}

func decodeTest(f *config.File, t config.Table) (Test, error) {
	var w struct {
		Test Test `toml:"test"`
	}
	w.Test = Test{
		LossRatios:      []float64{0, 0.005},
		FinalDuration:   config.Duration(30 * time.Second),
		InitialDuration: config.Duration(time.Second),
		Precision:       0.005,
		Phases:          2,
		Warmup:          config.Duration(time.Second),
		WarmupRate:      1000,
		Drain:           config.Duration(100 * time.Millisecond),
		Latency:         []float64{0.1, 0.5, 0.9},
		CatchUp:         config.Duration(50 * time.Millisecond),
	}
	if err := t.Decode(&w); err != nil {
		return w.Test, err
	}
	c := &w.Test
	var errs config.Errors
	bad := func(key string, format string, a ...any) {
		errs = append(errs, t.Error("test."+key, fmt.Errorf(format, a...)))
	}
	switch {
	case c.Algorithm != "" && len(c.Algorithms) > 0:
		bad("algorithms", "set algorithm or algorithms, not both")
	case c.Algorithm == "" && len(c.Algorithms) == 0:
		c.Algorithm = "mlrsearch"
	}
	if !slices.Contains([]string{"", "mlrsearch", "mlrsearch-15", "binary", "both"}, c.Algorithm) {
		bad("algorithm", "%q: use \"mlrsearch\", \"mlrsearch-15\", \"binary\" or \"both\"", c.Algorithm)
	}
	for i, a := range c.Algorithms {
		switch {
		case !slices.Contains(Algorithms, a):
			bad("algorithms", "%q: each one of %q", a, Algorithms)
		case slices.Index(c.Algorithms, a) < i:
			bad("algorithms", "%q is listed twice", a)
		}
	}
	for i, g := range c.Goals {
		if _, ok := search.Preset(g.Preset); g.Preset != "" && !ok {
			bad(fmt.Sprintf("goals[%d].preset", i), "%q: one of %q", g.Preset, search.Presets)
		}
	}
	for i, g := range c.SearchGoals() {
		if err := g.Check(); err != nil {
			bad(fmt.Sprintf("goals[%d]", i), "%v", err)
		}
	}
	if len(c.FrameSizes) == 0 && !c.IMIX {
		bad("frame_sizes", "no frame size: list some (e.g. [64, 1518]) or set imix = true")
	}
	if len(c.LossRatios) == 0 {
		bad("loss_ratios", "empty: the default is [0, 0.005], NDR and PDR at 0.5 %%")
	}
	for _, r := range c.LossRatios {
		if !(r >= 0 && r < 1) {
			bad("loss_ratios", "%g is not in [0, 1)", r)
		}
	}
	if !(c.Precision > 0 && c.Precision < 0.5) {
		bad("precision", "%g: a relative width between 0 and 0.5, e.g. 0.005", c.Precision)
	}
	if c.FinalDuration <= 0 {
		bad("final_duration", "must be positive")
	}
	if c.Phases < 0 || c.Phases > 10 {
		bad("phases", "%d is outside 0..10", c.Phases)
	}
	for _, s := range c.Latency {
		if !(s > 0 && s <= 1) {
			bad("latency", "%g: shares of the PDR, in (0, 1]", s)
		}
	}
	switch c.DUT.API {
	case "", "linerate":
		c.DUT.API = "linerate"
	case "srv6pm":
		if c.DUT.SSID < 1 || c.DUT.SSID > 65535 {
			bad("dut.ssid", "the srv6pm API needs the collector's session: an SSID in 1..65535")
		}
		if c.DUT.Control == "" {
			bad("dut.control", "the srv6pm API needs the DUT's address")
		}
	default:
		bad("dut.api", "%q: \"linerate\" or \"srv6pm\"", c.DUT.API)
	}
	if c.CatchUp > config.Duration(time.Second) {
		bad("catch_up", "%v is over 1s", c.CatchUp)
	}
	if c.MaxRate != 0 && c.MinRate > c.MaxRate {
		bad("min_rate", "%v is above max_rate %v", c.MinRate, c.MaxRate)
	}
	if len(c.Streams) == 0 {
		bad("streams", "none: add a [[test.streams]] table with tx, rx, src and dst")
	}
	ports := map[string]bool{}
	for _, p := range f.Ports {
		ports[p.Name] = true
	}
	rxs := map[string]bool{}
	for i := range c.Streams {
		s := &c.Streams[i]
		at := fmt.Sprintf("streams[%d].", i)
		if s.Name == "" {
			s.Name = fmt.Sprintf("%s-%s", s.Tx, s.Rx)
		}
		if s.IPVersion == 0 {
			s.IPVersion = 4
			if s.Src.IsValid() && s.Src.Is6() {
				s.IPVersion = 6
			}
		}
		if s.Flows == 0 {
			s.Flows = 1
		}
		if s.UDPSrcPort == 0 {
			s.UDPSrcPort = 10000
		}
		if s.UDPDstPort == 0 {
			s.UDPDstPort = 20000 + i
		}
		for _, k := range []struct{ key, port string }{{"tx", s.Tx}, {"rx", s.Rx}} {
			if !ports[k.port] {
				bad(at+k.key, "%q is not a port of this file: declare it in a [[ports]] table", k.port)
			}
		}
		if rxs["rx "+s.Rx] {
			bad(at+"rx", "port %q is another stream's rx port: each stream needs its own", s.Rx)
		}
		if rxs["tx "+s.Tx] {
			bad(at+"tx", "port %q is another stream's tx port: each stream needs its own", s.Tx)
		}
		rxs["rx "+s.Rx], rxs["tx "+s.Tx] = true, true
		if s.IPVersion != 4 && s.IPVersion != 6 {
			bad(at+"ip_version", "%d: 4 or 6", s.IPVersion)
		}
		for _, a := range []struct {
			key  string
			addr config.Addr
		}{{"src", s.Src}, {"dst", s.Dst}} {
			switch {
			case !a.addr.IsValid():
				bad(at+a.key, "required: the stream's %s address", a.key)
			case a.addr.Is4() != (s.IPVersion == 4):
				bad(at+a.key, "%v is not an IPv%d address", a.addr, s.IPVersion)
			}
		}
		if s.IOAMNamespace == 0 {
			s.IOAMNamespace = 1
		}
		if s.IOAMHops == 0 {
			s.IOAMHops = 4
		}
		switch {
		case !(s.IOAMShare >= 0 && s.IOAMShare <= 1):
			bad(at+"ioam_share", "%g is not in [0, 1]", s.IOAMShare)
		case s.IOAMShare > 0 && s.IPVersion != 6:
			bad(at+"ioam_share", "IOAM travels in an IPv6 Hop-by-Hop header: an IPv6 stream only")
		}
		if s.IOAMNamespace < 0 || s.IOAMNamespace > 65534 {
			bad(at+"ioam_namespace", "%d is outside 0..65534", s.IOAMNamespace)
		}
		if s.IOAMHops < 1 || s.IOAMHops > 32 {
			bad(at+"ioam_hops", "%d is outside 1..32", s.IOAMHops)
		}
		if !(s.StampShare >= 0 && s.StampShare <= 1) {
			bad(at+"stamp_share", "%g is not in [0, 1]", s.StampShare)
		}
		if s.StampMode == "" {
			s.StampMode = "reflector"
		}
		if s.StampSSID == 0 {
			s.StampSSID = 1
		}
		if s.StampSSID < 1 || s.StampSSID > 65535 {
			bad(at+"stamp_ssid", "%d is outside 1..65535", s.StampSSID)
		}
		switch s.StampMode {
		case "reflector":
		case "collector":
			if s.StampShare > 0 && !s.StampSender.IsValid() {
				bad(at+"stamp_sender", "required in collector mode: the DUT's Session-Sender address")
			} else if s.StampSender.IsValid() && s.StampSender.Is4() != (s.IPVersion == 4) {
				bad(at+"stamp_sender", "%v is not an IPv%d address", s.StampSender, s.IPVersion)
			}
			if s.StampShare > 0 && (c.DUT.Control == "" || len(c.DUT.Consumed) == 0 && c.DUT.API != "srv6pm") {
				bad(at+"stamp_mode", "a collector DUT consumes the STAMP packets: set [test.dut] control and consumed, or every one counts as lost")
			}
		default:
			bad(at+"stamp_mode", "%q: \"reflector\" or \"collector\"", s.StampMode)
		}
		if s.Flows < 1 || s.Flows > 65536 {
			bad(at+"flows", "%d is outside 1..65536", s.Flows)
		}
		if s.VLAN < 0 || s.VLAN > 4094 {
			bad(at+"vlan", "%d is outside 0..4094", s.VLAN)
		}
		for _, size := range append(c.FrameSizes, imixIf(c.IMIX)...) {
			if size < minFrame(*s) {
				bad("frame_sizes", "%d bytes cannot carry stream %s's headers and the 16-byte sequence and timestamp: at least %d", size, s.Name, minFrame(*s))
				break
			}
		}
	}
	if err := errs.Err(); err != nil {
		return *c, err
	}
	return *c, nil
}

func imixIf(on bool) []int {
	if on {
		return IMIX
	}
	return nil
}

// Load reads and checks a test profile.
func Load(path string) (*Profile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("test profile: %w", err)
	}
	return Parse(path, data)
}

// Parse reads a test profile from data; name is the file name for messages.
func Parse(name string, data []byte) (*Profile, error) {
	p := &Profile{Path: name, base: data}
	// The profile has no pipelines; a placeholder makes it a whole config so
	// that the ports, pools and engine are checked as linerate run would.
	f, err := config.Parse(name, p.withPipelines(placeholder))
	if err != nil {
		return nil, err
	}
	p.file = f
	p.Test, err = decodeTest(f, f.Section(Section))
	if err != nil {
		return nil, err
	}
	if p.Test.MaxLoadFrom != "" {
		if p.calibration, err = p.loadCalibration(); err != nil {
			return nil, &config.Error{File: name, Line: f.Line("test.max_load_from"), Key: "test.max_load_from", Err: err}
		}
	}
	lines := bytes.Count(data, []byte("\n")) + 1
	for i := range f.Pipelines {
		key := fmt.Sprintf("pipelines[%d]", i)
		if l := f.Line(key); l > 0 && l <= lines {
			return nil, &config.Error{File: name, Line: l, Key: key,
				Err: errors.New("a test profile has no pipelines: linerate test makes them for each trial")}
		}
	}
	return p, nil
}

// placeholder is a pipeline that makes a profile a valid config.
const placeholder = `
[[pipelines]]
name = "linerate-test-placeholder"
[[pipelines.stages]]
kind = "generator"
src = "192.0.2.1"
dst = "192.0.2.2"
ip_version = 4
count = 1
[[pipelines.stages]]
kind = "sink"
`

func (p *Profile) withPipelines(pipelines string) []byte {
	var b strings.Builder
	b.Write(p.base)
	b.WriteString("\n# ---- made by linerate test ----\n")
	b.WriteString(pipelines)
	return []byte(b.String())
}

// Sizes are the frame sizes searched, in order; IMIXSize stands for the IMIX.
func (t *Test) Sizes() []int {
	s := slices.Clone(t.FrameSizes)
	if t.IMIX {
		s = append(s, IMIXSize)
	}
	return s
}

// SizeName is how reports name a frame size.
func SizeName(size int) string {
	if size == IMIXSize {
		return "IMIX"
	}
	return fmt.Sprint(size)
}

// wireBytes is a frame's bytes on the wire: the frame (with FCS) and 20 bytes
// of preamble, start delimiter and inter-frame gap.
func wireBytes(size int) float64 {
	if size == IMIXSize {
		var n int
		for _, s := range IMIX {
			n += s
		}
		return float64(n)/float64(len(IMIX)) + 20
	}
	return float64(size + 20)
}
