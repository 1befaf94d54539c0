package builtin

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/linerate/linerate/appliance/packet"
)

// newGen builds a generator stage from TOML keys.
func newGen(t testing.TB, h *harness, keys string) *generator {
	t.Helper()
	return h.mustBuild("generator", keys).(*generator)
}

// genCase is one generator configuration and what its frames must carry.
type genCase struct {
	name      string
	v4        bool
	vlan      int
	sizes     []int
	flows     int
	src, dst  string
	sport     int
	hopLimit  int
	pattern   string
	noCsum    bool
	wantPatch bool // flows × sizes too large for per-flow templates
}

func (c genCase) keys() string {
	var b strings.Builder
	ver := 6
	if c.v4 {
		ver = 4
	}
	fmt.Fprintf(&b, "ip_version = %d\nsrc = %q\ndst = %q\n", ver, c.src, c.dst)
	fmt.Fprintf(&b, "src_mac = \"02:00:00:00:00:0a\"\ndst_mac = \"02:00:00:00:00:0b\"\n")
	fmt.Fprintf(&b, "flows = %d\nudp_src_port = %d\nudp_dst_port = 20000\nhop_limit = %d\n", c.flows, c.sport, c.hopLimit)
	if c.vlan != 0 {
		fmt.Fprintf(&b, "vlan = %d\n", c.vlan)
	}
	if c.pattern != "" {
		fmt.Fprintf(&b, "pattern = %q\n", c.pattern)
	}
	if c.noCsum {
		b.WriteString("udp_checksum = false\n")
	}
	b.WriteString("sizes = [")
	for i, s := range c.sizes {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprint(&b, s)
	}
	b.WriteString("]\n")
	return b.String()
}

