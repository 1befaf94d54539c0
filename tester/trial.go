package tester

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/linerate/linerate/appliance"
	"github.com/linerate/linerate/appliance/stats"
	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/tester/search"
)

// Trial is one trial's outcome: the search's view (the load asked for, what
// was sent and delivered) and the detail reports show.
type Trial struct {
	search.Trial
	// Asked is the packets the trial asked the generators for, all streams
	// (Sent is what the tx ports took).
	Asked uint64 `json:"asked"`
	Phase string `json:"phase"`
	// Size is the frame size, IMIXSize for the IMIX.
	Size    int            `json:"frame_size"`
	Streams []StreamResult `json:"streams"`
	// Consumed is what the DUT's consuming stages took during the trial,
	// counted as delivered.
	Consumed uint64 `json:"dut_consumed"`
	// DUTDrops are the DUT's drops by reason during the trial, when its
	// control API is known.
	DUTDrops map[string]uint64 `json:"dut_drops,omitempty"`
	// IOAMSent is how many of the plain packets the tester's IOAM encap
	// gave a trace.
	IOAMSent uint64 `json:"ioam_sent,omitempty"`
	// TesterDrops are the tester's own drops by reason (tx_full: its tx
	// port refused packets), which count as lost.
	TesterDrops map[string]uint64 `json:"tester_drops,omitempty"`
	// Latency is every stream's latency, in ns, merged.
	Latency *Histogram    `json:"latency,omitempty"`
	Wall    time.Duration `json:"wall_ns"` // the trial's own time, setup and drain included
	// Retries is how many times the trial was run again because the tester
	// could not send its load; TesterShort what it still failed to send,
	// counted as lost.
	Retries     int    `json:"retries"`
	TesterShort uint64 `json:"tester_short"`
	// ID is the trial's tag in its packets (1..255, then round again);
	// LateFromEarlier the packets of earlier trials (another tag) that came
	// in during this one: a DUT held them past their drain. They count in
	// neither trial.
	ID              int    `json:"trial_id"`
	LateFromEarlier uint64 `json:"late_from_earlier"`
}

// StreamResult is what one stream sent and got back in a trial.
type StreamResult struct {
	Name string `json:"name"`
	// Asked is the packets the trial asked the generator for: the load times
	// the duration. Sent is what the tx port took: less when the tester
	// could not keep up, and the difference counts as lost.
	Asked uint64 `json:"asked"`
	Sent  uint64 `json:"sent"`
	// Made is what the generator made; NoBuffer what it could not, its pool
	// being empty.
	Made     uint64 `json:"made"`
	NoBuffer uint64 `json:"no_buffer"`
	// Received is what came back with the stream's sequence and timestamp;
	// Late is the part of it that came after the last packet was sent.
	Received uint64 `json:"received"`
	Late     uint64 `json:"late"`
	// LateFromEarlier is what came with an earlier trial's tag: not counted
	// in Received, Reordered, Gaps or Latency.
	LateFromEarlier uint64 `json:"late_from_earlier"`
	// Reordered counts packets that came after a later one of their flow;
	// Duplicates those whose sequence number had come before (among the
	// flow's last 64); Gaps are the sink's missing sequence numbers net of
	// late arrivals.
	// The STAMP share: test packets (or replies, to a collector DUT) asked
	// for and sent; those that came back as replies (reflector DUT), part
	// of Received.
	StampAsked    uint64     `json:"stamp_asked,omitempty"`
	StampSent     uint64     `json:"stamp_sent,omitempty"`
	StampReturned uint64     `json:"stamp_returned,omitempty"`
	Reordered     uint64     `json:"reordered"`
	Duplicates    uint64     `json:"duplicates"`
	Gaps          uint64     `json:"gaps"`
	Latency       *Histogram `json:"latency,omitempty"`
}

// DUTCounters reads a DUT's own counters: what its consuming stages took and
// what it dropped, by reason, so far.
type DUTCounters interface {
	Read(ctx context.Context) (consumed uint64, drops map[string]uint64, err error)
}

