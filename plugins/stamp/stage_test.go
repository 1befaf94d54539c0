package stamp

import (
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/linerate/linerate/appliance/clock"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/plugins"
)

// endSRv6 does what an SRv6 End node does to a frame (RFC 8986 §4.1): one
// segment less, the next one the destination. It fails t on a frame without
// segments left.
func endSRv6(t testing.TB, frame []byte) []byte {
	t.Helper()
	f := append([]byte(nil), frame...)
	var l packet.Layers
	if err := packet.Parse(f, &l); err != nil {
		t.Fatalf("End: %v", err)
	}
	srh := l.SRH(f)
	if srh == nil || srh.SegmentsLeft() == 0 {
		t.Fatalf("End: no segments left")
	}
	srh.SetSegmentsLeft(srh.SegmentsLeft() - 1)
	a, _ := srh.ActiveSegment()
	packet.IPv6(f[l.L3:]).SetDst(a)
	packet.IPv6(f[l.L3:]).SetHopLimit(packet.IPv6(f[l.L3:]).HopLimit() - 1)
	return f
}

// checkUDP verifies a frame's UDP checksum against gopacket's view of it.
func checkUDP(t testing.TB, frame []byte) {
	t.Helper()
	var l packet.Layers
	if err := packet.Parse(frame, &l); err != nil {
		t.Fatalf("parse: %v", err)
	}
	u := packet.UDP(frame[l.L4:l.End])
	if got, want := u.Checksum(), l.UDPChecksum(frame); got != want {
		t.Errorf("UDP checksum %#04x, want %#04x", got, want)
	}
}

func senderKeys(extra string) string {
	return fmt.Sprintf(`
src = "%s"
src_mac = "02:00:00:00:00:0a"
dst_mac = "02:00:00:00:00:0e"
interval = "10ms"
synchronized = true
clock_error = "1us"
[[sessions]]
ssid = 7
reflector = "%s"
segments = ["%s"]
reflector_mode = "stateful"
%s`, addrS, addrR, addrE, extra)
}

const reflectorKeys = `
synchronized = true
clock_error = "1us"
[[sessions]]
ssid = 7
mode = "stateful"
return_path = ["2001:db8:e::1"]
`

// A test packet from the template: gopacket sees IPv6, an SRH with the
// forward path, UDP to 862 and the base packet.
func TestSenderTemplate(t *testing.T) {
	h := newHarness(t)
	snd := h.MustBuildNamed("stamp.sender", "tx", senderKeys(""))
	var frames [][]byte
	for i := 0; i < 3; i++ {
		frames = append(frames, h.produce(snd)...)
		h.advance(10 * time.Millisecond)
	}
	if len(frames) != 3 {
		t.Fatalf("%d packets in 30 ms at 10 ms", len(frames))
	}
	for i, f := range frames {
		pk := gopacket.NewPacket(f, layers.LayerTypeEthernet, gopacket.Default)
		ip, _ := pk.Layer(layers.LayerTypeIPv6).(*layers.IPv6)
		u, _ := pk.Layer(layers.LayerTypeUDP).(*layers.UDP)
		if ip == nil || u == nil {
			t.Fatalf("gopacket: %v", pk)
		}
		if ip.DstIP.String() != addrE.String() || ip.SrcIP.String() != addrS.String() || ip.NextHeader != layers.IPProtocolIPv6Routing {
			t.Errorf("IPv6 %v → %v nh %v", ip.SrcIP, ip.DstIP, ip.NextHeader)
		}
		if u.DstPort != DefaultPort || u.SrcPort != DefaultPort || len(u.Payload) != BaseLen {
			t.Errorf("UDP %d → %d, %d bytes", u.SrcPort, u.DstPort, len(u.Payload))
		}
		var l packet.Layers
		if err := packet.Parse(f, &l); err != nil {
			t.Fatal(err)
		}
		srh := l.SRH(f)
		if srh == nil || srh.SegmentsLeft() != 1 || srh.NumSegments() != 2 || srh.SegmentAddr(0) != addrR || srh.SegmentAddr(1) != addrE {
			t.Fatalf("SRH %x", srh)
		}
		checkUDP(t, f)
		sp := SenderPacket(u.Payload)
		if sp.Seq() != uint32(i) || sp.SSID() != 7 || !sp.ErrorEstimate().Synchronized() || sp.ErrorEstimate().PTP() {
			t.Errorf("packet %d: seq %d ssid %d ee %#x", i, sp.Seq(), sp.SSID(), uint16(sp.ErrorEstimate()))
		}
		want := clock.NTP(testUnixBase + int64(time.Second) + int64(i)*int64(10*time.Millisecond))
		if sp.Timestamp() != want {
			t.Errorf("packet %d: T1 %#x, want %#x", i, sp.Timestamp(), want)
		}
	}
	if got := h.StageCounter("tx", "sent"); got != 3 {
		t.Errorf("sent counter %d", got)
	}
}

