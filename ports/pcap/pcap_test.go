package pcap

import (
	"bytes"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/linerate/linerate/appliance/clock"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/internal/porttest"
	"github.com/linerate/linerate/internal/testenv"
	"github.com/linerate/linerate/ports"
)

const jumboRoom = 9216

// replay reads path through a port at file timing on a Sim clock whose wall
// time at Start is the first record's time, so Unix(RxTime) is each record's own
// timestamp, and writes everything it reads to out through a second port with
// TxTime = RxTime.
func replay(t *testing.T, path, out string, first time.Time, limit int) []capture {
	t.Helper()
	pool := porttest.Pool(t, 256, jumboRoom)
	// Engine time starts at 1 s, not 0: a zero TxTime means "not stamped".
	sim := clock.NewSim(first.UnixNano() - int64(time.Second))
	sim.Set(int64(time.Second))
	rx, err := New(Options{Name: "rx", RxFile: path, Timing: TimingFile, Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	if err := rx.Start(sim); err != nil {
		t.Fatal(err)
	}
	var tx *Port
	if out != "" {
		if tx, err = New(Options{Name: "tx", TxFile: out, Clock: sim}); err != nil {
			t.Fatal(err)
		}
	}
	sim.Set(int64(time.Hour)) // everything in the test files is due
	var got []capture
	var b packet.Burst
	for len(got) < limit {
		b.Reset()
		n := rx.RxBurst(0, &b)
		if n == 0 {
			break
		}
		for i := 0; i < n; i++ {
			pk := b.P(i)
			got = append(got, capture{data: append([]byte(nil), pk.Data()...), ts: time.Unix(0, clock.Unix(sim, pk.RxTime))})
			pk.TxTime = pk.RxTime
		}
		if tx == nil {
			packet.Free(&b)
			continue
		}
		before := b
		if took := tx.TxBurst(0, &b); took != n {
			t.Fatalf("TxBurst took %d of %d", took, n)
		}
		if b != before {
			t.Fatal("TxBurst modified the burst")
		}
	}
	if !rx.Done() {
		t.Error("rx not Done after the whole file")
	}
	if err := rx.Close(); err != nil {
		t.Error(err)
	}
	if tx != nil {
		if err := tx.Close(); err != nil {
			t.Error(err)
		}
	}
	if pool.InUse() != 0 {
		t.Errorf("%d buffers in use", pool.InUse())
	}
	return got
}

func sameCaptures(t *testing.T, what string, got, want []capture) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d packets, want %d", what, len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i].data, want[i].data) {
			t.Errorf("%s: packet %d: data differs (%d vs %d bytes)", what, i, len(got[i].data), len(want[i].data))
		}
		if !got[i].ts.Equal(want[i].ts) {
			t.Errorf("%s: packet %d: ts %v, want %v", what, i, got[i].ts.UTC(), want[i].ts.UTC())
		}
	}
}

func TestRoundTrip(t *testing.T) {
	caps := testCaptures(t, testFrames(t))
	for _, nanos := range []bool{false, true} {
		name := "micros"
		if nanos {
			name = "nanos"
		}
		t.Run(name, func(t *testing.T) {
			in := writeOracle(t, caps, nanos)
			out := filepath.Join(t.TempDir(), "out.pcap")
			got := replay(t, in, out, caps[0].ts, 100)
			sameCaptures(t, "read", got, caps)
			sameCaptures(t, "written", readOracle(t, out), caps)

			raw, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			le := binary.LittleEndian
			if m, sl, lt := le.Uint32(raw), le.Uint32(raw[16:]), le.Uint32(raw[20:]); m != 0xa1b23c4d || sl != 262144 || lt != 1 {
				t.Errorf("header magic %#x snaplen %d linktype %d", m, sl, lt)
			}
		})
	}
}

func TestPcapng(t *testing.T) {
	caps := testCaptures(t, testFrames(t))
	in := writeOracleNg(t, caps)
	out := filepath.Join(t.TempDir(), "out.pcap")
	got := replay(t, in, out, caps[0].ts, 100)
	sameCaptures(t, "pcapng read", got, caps)
	sameCaptures(t, "pcapng written", readOracle(t, out), caps)
}