// TestGeneratorFrames decodes every frame with gopacket, an independent
// decoder, and checks each header field, both checksums, the generator fields
// and the payload pattern.
func TestGeneratorFrames(t *testing.T) {
	cases := []genCase{
		{name: "v6", src: "2001:db8:1::1", dst: "2001:db8:2::1", sizes: []int{82, 128, 1500}, flows: 3, sport: 10000, hopLimit: 64},
		{name: "v6/vlan", vlan: 100, src: "2001:db8:1::1", dst: "2001:db8:2::1", sizes: []int{86, 512}, flows: 2, sport: 10000, hopLimit: 1},
		{name: "v4", v4: true, src: "192.0.2.1", dst: "198.51.100.7", sizes: []int{64, 128, 1518}, flows: 4, sport: 5000, hopLimit: 255},
		{name: "v4/vlan", v4: true, vlan: 4094, src: "192.0.2.1", dst: "198.51.100.7", sizes: []int{68, 1000}, flows: 2, sport: 5000, hopLimit: 64},
		// Source address and port wrap around their 16 bits across the flows:
		// the incremental checksum updates must carry correctly.
		{name: "v6/wrap", src: "2001:db8:1::fffe", dst: "2001:db8:2::1", sizes: []int{100}, flows: 4, sport: 65534, hopLimit: 64},
		{name: "v4/wrap", v4: true, src: "10.1.255.254", dst: "10.2.0.1", sizes: []int{64, 65}, flows: 5, sport: 65533, hopLimit: 64},
		// Too many flows for finished per-flow templates: every packet is patched.
		{name: "v6/patched", src: "2001:db8:1::1", dst: "2001:db8:2::1", sizes: []int{1500}, flows: 1000, sport: 1024, hopLimit: 64, wantPatch: true},
		{name: "v4/patched/vlan", v4: true, vlan: 7, src: "192.0.2.1", dst: "192.0.2.2", sizes: []int{1400, 64}, flows: 800, sport: 1024, hopLimit: 64, wantPatch: true},
		{name: "v6/pattern=zero", src: "2001:db8:1::1", dst: "2001:db8:2::1", sizes: []int{200}, flows: 1, sport: 1, hopLimit: 64, pattern: "zero"},
		{name: "v4/pattern=0xa5", v4: true, src: "192.0.2.1", dst: "192.0.2.2", sizes: []int{200}, flows: 2, sport: 1, hopLimit: 64, pattern: "0xa5"},
		{name: "v6/pattern=random", src: "2001:db8:1::1", dst: "2001:db8:2::1", sizes: []int{333}, flows: 2, sport: 1, hopLimit: 64, pattern: "random"},
		{name: "v6/no-checksum", src: "2001:db8:1::1", dst: "2001:db8:2::1", sizes: []int{128}, flows: 2, sport: 1, hopLimit: 64, noCsum: true},
		// One size of at most 64 bytes: the burst-at-once fast path.
		{name: "v4/fast", v4: true, src: "10.1.255.254", dst: "10.2.0.1", sizes: []int{64}, flows: 5, sport: 65533, hopLimit: 64},
		{name: "v4/fast/vlan", v4: true, vlan: 9, src: "192.0.2.1", dst: "192.0.2.2", sizes: []int{68}, flows: 3, sport: 7, hopLimit: 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			g := newGen(t, h, c.keys())
			if (g.perFlow == nil) != c.wantPatch {
				t.Fatalf("per-flow templates: %v, want %v", g.perFlow != nil, !c.wantPatch)
			}
			// Two rounds over every flow and size, and a part of a third, over
			// several Produce calls at different times.
			total := 2*c.flows*len(c.sizes) + 1
			seq := make([]uint64, c.flows)
			var firstPayload []byte // of the first size, for the random pattern
			for k := 0; k < total; {
				h.Clock.Advance(time.Microsecond)
				b := h.produce(g)
				if b.N == 0 {
					t.Fatal("flat-out generator produced nothing")
				}
				for i := 0; i < b.N && k < total; i, k = i+1, k+1 {
					p := b.P(i)
					if p.RxTime != h.Clock.Now() || p.Flags()&packet.FlagLocal == 0 || p.InPort != packet.NoPort {
						t.Fatalf("packet %d: RxTime %d (now %d), flags %#x, InPort %d", k, p.RxTime, h.Clock.Now(), p.Flags(), p.InPort)
					}
					size := c.sizes[k%len(c.sizes)]
					flow := (k / len(c.sizes)) % c.flows
					pl := checkGenFrame(t, c, p.Data(), size, flow)
					if len(pl) >= GenFieldsLen {
						v := binary.BigEndian.Uint64(pl)
						if got, want := v>>48, uint64(flow); got != want {
							t.Fatalf("packet %d: flow field %d, want %d", k, got, want)
						}
						if got := v & (1<<48 - 1); got != seq[flow] {
							t.Fatalf("packet %d: sequence %d, want %d", k, got, seq[flow])
						}
						seq[flow]++
						if ts := int64(binary.BigEndian.Uint64(pl[8:])); ts != h.Clock.Now() {
							t.Fatalf("packet %d: tx timestamp %d, want %d", k, ts, h.Clock.Now())
						}
						pl = pl[GenFieldsLen:]
						checkPattern(t, c.pattern, pl, GenFieldsLen)
						if c.pattern == "random" && size == c.sizes[0] {
							if firstPayload == nil {
								firstPayload = append([]byte(nil), pl...)
							} else if !bytes.Equal(firstPayload, pl) {
								t.Fatalf("packet %d: random payload differs between packets of one size", k)
							}
						}
					}
				}
				packet.Free(b)
			}
			if got := h.Counter("sent"); got < uint64(total) {
				t.Errorf("sent counter %d, want ≥ %d", got, total)
			}
		})
	}
}

