package stamp

import (
	"encoding/binary"
	"net/netip"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/linerate/linerate/appliance/kernel"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/internal/testenv"
	"github.com/linerate/linerate/plugins"
	"github.com/linerate/linerate/plugins/stamp/bpf"
)

// The XDP collector (plugins/stamp/bpf) against the Go stage: replies made
// by the Go sender and reflector go to a Go collector, and to the program
// in front of a second, identical collector that makes its records from
// the program's ring. The records are the same but for T4 (the program's
// well formed), and the program drops, leaves to Go or lets pass what the
// Go stage drops, handles in Go or lets pass.

const xdpSenderKeys = `
src = "2001:db8:a::2"
src_mac = "02:00:00:00:00:0a"
dst_mac = "02:00:00:00:00:0e"
src_port = 50000
interval = "10ms"
synchronized = true
clock_error = "1us"
[[sessions]]
ssid = 7
reflector = "2001:db8:b::2"
reflector_mode = "stateful"
[[sessions]]
ssid = 8
reflector = "2001:db8:b::2"
timestamp = "ptp"
[[sessions]]
ssid = 9
src = "192.0.2.1"
reflector = "192.0.2.2"
[[sessions]]
ssid = 10
reflector = "2001:db8:b::2"
tlvs = ["timestamp_info"]
`

const xdpReflectorKeys = `
synchronized = true
clock_error = "1us"
[[sessions]]
ssid = 7
mode = "stateful"
[[sessions]]
ssid = 8
[[sessions]]
ssid = 9
[[sessions]]
ssid = 10
`

type xdpCollectorPair struct {
	a, b  *chain
	prog  *bpf.Collector
	collB *collector
	ctx   plugins.Context
}

func newXDPCollectorPair(t testing.TB, p *bpf.Collector) *xdpCollectorPair {
	testenv.RequireRoot(t)
	requireProgram(t, bpf.CollectorNeeds, 0)
	x := &xdpCollectorPair{}
	for _, c := range []**chain{&x.a, &x.b} {
		h := newHarness(t)
		*c = &chain{h: h,
			snd:  h.MustBuildNamed("stamp.sender", "tx", xdpSenderKeys),
			rfl:  h.MustBuildNamed("stamp.reflector", "refl", xdpReflectorKeys),
			coll: h.MustBuildNamed("stamp.collector", "coll", "")}
	}
	if p == nil {
		var err error
		if p, err = bpf.LoadCollector(0, 1); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
	}
	x.prog, x.collB = p, x.b.coll.(*collector)
	if err := p.Configure(bpf.CollectorConfig{Port: x.collB.port, CheckSource: x.collB.checkSrc}); err != nil {
		t.Fatal(err)
	}
	var ss []bpf.CollectorSession
	for id, s := range x.b.h.registry().tx.Load().m {
		cs := bpf.CollectorSession{SSID: id, SrcPort: s.cfg.SrcPort, IPv4: s.ipv4, Auth: s.cfg.Auth, HMACTLV: s.hmacTLV >= 0,
			Src: s.src16, Reflector: s.replySrc}
		if s.ipv4 {
			cs.Src, cs.Reflector = v4mapped(s.src4), v4mapped(s.replySrc4)
		}
		ss = append(ss, cs)
	}
	if err := p.SetSessions(ss); err != nil {
		t.Fatal(err)
	}
	x.collB.xdp = &coXDP{}
	x.collB.xdp.utcOff.Store(-int64(kernelTAIOffset()) * 1e9)
	x.collB.onEvent = x.collB.takeXDP
	x.ctx = plugins.Context{Clock: x.b.h.Clock}
	x.collB.tickCtx = &x.ctx
	return x
}

// replies are the Go reflector's replies to what the sender has due.
func (x *xdpCollectorPair) replies(t testing.TB) [][]byte {
	h := x.a.h
	var out [][]byte
	for _, f := range h.produce(x.a.snd) {
		h.advance(time.Millisecond)
		rr := h.run(f, 0, x.a.rfl)
		if rr.dropped != "" {
			t.Fatalf("reflector: %s", rr.dropped)
		}
		out = append(out, rr.data)
	}
	x.b.h.produce(x.b.snd) // the second sender's state moves alike
	return out
}

