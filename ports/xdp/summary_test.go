//go:build linux

package xdp

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"strconv"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/gopacket/gopacket/layers"

	"github.com/linerate/linerate/appliance/kernel"
	"github.com/linerate/linerate/internal/testenv"
)

// The values random rules and packets draw from, so that they meet often.
var (
	sumProtos   = []int{17, 6, 58, 1, 0, 43, 44, 60, 255}
	sumPorts    = []int{862, 863, 9, 4789, 0, 65535}
	sumPrefixes = []netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("10.1.2.0/24"),
		netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("2001:db8::/32"),
		netip.MustParsePrefix("2001:db8:aa::/48"), netip.MustParsePrefix("::/0"),
		netip.MustParsePrefix("::ffff:10.0.0.0/104"),
	}
	sumAddrs = []netip.Addr{
		netip.MustParseAddr("10.1.2.3"), netip.MustParseAddr("10.9.9.9"), netip.MustParseAddr("192.0.2.1"),
		netip.MustParseAddr("2001:db8:aa::1"), netip.MustParseAddr("2001:db8:bb::1"),
		netip.MustParseAddr("2001:db9::1"), netip.MustParseAddr("::ffff:10.1.2.3"),
	}
)

// randRule is a rule that sets at least one field, each from the values above.
func randRule(r *rand.Rand) Rule {
	for {
		var ru Rule
		pick := func(vs []int) *int {
			if r.IntN(10) < 4 {
				v := vs[r.IntN(len(vs))]
				if r.IntN(8) == 0 {
					v = r.IntN(256)
				}
				return &v
			}
			return nil
		}
		tri := func() *bool {
			switch r.IntN(6) {
			case 0:
				return ptr(true)
			case 1:
				return ptr(false)
			}
			return nil
		}
		ru.NextHeader = pick(sumProtos)
		ru.UDPDstPort = pick(sumPorts)
		ru.UDPSrcPort = pick(sumPorts)
		if r.IntN(10) < 3 {
			ru.DstPrefix = sumPrefixes[r.IntN(len(sumPrefixes))]
		}
		ru.HopByHop, ru.SRH, ru.IOAM = tri(), tri(), tri()
		if ru.check() == nil {
			return ru
		}
	}
}

// randFrame is a frame the rules above may or may not take: IPv4 (odd
// header lengths and fragments included), IPv6 with up to three extension
// headers (Hop-by-Hop with or without IOAM, SRH and other routing headers,
// Destination Options, Fragment), VLAN tags, other EtherTypes, and any of
// them cut short.
func randFrame(r *rand.Rand) []byte {
	f := make([]byte, 14, 256)
	for i := range 12 {
		f[i] = byte(r.Uint32())
	}
	l3 := []uint16{0x0800, 0x86dd, 0x0800, 0x86dd, 0x8100, 0x88a8, 0x0806, uint16(r.Uint32())}[r.IntN(8)]
	for tags := 0; (l3 == 0x8100 || l3 == 0x88a8) && tags < 3; tags++ {
		binary.BigEndian.PutUint16(f[len(f)-2:], l3)
		f = append(f, byte(r.IntN(16)), byte(r.IntN(256)), 0, 0)
		l3 = []uint16{0x0800, 0x86dd, 0x8100}[r.IntN(3)]
	}
	binary.BigEndian.PutUint16(f[len(f)-2:], l3)
	proto := sumProtos[r.IntN(len(sumProtos))]
	if r.IntN(3) == 0 {
		proto = 17
	}
	dst := sumAddrs[r.IntN(len(sumAddrs))]
	switch l3 {
	case 0x0800:
		ip := make([]byte, 20)
		ip[0] = 0x45
		if r.IntN(8) == 0 {
			ip[0] = 0x40 | byte(r.IntN(16))
		}
		if r.IntN(8) == 0 {
			ip[6], ip[7] = byte(r.IntN(256)), byte(r.IntN(256))
		}
		ip[9] = byte(proto)
		a := dst.Unmap()
		if a.Is6() {
			a = netip.MustParseAddr("10.1.2.3")
		}
		copy(ip[16:], a.AsSlice())
		f = append(f, ip...)
		if ihl := int(ip[0]&0xf) * 4; ihl > 20 {
			f = append(f, make([]byte, ihl-20)...)
		}
	case 0x86dd:
		ip := make([]byte, 40)
		ip[0] = 0x60
		a := dst
		if a.Is4() {
			a = netip.AddrFrom16(a.As16())
		}
		copy(ip[24:], a.AsSlice())
		f = append(f, ip...)
		nhAt := len(f) - 40 + 6
		for range r.IntN(4) {
			nh := []byte{0, 43, 60, 44}[r.IntN(4)]
			f[nhAt] = nh
			x := make([]byte, 8*(1+r.IntN(3)))
			x[1] = byte(len(x)/8 - 1)
			switch nh {
			case 43:
				x[2] = []byte{4, 4, 0, 3}[r.IntN(4)] // routing type: 4 is the SRH
			case 0, 60:
				if r.IntN(2) == 0 { // an IOAM option, after a Pad1 or not
					o := 2 + r.IntN(2)
					x[o], x[o+1] = 0x31, byte(len(x)-o-2)
				} else {
					x[2], x[3] = 1, byte(len(x)-4) // PadN
				}
			}
			nhAt = len(f)
			f = append(f, x...)
		}
		f[nhAt] = byte(proto)
	}
	if (l3 == 0x0800 || l3 == 0x86dd) && proto == 17 {
		u := make([]byte, 8)
		binary.BigEndian.PutUint16(u, uint16(sumPorts[r.IntN(len(sumPorts))]))
		binary.BigEndian.PutUint16(u[2:], uint16(sumPorts[r.IntN(len(sumPorts))]))
		f = append(f, u...)
	}
	f = append(f, make([]byte, r.IntN(32))...)
	if r.IntN(8) == 0 { // BPF_PROG_TEST_RUN wants an Ethernet header's 14 bytes
		f = f[:14+r.IntN(len(f)-13)]
	}
	return f
}