// checkGenFrame checks one frame against c for the given size and flow and
// returns its UDP payload.
func checkGenFrame(t *testing.T, c genCase, d []byte, size, flow int) []byte {
	t.Helper()
	if len(d) != size-fcsLen {
		t.Fatalf("frame of size %d is %d bytes, want %d (size less the FCS)", size, len(d), size-fcsLen)
	}
	// A DecodingLayerParser stops after UDP: gopacket would otherwise decode
	// the payload by port (RADIUS on 1812, and so on).
	var (
		eth     layers.Ethernet
		q       layers.Dot1Q
		ip4     layers.IPv4
		ip6     layers.IPv6
		udp     layers.UDP
		pay     gopacket.Payload
		decoded []gopacket.LayerType
	)
	parser := gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet, &eth, &q, &ip4, &ip6, &udp, &pay)
	parser.IgnoreUnsupported = true
	if err := parser.DecodeLayers(d, &decoded); err != nil {
		t.Fatalf("gopacket: %v", err)
	}
	want := []gopacket.LayerType{layers.LayerTypeEthernet, layers.LayerTypeIPv6, layers.LayerTypeUDP}
	if c.v4 {
		want[1] = layers.LayerTypeIPv4
	}
	if c.vlan != 0 {
		want = append(want[:1], append([]gopacket.LayerType{layers.LayerTypeDot1Q}, want[1:]...)...)
	}
	if len(decoded) < len(want) || fmt.Sprint(decoded[:len(want)]) != fmt.Sprint(want) {
		t.Fatalf("gopacket decoded %v, want %v first", decoded, want)
	}
	if !bytes.Equal(eth.SrcMAC, macA[:]) || !bytes.Equal(eth.DstMAC, macB[:]) {
		t.Fatalf("MACs %v > %v", eth.SrcMAC, eth.DstMAC)
	}
	wantIP := layers.EthernetTypeIPv6
	if c.v4 {
		wantIP = layers.EthernetTypeIPv4
	}
	if c.vlan != 0 {
		if eth.EthernetType != layers.EthernetTypeDot1Q {
			t.Fatalf("EtherType %v, want 802.1Q", eth.EthernetType)
		}
		if int(q.VLANIdentifier) != c.vlan || q.Priority != 0 || q.Type != wantIP {
			t.Fatalf("VLAN tag: id %d prio %d type %v, want id %d type %v", q.VLANIdentifier, q.Priority, q.Type, c.vlan, wantIP)
		}
	} else if eth.EthernetType != wantIP {
		t.Fatalf("EtherType %v, want %v", eth.EthernetType, wantIP)
	}
	l2 := 14
	if c.vlan != 0 {
		l2 = 18
	}
	// The flow changes the low 16 bits of the source address and the source
	// port, each wrapping within its 16 bits.
	src := netip.MustParseAddr(c.src).AsSlice()
	low := binary.BigEndian.Uint16(src[len(src)-2:])
	binary.BigEndian.PutUint16(src[len(src)-2:], low+uint16(flow))
	dst := netip.MustParseAddr(c.dst).AsSlice()
	udpLen := len(d) - l2 - 40
	if c.v4 {
		udpLen = len(d) - l2 - 20
		ip := &ip4
		if ip.Version != 4 || ip.IHL != 5 || int(ip.Length) != len(d)-l2 || ip.Flags != layers.IPv4DontFragment ||
			ip.FragOffset != 0 || int(ip.TTL) != c.hopLimit || ip.Protocol != layers.IPProtocolUDP || ip.TOS != 0 {
			t.Fatalf("IPv4 header: %+v", ip)
		}
		if !ip.SrcIP.Equal(net.IP(src)) || !ip.DstIP.Equal(net.IP(dst)) {
			t.Fatalf("IPv4 %v > %v, want %v > %v", ip.SrcIP, ip.DstIP, net.IP(src), net.IP(dst))
		}
		if _, v := ip.VerifyChecksum(); !v.Valid {
			t.Fatalf("IPv4 header checksum %#04x, want %#04x", v.Actual, v.Correct)
		}
		if err := udp.SetNetworkLayerForChecksum(ip); err != nil {
			t.Fatal(err)
		}
	} else {
		ip := &ip6
		if ip.Version != 6 || ip.TrafficClass != 0 || ip.FlowLabel != 0 || int(ip.Length) != udpLen ||
			ip.NextHeader != layers.IPProtocolUDP || int(ip.HopLimit) != c.hopLimit {
			t.Fatalf("IPv6 header: %+v", ip)
		}
		if !ip.SrcIP.Equal(net.IP(src)) || !ip.DstIP.Equal(net.IP(dst)) {
			t.Fatalf("IPv6 %v > %v, want %v > %v", ip.SrcIP, ip.DstIP, net.IP(src), net.IP(dst))
		}
		if err := udp.SetNetworkLayerForChecksum(ip); err != nil {
			t.Fatal(err)
		}
	}
	if int(udp.SrcPort) != (c.sport+flow)&0xffff || udp.DstPort != 20000 || int(udp.Length) != udpLen {
		t.Fatalf("UDP ports %d > %d length %d, want %d > 20000 length %d", udp.SrcPort, udp.DstPort, udp.Length, (c.sport+flow)&0xffff, udpLen)
	}
	if c.noCsum {
		if udp.Checksum != 0 {
			t.Fatalf("UDP checksum %#04x with udp_checksum = false", udp.Checksum)
		}
	} else {
		err, v := udp.VerifyChecksum()
		if err != nil || udp.Checksum == 0 || !v.Valid {
			t.Fatalf("UDP checksum %#04x, want %#04x (%v)", v.Actual, v.Correct, err)
		}
	}
	return udp.Payload
}

