package stamp

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/linerate/linerate/appliance/clock"
	"github.com/linerate/linerate/appliance/kernel"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/internal/testenv"
	"github.com/linerate/linerate/plugins/stamp/bpf"
)

// The XDP reflector (plugins/stamp/bpf) against the Go stage: the same
// frames through both, the same bytes out but for T2, T3 and the UDP
// checksum they change (the program's must be right, its times well
// formed), the same drop reasons, and nothing touched of what the program
// leaves to the Go stage.

// xdpPair is a Go reflector and the plain XDP program configured from it.
type xdpPair struct {
	h    *harness
	r    *reflector
	prog *bpf.Reflector
}

func newXDPPair(t testing.TB, keys string) *xdpPair {
	t.Helper()
	testenv.RequireRoot(t)
	requireProgram(t, bpf.ReflectorNeeds, 0)
	h := newHarness(t)
	st := h.MustBuildNamed("stamp.reflector", "refl", keys)
	p, err := bpf.LoadReflector(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	x := &xdpPair{h: h, r: st.(*reflector), prog: p}
	x.sync(t)
	return x
}

// reset gives the pair a fresh Go stage and the program fresh sessions,
// without loading it again.
func (x *xdpPair) reset(t testing.TB, keys string) {
	t.Helper()
	x.h = newHarness(t)
	x.r = x.h.MustBuildNamed("stamp.reflector", "refl", keys).(*reflector)
	if err := x.r.syncXDP(x.prog, nil); err != nil {
		t.Fatal(err)
	}
	x.sync(t)
}

// sync gives the program the stage's config and sessions, as the offload
// does on start and on every change.
func (x *xdpPair) sync(t testing.TB) {
	t.Helper()
	if err := x.prog.Configure(x.r.xdpConfig()); err != nil {
		t.Fatal(err)
	}
	if err := x.r.syncXDP(x.prog, x.r.reg.rf.Load()); err != nil {
		t.Fatal(err)
	}
}

// requireProgram skips, naming the feature, where the kernel lacks what a
// program needs (needs(ifindex): bpf.ReflectorNeeds, bpf.CollectorNeeds).
func requireProgram(t testing.TB, needs func(int) ([]kernel.Feature, error), ifindex int) {
	t.Helper()
	fs, err := needs(ifindex)
	if err != nil {
		t.Fatal(err)
	}
	testenv.RequireKernel(t, fs...)
}

// xdpOut is what the program made of a frame.
type xdpOut struct {
	action uint32
	data   []byte
	reason string // the counter that moved: "reflected", "to_go" or a drop reason
	path   string // the outcome of the path, the program then the Go stage (pathOutcome)
}

// pathOutcome names what became of a frame on its way through: the
// program's counter where it finished with it, else the Go stage's fate
// ("reflected" back out of port 0, a drop reason, "continue").
func pathOutcome(reason string, gr result) string {
	if reason != "to_go" && reason != "" {
		return reason
	}
	switch {
	case gr.dropped != "":
		return gr.dropped
	case gr.port == packet.NoPort:
		return "continue"
	case gr.port == 0:
		return "reflected"
	}
	return fmt.Sprintf("forwarded to %d", gr.port)
}

func (x *xdpPair) runXDP(t testing.TB, frame []byte) xdpOut {
	t.Helper()
	before, err := x.prog.Counters()
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, len(frame)+512)
	opts := ebpf.RunOptions{Data: frame, DataOut: out}
	act, err := x.prog.Program.Run(&opts)
	if err != nil {
		t.Fatalf("prog.Run: %v", err)
	}
	after, err := x.prog.Counters()
	if err != nil {
		t.Fatal(err)
	}
	o := xdpOut{action: act, data: opts.DataOut}
	for i := range after {
		if after[i] != before[i] {
			if o.reason != "" {
				t.Fatalf("two counters moved: %s and %s", o.reason, bpf.ReflectorCounters[i])
			}
			o.reason = bpf.ReflectorCounters[i]
		}
	}
	return o
}