func TestTshark(t *testing.T) {
	tshark := testenv.RequireCmd(t, "tshark")
	caps := testCaptures(t, testFrames(t))
	out := filepath.Join(t.TempDir(), "out.pcap")
	replay(t, writeOracle(t, caps, false), out, caps[0].ts, 100)
	cmd := exec.Command(tshark, "-r", out, "-T", "fields", "-e", "frame.len", "-e", "vlan.id", "-e", "frame.time_epoch")
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir()) // keep tshark away from the real profile
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("tshark: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != len(caps) {
		t.Fatalf("tshark read %d frames, want %d:\n%s", len(lines), len(caps), b)
	}
	for i, l := range lines {
		f := strings.Split(l, "\t")
		if want := len(caps[i].data); f[0] != strconv.Itoa(want) {
			t.Errorf("frame %d: tshark length %s, want %d", i, f[0], want)
		}
		if i == 0 && f[1] != "100" {
			t.Errorf("frame 0: tshark vlan.id %q, want 100", f[1])
		}
		if want := caps[i].ts.Unix(); !strings.HasPrefix(f[2], strconv.FormatInt(want, 10)+".") {
			t.Errorf("frame %d: tshark time %s, want %d.…", i, f[2], want)
		}
	}
}

func TestTooBig(t *testing.T) {
	caps := testCaptures(t, testFrames(t))
	pool := porttest.Pool(t, 64, 2048)
	p, err := New(Options{Name: "rx", RxFile: writeOracle(t, caps, true), Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	got, rxTimes := drain(t, p, 100)
	if len(got) != 3 {
		t.Fatalf("got %d packets, want the 3 that fit", len(got))
	}
	for i, rt := range rxTimes {
		if rt != 0 {
			t.Errorf("packet %d: flat timing set RxTime %d; the engine stamps it", i, rt)
		}
	}
	st := p.Stats()
	if st.RxDropped != 1 || st.Extra["rx_too_big"] != 1 || st.RxPackets != 3 {
		t.Errorf("stats %+v", st)
	}
	var bytes uint64
	for _, c := range caps[:3] {
		bytes += uint64(len(c.data))
	}
	if st.RxBytes != bytes {
		t.Errorf("rx bytes %d, want %d", st.RxBytes, bytes)
	}
	if !p.Done() {
		t.Error("not Done")
	}
}

func TestLoop(t *testing.T) {
	caps := testCaptures(t, testFrames(t))
	pool := porttest.Pool(t, 64, jumboRoom)
	p, err := New(Options{Name: "rx", RxFile: writeOracleNg(t, caps), Pool: pool, Loop: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	const passes = 5
	got, _ := drain(t, p, passes*len(caps))
	if len(got) < passes*len(caps) {
		t.Fatalf("got %d packets, want %d", len(got), passes*len(caps))
	}
	for i := range got {
		if !bytes.Equal(got[i].data, caps[i%len(caps)].data) {
			t.Errorf("packet %d differs from record %d", i, i%len(caps))
		}
	}
	if p.Done() {
		t.Error("a looping port is Done")
	}
	if n := p.Stats().Extra["rx_passes"]; n < passes-1 {
		t.Errorf("rx_passes %d", n)
	}
}

func TestFileTiming(t *testing.T) {
	caps := testCaptures(t, testFrames(t))[:4] // offsets 0, 1.5 ms, 3.5 ms, 3.51 ms
	pool := porttest.Pool(t, 64, jumboRoom)
	p, err := New(Options{Name: "rx", RxFile: writeOracle(t, caps, true), Pool: pool, Loop: true, Timing: TimingFile})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	sim := clock.NewSim(0)
	sim.Set(int64(time.Second)) // the engine's clock is not at zero when it starts
	if err := p.Start(sim); err != nil {
		t.Fatal(err)
	}
	t0 := sim.Now()
	span := caps[3].ts.Sub(caps[0].ts)
	pass2 := t0 + int64(span+span/3) // one file span plus one mean gap
	steps := []struct {
		at    int64
		want  int
		first int64 // RxTime of the first packet released
	}{
		{t0, 1, t0},
		{t0 + int64(1499*time.Microsecond), 0, 0},
		{t0 + int64(1500*time.Microsecond), 1, t0 + int64(1500*time.Microsecond)},
		{t0 + int64(3510*time.Microsecond), 2, t0 + int64(3500*time.Microsecond)},
		{pass2 - 1, 0, 0},
		{pass2, 1, pass2},
	}
	var b packet.Burst
	for i, s := range steps {
		sim.Set(s.at)
		b.Reset()
		n := p.RxBurst(0, &b)
		if n != s.want {
			t.Fatalf("step %d at %d: %d packets, want %d", i, s.at, n, s.want)
		}
		if n > 0 && b.P(0).RxTime != s.first {
			t.Errorf("step %d: RxTime %d, want %d", i, b.P(0).RxTime, s.first)
		}
		packet.Free(&b)
	}
	if pool.InUse() != 0 {
		t.Errorf("%d buffers held while waiting for due records", pool.InUse())
	}
	if info := p.Info(); info.TimestampSource != "file" || info.RxQueues != 1 {
		t.Errorf("info %+v", info)
	}
}

func TestTxClock(t *testing.T) {
	pool := porttest.Pool(t, 8, 2048)
	out := filepath.Join(t.TempDir(), "out.pcap")
	p, err := New(Options{Name: "tx", TxFile: out, Snaplen: 100})
	if err != nil {
		t.Fatal(err)
	}
	if !p.Done() {
		t.Error("a port without rx_file is not Done")
	}
	var b packet.Burst
	fill := func(n, size int) {
		b.Reset()
		pool.Alloc(&b, n)
		for i := 0; i < n; i++ {
			d, _ := b.P(i).Append(size)
			for j := range d {
				d[j] = byte(j)
			}
		}
	}
	before := time.Now()
	fill(1, 1000)
	p.TxBurst(0, &b) // no clock yet: wall time now
	after := time.Now()
	sim := clock.NewSim(5_000_000_000)
	sim.Set(7)
	if err := p.Start(sim); err != nil {
		t.Fatal(err)
	}
	fill(2, 50)
	b.P(0).TxTime = 42
	p.TxBurst(0, &b) // TxTime mapped through the clock; zero TxTime is now
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	recs := readOracleRaw(t, out)
	if len(recs) != 3 {
		t.Fatalf("%d records", len(recs))
	}
	if ts := recs[0].ts; ts.Before(before.Truncate(time.Nanosecond)) || ts.After(after) {
		t.Errorf("wall-clock stamp %v outside [%v, %v]", ts, before, after)
	}
	if recs[0].capLen != 100 || recs[0].origLen != 1000 {
		t.Errorf("snaplen: captured %d of %d", recs[0].capLen, recs[0].origLen)
	}
	if got := recs[1].ts.UnixNano(); got != 5_000_000_042 {
		t.Errorf("TxTime 42 written as %d", got)
	}
	if got := recs[2].ts.UnixNano(); got != 5_000_000_007 {
		t.Errorf("zero TxTime written as %d, want the clock's now", got)
	}
	st := p.Stats()
	if st.TxPackets != 3 || st.TxBytes != 1100 {
		t.Errorf("stats %+v", st)
	}
}

type rawRecord struct {
	ts              time.Time
	capLen, origLen int
}

func readOracleRaw(t *testing.T, path string) []rawRecord {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := newReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var out []rawRecord
	for {
		rec, err := r.next()
		if err != nil {
			break
		}
		out = append(out, rawRecord{time.Unix(0, rec.ts), len(rec.data), rec.origLen})
	}
	return out
}

func TestTxConcurrent(t *testing.T) {
	pool := porttest.Pool(t, 1024, 2048)
	out := filepath.Join(t.TempDir(), "out.pcap")
	p, err := New(Options{Name: "tx", TxFile: out, TxQueues: 4, Clock: clock.NewSim(0)})
	if err != nil {
		t.Fatal(err)
	}
	const perQueue = 50
	var wg sync.WaitGroup
	for q := 0; q < 4; q++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var b packet.Burst
			for i := 0; i < perQueue; i++ {
				b.Reset()
				pool.Alloc(&b, 4)
				for j := 0; j < b.N; j++ {
					d, _ := b.P(j).Append(64)
					d[0] = byte(q)
				}
				if n := p.TxBurst(q, &b); n != b.N {
					t.Errorf("took %d of %d", n, b.N)
				}
				_ = p.Stats()
			}
		}()
	}
	wg.Wait()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if n := len(readOracleRaw(t, out)); n != 4*perQueue*4 {
		t.Errorf("%d records, want %d", n, 4*perQueue*4)
	}
	if st := p.Stats(); st.TxPackets != 4*perQueue*4 {
		t.Errorf("tx packets %d", st.TxPackets)
	}
}

func TestTxWithoutFile(t *testing.T) {
	pool := porttest.Pool(t, 8, 2048)
	p, err := New(Options{Name: "rx", RxFile: writeOracle(t, testCaptures(t, testFrames(t))[:1], true), Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var b packet.Burst
	pool.Alloc(&b, 3)
	if n := p.TxBurst(0, &b); n != 3 {
		t.Fatalf("took %d", n)
	}
	if st := p.Stats(); st.TxDropped != 3 || st.Extra["tx_no_file"] != 3 {
		t.Errorf("stats %+v", st)
	}
}

func TestConfig(t *testing.T) {
	caps := testCaptures(t, testFrames(t))
	in := writeOracle(t, caps, false)
	pool := porttest.Pool(t, 64, jumboRoom)
	q := func(s string) string { return `"` + s + `"` }
	bad := []struct{ name, cfg string }{
		{"unknown key", `rx_file = ` + q(in) + "\nspeed = 3"},
		{"bad timing", `rx_file = ` + q(in) + "\ntiming = \"fast\""},
		{"wrong type", `loop = "yes"`},
		{"loop without file", `loop = true`},
		{"snaplen", `tx_file = "x"` + "\nsnaplen = 300000"},
		{"missing file", `rx_file = "/nonexistent/in.pcap"`},
		{"not a capture", `rx_file = ` + q(writeTemp(t, "junk", []byte("hello, world, not a pcap")))},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			p, err := ports.Open("pcap", &ports.Setup{Name: "p", Config: porttest.Config(c.cfg), Pool: pool, RxQueues: 1, TxQueues: 1})
			if err == nil {
				p.Close()
				t.Fatal("no error")
			}
			t.Log(err)
		})
	}
	if _, err := ports.Open("pcap", &ports.Setup{Name: "p", Config: porttest.Config(`rx_file = ` + q(in)), Pool: pool, RxQueues: 2}); err == nil {
		t.Error("two rx queues accepted")
	}
	p, err := ports.Open("pcap", &ports.Setup{Name: "p", Config: porttest.Config(`rx_file = ` + q(in) + "\ntx_file = \"/nonexistent/out.pcap\""), DryRun: true})
	if err != nil || p != nil {
		t.Errorf("dry run: %v, %v", p, err)
	}
	if _, err := ports.Open("pcap", &ports.Setup{Name: "p", Config: porttest.Config(`rx_file = "/nonexistent/in.pcap"`), DryRun: true}); err == nil {
		t.Error("dry run accepted a missing rx_file")
	}
	out := filepath.Join(t.TempDir(), "o.pcap")
	p, err = ports.Open("pcap", &ports.Setup{Name: "p", Pool: pool, RxQueues: 1, TxQueues: 2,
		Config: porttest.Config("rx_file = " + q(in) + "\ntx_file = " + q(out) + "\nloop = false\ntiming = \"file\"\nsnaplen = 128")})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if info := p.Info(); info.Driver != "pcap" || info.TxQueues != 2 || info.RxQueues != 1 || info.TimestampSource != "file" {
		t.Errorf("info %+v", info)
	}
	if _, ok := p.(ports.Starter); !ok {
		t.Error("not a Starter")
	}
}

// TestNoAllocs checks that the burst paths allocate nothing, across a rewind.
func TestNoAllocs(t *testing.T) {
	caps := testCaptures(t, testFrames(t))
	pool := porttest.Pool(t, 256, jumboRoom)
	rx, err := New(Options{Name: "rx", RxFile: writeOracleNg(t, caps), Pool: pool, Loop: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	tx, err := New(Options{Name: "tx", TxFile: filepath.Join(t.TempDir(), "o.pcap"), Clock: clock.NewSim(0)})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	var b packet.Burst
	allocs := testing.AllocsPerRun(200, func() {
		b.Reset()
		n := rx.RxBurst(0, &b)
		if n == 0 {
			t.Fatal("looping port gave nothing")
		}
		tx.TxBurst(0, &b)
	})
	if allocs != 0 {
		t.Errorf("%.1f allocations per rx+tx burst", allocs)
	}
}

// BenchmarkReplay reads a looped file of mixed sizes flat out.
func BenchmarkReplay(b *testing.B) {
	for _, ng := range []bool{false, true} {
		name := "format=pcap"
		if ng {
			name = "format=pcapng"
		}
		b.Run(name, func(b *testing.B) {
			frames := testFrames(b)[:3]
			var caps []capture
			for i := 0; i < 4096; i++ {
				caps = append(caps, capture{data: frames[i%3], ts: time.Unix(int64(i), 0)})
			}
			path := writeOracle(b, caps, true)
			if ng {
				path = writeOracleNg(b, caps)
			}
			pool := porttest.Pool(b, 256, 2048)
			rx, err := New(Options{Name: "rx", RxFile: path, Pool: pool, Loop: true})
			if err != nil {
				b.Fatal(err)
			}
			defer rx.Close()
			var bu packet.Burst
			pkts, bytes := 0, 0
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				bu.Reset()
				pkts += rx.RxBurst(0, &bu)
				for j := 0; j < bu.N; j++ {
					bytes += bu.P(j).Len()
				}
				packet.Free(&bu)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(pkts), "ns/pkt")
			b.ReportMetric(float64(pkts)/b.Elapsed().Seconds()/1e6, "Mpps")
			b.ReportMetric(float64(bytes)/b.Elapsed().Seconds()/1e9, "GB/s")
		})
	}
}

// mtuFrames are frames at the MTU of 1500 and one byte past it, untagged,
// with an 802.1Q tag and with QinQ tags: the first of each pair fits.
func mtuFrames() (fit, over [][]byte) {
	mk := func(n int, tags ...uint16) []byte {
		f := make([]byte, n)
		copy(f, []byte{2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1})
		o := 12
		for _, tag := range tags {
			f[o], f[o+1], f[o+3] = byte(tag>>8), byte(tag), 7
			o += 4
		}
		f[o], f[o+1] = 0x86, 0xdd
		for i := o + 2; i < n; i++ {
			f[i] = byte(i)
		}
		return f
	}
	for _, tags := range [][]uint16{nil, {0x8100}, {0x88a8, 0x8100}} {
		l2 := 14 + 4*len(tags)
		fit = append(fit, mk(l2+1500, tags...))
		over = append(over, mk(l2+1501, tags...))
	}
	return fit, over
}

// The port's mtu bounds the frames it reads and writes: past it, a frame is
// dropped and counted (rx_too_big, tx_too_big), the others pass whole.
func TestMTU(t *testing.T) {
	fit, over := mtuFrames()
	var all [][]byte
	for i := range fit {
		all = append(all, fit[i], over[i])
	}
	pool := porttest.Pool(t, 64, jumboRoom)
	out := filepath.Join(t.TempDir(), "out.pcap")
	// Through the config, as the engine opens it: the mtu key.
	pp, err := ports.Open("pcap", &ports.Setup{Name: "p", Pool: pool, RxQueues: 1, TxQueues: 1, MTU: 1500,
		Config: porttest.Config(`rx_file = "` + writeOracle(t, testCaptures(t, all), true) + `"` + "\ntx_file = \"" + out + "\"")})
	if err != nil {
		t.Fatal(err)
	}
	p := pp.(*Port)
	if mtu := p.Info().MTU; mtu != 1500 {
		t.Errorf("Info().MTU %d, want 1500", mtu)
	}
	got, _ := drain(t, p, 100)
	if len(got) != len(fit) {
		t.Fatalf("received %d frames, want the %d that fit", len(got), len(fit))
	}
	for i := range got {
		if !bytes.Equal(got[i].data, fit[i]) {
			t.Errorf("frame %d differs", i)
		}
	}
	if st := p.Stats(); st.RxDropped != uint64(len(over)) || st.Extra["rx_too_big"] != uint64(len(over)) {
		t.Errorf("rx stats %+v", st)
	}
	var b packet.Burst
	if pool.Alloc(&b, len(all)) != len(all) {
		t.Fatal("pool empty")
	}
	for i, f := range all {
		d, err := b.P(i).Append(len(f))
		if err != nil {
			t.Fatal(err)
		}
		copy(d, f)
	}
	if n := p.TxBurst(0, &b); n != len(all) {
		t.Fatalf("TxBurst took %d of %d", n, len(all))
	}
	st := p.Stats()
	if st.TxPackets != uint64(len(fit)) || st.TxDropped != uint64(len(over)) || st.Extra["tx_too_big"] != uint64(len(over)) ||
		st.Extra["tx_write_error"] != 0 {
		t.Errorf("tx stats %+v", st)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	written := readOracle(t, out)
	if len(written) != len(fit) {
		t.Fatalf("wrote %d frames, want %d", len(written), len(fit))
	}
	for i := range written {
		if !bytes.Equal(written[i].data, fit[i]) {
			t.Errorf("written frame %d differs", i)
		}
	}
}