// Runner runs trials with a profile's ports.
type Runner struct {
	Profile *Profile
	// Do runs f where the ports are to be opened (a network namespace's
	// thread, in tests); nil runs it here.
	Do  func(f func() error) error
	Log *slog.Logger
	DUT DUTCounters

	trials int // trials run so far: the next one's tag
	// genCap, in tests, caps the generators' rate (pps, all streams): a
	// tester that cannot send more.
	genCap float64
	// heldOver, in tests, is pipelines added to each trial's engine.
	heldOver string
	// calibrating: the searches find the tester's own limit (Calibrate),
	// so its shortfall marks no result tester-limited.
	calibrating bool
}

// trialConfig is the engine config of one trial: the profile and, per
// stream, a generator pipeline (and a STAMP pipeline for its STAMP share)
// towards its tx port, and per port that receives, a pipeline with the
// stream's sink (and a STAMP collector for replies that come back). It
// returns, per stream, the plain and the STAMP packets asked for.
func (r *Runner) trialConfig(id, size int, rate float64, d time.Duration) ([]byte, []uint64, []uint64) {
	t := &r.Profile.Test
	sizes := []int{size}
	if size == IMIXSize {
		sizes = IMIX
	}
	var b strings.Builder
	plain := make([]uint64, len(t.Streams))
	stamp := make([]uint64, len(t.Streams))
	per := rate / float64(len(t.Streams))
	genPer := per
	if r.genCap > 0 {
		genPer = min(per, r.genCap/float64(len(t.Streams)))
	}
	// The generator stops at its count, or at the trial's end (and a hair):
	// one that fell behind longer than catch_up does not stretch the trial
	// at a lower load.
	gd := config.Duration(d + 5*time.Millisecond).String()
	for i, s := range t.Streams {
		pr := math.Round(per * (1 - s.StampShare))
		gr := math.Round(genPer * (1 - s.StampShare))
		sr := math.Round(per * s.StampShare)
		plain[i] = uint64(math.Round(pr * d.Seconds()))
		stamp[i] = uint64(math.Round(sr * d.Seconds()))
		if plain[i] > 0 {
			fmt.Fprintf(&b, `
[[pipelines]]
name = "tx-%[1]d"
[[pipelines.stages]]
kind = "generator"
name = "gen-%[1]d"
ip_version = %[2]d
src = %[3]q
dst = %[4]q
src_mac = %[5]q
dst_mac = %[6]q
vlan = %[7]d
flows = %[8]d
udp_src_port = %[9]d
udp_dst_port = %[10]d
sizes = %[11]s
rate = "%[12]dpps"
count = %[13]d
duration = %[14]q
catch_up = %[15]q
pool = "port:%[16]s"
trial = %[17]d
`, i, s.IPVersion, s.Src.String(), s.Dst.String(), s.SrcMAC.String(), s.DstMAC.String(), s.VLAN, s.Flows,
				s.UDPSrcPort, s.UDPDstPort, tomlInts(sizes), max(1, int64(gr)), plain[i], gd, t.CatchUp.String(), s.Tx, id)
			if k := int(math.Round(1000 * s.IOAMShare)); k > 0 {
				// k in 1000 of the generator's packets get a trace, inline.
				fmt.Fprintf(&b, `[[pipelines.stages]]
kind = "ioam.encap"
name = "ioam-%[1]d"
node_id = 1
mode = "inline"
namespaces = [ { id = %[2]d } ]
[[pipelines.stages.profiles]]
name = "test"
rate = "%[3]d/1000"
trace = { namespace = %[2]d, type = "0xF80000", hops = %[4]d }
`, i, s.IOAMNamespace, k, s.IOAMHops)
			}
			fmt.Fprintf(&b, "[[pipelines.stages]]\nkind = \"forward\"\nport = %q\n", s.Tx)
		}
		if stamp[i] > 0 {
			r.stampPipeline(&b, i, s, size, int64(sr), stamp[i], gd)
		}
	}
	// A pipeline per port that receives: a stream's rx port, or the tx port
	// of a stream whose STAMP replies come back.
	var rxPorts []string
	for _, s := range t.Streams {
		for _, p := range []string{s.Rx, s.Tx} {
			if !slices.Contains(rxPorts, p) && (p == s.Rx || s.StampShare > 0 && s.StampMode == "reflector") {
				rxPorts = append(rxPorts, p)
			}
		}
	}
	for _, port := range rxPorts {
		fmt.Fprintf(&b, "\n[[pipelines]]\nname = \"rx-%s\"\nrx = [%q]\n", port, port)
		for i, s := range t.Streams {
			if s.Tx == port && s.StampShare > 0 && s.StampMode == "reflector" {
				fmt.Fprintf(&b, "[[pipelines.stages]]\nkind = \"stamp.collector\"\nname = \"collector-%d\"\n", i)
			}
		}
		sink := false
		for i, s := range t.Streams {
			if s.Rx == port {
				fmt.Fprintf(&b, "[[pipelines.stages]]\nkind = \"sink\"\nname = \"sink-%d\"\nudp_port = %d\nflows = %d\ntrial = %d\n", i, s.UDPDstPort, s.Flows, id)
				sink = true
			}
		}
		if !sink {
			fmt.Fprintf(&b, "[[pipelines.stages]]\nkind = \"sink\"\nname = \"rest-%s\"\n", port)
		}
	}
	b.WriteString(r.heldOver)
	return r.Profile.withPipelines(b.String()), plain, stamp
}