// summaryPair is the dispatcher twice, of one stamp variant: deciding on
// the summary first, and walking the rules for every packet, the reference.
type summaryPair struct {
	v          variant
	fast, walk *dispatcher
}

func newSummaryPair(t testing.TB, v variant) summaryPair {
	return summaryPair{v: v, fast: loadVariant(t, v, false), walk: loadVariant(t, v, true)}
}

func (p summaryPair) setRules(t testing.TB, rs []Rule) {
	for _, d := range []*dispatcher{p.fast, p.walk} {
		if err := d.setRules(rs, false); err != nil {
			t.Fatal(err)
		}
	}
}

// compare runs frame through both and fails on any difference: the
// verdict, the bytes the kernel or the socket gets, every counter (an early
// pass is a pass). It reports whether the summary decided.
func (p summaryPair) compare(t testing.TB, rs []Rule, frame []byte) (early bool) {
	t.Helper()
	var rets [2]uint32
	var outs [2][]byte
	var deltas [2]map[string]uint64
	for i, d := range []*dispatcher{p.fast, p.walk} {
		before := d.stats()
		opts := &ebpf.RunOptions{Data: frame, DataOut: make([]byte, len(frame)+256)}
		ret, err := d.prog.Run(opts)
		if err != nil {
			t.Fatalf("run: %v (frame %x)", err, frame)
		}
		out := opts.DataOut
		after := d.stats()
		deltas[i] = map[string]uint64{}
		for k, v := range after {
			deltas[i][k] = v - before[k]
		}
		if deltas[i]["xdp_matched"] == 1 && p.v.via == viaMeta {
			// Taken: the output starts with the metadata the dispatcher
			// wrote (struct lr_xdp_meta), whose rx_ns is the time.
			clear(out[:8])
		}
		// No socket: what the kernel gets is what came in.
		if ret == xdpPass && !bytes.Equal(kernelView(p.v, out, deltas[i]["xdp_matched"] == 1), frame) {
			t.Fatalf("%s: passed, the frame changed\nrules %s\nframe %x\nout   %x", p.v.name, showRules(rs), frame, out)
		}
		rets[i], outs[i] = ret, out
	}
	early = deltas[0]["xdp_passed_early"] == 1
	deltas[0]["xdp_passed_early"] = 0
	if rets[0] != rets[1] || !bytes.Equal(outs[0], outs[1]) {
		t.Fatalf("%s: verdict %d with the summary, %d walking the rules\nrules %s\nframe %x", p.v.name, rets[0], rets[1], showRules(rs), frame)
	}
	for k, v := range deltas[1] {
		if deltas[0][k] != v {
			t.Fatalf("%s: counter %s: %d with the summary, %d walking the rules\nrules %s\nframe %x", p.v.name, k, deltas[0][k], v, showRules(rs), frame)
		}
	}
	return early
}

func showRules(rs []Rule) string {
	var b bytes.Buffer
	for _, r := range rs {
		b.WriteString("{")
		for _, f := range []struct {
			name string
			v    *int
		}{{"nh", r.NextHeader}, {"dport", r.UDPDstPort}, {"sport", r.UDPSrcPort}} {
			if f.v != nil {
				b.WriteString(" " + f.name + "=" + strconv.Itoa(*f.v))
			}
		}
		if r.DstPrefix.IsValid() {
			b.WriteString(" dst=" + r.DstPrefix.String())
		}
		for _, f := range []struct {
			name string
			v    *bool
		}{{"hbh", r.HopByHop}, {"srh", r.SRH}, {"ioam", r.IOAM}} {
			if f.v != nil {
				b.WriteString(" " + f.name + "=" + map[bool]string{true: "1", false: "0"}[*f.v])
			}
		}
		b.WriteString(" }")
	}
	return b.String()
}