// checkPattern checks payload bytes from offset off of the payload.
func checkPattern(t *testing.T, pattern string, b []byte, off int) {
	t.Helper()
	for i, v := range b {
		var want byte
		switch pattern {
		case "", "incr":
			want = byte(off + i)
		case "zero":
			want = 0
		case "0xa5":
			want = 0xa5
		default:
			return
		}
		if v != want {
			t.Fatalf("payload byte %d is %#02x, want %#02x (pattern %q)", off+i, v, want, pattern)
		}
	}
}

// TestGeneratorNoRoomForFields: frames too short for the 16 generator bytes
// carry none, and their payload is the pattern from its first byte.
func TestGeneratorNoRoomForFields(t *testing.T) {
	h := newHarness(t)
	// IPv4: 42 bytes of headers; 46 is the minimum, 61 leaves 15 payload bytes.
	c := genCase{v4: true, src: "192.0.2.1", dst: "192.0.2.2", sport: 10000, hopLimit: 64, flows: 1, sizes: []int{46, 61, 62}}
	g := newGen(t, h, c.keys()+"count = 3\n")
	b := h.produce(g)
	defer packet.Free(b)
	if b.N != 3 {
		t.Fatalf("%d packets, want 3", b.N)
	}
	for i, want := range []int{0, 15, 16} {
		d := b.P(i).Data()
		pl := checkGenFrame(t, c, d, c.sizes[i], 0)
		if len(pl) != want {
			t.Fatalf("size %d: payload %d bytes, want %d", c.sizes[i], len(pl), want)
		}
		if len(pl) < GenFieldsLen {
			checkPattern(t, "incr", pl, 0)
		}
	}
	if g.seq[0] != 1 {
		t.Errorf("sequence advanced to %d, want 1 (only the 62-byte frame has fields)", g.seq[0])
	}
}

// TestGeneratorSequence: per flow, sequence numbers count up by one and tx
// timestamps never go back, across Produce calls.
func TestGeneratorSequence(t *testing.T) {
	h := newHarness(t)
	g := newGen(t, h, `src = "2001:db8::1"
dst = "2001:db8::2"
flows = 5
sizes = [128, 256, 512]`)
	next := make([]uint64, 5)
	last := make([]int64, 5)
	for call := 0; call < 45; call++ {
		h.Clock.Advance(time.Duration(1+call%3) * time.Microsecond)
		b := h.produce(g)
		for i := 0; i < b.N; i++ {
			d := b.P(i).Data()
			f := d[14+40+8:]
			v, ts := binary.BigEndian.Uint64(f), int64(binary.BigEndian.Uint64(f[8:]))
			flow, seq := v>>48, v&(1<<48-1)
			if seq != next[flow] {
				t.Fatalf("flow %d: sequence %d, want %d", flow, seq, next[flow])
			}
			if ts < last[flow] || ts != h.Clock.Now() {
				t.Fatalf("flow %d: timestamp %d after %d (now %d)", flow, ts, last[flow], h.Clock.Now())
			}
			next[flow]++
			last[flow] = ts
		}
		packet.Free(b)
	}
	for f, n := range next {
		if n != 45*64/5 {
			t.Errorf("flow %d: %d packets, want %d", f, n, 45*64/5)
		}
	}
}