// roundTrip sends one test packet through End → reflector → End → collector,
// with the given delays on each leg, and returns what the collector kept.
type chain struct {
	h              *harness
	snd, rfl, coll plugins.Stage
}

func newChain(t testing.TB, sndExtra, rflKeys, collKeys string) *chain {
	h := newHarness(t)
	c := &chain{h: h}
	c.snd = h.MustBuildNamed("stamp.sender", "tx", senderKeys(sndExtra))
	c.rfl = h.MustBuildNamed("stamp.reflector", "refl", rflKeys)
	c.coll = h.MustBuildNamed("stamp.collector", "coll", collKeys)
	return c
}

// step sends what is due and carries it to the collector: fwd and bwd are
// the two legs' delays, dwell the reflector's residence time (before T3).
func (c *chain) step(t testing.TB, fwd, dwell, bwd time.Duration) []result {
	t.Helper()
	h := c.h
	var out []result
	for _, f := range h.produce(c.snd) {
		h.advance(fwd)
		rr := h.run(endSRv6(t, f), 0, c.rfl)
		if rr.dropped != "" {
			out = append(out, rr)
			continue
		}
		_ = dwell
		h.advance(bwd)
		out = append(out, h.run(endSRv6(t, rr.data), 1, c.coll))
	}
	return out
}

func (c *chain) session(id uint16) *txSession { return c.h.registry().tx.Load().get(id) }

func drain(s *txSession) []Record {
	var out []Record
	for {
		r, ok := s.fifo.Get()
		if !ok {
			return out
		}
		out = append(out, r)
	}
}

// The full loop in virtual time: T1..T4 are the times the packet passed each
// point, the delays come out per direction, and the reflected packet goes
// back along the return path.
func TestRoundTripSRv6(t *testing.T) {
	c := newChain(t, "", reflectorKeys, "")
	h := c.h
	fwd, bwd := 3*time.Millisecond, 5*time.Millisecond
	for i := 0; i < 5; i++ {
		for _, r := range c.step(t, fwd, 0, bwd) {
			if r.dropped != "consumed" {
				t.Fatalf("reply not consumed by the collector: %q", r.dropped)
			}
		}
		h.advance(10*time.Millisecond - fwd - bwd)
	}
	s := c.session(7)
	recs := drain(s)
	if len(recs) != 5 {
		t.Fatalf("%d records", len(recs))
	}
	for i, r := range recs {
		if r.Seq != uint32(i) || r.ReflectorSeq != uint32(i) || r.SSID != 7 {
			t.Errorf("record %d: seq %d rseq %d", i, r.Seq, r.ReflectorSeq)
		}
		if r.Forward() != int64(fwd) || r.Backward() != int64(bwd) || r.RTT() != int64(fwd+bwd) {
			t.Errorf("record %d: fwd %d bwd %d rtt %d", i, r.Forward(), r.Backward(), r.RTT())
		}
		if !r.Synchronized() {
			t.Error("unsynchronised with synchronized = true on both sides")
		}
		if r.SenderTTL != 63 { // 64 at the sender, one End hop
			t.Errorf("sender TTL %d", r.SenderTTL)
		}
		if r.HopLimit != 254 { // 255 at the reflector, one End hop
			t.Errorf("reply hop limit %d", r.HopLimit)
		}
	}
	m := metricsOf(s)
	if m.Sent != 5 || m.Received != 5 || m.LostRoundTrip != 0 || !m.Split || m.LostForward != 0 || m.LostBackward != 0 {
		t.Errorf("metrics %+v", m)
	}
	if m.RTT.P50 < int64(fwd+bwd)*99/100 || m.RTT.P50 > int64(fwd+bwd)*101/100 || m.Forward.Max != int64(fwd) {
		t.Errorf("rtt p50 %d max fwd %d", m.RTT.P50, m.Forward.Max)
	}
	if got := h.StageCounter("refl", "reflected"); got != 5 {
		t.Errorf("reflected %d", got)
	}
}

