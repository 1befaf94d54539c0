package stamp

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/linerate/linerate/appliance/clock"
	"github.com/linerate/linerate/appliance/packet"
)

// frameOf returns the UDP payload of a frame, and its parse.
func payloadOf(t testing.TB, f []byte) ([]byte, *packet.Layers) {
	t.Helper()
	l := &packet.Layers{}
	if err := packet.Parse(f, l); err != nil {
		t.Fatal(err)
	}
	return packet.UDP(f[l.L4:l.End]).Payload(), l
}

// fixUDP rewrites a frame's UDP checksum after a test edited it.
func fixUDP(t testing.TB, f []byte) {
	t.Helper()
	_, l := payloadOf(t, f)
	u := packet.UDP(f[l.L4:l.End])
	u.SetChecksum(l.UDPChecksum(f))
}

// Loss splits by direction with a stateful reflector: the reflector's own
// sequence shows which packets it got.
func TestLossSplit(t *testing.T) {
	c := newChain(t, "", reflectorKeys, "")
	h := c.h
	lostFwd := map[int]bool{2: true, 5: true, 6: true}
	lostBwd := map[int]bool{3: true, 8: true}
	for i := 0; i < 12; i++ {
		for _, f := range h.produce(c.snd) {
			if lostFwd[i] {
				continue
			}
			rr := h.run(endSRv6(t, f), 0, c.rfl)
			if lostBwd[i] || rr.dropped != "" {
				continue
			}
			h.run(endSRv6(t, rr.data), 1, c.coll)
		}
		h.advance(10 * time.Millisecond)
	}
	m := metricsOf(c.session(7))
	if m.Sent != 12 || m.Answered != 12 || m.Received != 7 || m.LostRoundTrip != 5 || m.LostForward != 3 || m.LostBackward != 2 || m.InFlight != 0 {
		t.Errorf("metrics: sent %d received %d rt %d fwd %d bwd %d in flight %d answered %d",
			m.Sent, m.Received, m.LostRoundTrip, m.LostForward, m.LostBackward, m.InFlight, m.Answered)
	}
}

// IPv4 with a VLAN tag and PTP timestamps.
func TestIPv4VLANPTP(t *testing.T) {
	h := newHarness(t)
	snd := h.MustBuildNamed("stamp.sender", "tx", `
src = "192.0.2.1"
vlan = 100
timestamp = "ptp"
interval = "1ms"
[[sessions]]
ssid = 300
reflector = "198.51.100.7"
`)
	rfl := h.MustBuildNamed("stamp.reflector", "refl", `
addresses = ["198.51.100.7"]
[[sessions]]
ssid = 300
`)
	coll := h.MustBuildNamed("stamp.collector", "coll", "")
	f := h.produce(snd)[0]
	pay, l := payloadOf(t, f)
	if l.VLANs != 1 || l.VLAN[0]&0xfff != 100 || l.IPVersion != 4 {
		t.Fatalf("frame: vlans %d ip %d", l.VLANs, l.IPVersion)
	}
	sp := SenderPacket(pay)
	if !sp.ErrorEstimate().PTP() {
		t.Error("Z bit clear")
	}
	if got := clock.FromPTP(sp.Timestamp()) - 37e9; got != testUnixBase+int64(time.Second) {
		t.Errorf("PTP T1 %d", got)
	}
	checkUDP(t, f)
	h.advance(time.Millisecond)
	rr := h.run(f, 0, rfl)
	if rr.dropped != "" {
		t.Fatal(rr.dropped)
	}
	checkUDP(t, rr.data)
	rp, rl := payloadOf(t, rr.data)
	ip := packet.IPv4(rr.data[rl.L3:])
	if ip.SrcAddr().String() != "198.51.100.7" || ip.DstAddr().String() != "192.0.2.1" || !ip.IsChecksumValid() || rl.VLANs != 1 {
		t.Errorf("reply %s → %s", ip.SrcAddr(), ip.DstAddr())
	}
	if !ReflectorPacket(rp).ErrorEstimate().PTP() {
		t.Error("the reflector did not mirror PTP")
	}
	h.advance(time.Millisecond)
	if r := h.run(rr.data, 1, coll); r.dropped != "consumed" {
		t.Fatalf("collector: %q", r.dropped)
	}
	recs := drain(h.registry().tx.Load().get(300))
	if len(recs) != 1 || recs[0].RTT() != int64(2*time.Millisecond) {
		t.Fatalf("records %+v", recs)
	}
}