// compare runs frame through both and checks they agree; it returns the
// program's verdict.
func (x *xdpPair) compare(t testing.TB, frame []byte) xdpOut {
	t.Helper()
	wallBefore := time.Now().UnixNano()
	xo := x.runXDP(t, frame)
	wallAfter := time.Now().UnixNano()
	gr := x.h.run(append([]byte(nil), frame...), 0, x.r)
	xo.path = pathOutcome(xo.reason, gr)
	switch xo.action {
	case 2: // XDP_PASS: left to the Go stage, untouched
		if !bytes.Equal(xo.data, frame) {
			t.Fatalf("the program changed a packet it left to Go:\n in %x\nout %x", frame, xo.data)
		}
	case 1: // XDP_DROP
		if gr.dropped != xo.reason {
			t.Fatalf("the program dropped (%s), the Go stage: dropped %q", xo.reason, gr.dropped)
		}
	case 3: // XDP_TX
		if gr.dropped != "" || gr.port != 0 {
			t.Fatalf("the program reflected, the Go stage: dropped %q, port %d", gr.dropped, gr.port)
		}
		if xo.reason != "reflected" {
			t.Fatalf("the program reflected and counted %q", xo.reason)
		}
		checkXDPReply(t, xo.data, gr.data, wallBefore, wallAfter)
	default:
		t.Fatalf("XDP action %d", xo.action)
	}
	return xo
}

// checkXDPReply compares the program's reply with the Go stage's: byte for
// byte but for T2, T3 and the UDP checksum; those it checks on their own.
func checkXDPReply(t testing.TB, got, want []byte, wallBefore, wallAfter int64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("reply of %d bytes, Go's %d:\nxdp %x\n go %x", len(got), len(want), got, want)
	}
	var l packet.Layers
	if err := packet.Parse(got, &l); err != nil {
		t.Fatalf("parse the program's reply: %v", err)
	}
	checkUDP(t, got)
	pay := int(l.L4) + packet.UDPLen
	g, w := append([]byte(nil), got...), append([]byte(nil), want...)
	for _, f := range [][2]int{{pay + 4, pay + 12}, {pay + 16, pay + 24}, {int(l.L4) + 6, int(l.L4) + 8}} {
		clear(g[f[0]:f[1]])
		clear(w[f[0]:f[1]])
	}
	if !bytes.Equal(g, w) {
		t.Fatalf("the program's reply differs from the Go stage's (times and checksum masked):\nxdp %x\n go %x", g, w)
	}
	rp := ReflectorPacket(got[pay:])
	ptp := rp.ErrorEstimate().PTP()
	// PTP is TAI: the stage's TAI offset is the harness clock's default, 37.
	t3 := unixTime(rp.Timestamp(), ptp, 37)
	t2 := unixTime(rp.ReceiveTimestamp(), ptp, 37)
	if t2 > t3 {
		t.Errorf("T2 %d after T3 %d", t2, t3)
	}
	const slack = int64(5 * time.Second) // the clocks' offsets, not the program's speed
	if t2 < wallBefore-slack || t3 > wallAfter+slack {
		t.Errorf("T2 %s, T3 %s: not the time of the run (%s)", time.Unix(0, t2).UTC(), time.Unix(0, t3).UTC(),
			time.Unix(0, wallBefore).UTC())
	}
}

// stampFrame builds a test frame: Ethernet, IPv4 or IPv6, UDP, payload.
func stampFrame(t testing.TB, src, dst netip.Addr, sport, dport uint16, hop, tos uint8, pay []byte) []byte {
	t.Helper()
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 0x0a}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 0xa0}}
	udp := &layers.UDP{SrcPort: layers.UDPPort(sport), DstPort: layers.UDPPort(dport)}
	var ip gopacket.NetworkLayer
	if src.Is4() {
		eth.EthernetType = layers.EthernetTypeIPv4
		v4 := &layers.IPv4{Version: 4, TTL: hop, TOS: tos, Protocol: layers.IPProtocolUDP, Flags: layers.IPv4DontFragment,
			SrcIP: src.AsSlice(), DstIP: dst.AsSlice(), Id: 0x1234}
		ip = v4
	} else {
		eth.EthernetType = layers.EthernetTypeIPv6
		ip = &layers.IPv6{Version: 6, HopLimit: hop, TrafficClass: tos, FlowLabel: 0x12345, NextHeader: layers.IPProtocolUDP,
			SrcIP: src.AsSlice(), DstIP: dst.AsSlice()}
	}
	if err := udp.SetNetworkLayerForChecksum(ip); err != nil {
		t.Fatal(err)
	}
	buf := gopacket.NewSerializeBuffer()
	err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
		eth, ip.(gopacket.SerializableLayer), udp, gopacket.Payload(pay))
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// senderPayload is a base test packet: seq, T1 in format ee's, ssid.
func senderPayload(seq uint32, ee ErrorEstimate, ssid uint16) []byte {
	p := make([]byte, BaseLen)
	binary.BigEndian.PutUint32(p, seq)
	ts := clock.NTP(testUnixBase)
	if ee.PTP() {
		ts = clock.PTP(testUnixBase + 37e9)
	}
	binary.BigEndian.PutUint64(p[4:], ts)
	binary.BigEndian.PutUint16(p[12:], uint16(ee))
	binary.BigEndian.PutUint16(p[14:], ssid)
	return p
}

