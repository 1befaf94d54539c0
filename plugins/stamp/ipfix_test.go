package stamp

import (
	"encoding/binary"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/linerate/linerate/internal/tshark"
	"github.com/linerate/linerate/plugins"
)

// since is the histogram of what was recorded between two states: its
// counts, sum and quantiles are those of the later values alone.
func TestHistSince(t *testing.T) {
	var h, prev, d hist
	for v := int64(1000); v < 2000; v++ {
		h.record(v)
	}
	prev = h
	for v := int64(5_000_000); v < 5_001_000; v++ {
		h.record(v)
	}
	h.since(&prev, &d)
	if d.n != 1000 || d.sum/int64(d.n) != 5_000_499 {
		t.Errorf("n %d mean %d", d.n, d.sum/int64(d.n))
	}
	for _, q := range []float64{0.5, 0.9, 0.99} {
		if v := d.quantile(q); v < 4_960_000 || v > 5_040_000 {
			t.Errorf("p%v = %d, not within 0.8%% of the later values", q*100, v)
		}
	}
	if d.min < 4_960_000 || d.max > 5_001_000 || d.min > d.max {
		t.Errorf("min %d max %d", d.min, d.max)
	}
	var empty hist
	h.since(&h, &empty)
	if empty.n != 0 {
		t.Errorf("nothing since itself: n %d", empty.n)
	}
}

// A collector with an [ipfix] table sends, once an ipfix_interval, each
// session's interval: what it sent and got, and its delays per direction;
// after a session's first interval, the collector's Tick allocates nothing.
func TestIPFIXIntervals(t *testing.T) {
	sock, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	h := newHarness(t)
	h.Sections = fmt.Sprintf("[ipfix]\ncollectors = [\"udp:%s\"]\n", sock.LocalAddr())
	c := &chain{h: h}
	c.snd = h.MustBuildNamed("stamp.sender", "tx", senderKeys(""))
	c.rfl = h.MustBuildNamed("stamp.reflector", "refl", reflectorKeys)
	c.coll = h.Start(h.MustBuildNamed("stamp.collector", "coll", `ipfix_interval = "1s"`))
	tick := c.coll.(plugins.Ticker)
	fwd, bwd := 3*time.Millisecond, 5*time.Millisecond
	// Two seconds of test packets, every 10 ms, the collector ticking.
	for range 200 {
		c.step(t, fwd, 0, bwd)
		h.advance(10*time.Millisecond - fwd - bwd)
		h.Ctx.Now = h.Clock.Now()
		tick.Tick(&h.Ctx)
	}
	buf := make([]byte, 65535)
	var rec []byte
	for rec == nil {
		_ = sock.SetReadDeadline(time.Now().Add(time.Minute))
		n, _, err := sock.ReadFrom(buf)
		if err != nil {
			t.Fatal(err)
		}
		for o := 16; o < n; {
			id, l := binary.BigEndian.Uint16(buf[o:]), int(binary.BigEndian.Uint16(buf[o+2:]))
			if id == SessionTemplateID && l >= 4+sessionRecordLen {
				rec = append([]byte(nil), buf[o+4:o+4+sessionRecordLen]...)
			}
			o += l
		}
	}
	be := binary.BigEndian
	i64 := func(o int) int64 { return int64(be.Uint64(rec[o:])) }
	// flowStart, flowEnd: 16 bytes; the addresses: 32; then the SSID.
	ssid, sent, recv, lost := be.Uint16(rec[48:]), be.Uint64(rec[50:]), be.Uint64(rec[58:]), be.Uint64(rec[66:])
	if ssid != 7 || sent < 90 || sent > 110 || recv < 90 || recv > 110 || lost != 0 {
		t.Errorf("interval: ssid %d sent %d received %d lost %d", ssid, sent, recv, lost)
	}
	// Round trip from 90, forward from 146, backward from 202: min, mean,
	// p50, p90, p99, max, IPDV.
	for _, d := range []struct {
		name string
		off  int
		want time.Duration
	}{{"round trip", 90, fwd + bwd}, {"forward", 146, fwd}, {"backward", 202, bwd}} {
		for k, what := range []string{"min", "mean", "p50", "p90", "p99", "max"} {
			if v := i64(d.off + 8*k); v < int64(d.want)*99/100 || v > int64(d.want)*101/100 {
				t.Errorf("%s %s: %d ns, want %v", d.name, what, v, d.want)
			}
		}
		if ipdv := i64(d.off + 48); ipdv != 0 {
			t.Errorf("%s IPDV %d, want 0 (every delay is the same)", d.name, ipdv)
		}
	}
	if got := testing.AllocsPerRun(10, func() {
		h.advance(time.Second)
		h.Ctx.Now = h.Clock.Now()
		tick.Tick(&h.Ctx)
	}); got != 0 {
		t.Errorf("the collector's Tick allocates %v times an interval", got)
	}
}