// One row per named drop reason, and the packets the reflector lets pass.
func TestReflectorDrops(t *testing.T) {
	h := newHarness(t)
	snd := h.MustBuildNamed("stamp.sender", "tx", senderKeys(""))
	rfl := h.MustBuildNamed("stamp.reflector", "refl", `
allow = ["2001:db8:a::/48"]
rate_limit = "100pps"
rate_burst = 2
[[sessions]]
ssid = 7
mode = "stateful"
return_path = ["2001:db8:e::1", "2001:db8:f::1"]
`)
	base := endSRv6(t, h.produce(snd)[0])
	edit := func(f func(pay []byte, frame []byte)) []byte {
		c := append([]byte(nil), base...)
		pay, _ := payloadOf(t, c)
		f(pay, c)
		fixUDP(t, c)
		return c
	}
	_, l := payloadOf(t, base)
	for _, c := range []struct {
		name  string
		frame []byte
		want  string
	}{
		{"unknown SSID", edit(func(p, _ []byte) { binary.BigEndian.PutUint16(p[14:], 99) }), "stamp_unknown_session"},
		{"not allowed source", edit(func(_, f []byte) { f[l.L3+8] = 0x30 }), "stamp_not_allowed"},
		{"return path longer than the forward one", base, "stamp_reply_too_big"},
		{"short", func() []byte {
			c := append([]byte(nil), base[:len(base)-4]...)
			packet.UDP(c[l.L4:]).SetLength(packet.UDP(c[l.L4:]).Length() - 4)
			packet.IPv6(c[l.L3:]).SetPayloadLength(packet.IPv6(c[l.L3:]).PayloadLength() - 4)
			fixUDP(t, c)
			return c
		}(), "stamp_short"},
		{"not for 862", edit(func(p, f []byte) { packet.UDP(f[l.L4:]).SetDstPort(863) }), ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := h.run(c.frame, 0, rfl); got.dropped != c.want {
				t.Errorf("got %q, want %q", got.dropped, c.want)
			}
		})
	}
	// The per-source bucket: burst 2, then nothing until it refills. (The
	// oversized reply above took one token.)
	got := []string{}
	for i := 0; i < 3; i++ {
		got = append(got, h.run(base, 0, rfl).dropped)
	}
	if got[0] != "stamp_reply_too_big" || got[1] != "stamp_rate_limited" || got[2] != "stamp_rate_limited" {
		t.Errorf("rate limit: %v", got)
	}
	h.advance(50 * time.Millisecond)
	if r := h.run(base, 0, rfl); r.dropped == "stamp_rate_limited" {
		t.Error("the bucket did not refill")
	}
}

// Unknown SSIDs are reflected statelessly when configured, from allowed
// sources only; a stopped session is not answered.
func TestStatelessUnknown(t *testing.T) {
	h := newHarness(t)
	snd := h.MustBuildNamed("stamp.sender", "tx", senderKeys(""))
	rfl := h.MustBuildNamed("stamp.reflector", "refl", `
unknown = "reflect"
allow = ["2001:db8:a::/48"]
`)
	f := endSRv6(t, h.produce(snd)[0])
	rr := h.run(f, 0, rfl)
	if rr.dropped != "" {
		t.Fatal(rr.dropped)
	}
	pay, l := payloadOf(t, rr.data)
	rp := ReflectorPacket(pay)
	if rp.Seq() != rp.SenderSeq() || rp.SSID() != 7 || l.SRH(rr.data) != nil {
		t.Errorf("stateless reply: seq %d sender seq %d", rp.Seq(), rp.SenderSeq())
	}
	if len(rr.data) > len(f) {
		t.Error("reply larger than the request")
	}
	if _, err := h.BuildNamed("stamp.reflector", "r2", `unknown = "reflect"`); err == nil {
		t.Error("unknown = reflect without allow was accepted")
	}
	reg := h.registry()
	rs := reg.rf.Load()
	_ = rs
	h2 := newHarness(t)
	snd2 := h2.MustBuildNamed("stamp.sender", "tx", senderKeys(""))
	rfl2 := h2.MustBuildNamed("stamp.reflector", "refl", "[[sessions]]\nssid = 7\nstart = false\n")
	if r := h2.run(endSRv6(t, h2.produce(snd2)[0]), 0, rfl2); r.dropped != "stamp_session_stopped" {
		t.Errorf("stopped session: %q", r.dropped)
	}
}