// TestGeneratorRate runs the generator in virtual time and counts what it
// makes: the rate, within one Produce call's worth.
func TestGeneratorRate(t *testing.T) {
	for _, c := range []struct {
		rate   string
		pps    float64
		step   time.Duration
		length time.Duration
	}{
		{"1Mpps", 1e6, 10 * time.Microsecond, 100 * time.Millisecond},
		{"100kpps", 1e5, time.Microsecond, 50 * time.Millisecond},
		{"2.5Mpps", 2.5e6, 3 * time.Microsecond, 20 * time.Millisecond},
		{"1000pps", 1e3, 100 * time.Microsecond, time.Second},
	} {
		t.Run(c.rate, func(t *testing.T) {
			h := newHarness(t)
			g := newGen(t, h, `src = "2001:db8::1"
dst = "2001:db8::2"
sizes = [128]
rate = "`+c.rate+`"`)
			var n int
			var last int64
			for h.Clock.Now() <= int64(c.length) {
				b := h.produce(g)
				n += b.N
				packet.Free(b)
				last = h.Clock.Now()
				h.Clock.Advance(c.step)
			}
			// Tokens accrue from the first call, at time zero, to the last.
			want := c.pps * float64(last) / 1e9
			if d := float64(n) - want; d > 1 || d < -1 {
				t.Errorf("%d packets in %v at %s, want %.1f ± 1", n, time.Duration(last), c.rate, want)
			}
			if got := h.Counter("sent"); got != uint64(n) {
				t.Errorf("sent counter %d, want %d", got, n)
			}
			if got, want := h.Counter("sent_bytes"), uint64(n)*124; got != want {
				t.Errorf("sent_bytes counter %d, want %d", got, want)
			}
		})
	}
}

// TestGeneratorRateFromTimeZero: virtual time starts at zero, and the first
// Produce at time zero starts the schedule there.
func TestGeneratorRateFromTimeZero(t *testing.T) {
	h := newHarness(t)
	g := newGen(t, h, `src = "2001:db8::1"
dst = "2001:db8::2"
rate = "1Mpps"
duration = "1ms"`)
	var n int
	for !g.Done() {
		b := h.produce(g)
		for i := 0; i < b.N; i++ {
			if b.P(i).RxTime >= int64(time.Millisecond) {
				t.Fatalf("packet made at %d, after the 1ms duration", b.P(i).RxTime)
			}
		}
		n += b.N
		packet.Free(b)
		if g.Done() {
			break
		}
		if h.Clock.Now() > int64(2*time.Millisecond) {
			t.Fatal("generator not done 1ms after its duration")
		}
		h.Clock.Advance(10 * time.Microsecond)
	}
	if h.Clock.Now() != int64(time.Millisecond) {
		t.Errorf("done at %v, want 1ms", time.Duration(h.Clock.Now()))
	}
	// Tokens accrue from time zero: 10 per 10µs step, produced at 10µs…990µs.
	if n != 990 {
		t.Errorf("%d packets in 1ms at 1Mpps, want 990", n)
	}
}