// The reflected frame: addresses swapped, the return SRH, ports swapped, the
// reflector layout with the sender's fields copied, a valid checksum.
func TestReflectedFrame(t *testing.T) {
	c := newChain(t, "", reflectorKeys, "")
	h := c.h
	f := h.produce(c.snd)[0]
	in := endSRv6(t, f)
	h.advance(2 * time.Millisecond)
	rr := h.run(in, 0, c.rfl)
	if rr.dropped != "" {
		t.Fatalf("dropped: %s", rr.dropped)
	}
	out := rr.data
	var l packet.Layers
	if err := packet.Parse(out, &l); err != nil {
		t.Fatal(err)
	}
	ip := packet.IPv6(out[l.L3:])
	if ip.SrcAddr() != addrR || ip.DstAddr() != addrE || ip.HopLimit() != 255 {
		t.Errorf("IPv6 %s → %s hl %d", ip.SrcAddr(), ip.DstAddr(), ip.HopLimit())
	}
	srh := l.SRH(out)
	if srh == nil || srh.SegmentsLeft() != 1 || srh.SegmentAddr(0) != addrS || srh.SegmentAddr(1) != addrE {
		t.Fatalf("return SRH %x", srh)
	}
	if packet.Ethernet(out).Dst() != packet.Ethernet(in).Src() {
		t.Error("MACs not swapped")
	}
	u := packet.UDP(out[l.L4:l.End])
	if u.SrcPort() != DefaultPort || u.DstPort() != DefaultPort {
		t.Errorf("ports %d → %d", u.SrcPort(), u.DstPort())
	}
	checkUDP(t, out)
	rp := ReflectorPacket(u.Payload())
	sp := SenderPacket(packet.UDP(in[l.L4:]).Payload())
	if rp.SenderSeq() != sp.Seq() || rp.SenderTimestamp() != sp.Timestamp() || rp.SenderErrorEstimate() != sp.ErrorEstimate() || rp.SSID() != 7 {
		t.Error("sender fields not copied")
	}
	wantT2 := clock.NTP(testUnixBase + int64(time.Second) + int64(2*time.Millisecond))
	if rp.ReceiveTimestamp() != wantT2 || rp.Timestamp() != wantT2 {
		t.Errorf("T2 %#x T3 %#x, want %#x", rp.ReceiveTimestamp(), rp.Timestamp(), wantT2)
	}
	if len(out) > len(in) {
		t.Errorf("reply %d bytes, request %d", len(out), len(in))
	}
	for _, b := range out[l.L4+8+38 : l.L4+8+40] {
		if b != 0 {
			t.Error("MBZ not zero")
		}
	}
}