// A malformed TLV is reflected with M set and stops TLV processing; at the
// collector a TLV that overruns the packet is a named drop.
func TestMalformedTLVs(t *testing.T) {
	c := newChain(t, `tlvs = ["timestamp_info", "direct_measurement"]`, reflectorKeys, "")
	h := c.h
	f := endSRv6(t, h.produce(c.snd)[0])
	pay, _ := payloadOf(t, f)
	// The Timestamp Information TLV claims 3 octets and the rest are junk.
	binary.BigEndian.PutUint16(pay[BaseLen+2:], 3)
	fixUDP(t, f)
	rr := h.run(f, 0, c.rfl)
	if rr.dropped != "" {
		t.Fatal(rr.dropped)
	}
	rpay, _ := payloadOf(t, rr.data)
	if rpay[BaseLen]&FlagM == 0 {
		t.Errorf("M not set: flags %#x", rpay[BaseLen])
	}
	if got := h.StageCounter("refl", "tlv_malformed"); got != 1 {
		t.Errorf("tlv_malformed %d", got)
	}
	// The reply's TLV area no longer walks: the collector drops it, named.
	back := endSRv6(t, rr.data)
	if r := h.run(back, 1, c.coll); r.dropped != "stamp_tlv_overrun" {
		t.Errorf("collector: %q", r.dropped)
	}
	// A reply whose SSID no session has, and one from the wrong source.
	h.advance(10 * time.Millisecond)
	f2 := endSRv6(t, h.produce(c.snd)[0])
	rr2 := h.run(f2, 0, c.rfl)
	back2 := endSRv6(t, rr2.data)
	p2, l2 := payloadOf(t, back2)
	wrong := append([]byte(nil), back2...)
	packet.IPv6(wrong[l2.L3:]).SetSrc([16]byte{0x20, 0x01, 0x0d, 0xb8, 15: 9})
	fixUDP(t, wrong)
	if r := h.run(wrong, 1, c.coll); r.dropped != "stamp_wrong_source" {
		t.Errorf("wrong source: %q", r.dropped)
	}
	binary.BigEndian.PutUint16(p2[14:], 4242)
	fixUDP(t, back2)
	if r := h.run(back2, 1, c.coll); r.dropped != "stamp_unknown_session" {
		t.Errorf("unknown session: %q", r.dropped)
	}
}

// A Return Path TLV with an SRv6 segment list steers the reply; a Control
// Code of 0 asks for none.
func TestReturnPathTLV(t *testing.T) {
	for _, c := range []struct {
		name  string
		extra string
		want  string
		segs  int
	}{
		{"segment list", `return_path = ["2001:db8:e::1"]`, "", 2},
		{"no reply", `return_control_code = 0`, "stamp_no_reply", 0},
		{"same link", `return_control_code = 1`, "", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			snd := h.MustBuildNamed("stamp.sender", "tx", senderKeys(c.extra))
			rfl := h.MustBuildNamed("stamp.reflector", "refl", "[[sessions]]\nssid = 7\n")
			rr := h.run(endSRv6(t, h.produce(snd)[0]), 0, rfl)
			if rr.dropped != c.want {
				t.Fatalf("got %q", rr.dropped)
			}
			if c.want != "" {
				return
			}
			_, l := payloadOf(t, rr.data)
			srh := l.SRH(rr.data)
			if c.segs == 0 {
				if srh != nil {
					t.Error("an SRH without a return path")
				}
				return
			}
			if srh == nil || srh.NumSegments() != c.segs || srh.SegmentAddr(0) != addrS || srh.SegmentAddr(1) != addrE {
				t.Errorf("SRH %x", srh)
			}
			checkUDP(t, rr.data)
		})
	}
}

// Config errors name the stage table and the session.
func TestConfigErrors(t *testing.T) {
	h := newHarness(t)
	for _, c := range []struct{ kind, keys, want string }{
		{"stamp.sender", "[[sessions]]\nssid = 0\n", "ssid 0"},
		{"stamp.sender", fmt.Sprintf("src = %q\n[[sessions]]\nssid = 1\nreflector = \"192.0.2.1\"\n", addrS), "same address family"},
		{"stamp.sender", fmt.Sprintf("src = %q\n[[sessions]]\nssid = 1\nreflector = %q\nauthenticated = true\n", addrS, addrR), "needs a key"},
		{"stamp.sender", fmt.Sprintf("src = %q\n[[sessions]]\nssid = 1\nreflector = %q\ntlvs = [\"bogus\"]\n", addrS, addrR), "unknown TLV"},
		{"stamp.sender", "[[sessions]]\nssid = 1\nbogus_key = 1\n", "bogus_key"},
		{"stamp.reflector", "[[sessions]]\nssid = 70000\n", "ssid 70000"},
		{"stamp.reflector", `mac = "flip"`, "swap or keep"},
		{"stamp.collector", `port = -1`, "port"},
	} {
		_, err := h.BuildNamed(c.kind, fmt.Sprintf("s%d", len(c.keys)), c.keys)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %q: %v", c.kind, c.keys, err)
		}
	}
}