const xdpKeys = `
forward = "in"
unknown = "reflect"
allow = ["2001:db8::/32", "192.0.2.0/24", "::ffff:0:0/96", "ff00::/8", "::/128", "::1/128", "127.0.0.0/8", "224.0.0.0/4"]
synchronized = true
clock_error = "1us"
rate_limit = "1Mpps"
rate_burst = 1000
[[sessions]]
ssid = 7
mode = "stateful"
[[sessions]]
ssid = 8
sender = "2001:db8:a::2"
return_path = ["2001:db8:e::1", "2001:db8:e::2"]
[[sessions]]
ssid = 9
return_path = ["2001:db8:e::1"]
[[sessions]]
ssid = 10
sender = "2001:db8:a::3"
[[sessions]]
ssid = 11
start = false
[[sessions]]
ssid = 12
timestamp = "ptp"
source = "2001:db8:b::99"
[[sessions]]
ssid = 13
sender = "2001:db8:a::2"
return_path = ["2001:db8:a::2"]
[[sessions]]
ssid = 14
sender = "2001:db8:a::2"
return_path = ["2001:db8:e::1", "2001:db8:e::2", "2001:db8:e::3", "2001:db8:e::4", "2001:db8:e::5",
  "2001:db8:e::6", "2001:db8:e::7", "2001:db8:e::8", "2001:db8:e::9"]
`

var (
	eeNTP = MakeErrorEstimate(true, false, 0, 5)
	eePTP = MakeErrorEstimate(false, true, 3, 7)
	v4S   = netip.MustParseAddr("192.0.2.1")
	v4R   = netip.MustParseAddr("192.0.2.2")
)