// TestGeneratorCount: count ends the generator exactly, and several lcores split
// the count and the rate between them.
func TestGeneratorCount(t *testing.T) {
	h := newHarness(t)
	g := newGen(t, h, `src = "192.0.2.1"
dst = "192.0.2.2"
ip_version = 4
count = 100`)
	var n []int
	for i := 0; i < 4; i++ {
		b := h.produce(g)
		n = append(n, b.N)
		packet.Free(b)
	}
	if fmt.Sprint(n) != "[64 36 0 0]" || !g.Done() || g.Sent() != 100 {
		t.Errorf("bursts %v, done %v, sent %d; want [64 36 0 0], done, 100", n, g.Done(), g.Sent())
	}

	// Three lcores: the counts add up to 100 and the rates to 3kpps.
	sum := 0
	for lc := 0; lc < 3; lc++ {
		h := newHarness(t)
		h.Instance, h.NumInstances = lc, 3
		g := newGen(t, h, `src = "2001:db8::1"
dst = "2001:db8::2"
flows = 3
count = 100
rate = "3kpps"`)
		if want := 1e3 / 1e9; g.rate != want {
			t.Errorf("lcore %d: rate %g packets/ns, want %g", lc, g.rate, want)
		}
		for !g.Done() {
			h.Clock.Advance(time.Millisecond)
			b := h.produce(g)
			if b.N > 1 {
				t.Fatalf("lcore %d: %d packets in 1ms at 1kpps", lc, b.N)
			}
			sum += b.N
			packet.Free(b)
		}
		if want := []uint64{34, 33, 33}[lc]; g.Sent() != want {
			t.Errorf("lcore %d sent %d, want %d", lc, g.Sent(), want)
		}
	}
	if sum != 100 {
		t.Errorf("three lcores sent %d, want 100", sum)
	}
	// Fewer flows than lcores: some lcore would have no flow of its own.
	h = newHarness(t)
	h.Instance, h.NumInstances = 2, 3
	if _, err := h.build("generator", `src = "2001:db8::1"
dst = "2001:db8::2"
flows = 2`); err == nil {
		t.Error("2 flows on 3 lcores were accepted")
	}
}

// TestGeneratorDuration: duration ends the generator at start + duration.
func TestGeneratorDuration(t *testing.T) {
	h := newHarness(t)
	h.Clock.Set(int64(5 * time.Second))
	g := newGen(t, h, `src = "2001:db8::1"
dst = "2001:db8::2"
duration = "100us"`)
	for i := 0; i < 10; i++ {
		packet.Free(h.produce(g))
		h.Clock.Advance(10 * time.Microsecond)
		if g.Done() {
			t.Fatalf("done after %d steps of 10µs", i+1)
		}
	}
	b := h.produce(g)
	if b.N != 0 || !g.Done() {
		t.Errorf("at start + duration: %d packets, done %v; want 0, done", b.N, g.Done())
	}
	packet.Free(b)
}

// TestGeneratorPoolEmpty: an empty pool makes fewer packets and counts them.
func TestGeneratorPoolEmpty(t *testing.T) {
	h := newHarness(t)
	h.NewPool("small", 10, 2048)
	g := newGen(t, h, `src = "2001:db8::1"
dst = "2001:db8::2"
pool = "small"`)
	b := h.produce(g)
	if b.N != 10 || h.Counter("no_buffer") != 54 || h.Counter("sent") != 10 {
		t.Errorf("%d packets, no_buffer %d, sent %d; want 10, 54, 10", b.N, h.Counter("no_buffer"), h.Counter("sent"))
	}
	packet.Free(b)
}