// TestDispatcherSummary: the summary never changes a verdict. Random rule
// sets (1 to 6 rules) and random frames through the dispatcher deciding on
// the summary first and through the same program walking the rules for
// every packet (BPF_PROG_TEST_RUN): the same verdict, the same bytes, the
// same counters, in each stamp variant. And the summary does decide: most
// of the frames no rule takes pass on it, and the host's frames beside the
// docs' rules all do.
func TestDispatcherSummary(t *testing.T) {
	eachVariant(t, testDispatcherSummary)
}

func testDispatcherSummary(t *testing.T, v variant) {
	p := newSummaryPair(t, v)
	r := rand.New(rand.NewPCG(16, 1))
	var frames, taken, early int
	for range 300 {
		rs := make([]Rule, 1+r.IntN(6))
		for i := range rs {
			rs[i] = randRule(r)
		}
		p.setRules(t, rs)
		for range 40 {
			before := p.walk.stats()["xdp_matched"]
			if p.compare(t, rs, randFrame(r)) {
				early++
			}
			if p.walk.stats()["xdp_matched"] != before {
				taken++
			}
			frames++
		}
	}
	t.Logf("%d frames: %d taken by a rule, %d passed on the summary", frames, taken, early)
	if taken == 0 || early < (frames-taken)/4 {
		t.Errorf("%d frames: %d taken, %d passed on the summary: the test does not exercise both", frames, taken, early)
	}
	// The host's traffic beside a STAMP rule and an IOAM rule, the
	// configuration of the docs: every frame that is not STAMP and carries
	// no IOAM option passes on the summary, extension headers or not.
	rs := []Rule{
		{NextHeader: ptr(17), UDPDstPort: ptr(862)},
		{DstPrefix: netip.MustParsePrefix("2001:db8:aa::/48"), IOAM: ptr(true)},
	}
	p.setRules(t, rs)
	for _, c := range []struct {
		name  string
		frame []byte
		early bool
	}{
		{"ssh", frame6(t, "2001:db8:aa::2", nil, 0), true},
		{"other udp", frame6(t, "2001:db8::2", nil, 9), true},
		{"stamp", frame6(t, "2001:db8::2", nil, 862), false},
		{"ioam", frame6(t, "2001:db8:aa::9", []layers.IPv6HopByHopOption{ioamOpt()}, 0), false},
		{"ioam outside the prefix", frame6(t, "2001:db8:ab::9", []layers.IPv6HopByHopOption{ioamOpt()}, 0), false},
		{"hop-by-hop router alert", frame6(t, "2001:db8::2", []layers.IPv6HopByHopOption{
			{OptionType: 5, OptionLength: 2, OptionData: []byte{0, 0}}}, 0), true},
		{"stamp behind hop-by-hop", frame6(t, "2001:db8::2", []layers.IPv6HopByHopOption{
			{OptionType: 5, OptionLength: 2, OptionData: []byte{0, 0}}}, 862), false},
		{"not ip", append(make([]byte, 12), 0x88, 0xb5), true},
	} {
		if got := p.compare(t, rs, c.frame); got != c.early {
			t.Errorf("%s: passed on the summary %v, want %v", c.name, got, c.early)
		}
	}
}

// FuzzDispatcherSummary: the same comparison on any frame and rule set (a
// seed draws 1 to 6 rules as TestDispatcherSummary does), in each stamp
// variant this kernel loads; TestDispatcherSummary's subtests name the
// ones it skips, once each.
func FuzzDispatcherSummary(f *testing.F) {
	testenv.RequireRoot(f)
	r := rand.New(rand.NewPCG(16, 2))
	for i := range 16 {
		f.Add(uint64(i), randFrame(r))
	}
	f.Add(uint64(0), frame6(f, "2001:db8::2", nil, 862))
	f.Add(uint64(1), frame6(f, "2001:db8:aa::9", []layers.IPv6HopByHopOption{ioamOpt()}, 0))
	var pairs []summaryPair
	for _, v := range variants {
		if err := kernel.Require(v.needs...); err != nil {
			f.Logf("variant %s: not here: %v", v.name, err)
			continue
		}
		pairs = append(pairs, newSummaryPair(f, v))
	}
	f.Fuzz(func(t *testing.T, seed uint64, frame []byte) {
		if len(frame) < 14 || len(frame) > 1500 {
			return // BPF_PROG_TEST_RUN refuses less than an Ethernet header
		}
		r := rand.New(rand.NewPCG(seed, 0))
		rs := make([]Rule, 1+r.IntN(6))
		for i := range rs {
			rs[i] = randRule(r)
		}
		for _, p := range pairs {
			p.setRules(t, rs)
			p.compare(t, rs, frame)
		}
	})
}
