package stamp

import (
	"net/netip"
	"reflect"
	"testing"
	"time"

	"github.com/cilium/ebpf"

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

func TestXDPCollectorGolden(t *testing.T) {
	x := newXDPCollectorPair(t, nil)
	seen := map[string]int{}
	wall := time.Now().UnixNano()
	for range 5 {
		for _, f := range x.replies(t) {
			m, _ := x.compare(t, f)
			seen[m]++
		}
		x.a.h.advance(10 * time.Millisecond)
		x.b.h.advance(10 * time.Millisecond)
	}
	// A base reply from another reflector.
	var f []byte
	for _, r := range x.replies(t) {
		if pay, l := payloadOf(t, r); len(pay) == BaseLen && l.IPVersion == 6 {
			f = r
		}
	}
	wrong := append([]byte(nil), f...)
	_, l := payloadOf(t, wrong)
	if l.IPVersion == 6 {
		packet.IPv6(wrong[l.L3:]).SetSrc(netip.MustParseAddr("2001:db8:b::99").As16())
	}
	if m, act := x.compare(t, wrong); m != "stamp_wrong_source" || act != 1 {
		t.Errorf("a reply from elsewhere: %q, action %d", m, act)
	}
	t.Logf("outcomes %v", seen)
	// Sessions 7, 8 and 9 in the kernel, 10 (TLVs) in Go.
	if seen["to_go"] == 0 || seen["records"] != 3*seen["to_go"] || len(seen) != 2 {
		t.Errorf("outcomes %v, want three records in the kernel for each reply with TLVs left to Go", seen)
	}
	for _, id := range []uint16{7, 8, 9, 10} {
		ga, gb := drain(x.a.session(id)), drain(x.b.session(id))
		if len(ga) != len(gb) || len(ga) == 0 {
			t.Fatalf("session %d: %d records in Go, %d through the program", id, len(ga), len(gb))
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