// compare sends a reply to both; it returns the program's counter that
// moved and its action.
func (x *xdpCollectorPair) compare(t testing.TB, f []byte) (string, uint32) {
	t.Helper()
	before, _ := x.prog.Counters()
	out := make([]byte, len(f)+256)
	opts := ebpf.RunOptions{Data: f, DataOut: out}
	act, err := x.prog.Program.Run(&opts)
	if err != nil {
		t.Fatal(err)
	}
	after, _ := x.prog.Counters()
	moved := ""
	for i := range after {
		if after[i] != before[i] {
			moved = bpf.CollectorCounters[i]
		}
	}
	gr := x.a.h.run(append([]byte(nil), f...), 1, x.a.coll)
	switch {
	case act == 1 && moved == "records": // consumed: the record comes through the ring
		if gr.dropped != "consumed" {
			t.Fatalf("the program took a reply the Go stage did not: %q", gr.dropped)
		}
		n, err := x.prog.Poll(0, x.collB.onEvent)
		if err != nil || n != 1 {
			t.Fatalf("%d events in the ring, %v", n, err)
		}
	case act == 1:
		if gr.dropped != moved {
			t.Fatalf("the program dropped (%s), the Go stage: %q", moved, gr.dropped)
		}
	case act == 2: // left to Go, or not the collector's: untouched
		if string(opts.DataOut) != string(f) {
			t.Fatal("the program changed a packet it let pass")
		}
		// The second stage handles it as the first did.
		x.b.h.run(append([]byte(nil), f...), 1, x.collB)
	default:
		t.Fatalf("action %d", act)
	}
	return moved, act
}

// collectorGoldenRounds is how many rounds of replies the golden test
// sends; the four sessions send alike.
const collectorGoldenRounds = 5

// The replies of four sessions on both paths a collector with an offload
// takes: "xdp", the program in the kernel in front of the Go stage (its
// records against a Go collector's); "fallback", offload = "auto" where the
// kernel lacks what the program needs (forced on every kernel), the Go
// stage alone. On both every reply is a record, and a reply from another
// reflector a stamp_wrong_source drop.
func TestXDPCollectorGolden(t *testing.T) {
	t.Run("xdp", func(t *testing.T) {
		x := newXDPCollectorPair(t, nil)
		seen := map[string]int{}
		wall := time.Now().UnixNano()
		n := 0
		for range collectorGoldenRounds {
			for _, f := range x.replies(t) {
				m, _ := x.compare(t, f)
				seen[m]++
				n++
			}
			x.a.h.advance(10 * time.Millisecond)
			x.b.h.advance(10 * time.Millisecond)
		}
		if m, act := x.compare(t, wrongReflector(t, x.replies(t))); m != "stamp_wrong_source" || act != 1 {
			t.Errorf("a reply from elsewhere: %q, action %d", m, act)
		}
		t.Logf("outcomes %v", seen)
		// Sessions 7, 8 and 9 in the kernel, 10 (TLVs) in Go.
		if seen["to_go"] == 0 || seen["records"] != 3*seen["to_go"] || len(seen) != 2 {
			t.Errorf("outcomes %v, want three records in the kernel for each reply with TLVs left to Go", seen)
		}
		for _, id := range []uint16{7, 8, 9, 10} {
			ga, gb := drain(x.a.session(id)), drain(x.b.session(id))
			if len(ga) != len(gb) || len(ga) != n/4 {
				t.Fatalf("session %d: %d records in Go, %d through the program, want %d", id, len(ga), len(gb), n/4)
			}
			for i := range ga {
				if id != 10 {
					if d := gb[i].T4 - wall; d < -int64(5*time.Second) || d > int64(5*time.Second) {
						t.Errorf("session %d: T4 %s is not the time of the run", id, time.Unix(0, gb[i].T4).UTC())
					}
				}
				ga[i].T4, gb[i].T4 = 0, 0
				if !reflect.DeepEqual(ga[i], gb[i]) {
					t.Errorf("session %d record %d:\n  go %+v\n xdp %+v", id, i, ga[i], gb[i])
				}
			}
		}
	})
	t.Run("fallback", func(t *testing.T) {
		t.Setenv(kernel.DisableEnv, "bpf_ktime_get_tai_ns")
		h := newHarness(t)
		c := &chain{h: h,
			snd:  h.MustBuildNamed("stamp.sender", "tx", xdpSenderKeys),
			rfl:  h.MustBuildNamed("stamp.reflector", "refl", xdpReflectorKeys),
			coll: h.MustBuildNamed("stamp.collector", "coll", `offload = "auto"`)}
		req := c.coll.(*collector).xdp.req
		if err := req.RequireKernel(); err != nil || req.InKernel() ||
			!strings.Contains(req.Reason(), "the kernel lacks bpf_ktime_get_tai_ns") {
			t.Fatalf("auto: %v, in the kernel %v, reason %q", err, req.InKernel(), req.Reason())
		}
		replies := func() [][]byte {
			var out [][]byte
			for _, f := range h.produce(c.snd) {
				h.advance(time.Millisecond)
				rr := h.run(f, 0, c.rfl)
				if rr.dropped != "" {
					t.Fatalf("reflector: %s", rr.dropped)
				}
				out = append(out, rr.data)
			}
			return out
		}
		n := 0
		for range collectorGoldenRounds {
			for _, f := range replies() {
				if gr := h.run(f, 1, c.coll); gr.dropped != "consumed" {
					t.Fatalf("a reply: %q, want a record", gr.dropped)
				}
				n++
			}
			h.advance(10 * time.Millisecond)
		}
		if gr := h.run(wrongReflector(t, replies()), 1, c.coll); gr.dropped != "stamp_wrong_source" {
			t.Errorf("a reply from elsewhere: %q", gr.dropped)
		}
		for _, id := range []uint16{7, 8, 9, 10} {
			recs := drain(c.session(id))
			if len(recs) != n/4 {
				t.Fatalf("session %d: %d records, want %d", id, len(recs), n/4)
			}
			for i, r := range recs {
				if r.Seq != uint32(i) || r.T4 < r.T1 {
					t.Errorf("session %d record %d: %+v", id, i, r)
				}
			}
		}
	})
}