// The interval records chain from the session's start: the first begins
// when the session started, not when it is exported (flowStart was
// flowEnd, over a whole interval's counts), and each later one where the
// one before it ended. tshark decodes the same ends.
func TestIPFIXFirstInterval(t *testing.T) {
	sock, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	h := newHarness(t)
	h.Sections = fmt.Sprintf("[ipfix]\ncollectors = [\"udp:%s\"]\n", sock.LocalAddr())
	c := &chain{h: h}
	c.snd = h.MustBuildNamed("stamp.sender", "tx", senderKeys(""))
	c.rfl = h.MustBuildNamed("stamp.reflector", "refl", reflectorKeys)
	c.coll = h.Start(h.MustBuildNamed("stamp.collector", "coll", `ipfix_interval = "1s"`))
	tick := c.coll.(plugins.Ticker)
	start := testUnixBase + h.Clock.Now() // the session's first packet goes now
	// The collector's first tick comes 0.51 s into the session: its first
	// interval ends a second later, with 1.51 s of packets, every 10 ms.
	for i := range 400 {
		c.step(t, time.Millisecond, 0, time.Millisecond)
		h.advance(8 * time.Millisecond)
		if i >= 50 {
			h.Ctx.Now = h.Clock.Now()
			tick.Tick(&h.Ctx)
		}
	}
	type rec struct {
		start, end int64
		sent       uint64
	}
	var recs []rec
	raw, msgs := readIPFIX(t, sock, 3)
	for _, b := range raw {
		recs = append(recs, rec{ipfixNanos(b), ipfixNanos(b[8:]), binary.BigEndian.Uint64(b[50:])})
	}
	for i, r := range recs {
		t.Logf("record %d: %v to %v, %d sent", i, time.Duration(r.start-start), time.Duration(r.end-start), r.sent)
	}
	if r := recs[0]; r.start != start || r.end != start+int64(1510*time.Millisecond) || r.sent != 151 {
		t.Errorf("first interval %v to %v from the session's start, %d sent: want 0 to 1.51s, 151 sent",
			time.Duration(r.start-start), time.Duration(r.end-start), r.sent)
	}
	for i := 1; i < len(recs); i++ {
		if recs[i].start != recs[i-1].end || recs[i].end != recs[i].start+int64(time.Second) {
			t.Errorf("record %d: %d to %d, after one that ended at %d", i, recs[i].start, recs[i].end, recs[i-1].end)
		}
	}

	// tshark reads flowStartNanoseconds and flowEndNanoseconds as they are.
	tshark.Require(t)
	var frames [][]byte
	for _, m := range msgs {
		frames = append(frames, ipfixFrame(t, m))
	}
	pcap := filepath.Join(t.TempDir(), "ipfix.pcap")
	tshark.WritePcap(t, pcap, frames)
	out := strings.TrimSpace(string(tshark.Run(t, "-r", pcap, "-d", "udp.port==4739,cflow", "-Y", "cflow.flowset_id == 257",
		"-T", "fields", "-E", "occurrence=f", "-e", "cflow.abstimestart", "-e", "cflow.abstimeend")))
	// The NTP format's fraction is 2^-32 s: tshark's nanoseconds may be 1 less.
	first := strings.Split(strings.Split(out, "\n")[0], "\t")
	for i, want := range []int64{start, start + int64(1510*time.Millisecond)} {
		var got time.Time
		if i < len(first) {
			got, _ = time.Parse("Jan _2, 2006 15:04:05.000000000 MST", first[i])
		}
		if d := want - got.UnixNano(); d < 0 || d > 1 {
			t.Errorf("tshark: the first interval's end %d is %q, want %v\n%s", i, first, time.Unix(0, want).UTC(), out)
		}
	}
}