// xdpGolden are the frames both must treat alike, named by what they test,
// with the program's expected outcome.
func xdpGolden(t testing.TB) []struct {
	name, want string
	frame      []byte
} {
	f := func(src, dst netip.Addr, ssid uint16, ee ErrorEstimate) []byte {
		return stampFrame(t, src, dst, 40000, DefaultPort, 61, 0xb9, senderPayload(42, ee, ssid))
	}
	withTLV := senderPayload(1, eeNTP, 7)
	withTLV = append(withTLV, 0x80, TLVExtraPadding, 0, 4, 0, 0, 0, 0)
	reflectedPay := senderPayload(1, eeNTP, 7)
	binary.BigEndian.PutUint64(reflectedPay[16:], 1)
	groupMAC := f(addrS, addrR, 7, eeNTP)
	groupMAC[0] |= 1
	badSrcMAC := f(addrS, addrR, 7, eeNTP)
	badSrcMAC[6] |= 1
	padded := append(f(v4S, v4R, 7, eeNTP), 0, 0, 0, 0)
	short := stampFrame(t, addrS, addrR, 40000, DefaultPort, 64, 0, make([]byte, 20))
	return []struct {
		name, want string
		frame      []byte
	}{
		{"stateless_ntp_v6", "reflected", f(addrS, addrR, 1000, eeNTP)},
		{"stateless_ptp_v6", "reflected", f(addrS, addrR, 1001, eePTP)},
		{"stateless_v4", "reflected", f(v4S, v4R, 1000, eeNTP)},
		{"stateful_1", "reflected", f(addrS, addrR, 7, eeNTP)},
		{"stateful_2", "reflected", f(addrS, addrR, 7, eePTP)},
		{"stateful_v4", "reflected", f(v4S, v4R, 7, eeNTP)},
		{"srv6_return_pinned", "reflected", f(addrS, addrR, 8, eeNTP)},
		{"srv6_return_not_pinned", "stamp_reply_too_big", f(addrS, addrR, 9, eeNTP)},
		{"srv6_return_v4", "stamp_bad_return_path", f(v4S, v4R, 9, eeNTP)},
		{"srv6_return_ends_at_sender", "reflected", f(addrS, addrR, 13, eeNTP)},
		{"srv6_return_too_long_for_xdp", "to_go", f(addrS, addrR, 14, eeNTP)},
		{"pinned_ok", "reflected", f(netip.MustParseAddr("2001:db8:a::3"), addrR, 10, eeNTP)},
		{"pinned_wrong_source", "stamp_wrong_source", f(addrS, addrR, 10, eeNTP)},
		{"stopped", "to_go", f(addrS, addrR, 11, eeNTP)},
		{"ptp_session_source", "reflected", f(addrS, addrR, 12, eeNTP)},
		{"ssid_0", "reflected", f(addrS, addrR, 0, eeNTP)},
		{"ethernet_padding", "reflected", padded},
		{"multicast_dst", "stamp_group_destination", f(addrS, netip.MustParseAddr("ff02::1"), 7, eeNTP)},
		{"group_mac", "stamp_group_destination", groupMAC},
		{"group_src_mac", "stamp_bad_source", badSrcMAC},
		{"loopback_src", "stamp_bad_source", f(netip.MustParseAddr("::1"), addrR, 7, eeNTP)},
		{"unspecified_src", "stamp_bad_source", f(netip.MustParseAddr("::"), addrR, 7, eeNTP)},
		{"mapped_loopback_src", "stamp_bad_source", f(netip.MustParseAddr("::ffff:127.0.0.1"), addrR, 7, eeNTP)},
		{"v4_loopback_src", "stamp_bad_source", f(netip.MustParseAddr("127.0.0.1"), v4R, 7, eeNTP)},
		{"v4_multicast_dst", "stamp_group_destination", f(v4S, netip.MustParseAddr("224.0.0.1"), 7, eeNTP)},
		{"v4_broadcast_dst", "stamp_group_destination", f(v4S, netip.MustParseAddr("255.255.255.255"), 7, eeNTP)},
		{"not_allowed", "stamp_not_allowed", f(netip.MustParseAddr("2002::1"), addrR, 7, eeNTP)},
		{"short", "stamp_short", short},
		{"tlvs_to_go", "to_go", stampFrame(t, addrS, addrR, 40000, DefaultPort, 64, 0, withTLV)},
		{"reflected_to_go", "to_go", stampFrame(t, addrS, addrR, 40000, DefaultPort, 64, 0, reflectedPay)},
		{"auth_to_go", "to_go", stampFrame(t, addrS, addrR, 40000, DefaultPort, 64, 0, make([]byte, BaseAuthLen))},
		{"other_port", "", stampFrame(t, addrS, addrR, 40000, 863, 64, 0, senderPayload(1, eeNTP, 7))},
	}
}

// xdpGoldenInGo is what the Go stage makes of the golden frames the
// program leaves to it (to_go) or lets pass (""): with the program or
// without it, the path's outcome. The others' is the program's want.
var xdpGoldenInGo = map[string]string{
	"srv6_return_too_long_for_xdp": "reflected",
	"stopped":                      "stamp_session_stopped",
	"tlvs_to_go":                   "reflected",
	"reflected_to_go":              "stamp_reflected",
	"auth_to_go":                   "stamp_unknown_session",
	"other_port":                   "continue",
}

func goldenPath(name, want string) string {
	if p, ok := xdpGoldenInGo[name]; ok {
		return p
	}
	return want
}