func writeKey(t testing.TB, hexKey string) string {
	t.Helper()
	p := t.TempDir() + "/k"
	if err := os.WriteFile(p, []byte(hexKey), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Authenticated mode: the right key gives records with every HMAC checked;
// a wrong key at the reflector is a counted drop and no record.
func TestAuthenticated(t *testing.T) {
	good := writeKey(t, strings.Repeat("ab", 32))
	bad := writeKey(t, strings.Repeat("cd", 32))
	for _, c := range []struct {
		name     string
		rflKey   string
		records  int
		badHMACs uint64
	}{{"right key", good, 3, 0}, {"wrong key", bad, 0, 3}} {
		t.Run(c.name, func(t *testing.T) {
			ch := newChain(t, fmt.Sprintf("authenticated = true\nkey_file = %q\ntlvs = [\"timestamp_info\"]\n", good),
				reflectorKeys+fmt.Sprintf("authenticated = true\nkey_file = %q\n", c.rflKey), "")
			h := ch.h
			for i := 0; i < 3; i++ {
				rs := ch.step(t, time.Millisecond, 0, time.Millisecond)
				for _, r := range rs {
					if c.records > 0 && r.dropped != "consumed" {
						t.Fatalf("got %q", r.dropped)
					}
					if c.records == 0 && r.dropped != "stamp_bad_hmac" {
						t.Fatalf("got %q", r.dropped)
					}
				}
				h.advance(10 * time.Millisecond)
			}
			recs := drain(ch.session(7))
			if len(recs) != c.records {
				t.Errorf("%d records", len(recs))
			}
			for _, r := range recs {
				if r.Flags&(RecTLVIntegrity|RecTLVMalformed|RecTLVUnrecognized) != 0 {
					t.Errorf("TLV flags %#x", r.Flags)
				}
			}
			if got := h.StageCounter("refl", "reflected"); got != uint64(c.records) {
				t.Errorf("reflected %d", got)
			}
		})
	}
}

// TLVs come back filled in, with U cleared; the Follow-Up Telemetry names the
// previous reflected packet; the HMAC TLV verifies at the collector.
func TestTLVsReflected(t *testing.T) {
	key := writeKey(t, strings.Repeat("11", 32))
	ch := newChain(t, fmt.Sprintf(`tlvs = ["location", "timestamp_info", "direct_measurement", "follow_up_telemetry", "destination_node_address", "access_report"]
cos_dscp = 46
hmac_tlv = true
key_file = %q
padding = 16
`, key), reflectorKeys+fmt.Sprintf("key_file = %q\n", key), "")
	h := ch.h
	var replies [][]byte
	for i := 0; i < 2; i++ {
		for _, f := range h.produce(ch.snd) {
			h.advance(time.Millisecond)
			rr := h.run(endSRv6(t, f), 0, ch.rfl)
			if rr.dropped != "" {
				t.Fatal(rr.dropped)
			}
			replies = append(replies, rr.data)
			if r := h.run(endSRv6(t, rr.data), 1, ch.coll); r.dropped != "consumed" {
				t.Fatalf("collector: %q", r.dropped)
			}
		}
		h.advance(10 * time.Millisecond)
	}
	var l packet.Layers
	second := replies[1]
	if err := packet.Parse(second, &l); err != nil {
		t.Fatal(err)
	}
	pay := packet.UDP(second[l.L4:l.End]).Payload()
	first := ReflectorPacket(func() []byte {
		var l1 packet.Layers
		_ = packet.Parse(replies[0], &l1)
		return packet.UDP(replies[0][l1.L4:l1.End]).Payload()
	}())
	tlvs, err := ParseTLVs(pay[BaseLen:])
	if err != nil {
		t.Fatal(err)
	}
	types := map[uint8]TLVFields{}
	for _, tv := range tlvs {
		types[tv.Type] = tv
		if tv.Flags != 0 {
			t.Errorf("%s: flags %#x, want 0", TLVName(tv.Type), tv.Flags)
		}
	}
	if loc, err := DecodeLocation(types[TLVLocation].Value); err != nil || loc.DstPort != DefaultPort || loc.SrcPort != DefaultPort ||
		len(loc.Sub) != 3 || loc.Sub[0].Type != SubSourceEUI48 || loc.Sub[1].Type != SubDestinationIP6 ||
		netip.AddrFrom16([16]byte(loc.Sub[1].Value)) != addrR || netip.AddrFrom16([16]byte(loc.Sub[2].Value)) != addrS {
		t.Errorf("location %+v %v", loc, err)
	}
	if ti, _ := DecodeTimestampInfo(types[TLVTimestampInfo].Value); ti.SyncSrcIn != SyncNTP || ti.TimestampIn != MethodSWLocal {
		t.Errorf("timestamp info %+v", ti)
	}
	if cos, _ := DecodeClassOfService(types[TLVClassOfService].Value); cos.DSCP1 != 46 || cos.RP != 0 {
		t.Errorf("cos %+v", cos)
	}
	if tc := packet.IPv6(second[l.L3:]).TrafficClass(); tc>>2 != 46 {
		t.Errorf("reply DSCP %d, the CoS TLV asked 46", tc>>2)
	}
	if dm, _ := DecodeDirectMeasurement(types[TLVDirectMeasurement].Value); dm != (DirectMeasurement{2, 2, 2}) {
		t.Errorf("direct measurement %+v", dm)
	}
	if fu, _ := DecodeFollowUpTelemetry(types[TLVFollowUpTelemetry].Value); fu.Seq != first.Seq() || fu.Timestamp != first.Timestamp() || fu.Method != MethodSWLocal {
		t.Errorf("follow-up %+v, previous seq %d T3 %#x", fu, first.Seq(), first.Timestamp())
	}
	if _, ok := types[TLVHMAC]; !ok {
		t.Error("no HMAC TLV")
	}
	k, _ := LoadKey(key)
	if ok, err := k.VerifyTLVs(pay, BaseLen); !ok || err != nil {
		t.Errorf("reply HMAC TLV: %v %v", ok, err)
	}
	recs := drain(ch.session(7))
	if len(recs) != 2 || recs[1].Flags&RecDirectMeasurement == 0 || recs[1].DirectMeasurement.SenderTx != 2 {
		t.Errorf("records %+v", recs)
	}
}
