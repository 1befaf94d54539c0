package stamp

import (
	"encoding/binary"
	"fmt"
	"net"
	"testing"
	"time"

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