// stampPipeline sends stream i's STAMP share: test packets of one session to
// a reflector DUT, or, for a collector DUT, the replies to them that a
// reflector of the tester's own makes, as if from src. They are padded to
// the frame size where it is larger than theirs.
func (r *Runner) stampPipeline(b *strings.Builder, i int, s Stream, size int, rate int64, count uint64, gd string) {
	base := 14 + 20 + 8 + 44 // Ethernet, IPv4, UDP, an unauthenticated test packet
	if s.IPVersion == 6 {
		base += 20
	}
	if s.VLAN != 0 {
		base += 4
	}
	padding := 0
	if size != IMIXSize && size-4-base >= 4 {
		padding = size - 4 - base - 4 // less the FCS and the TLV's header
	}
	src, reflector, srcMAC, dstMAC := s.Src, s.Dst, s.SrcMAC, s.DstMAC
	if s.StampMode == "collector" {
		// The test packets come "from" the DUT's sender to the tester's
		// reflector, which swaps them into replies from src to the DUT.
		src, reflector, srcMAC, dstMAC = s.StampSender, s.Src, s.DstMAC, s.SrcMAC
	}
	fmt.Fprintf(b, `
[[pipelines]]
name = "stamp-%[1]d"
[[pipelines.stages]]
kind = "stamp.sender"
name = "stamp-sender-%[1]d"
src_mac = %[2]q
dst_mac = %[3]q
vlan = %[4]d
[[pipelines.stages.sessions]]
ssid = %[5]d
src = %[6]q
reflector = %[7]q
rate = "%[8]dpps"
count = %[9]d
duration = %[10]q
padding = %[11]d
`, i, srcMAC.String(), dstMAC.String(), s.VLAN, s.StampSSID, src.String(), reflector.String(), max(1, rate), count, gd, padding)
	if s.StampMode == "collector" {
		bits := 32
		if s.IPVersion == 6 {
			bits = 128
		}
		fmt.Fprintf(b, `[[pipelines.stages]]
kind = "stamp.reflector"
name = "stamp-reflector-%d"
unknown = "reflect"
allow = ["%s/%d"]
rate_limit = "0"
`, i, src.String(), bits)
	}
	fmt.Fprintf(b, "[[pipelines.stages]]\nkind = \"forward\"\nport = %q\n", s.Tx)
}

func tomlInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = fmt.Sprint(n)
	}
	return "[" + strings.Join(s, ", ") + "]"
}

// TesterRetries is how many times a trial is run again when the tester
// itself could not send its load (its lcore was preempted), before the
// shortfall counts as lost.
const TesterRetries = 3

// Measure runs one trial of frame size size at rate packets per second (all
// streams together) for d. A trial the tester fell short in is run again, up
// to TesterRetries times.
func (r *Runner) Measure(ctx context.Context, size int, rate float64, d time.Duration) (*Trial, error) {
	for try := 0; ; try++ {
		tr, err := r.measure(ctx, size, rate, d)
		if err != nil || try == TesterRetries || tr.short() == 0 {
			if tr != nil {
				tr.Retries = try
			}
			return tr, err
		}
		if r.Log != nil {
			r.Log.Warn("the tester fell short of the load; trial repeated", "rate", rate, "duration", d, "short", tr.short())
		}
	}
}

// SentRate is what the tester did send, packets per second: less than Rate
// when it fell short.
func (t *Trial) SentRate() float64 {
	var n uint64
	for _, s := range t.Streams {
		n += min(s.Sent, s.Asked)
	}
	if t.Duration <= 0 {
		return 0
	}
	return float64(n) / t.Duration.Seconds()
}

// short is how many packets the tester failed to send, beyond a rounding's
// worth (2 packets and 0.01 %: the generator's rate is whole packets per
// second, and it starts on its first loop).
func (t *Trial) short() uint64 {
	var n uint64
	for _, s := range t.Streams {
		if gap := s.Asked - min(s.Asked, s.Sent); gap > 2+s.Asked/10000 {
			n += gap
		}
	}
	return n
}