// The golden frames on both paths a reflector with an offload takes: "xdp",
// the program in the kernel in front of the Go stage (each frame's bytes
// against the Go stage's); "fallback", offload = "auto" where the kernel
// lacks what the program needs (forced on every kernel), the Go stage
// alone. Each frame ends the same on both.
func TestXDPReflectorGolden(t *testing.T) {
	t.Run("xdp", func(t *testing.T) {
		x := newXDPPair(t, xdpKeys)
		for _, g := range xdpGolden(t) {
			t.Run(g.name, func(t *testing.T) {
				o := x.compare(t, g.frame)
				if o.reason != g.want || o.path != goldenPath(g.name, g.want) {
					t.Errorf("the program: %q, the path: %q; want %q, %q", o.reason, o.path, g.want, goldenPath(g.name, g.want))
				}
			})
		}
		// The stateful session's sequence moved in both, once per packet.
		st, err := x.prog.State(7)
		if err != nil {
			t.Fatal(err)
		}
		if st.Seq != 4 || st.Replied != 4 {
			t.Errorf("session 7 in the program: seq %d, replied %d; want 4, 4", st.Seq, st.Replied)
		}
	})
	t.Run("fallback", func(t *testing.T) {
		h := newHarness(t)
		r := fallbackReflector(t, h, xdpKeys)
		for _, g := range xdpGolden(t) {
			t.Run(g.name, func(t *testing.T) {
				gr := h.run(append([]byte(nil), g.frame...), 0, r)
				if got, want := pathOutcome("", gr), goldenPath(g.name, g.want); got != want {
					t.Fatalf("the Go stage: %q, want %q", got, want)
				}
				if gr.dropped == "" && gr.port == 0 {
					checkUDP(t, gr.data)
				}
			})
		}
		// The four the program would answer and the one with TLVs it
		// would leave to Go.
		if st := h.registry().rf.Load().get(7); st.st.seq != 5 || st.st.replied != 5 {
			t.Errorf("session 7 in Go: seq %d, replied %d; want 5, 5", st.st.seq, st.st.replied)
		}
	})
}

// fallbackReflector builds a reflector with offload = "auto" and keys where
// the kernel lacks bpf_ktime_get_tai_ns (LINERATE_KERNEL_DISABLE): its
// request is declined, naming it, as the engine declines it before a port
// loads the program, and the stage runs in Go.
func fallbackReflector(t *testing.T, h *harness, keys string) *reflector {
	t.Helper()
	t.Setenv(kernel.DisableEnv, "bpf_ktime_get_tai_ns")
	r := h.MustBuildNamed("stamp.reflector", "refl", "offload = \"auto\"\n"+keys).(*reflector)
	req := r.xdp.req
	if err := req.RequireKernel(); err != nil {
		t.Fatalf("auto: %v", err)
	}
	if req.InKernel() || !strings.Contains(req.Reason(), "the kernel lacks bpf_ktime_get_tai_ns") {
		t.Fatalf("auto: in the kernel %v, reason %q", req.InKernel(), req.Reason())
	}
	return r
}

// The per-source rate limit: a burst, then drops, in both.
func TestXDPReflectorRateLimit(t *testing.T) {
	x := newXDPPair(t, `
forward = "in"
unknown = "reflect"
allow = ["2001:db8::/32"]
rate_limit = "1pps"
rate_burst = 3
`)
	var got []string
	for i := range 6 {
		o := x.compare(t, stampFrame(t, addrS, addrR, 40000, DefaultPort, 64, 0, senderPayload(uint32(i), eeNTP, 5)))
		got = append(got, o.reason)
	}
	// Another source has its own bucket.
	o := x.compare(t, stampFrame(t, netip.MustParseAddr("2001:db8:a::9"), addrR, 40000, DefaultPort, 64, 0,
		senderPayload(1, eeNTP, 5)))
	got = append(got, o.reason)
	want := "[reflected reflected reflected stamp_rate_limited stamp_rate_limited stamp_rate_limited reflected]"
	if fmt.Sprint(got) != want {
		t.Errorf("%v, want %s", got, want)
	}
	// Many sources, each over its burst, back to back (the program's clock
	// is real, the Go stage's the harness's: a second between a source's
	// packets would refill one bucket): every packet's fate is the Go
	// stage's (compare checks), each source with a bucket of its own in the
	// table while the others come.
	limited := 0
	for i := range 64 {
		src := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 0xc, 14: byte(i >> 8), 15: byte(i)})
		for seq := range 5 {
			if o := x.compare(t, stampFrame(t, src, addrR, 40000, DefaultPort, 64, 0,
				senderPayload(uint32(seq), eeNTP, 5))); o.reason == "stamp_rate_limited" {
				limited++
			}
		}
	}
	if limited != 64*2 {
		t.Errorf("%d packets of 64 sources over a burst of 3 in 5 rounds limited, want %d", limited, 64*2)
	}
}