// readIPFIX reads the collector's socket until it has n STAMP interval
// records; it returns them, and the messages they came in.
func readIPFIX(t *testing.T, sock net.PacketConn, n int) (recs, msgs [][]byte) {
	t.Helper()
	buf := make([]byte, 65535)
	for len(recs) < n {
		_ = sock.SetReadDeadline(time.Now().Add(time.Minute))
		m, _, err := sock.ReadFrom(buf)
		if err != nil {
			t.Fatalf("%d records: %v", len(recs), err)
		}
		msgs = append(msgs, append([]byte(nil), buf[:m]...))
		for o := 16; o+4 <= m; {
			id, l := binary.BigEndian.Uint16(buf[o:]), int(binary.BigEndian.Uint16(buf[o+2:]))
			for r := o + 4; id == SessionTemplateID && r+sessionRecordLen <= o+l; r += sessionRecordLen {
				recs = append(recs, append([]byte(nil), buf[r:r+sessionRecordLen]...))
			}
			o += max(l, 4)
		}
	}
	return recs, msgs
}

// An interval's minimum and maximum delays are the values measured, not
// the bounds of the histogram buckets they fell in, which are up to 0.8%
// out: a minimum below what the path allows.
func TestIPFIXExactExtremes(t *testing.T) {
	sock, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	h := newHarness(t)
	h.Sections = fmt.Sprintf("[ipfix]\ncollectors = [\"udp:%s\"]\n", sock.LocalAddr())
	c := &chain{h: h}
	c.snd = h.MustBuildNamed("stamp.sender", "tx", senderKeys(""))
	c.rfl = h.MustBuildNamed("stamp.reflector", "refl", reflectorKeys)
	c.coll = h.Start(h.MustBuildNamed("stamp.collector", "coll", `ipfix_interval = "1s"`))
	tick := c.coll.(plugins.Ticker)
	// Forward delays of 1 ms in the first second, then 1.812345 to
	// 1.812345 + 9 µs, every 10 ms; backward 1 ms.
	const lo = 1_812_345
	for i := range 250 {
		fwd := time.Millisecond
		if i >= 100 {
			fwd = time.Duration(lo + 1000*(i%10))
		}
		c.step(t, fwd, 0, time.Millisecond)
		h.advance(10*time.Millisecond - fwd - time.Millisecond)
		h.Ctx.Now = h.Clock.Now()
		tick.Tick(&h.Ctx)
	}
	recs, _ := readIPFIX(t, sock, 2)
	i64 := func(b []byte, o int) int64 { return int64(binary.BigEndian.Uint64(b[o:])) }
	// Forward from 146: min, mean, p50, p90, p99, max.
	if min, max := i64(recs[1], 146), i64(recs[1], 146+40); min != lo || max != lo+9000 {
		t.Errorf("second interval: forward min %d, max %d, want %d and %d", min, max, lo, lo+9000)
	}
}

// ipfixNanos decodes a dateTimeNanoseconds (RFC 7011 §6.1.10: NTP format)
// to Unix ns.
func ipfixNanos(b []byte) int64 {
	sec, frac := binary.BigEndian.Uint32(b), binary.BigEndian.Uint32(b[4:])
	return (int64(sec)-2208988800)*1e9 + int64((uint64(frac)*1e9+1<<31)>>32)
}

// ipfixFrame is an IPFIX message as the collector's socket got it, in a
// frame for tshark.
func ipfixFrame(t *testing.T, msg []byte) []byte {
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2},
		EthernetType: layers.EthernetTypeIPv4}
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: net.IP{127, 0, 0, 1}, DstIP: net.IP{127, 0, 0, 1}}
	udp := &layers.UDP{SrcPort: 40000, DstPort: 4739}
	_ = udp.SetNetworkLayerForChecksum(ip)
	b := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(b, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, eth, ip, udp,
		gopacket.Payload(msg)); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}