func TestGeneratorConfigErrors(t *testing.T) {
	const addrs6 = "src = \"2001:db8::1\"\ndst = \"2001:db8::2\"\n"
	const addrs4 = "ip_version = 4\nsrc = \"192.0.2.1\"\ndst = \"192.0.2.2\"\n"
	for _, c := range []struct {
		name, keys, want string
	}{
		{"v6 size below minimum", addrs6 + "sizes = [64]", "size 64 is below the 66-byte minimum for IPv6 UDP"},
		{"v6 vlan size below minimum", addrs6 + "vlan = 10\nsizes = [128, 69]", "size 69 is below the 70-byte minimum"},
		{"v4 size below minimum", addrs4 + "sizes = [45]", "size 45 is below the 46-byte minimum for IPv4 UDP"},
		{"size beyond pool", addrs6 + "sizes = [3000]", "does not fit pool \"default\""},
		{"ip_version 5", "ip_version = 5\n" + addrs6, "ip_version must be 4 or 6"},
		{"v4 with v6 addresses", "ip_version = 4\n" + addrs6, "must be IPv4 addresses"},
		{"v6 with v4 addresses", "ip_version = 6\nsrc = \"192.0.2.1\"\ndst = \"192.0.2.2\"", "must be IPv6 addresses"},
		{"v6 with v4 dst", "sizes = [128]\nsrc = \"2001:db8::1\"\ndst = \"192.0.2.2\"", "must be IPv6 addresses"},
		{"v6 with v4 src", "sizes = [128]\nsrc = \"192.0.2.1\"\ndst = \"2001:db8::1\"", "must be IPv6 addresses"},
		{"v4 with v6 dst", "ip_version = 4\nsrc = \"192.0.2.1\"\ndst = \"2001:db8::1\"", "must be IPv4 addresses"},
		{"no dst", "src = \"2001:db8::1\"", "needs src and dst"},
		{"flows 0", addrs6 + "flows = 0", "flows 0 is outside 1..65536"},
		{"vlan 4095", addrs6 + "vlan = 4095", "vlan 4095 is outside 0..4094"},
		{"hop_limit 0", addrs6 + "hop_limit = 0", "hop_limit 0 is outside 1..255"},
		{"port 65536", addrs6 + "udp_dst_port = 65536", "UDP ports must be within 0..65535"},
		{"bad pattern", addrs6 + "pattern = \"0xZZ\"", "pattern \"0xZZ\" is not zero, incr, random or 0xNN"},
		{"unknown pool", addrs6 + "pool = \"nope\"", "generator: pool \"nope\""},
		{"unknown key", addrs6 + "rat = \"1Mpps\"", "generator#0.toml:3: rat: unknown key (did you mean \"rate\"?)"},
		{"wrong type", addrs6 + "\nsizes = \"64\"", "generator#0.toml:4: sizes"},
		{"bad rate", addrs6 + "rate = \"1Mbit\"", "generator#0.toml:3: rate"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			_, err := h.build("generator", c.keys)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}

// TestGeneratorAllocs: Produce allocates nothing, with finished per-flow
// templates and with per-packet patching.
func TestGeneratorAllocs(t *testing.T) {
	for _, c := range []struct{ name, keys string }{
		{"templates", "flows = 16\nsizes = [64, 128, 1500]"},
		{"patched", "flows = 4000\nsizes = [1500]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			g := newGen(t, h, "ip_version = 4\nsrc = \"192.0.2.1\"\ndst = \"192.0.2.2\"\nrate = \"10Mpps\"\n"+c.keys)
			b := &packet.Burst{}
			step := func() {
				h.Clock.Advance(5 * time.Microsecond)
				h.Ctx.Now = h.Clock.Now()
				b.N = 0
				g.Produce(&h.Ctx, b)
				if b.N == 0 {
					t.Fatal("nothing produced")
				}
				packet.Free(b)
			}
			packet.Free(h.produce(g)) // starts the schedule
			step()
			if a := testing.AllocsPerRun(200, step); a != 0 {
				t.Errorf("%.1f allocations per Produce, want 0", a)
			}
		})
	}
}