// wrongReflector is a base IPv6 reply among replies, from another
// reflector's address.
func wrongReflector(t testing.TB, replies [][]byte) []byte {
	t.Helper()
	var f []byte
	for _, r := range replies {
		if pay, l := payloadOf(t, r); len(pay) == BaseLen && l.IPVersion == 6 {
			f = append([]byte(nil), r...)
		}
	}
	if f == nil {
		t.Fatal("no base IPv6 reply")
	}
	_, l := payloadOf(t, f)
	packet.IPv6(f[l.L3:]).SetSrc(netip.MustParseAddr("2001:db8:b::99").As16())
	return f
}

// FuzzXDPCollector is the collector's differential fuzzer: any frame, to
// the Go stage and to the program in front of the second one.
func FuzzXDPCollector(f *testing.F) {
	for _, s := range collectorSeeds(f) {
		f.Add(s)
	}
	p := newXDPCollectorPair(f, nil).prog
	f.Fuzz(func(t *testing.T, frame []byte) {
		if len(frame) < 14 || len(frame) > 1500 {
			return
		}
		x := newXDPCollectorPair(t, p)
		x.replies(t)
		x.compare(t, frame)
	})
}

// collectorSeeds are the replies of a chain like the pair's.
func collectorSeeds(tb testing.TB) [][]byte {
	h := newHarness(tb)
	snd := h.MustBuildNamed("stamp.sender", "tx", xdpSenderKeys)
	rfl := h.MustBuildNamed("stamp.reflector", "refl", xdpReflectorKeys)
	var out [][]byte
	for _, f := range h.produce(snd) {
		out = append(out, f) // test packets: a reflector's business
		if rr := h.run(f, 0, rfl); rr.dropped == "" {
			out = append(out, rr.data)
		}
	}
	return out
}