func (r *Runner) measure(ctx context.Context, size int, rate float64, d time.Duration) (*Trial, error) {
	start := time.Now()
	r.trials++
	id := (r.trials-1)%255 + 1 // 0 is "untagged"
	text, counts, stampCounts := r.trialConfig(id, size, rate, d)
	cfg, err := config.Parse(r.Profile.Path, text)
	if err != nil {
		return nil, err
	}
	log := r.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var consumed0 uint64
	var drops0 map[string]uint64
	if r.DUT != nil {
		if consumed0, drops0, err = r.DUT.Read(ctx); err != nil {
			return nil, fmt.Errorf("DUT counters: %w", err)
		}
	}
	var e *appliance.Engine
	build := func() (err error) {
		e, err = appliance.New(cfg, appliance.Options{Log: log})
		return err
	}
	if r.Do != nil {
		err = r.Do(build)
	} else {
		err = build()
	}
	if err != nil {
		return nil, err
	}
	defer func() { _ = e.Close() }()
	if err := e.Start(); err != nil {
		return nil, err
	}
	n := len(r.Profile.Test.Streams)
	// Wait for every generator to finish: its count sent, or its duration
	// over (it stops by itself then).
	sent := func(s *stats.Snapshot) uint64 {
		var v uint64
		for i := range n {
			v += s.Counter(fmt.Sprintf("gen-%d", i), "sent") + s.Counter(fmt.Sprintf("stamp-sender-%d", i), "sent")
		}
		return v
	}
	var want uint64
	for i, c := range counts {
		want += c + stampCounts[i]
	}
	timer := time.NewTimer(d)
	select {
	case <-ctx.Done():
		timer.Stop()
		return nil, ctx.Err()
	case <-timer.C:
	}
	last, still := uint64(0), 0
	for deadline := time.Now().Add(time.Second); still < 10 && time.Now().Before(deadline); {
		v := sent(e.Snapshot())
		if v >= want {
			break
		}
		if v == last {
			still++
		} else {
			last, still = v, 0
		}
		time.Sleep(2 * time.Millisecond)
	}
	atEnd := e.Snapshot()
	drain := time.NewTimer(time.Duration(r.Profile.Test.Drain))
	select {
	case <-ctx.Done():
		drain.Stop()
		return nil, ctx.Err()
	case <-drain.C:
	}
	e.Stop()
	final := e.Snapshot()

	tr := &Trial{Trial: search.Trial{Rate: rate, Duration: d}, Size: size, ID: id}
	all := stats.NewHistSnapshot()
	for i, s := range r.Profile.Test.Streams {
		sink := fmt.Sprintf("sink-%d", i)
		sr := StreamResult{
			Name:            s.Name,
			Asked:           counts[i] + stampCounts[i],
			Sent:            txPackets(final, s.Tx),
			Received:        final.Counter(sink, "tracked"),
			Reordered:       final.Counter(sink, "reordered"),
			Duplicates:      final.Counter(sink, "duplicates"),
			Gaps:            final.Counter(sink, "lost"),
			Made:            final.Counter(fmt.Sprintf("gen-%d", i), "sent"),
			NoBuffer:        final.Counter(fmt.Sprintf("gen-%d", i), "no_buffer"),
			LateFromEarlier: final.Counter(sink, "other_trial"),
		}
		tr.LateFromEarlier += sr.LateFromEarlier
		sr.Late = sr.Received - min(sr.Received, atEnd.Counter(sink, "tracked"))
		if stampCounts[i] > 0 {
			sr.StampAsked = stampCounts[i]
			sr.StampSent = final.Counter(fmt.Sprintf("stamp-sender-%d", i), "sent")
			sr.Made += sr.StampSent
			if s.StampMode == "reflector" {
				sr.StampReturned = final.Counter(fmt.Sprintf("collector-%d", i), "records")
				sr.Received += sr.StampReturned
			}
		}
		if h := hist(final, "rx-"+s.Rx+"/"+sink, "latency"); h != nil {
			all.Add(h)
			sr.Latency = newHistogram(h)
		}
		tr.Streams = append(tr.Streams, sr)
		// A shortfall of the tester's counts as lost, beyond a rounding's
		// worth (short); within it, the loss is what was sent.
		// Sent is what the tx ports took; Unsent the shortfall counted.
		tr.Asked += sr.Asked
		tr.Sent += sr.Sent
		if gap := sr.Asked - min(sr.Asked, sr.Sent); gap > 2+sr.Asked/10000 {
			tr.Unsent += gap
		}
		tr.Received += min(sr.Received-min(sr.Received, sr.Duplicates), sr.Sent)
	}
	tr.Latency = newHistogram(all)
	for i := range n {
		tr.IOAMSent += final.Counter(fmt.Sprintf("ioam-%d", i), "profile_test")
	}
	for _, dc := range final.Drops {
		if dc.Count > 0 {
			if tr.TesterDrops == nil {
				tr.TesterDrops = map[string]uint64{}
			}
			tr.TesterDrops[dc.Reason] = dc.Count
		}
	}
	if r.DUT != nil {
		c, drops, err := r.DUT.Read(ctx)
		if err != nil {
			return nil, fmt.Errorf("DUT counters: %w", err)
		}
		tr.Consumed = c - min(c, consumed0)
		tr.DUTDrops = map[string]uint64{}
		for k, v := range drops {
			if dv := v - min(v, drops0[k]); dv > 0 {
				tr.DUTDrops[k] = dv
			}
		}
		tr.Received = min(tr.Sent, tr.Received+tr.Consumed)
	}
	tr.TesterShort = tr.short()
	tr.Wall = time.Since(start)
	return tr, nil
}

// txPackets is what the tx port took: each stream has its own.
func txPackets(s *stats.Snapshot, tx string) uint64 {
	for _, p := range s.Ports {
		if p.Name == tx {
			return p.TxPackets
		}
	}
	return 0
}

func hist(s *stats.Snapshot, owner, name string) *stats.HistSnapshot {
	var out *stats.HistSnapshot
	for _, h := range s.Histogram {
		if h.Owner == owner && h.Name == name {
			if out == nil {
				out = stats.NewHistSnapshot()
			}
			out.Add(h.Hist)
		}
	}
	return out
}