// FuzzGeneratorChecksums: for any addresses, ports, flows and size, every
// frame's checksums verify.
func FuzzGeneratorChecksums(f *testing.F) {
	f.Add(true, uint32(0xc0000201), uint16(1), uint16(2), uint8(3), uint16(64), uint64(1))
	f.Add(false, uint32(0xfffffffe), uint16(65535), uint16(0), uint8(9), uint16(1500), uint64(1<<47))
	f.Fuzz(func(t *testing.T, v4 bool, addr uint32, sport, dport uint16, flows uint8, size uint16, start uint64) {
		h := newHarness(t)
		r := rand.New(rand.NewPCG(uint64(addr), start))
		var src, dst netip.Addr
		minSize := 66
		if v4 {
			var a [4]byte
			binary.BigEndian.PutUint32(a[:], addr)
			src, dst = netip.AddrFrom4(a), netip.AddrFrom4([4]byte{byte(r.Uint32()), 2, 3, 4})
			minSize = 46
		} else {
			var a [16]byte
			a[0] = 0x20
			binary.BigEndian.PutUint32(a[12:], addr)
			src, dst = netip.AddrFrom16(a), netip.AddrFrom16([16]byte{0x20, 1, 15: byte(r.Uint32())})
		}
		sz := minSize + int(size)%(2048+fcsLen-minSize+1)
		ver := 6
		if v4 {
			ver = 4
		}
		keys := fmt.Sprintf("ip_version = %d\nsrc = %q\ndst = %q\nudp_src_port = %d\nudp_dst_port = %d\nflows = %d\nsizes = [%d]\npattern = \"random\"\n",
			ver, src, dst, sport, dport, int(flows)+1, sz)
		g := newGen(t, h, keys)
		h.Clock.Set(int64(start >> 1))
		b := h.produce(g)
		defer packet.Free(b)
		for i := 0; i < b.N; i++ {
			d := b.P(i).Data()
			var l packet.Layers
			if err := packet.Parse(d, &l); err != nil || l.Flags&packet.FlagUDP == 0 {
				t.Fatalf("frame %d does not parse as UDP: %v", i, err)
			}
			u := l.UDP(d)
			if got, want := u.Checksum(), l.UDPChecksum(d); got != want {
				t.Fatalf("frame %d: UDP checksum %#04x, want %#04x", i, got, want)
			}
			if v4 && packet.Checksum(d[l.L3:l.L3+20], 0) != 0xffff {
				t.Fatalf("frame %d: IPv4 header checksum does not verify", i)
			}
		}
	})
}

// TestGeneratorFastPath: a single small size takes fillFast, and its frames are
// byte for byte what the general path writes for the same flows and times.
func TestGeneratorFastPath(t *testing.T) {
	for _, keys := range []string{`ip_version = 4
src = "10.1.255.254"
dst = "10.2.0.1"
flows = 5
udp_src_port = 65533
sizes = [64]`, `src = "2001:db8::fffe"
dst = "2001:db8::2"
flows = 3
sizes = [66]`, `ip_version = 4
src = "192.0.2.1"
dst = "198.51.100.1"
flows = 16
trial = 201
sizes = [64]`} {
		h := newHarness(t)
		fast := newGen(t, h, keys)
		slow := newGen(t, h, keys)
		if !fast.fast {
			t.Fatalf("%s: one small size did not take the fast path", keys)
		}
		slow.fast = false
		// Sequence numbers whose every word is in use, some about to wrap
		// under the trial tag's 40-bit mask: fillFast sums their words with
		// the flow's fixed ones (Flow ID, tag) at once.
		for f := range fast.seq {
			s := uint64(f)*0x0123_4567_89ab + 0xffff_fffe_fffe
			fast.seq[f], slow.seq[f] = s, s
		}
		for round := 0; round < 3; round++ {
			h.Clock.Advance(time.Millisecond)
			a, b := h.produce(fast), h.produce(slow)
			if a.N != b.N || a.N == 0 {
				t.Fatalf("round %d: fast made %d packets, slow %d", round, a.N, b.N)
			}
			for i := 0; i < a.N; i++ {
				pa, pb := a.P(i), b.P(i)
				if !bytes.Equal(pa.Data(), pb.Data()) || pa.RxTime != pb.RxTime || pa.Flags() != pb.Flags() {
					t.Fatalf("round %d packet %d differs:\nfast %x\nslow %x", round, i, pa.Data(), pb.Data())
				}
			}
			packet.Free(a)
			packet.Free(b)
		}
	}
}