// Addresses: a packet to an address not the reflector's is not its business.
func TestXDPReflectorAddresses(t *testing.T) {
	x := newXDPPair(t, `
forward = "in"
unknown = "drop"
addresses = ["2001:db8:b::2", "192.0.2.2"]
`)
	for _, c := range []struct {
		frame []byte
		want  string
	}{
		{stampFrame(t, addrS, addrR, 1, DefaultPort, 64, 0, senderPayload(1, eeNTP, 5)), "to_go"},
		{stampFrame(t, v4S, v4R, 1, DefaultPort, 64, 0, senderPayload(1, eeNTP, 5)), "to_go"},
		{stampFrame(t, addrS, netip.MustParseAddr("2001:db8:b::3"), 1, DefaultPort, 64, 0, senderPayload(1, eeNTP, 5)), ""},
	} {
		if o := x.compare(t, c.frame); o.reason != c.want {
			t.Errorf("%q, want %q", o.reason, c.want)
		}
	}
}

// The addresses' table full: 64 addresses, half IPv4, each found, and
// addresses next to them not.
func TestXDPReflectorAddressTable(t *testing.T) {
	var list []string
	var ours, others []netip.Addr
	for i := range 32 {
		a := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 0xb, 15: byte(i)})
		b := netip.AddrFrom4([4]byte{192, 0, 2, byte(100 + i)})
		ours = append(ours, a, b)
		others = append(others, netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 0xb, 14: 1, 15: byte(i)}),
			netip.AddrFrom4([4]byte{192, 0, 2, byte(200 + i)}))
		list = append(list, `"`+a.String()+`"`, `"`+b.String()+`"`)
	}
	x := newXDPPair(t, `
forward = "in"
unknown = "drop"
addresses = [`+strings.Join(list, ", ")+`]
`)
	for i, dst := range append(ours, others...) {
		src := addrS
		if dst.Is4() {
			src = v4S
		}
		want := "to_go" // ours: no session 5, the Go stage drops it
		if i >= len(ours) {
			want = "" // not ours: it passes
		}
		if o := x.compare(t, stampFrame(t, src, dst, 1, DefaultPort, 64, 0, senderPayload(1, eeNTP, 5))); o.reason != want {
			t.Errorf("to %s: %q, want %q", dst, o.reason, want)
		}
	}
}

// FuzzXDPReflector is the differential fuzzer: any frame, through a fresh
// pair, must come out of the program as out of the Go stage.
func FuzzXDPReflector(f *testing.F) {
	for _, g := range xdpGolden(f) {
		f.Add(g.frame)
	}
	x := newXDPPair(f, xdpKeys)
	f.Fuzz(func(t *testing.T, frame []byte) {
		if len(frame) < 14 || len(frame) > 1500 {
			return
		}
		x.reset(t, xdpKeys)
		x.compare(t, frame)
		x.compare(t, frame)
	})
}

// What the program cannot do is refused with offload = "xdp", with the
// table's place, and runs in Go with "auto".
func TestXDPOffloadConfig(t *testing.T) {
	h := newHarness(t)
	for _, c := range []struct{ keys, want string }{
		{`offload = "xdp"`, `set forward = "in"`},
		{"offload = \"xdp\"\nforward = \"eth1\"", `set forward = "in"`},
		{`offload = "kernel"`, `offload "kernel" is not off, xdp or auto`},
	} {
		_, err := h.Build("stamp.reflector", c.keys)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.keys, err, c.want)
		}
	}
	st, err := h.Build("stamp.reflector", `offload = "auto"`)
	if err != nil {
		t.Fatal(err)
	}
	if st.(*reflector).xdp != nil {
		t.Error("auto with forward unset asked for the offload")
	}
	st, err = h.Build("stamp.reflector", "offload = \"auto\"\nforward = \"in\"")
	if err != nil || st.(*reflector).xdp == nil || st.(*reflector).xdp.req == nil {
		t.Errorf("auto with forward = \"in\": %v", err)
	}
	if _, err := h.Build("stamp.collector", `offload = "xdp"`); err != nil {
		t.Errorf("collector: %v", err)
	}
}