// The collector's rings (collector.c: take, collector.go: Poll) over
// several turns: a poll hands over every record the program wrote, in the
// order it wrote them; a full ring leaves the next reply to the Go stage,
// counted as ring_full, and takes again once polled; a poll of an empty
// ring hands over nothing.
func TestXDPCollectorRing(t *testing.T) {
	cp := newXDPCollectorPair(t, nil)
	var frame []byte
	for _, f := range cp.replies(t) {
		if pay, _ := payloadOf(t, f); len(pay) == BaseLen {
			frame = f
			break
		}
	}
	if frame == nil {
		t.Fatal("no base reply")
	}
	pay, _ := payloadOf(t, frame)
	run := func(seq uint32) uint32 {
		binary.BigEndian.PutUint32(pay, seq)
		act, err := cp.prog.Program.Run(&ebpf.RunOptions{Data: frame})
		if err != nil {
			t.Fatal(err)
		}
		return act
	}
	counters := func() (records, full uint64) {
		c, err := cp.prog.Counters()
		if err != nil {
			t.Fatal(err)
		}
		return c[slices.Index(bpf.CollectorCounters, "records")], c[slices.Index(bpf.CollectorCounters, "ring_full")]
	}
	poll := func(from uint32, want int) {
		t.Helper()
		next := from
		n, err := cp.prog.Poll(0, func(ev *bpf.Event) {
			if got := binary.BigEndian.Uint32(ev.Pay[:]); got != next {
				t.Fatalf("record of sequence %d, want %d", got, next)
			}
			next++
		})
		if err != nil || n != want {
			t.Fatalf("polled %d records (%v), want %d", n, err, want)
		}
	}
	seq := uint32(0)
	for turn := range 3 {
		from := seq
		for range bpf.RingSlots {
			if act := run(seq); act != 1 /* XDP_DROP: consumed */ {
				t.Fatalf("turn %d, sequence %d: XDP action %d, want a record", turn, seq, act)
			}
			seq++
		}
		_, full0 := counters()
		if act := run(seq); act != 2 /* XDP_PASS: up to Go */ {
			t.Fatalf("a full ring: XDP action %d, want the reply left to Go", act)
		}
		if _, full := counters(); full != full0+1 {
			t.Fatalf("a full ring counted %d ring_full, want %d", full, full0+1)
		}
		poll(from, bpf.RingSlots)
		poll(seq, 0)
	}
	// Part of a ring, across the end of its slots.
	for range 3 {
		from := seq
		for range bpf.RingSlots / 3 {
			run(seq)
			seq++
		}
		poll(from, bpf.RingSlots/3)
	}
	if records, _ := counters(); records != uint64(3*bpf.RingSlots+3*(bpf.RingSlots/3)) {
		t.Fatalf("%d records counted, want %d", records, 3*bpf.RingSlots+3*(bpf.RingSlots/3))
	}
}

// Two CPUs write one ring while its reader polls: every reply is a record
// exactly once or left to Go (a full ring), and each writer's records come
// in the order it wrote them.
func TestXDPCollectorRingConcurrent(t *testing.T) {
	cp := newXDPCollectorPair(t, nil)
	var frame []byte
	for _, f := range cp.replies(t) {
		if pay, _ := payloadOf(t, f); len(pay) == BaseLen {
			frame = f
			break
		}
	}
	if frame == nil {
		t.Fatal("no base reply")
	}
	_, l := payloadOf(t, frame)
	off := int(l.L4) + packet.UDPLen // the sequence number's
	const writers, each = 2, 20000
	left := make([][]uint32, writers) // by writer: what a full ring left to Go
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			f := slices.Clone(frame)
			for i := range uint32(each) {
				seq := uint32(w)<<24 | i
				binary.BigEndian.PutUint32(f[off:], seq)
				act, err := cp.prog.Program.Run(&ebpf.RunOptions{Data: f})
				if err != nil {
					errs <- err
					return
				}
				if act == 2 { // XDP_PASS: up to Go
					left[w] = append(left[w], seq)
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	got := make([][]uint32, writers)
	take := func(ev *bpf.Event) {
		seq := binary.BigEndian.Uint32(ev.Pay[:])
		got[seq>>24] = append(got[seq>>24], seq)
	}
	for finished := false; !finished; {
		select {
		case <-done:
			finished = true
		default:
		}
		if _, err := cp.prog.Poll(0, take); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cp.prog.Poll(0, take); err != nil {
		t.Fatal(err)
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for w := range writers {
		all := append(slices.Clone(got[w]), left[w]...)
		slices.Sort(all)
		if len(all) != each || !slices.IsSorted(got[w]) {
			t.Fatalf("writer %d: %d records and %d left to Go of %d, in order: %v", w, len(got[w]), len(left[w]), each,
				slices.IsSorted(got[w]))
		}
		for i, s := range all {
			if s != uint32(w)<<24|uint32(i) {
				t.Fatalf("writer %d: sequence %d missing or twice", w, i)
			}
		}
		t.Logf("writer %d: %d records, %d left to Go for a full ring", w, len(got[w]), len(left[w]))
	}
}
