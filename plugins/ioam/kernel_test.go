//go:build linux

package ioam

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/linerate/linerate/appliance/kernel"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/internal/netns"
	"github.com/linerate/linerate/internal/testenv"
	"github.com/linerate/linerate/plugins/stagetest"
	"github.com/linerate/linerate/ports/afpacket"
)

// The Linux kernel as an IOAM transit node (net/ipv6/ioam6.c). The test builds
//
//	linerate ns                      kernel ns (forwarding, ioam6_enabled on lra1)
//	 encap → afpacket lra0 ──veth── lra1  ─route─  lrb0 ──veth── lrb1 afpacket → decap
//
// linerate encapsulates (IPv6-in-IPv6, outer destination 2001:db8:b::2, behind
// lrb0), the kernel fills its node data into the pre-allocated trace as it
// forwards, and linerate's decap reads it.

// The kernel node's ids and namespace data.
const (
	kNodeID      = 0x00BEEF
	kNodeIDWide  = 0x00C0FFEE12345678
	kIngressID   = 11 // lra1
	kEgressID    = 12 // lrb0
	kIngressWide = 0x0B0B0B0B
	kEgressWide  = 0x0C0C0C0C
	kNSData      = 0xDA7A0001
	kNSDataWide  = 0x1122334455667788
	kNS          = 123
)

type kernelLab struct {
	lr, k    *netns.NS
	a, b     *afpacket.Port
	a0MAC    [6]byte
	a1MAC    [6]byte
	outerDst string
	outerSrc string
}

func newKernelLab(t *testing.T, h *harness) *kernelLab {
	t.Helper()
	testenv.RequireRoot(t)
	testenv.RequireKernel(t, kernel.IOAM6)
	testenv.RequireCmd(t, "ip")
	kl := &kernelLab{lr: netns.New(t), k: netns.New(t), outerSrc: "2001:db8:a::2", outerDst: "2001:db8:b::2"}
	netns.Veth(t, kl.lr, "lra0", kl.k, "lra1")
	netns.Veth(t, kl.k, "lrb0", kl.lr, "lrb1")
	b1 := kl.lr.MAC(t, "lrb1")
	kl.a0MAC, kl.a1MAC = kl.lr.MAC(t, "lra0"), kl.k.MAC(t, "lra1")
	// IPv6 on in the kernel namespace, without link-local addresses or DAD, so
	// the only traffic on the links is the test's.
	kl.k.Sysctl(t, [][2]string{
		{"ipv6/conf/all/forwarding", "1"},
		{"ipv6/ioam6_id", fmt.Sprint(kNodeID)}, {"ipv6/ioam6_id_wide", fmt.Sprint(uint64(kNodeIDWide))},
		{"ipv6/conf/lra1/addr_gen_mode", "1"}, {"ipv6/conf/lrb0/addr_gen_mode", "1"},
		{"ipv6/conf/lra1/accept_dad", "0"}, {"ipv6/conf/lrb0/accept_dad", "0"},
		{"ipv6/conf/all/disable_ipv6", "0"}, {"ipv6/conf/lra1/disable_ipv6", "0"}, {"ipv6/conf/lrb0/disable_ipv6", "0"},
		{"ipv6/conf/lra1/ioam6_enabled", "1"},
		{"ipv6/conf/lra1/ioam6_id", fmt.Sprint(kIngressID)}, {"ipv6/conf/lrb0/ioam6_id", fmt.Sprint(kEgressID)},
		{"ipv6/conf/lra1/ioam6_id_wide", fmt.Sprint(kIngressWide)}, {"ipv6/conf/lrb0/ioam6_id_wide", fmt.Sprint(kEgressWide)},
		{"ipv6/icmp/ratelimit", "0"}, // every Time Exceeded, however many
	})
	kl.k.IP(t, "addr", "add", "2001:db8:a::1/64", "dev", "lra1", "nodad")
	kl.k.IP(t, "addr", "add", "2001:db8:b::1/64", "dev", "lrb0", "nodad")
	kl.k.IP(t, "-6", "neigh", "add", kl.outerDst, "lladdr", net.HardwareAddr(b1[:]).String(), "dev", "lrb0", "nud", "permanent")
	// ICMP errors go back to the outer source, behind lra1.
	kl.k.IP(t, "-6", "neigh", "add", kl.outerSrc, "lladdr", net.HardwareAddr(kl.a0MAC[:]).String(), "dev", "lra1", "nud", "permanent")
	kl.k.IP(t, "ioam", "namespace", "add", fmt.Sprint(kNS), "data", fmt.Sprint(uint32(kNSData)), "wide", fmt.Sprintf("%#x", uint64(kNSDataWide))) // iproute2 reads wide data as hex
	open := func(ifname string) *afpacket.Port {
		var p *afpacket.Port
		if err := kl.lr.Do(func() (err error) {
			p, err = afpacket.New(afpacket.Options{Name: ifname, Interface: ifname, Pool: h.pool, BlockTimeout: time.Millisecond})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := p.Close(); err != nil {
				t.Error(err)
			}
		})
		return p
	}
	kl.a, kl.b = open("lra0"), open("lrb1")
	return kl
}

// forward sends frame on lra0 and returns what comes out of the kernel on
// lrb1 for the outer destination, or nil.
func (kl *kernelLab) forward(t *testing.T, h *harness, frame []byte) []byte {
	t.Helper()
	fwd, _ := kl.exchange(t, h, frame)
	return fwd
}

// kernelMACs is frame with the MACs of a frame from lra0 to the kernel.
func (kl *kernelLab) kernelMACs(frame []byte) []byte {
	f := append([]byte(nil), frame...)
	copy(f[0:6], kl.a1MAC[:])
	copy(f[6:12], kl.a0MAC[:])
	return f
}

// exchange sends frame on lra0 and returns what the kernel made of it: the
// packet forwarded out of lrb1 to the outer destination, or an ICMPv6 error
// back on lra0 (nil, nil: neither within a generous deadline).
func (kl *kernelLab) exchange(t *testing.T, h *harness, frame []byte) (fwd, icmp []byte) {
	t.Helper()
	var b packet.Burst
	b.Push(h.Pkt(kl.kernelMACs(frame), 0))
	deadline := time.Now().Add(10 * time.Second)
	for b.N > 0 {
		n := kl.a.TxBurst(0, &b)
		copy(b.H[:], b.H[n:b.N])
		b.N -= n
		if time.Now().After(deadline) {
			packet.Free(&b)
			t.Fatal("lra0 does not take the frame")
		}
	}
	want := netIP(kl.outerDst)
	src := netIP(kl.outerSrc)
	for fwd == nil && icmp == nil && time.Now().Before(deadline) {
		got := 0
		for _, port := range []*afpacket.Port{kl.b, kl.a} {
			b.N = 0
			got += port.RxBurst(0, &b)
			for i := 0; i < b.N; i++ {
				d := b.H[i].P().Data()
				if len(d) < 54+packet.ICMPv6MinLen || binary.BigEndian.Uint16(d[12:]) != packet.EtherTypeIPv6 {
					continue
				}
				switch {
				case port == kl.b && fwd == nil && bytes.Equal(d[38:54], want[:]):
					fwd = append([]byte(nil), d...)
				case port == kl.a && icmp == nil && bytes.Equal(d[38:54], src[:]) && d[20] == packet.ProtocolICMPv6 && d[54] < 128:
					icmp = append([]byte(nil), d...)
				}
			}
			packet.Free(&b)
		}
		if got == 0 {
			time.Sleep(200 * time.Microsecond)
		}
	}
	return fwd, icmp
}

func netIP(s string) [16]byte {
	var a [16]byte
	copy(a[:], net.ParseIP(s).To16())
	return a
}

// The kernel's data for its hop, read by linerate's decap: hop limit, ids,
// interface ids and namespace data, short and wide.
func TestKernelTransitInterop(t *testing.T) {
	h := newHarness(t)
	kl := newKernelLab(t, h)
	for _, tt := range []uint32{0xC00000, 0xF00000, 0xFC0000, 0x00E000, 0xFFF002} {
		t.Run(fmt.Sprintf("type=%#06x", tt), func(t *testing.T) {
			room := 4
			if NodeLen(tt) > 8 {
				room = 3
			}
			enc := h.MustBuild("ioam.encap", fmt.Sprintf(`
node_id = 1
node_id_wide = 0x101
timestamp = "posix"
mode = "encap"
src = %q
dst = %q
namespaces = [ { id = %d, data = 0xE1 } ]
[[profiles]]
trace = { namespace = %d, type = "%#06x", hops = %d }
`, kl.outerSrc, kl.outerDst, kNS, kNS, tt, room))
			dec := h.MustBuild("ioam.decap", fmt.Sprintf(`
node_id = 3
node_id_wide = 0x303
timestamp = "posix"
export = true
namespaces = [ { id = %d, data = 0xD3 } ]
`, kNS))
			in := buildFrame(t, frameSpec{payload: 300, hopLimit: 40})
			out := h.run(in, 0, false, enc).data
			got := kl.forward(t, h, out)
			if got == nil {
				t.Fatal("nothing came through the kernel")
			}
			r := h.run(got, 1, false, dec)
			if !bytes.Equal(r.data[14:], in[14:]) {
				t.Error("decap output is not the original packet")
			}
			recs := drainRecords(t, dec)
			if len(recs) != 1 {
				t.Fatalf("%d records", len(recs))
			}
			hops := recs[0].Hops()
			if len(hops) != 3 {
				t.Fatalf("%d hops, want encap, kernel, decap", len(hops))
			}
			k := hops[1]
			t.Logf("kernel hop: %+v", k.Node)
			if tt&TraceHopLimNodeID != 0 && (k.HopLimit != 39 || k.NodeID != kNodeID) {
				t.Errorf("kernel hop limit %d id %#x, want 39 %#x", k.HopLimit, k.NodeID, kNodeID)
			}
			if tt&TraceIfIDs != 0 && (k.IngressIf != kIngressID || k.EgressIf != kEgressID) {
				t.Errorf("kernel interfaces %d→%d", k.IngressIf, k.EgressIf)
			}
			if tt&TraceNamespaceData != 0 && k.NamespaceData != kNSData {
				t.Errorf("kernel namespace data %#x", k.NamespaceData)
			}
			if tt&TraceHopLimNodeIDWide != 0 && (k.HopLimit != 39 || k.NodeIDWide != kNodeIDWide) {
				t.Errorf("kernel wide id %#x", k.NodeIDWide)
			}
			if tt&TraceIfIDsWide != 0 && (k.IngressIfWide != kIngressWide || k.EgressIfWide != kEgressWide) {
				t.Errorf("kernel wide interfaces %#x→%#x", k.IngressIfWide, k.EgressIfWide)
			}
			if tt&TraceNamespaceDataWide != 0 && k.NamespaceDataWide != kNSDataWide {
				t.Errorf("kernel wide namespace data %#x", k.NamespaceDataWide)
			}
			if tt&TraceTimestampSeconds != 0 {
				now := time.Now().Unix()
				if d := now - int64(k.Seconds); d < 0 || d > 60 {
					t.Errorf("kernel timestamp %d, now %d", k.Seconds, now)
				}
			}
			if tt&TraceOpaqueState != 0 && k.SchemaID != 0xFFFFFF {
				t.Errorf("kernel snapshot schema %#x, want none (0xFFFFFF)", k.SchemaID)
			}
			// The record: every field the kernel wrote, short and wide;
			// what it had no value for (all ones) named unknown, not shown
			// as a value.
			kj := recs[0].JSON("dec").Trace.Hops[1]
			if tt&TraceHopLimNodeID != 0 && (kj.NodeID == nil || *kj.NodeID != kNodeID) ||
				tt&TraceHopLimNodeIDWide != 0 && (kj.NodeIDWide == nil || *kj.NodeIDWide != kNodeIDWide) ||
				tt&TraceIfIDs != 0 && (kj.IngressIf == nil || *kj.IngressIf != kIngressID) ||
				tt&TraceIfIDsWide != 0 && (kj.IngressIfWide == nil || *kj.IngressIfWide != kIngressWide) {
				t.Errorf("kernel hop's record lacks a field: %+v", kj)
			}
			for _, f := range []struct {
				bit  uint32
				name string
				set  bool
			}{{TraceTransitDelay, "transit_delay_ns", kj.TransitDelay != nil || kj.TransitDelayOverflow},
				{TraceChecksumComplement, "checksum_complement", kj.ChecksumComplement != nil},
				{TraceBufferOccupancy, "buffer_occupancy", kj.Buffer != nil}} {
				if tt&f.bit != 0 && (f.set || !slices.Contains(kj.Unknown, f.name)) {
					t.Errorf("the kernel's %s: value set %v, unknown %v", f.name, f.set, kj.Unknown)
				}
			}
			if hops[0].NodeID != 1 && hops[0].NodeIDWide != 0x101 || hops[2].NodeID != 3 && hops[2].NodeIDWide != 0x303 {
				t.Errorf("linerate hops %+v %+v", hops[0].Node, hops[2].Node)
			}
		})
	}
}

// kernelExempt lists the byte ranges of a node's data the comparison skips:
// timestamps and queue depth (the nodes' own readings), and transit delay and
// buffer occupancy, which the kernel does not measure (it writes 0xFFFFFFFF)
// and linerate does.
func kernelExempt(tt uint32) [][2]int {
	var out [][2]int
	o := 0
	for bit := uint32(0x800000); bit > TraceBufferOccupancy>>1; bit >>= 1 {
		if tt&bit == 0 {
			continue
		}
		size := 4
		if bit&traceWide != 0 {
			size = 8
		}
		switch bit {
		case TraceTimestampSeconds, TraceTimestampFraction, TraceQueueDepth, TraceTransitDelay, TraceBufferOccupancy:
			out = append(out, [2]int{o, o + size})
		}
		o += size
	}
	return out
}

// For every trace type the kernel fills, linerate's transit writes the same
// bytes in the same places as the kernel given the same ids: the whole
// packet but the MACs (the kernel routes) and the exempt fields.
func TestKernelByteExact(t *testing.T) {
	h := newHarness(t)
	kl := newKernelLab(t, h)
	types := []uint32{0xC00000, 0xF00000, 0xFC0000, 0xFFF002, 0x00E000, 0x80E000, 0xFFFFFE}
	for bit := uint32(0x800000); bit >= 2; bit >>= 1 {
		types = append(types, bit) // each field alone, the undefined ones too
	}
	transit := h.MustBuild("ioam.transit", fmt.Sprintf(`
node_id = %d
node_id_wide = "%#x"
timestamp = "posix"
decrement_hop_limit = true
egress_port = "eth1"
namespaces = [ { id = %d, data = %d, data_wide = "%#x" } ]
interfaces = [ { port = "eth0", id = %d, id_wide = %d }, { port = "eth1", id = %d, id_wide = %d } ]
`, kNodeID, uint64(kNodeIDWide), kNS, uint32(kNSData), uint64(kNSDataWide), kIngressID, kIngressWide, kEgressID, kEgressWide))
	for _, tt := range types {
		t.Run(fmt.Sprintf("type=%#06x", tt), func(t *testing.T) {
			// Room for two nodes. An encapsulating node must not set bits
			// 12-21, so for those the type is written into the packet after.
			size := 2 * (NodeLen(tt) + 1) * 4
			legal := tt&(TraceUndefined|TraceReserved) == 0
			typ := tt
			if !legal {
				typ = 0x800000
			}
			enc := h.MustBuild("ioam.encap", fmt.Sprintf(`
mode = "encap"
src = %q
dst = %q
namespaces = [ { id = %d } ]
[[profiles]]
trace = { namespace = %d, type = "%#06x", size = %d, fill = false }
`, kl.outerSrc, kl.outerDst, kNS, kNS, typ, size))
			in := buildFrame(t, frameSpec{payload: 100})
			e := h.run(in, 0, false, enc).data
			if !legal {
				tr := Trace(Option(e[14+40+4:]).Body())
				tr[2] = uint8(NodeLen(tt))<<3 | tr[2]&7
				tr[4], tr[5], tr[6] = byte(tt>>16), byte(tt>>8), byte(tt)
			}
			k := kl.forward(t, h, e)
			if k == nil {
				t.Fatal("nothing came through the kernel")
			}
			l := h.run(e, 0, false, transit).data
			if len(k) != len(l) {
				t.Fatalf("kernel %d bytes, linerate %d", len(k), len(l))
			}
			tr := Trace(Option(l[14+40+4:]).Body())
			if tr.Overflow() || tr.RemainingLen() == len(tr.Data())/4 {
				t.Fatalf("linerate wrote nothing: % x", l[54:])
			}
			node := 14 + 40 + 4 + 4 + TraceHeaderLen + tr.RemainingLen()*4
			skip := map[int]bool{}
			for _, r := range kernelExempt(tt) {
				for i := r[0]; i < r[1]; i++ {
					skip[node+i] = true
				}
			}
			var diffs []string
			for i := 12; i < len(k); i++ {
				if !skip[i] && k[i] != l[i] {
					diffs = append(diffs, fmt.Sprintf("@%d kernel %02x linerate %02x", i, k[i], l[i]))
				}
			}
			if len(diffs) > 0 {
				t.Errorf("differences:\n%s\nkernel   % x\nlinerate % x", strings.Join(diffs, "\n"), k[54:node+NodeLen(tt)*4+8], l[54:node+NodeLen(tt)*4+8])
			}
		})
	}
}

// The hop limit rule of ioam.transit with decrement_hop_limit against the
// kernel's forwarding, for packets without IOAM, with a trace of a namespace
// the node knows and of one it does not: hop limit 2 leaves with 1, the same
// packet byte for byte past the MACs; hop limit 1 is dropped and answered
// with the kernel's ICMPv6 Time Exceeded, from the ingress address to the
// source, quoting the packet (the kernel quotes it with its node data in the
// trace, which linerate leaves out of a packet it drops).
func TestKernelHopLimit(t *testing.T) {
	h := newHarness(t)
	kl := newKernelLab(t, h)
	lr := newHarness(t)
	lr.Ports[0].MAC = kl.a1MAC
	lr.Ports[0].Addrs = []netip.Prefix{netip.MustParsePrefix("2001:db8:a::1/64")}
	transit := lr.MustBuild("ioam.transit", fmt.Sprintf(`
node_id = %d
node_id_wide = "%#x"
timestamp = "posix"
decrement_hop_limit = true
egress_port = "eth1"
namespaces = [ { id = %d, data = %d, data_wide = "%#x" } ]
interfaces = [ { port = "eth0", id = %d, id_wide = %d }, { port = "eth1", id = %d, id_wide = %d } ]
`, kNodeID, uint64(kNodeIDWide), kNS, uint32(kNSData), uint64(kNSDataWide), kIngressID, kIngressWide, kEgressID, kEgressWide))
	for _, hl := range []uint8{2, 1} {
		for _, f := range hopLimitFramesFor(t, lr, hl, kl.outerSrc, kl.outerDst) {
			if f.name != "known namespace" && f.name != "unknown namespace" && f.name != "no IOAM" {
				continue
			}
			t.Run(fmt.Sprintf("hop limit %d/%s", hl, f.name), func(t *testing.T) {
				fwd, icmp := kl.exchange(t, h, f.data)
				r := lr.run(kl.kernelMACs(f.data), 0, false, transit)
				em := lr.Env.TakeEmitted()
				var lrICMP []byte
				for _, e := range em {
					lrICMP = stagetest.TakeData(e.H)
				}
				if hl > 1 {
					if fwd == nil || r.data == nil {
						t.Fatalf("kernel forwarded: %v; linerate: %q", fwd != nil, r.dropped)
					}
					if fwd[21] != hl-1 || !bytes.Equal(fwd[12:], r.data[12:]) {
						t.Fatalf("kernel and linerate differ\nkernel   % x\nlinerate % x", fwd[12:], r.data[12:])
					}
					return
				}
				if fwd != nil || icmp == nil {
					t.Fatalf("the kernel forwarded %v, sent an ICMP error %v", fwd != nil, icmp != nil)
				}
				if r.dropped != "ioam_hop_limit" || lrICMP == nil {
					t.Fatalf("linerate: %q, ICMP error %v", r.dropped, lrICMP != nil)
				}
				if !bytes.Equal(icmp[:12], lrICMP[:12]) {
					t.Errorf("MACs: kernel % x, linerate % x", icmp[:12], lrICMP[:12])
				}
				k, l := packet.IPv6(icmp[14:]), packet.IPv6(lrICMP[14:])
				if k.Src() != l.Src() || k.Dst() != l.Dst() || k.NextHeader() != l.NextHeader() || k.HopLimit() != l.HopLimit() ||
					k.PayloadLength() != l.PayloadLength() {
					t.Errorf("IPv6 headers: kernel % x\n               linerate % x", icmp[14:54], lrICMP[14:54])
				}
				km, lm := icmp[54:], lrICMP[54:]
				if !bytes.Equal(km[:2], lm[:2]) || !bytes.Equal(km[4:8], lm[4:8]) {
					t.Errorf("ICMPv6 type, code or body: kernel % x, linerate % x", km[:8], lm[:8])
				}
				quote := 8
				if f.name == "known namespace" {
					// The kernel's quote has its node data in: compare
					// the outer header, then the inner packet.
					hbh := packet.IPv6Len + (int(km[8+packet.IPv6Len+1])+1)*8
					if !bytes.Equal(km[8:8+packet.IPv6Len], lm[8:8+packet.IPv6Len]) {
						t.Errorf("quoted IPv6 header: kernel % x, linerate % x", km[8:48], lm[8:48])
					}
					quote += hbh
				}
				if !bytes.Equal(km[quote:], lm[quote:]) {
					t.Errorf("quotes differ\nkernel   % x\nlinerate % x", km[quote:], lm[quote:])
				}
			})
		}
	}
}

// Five pre-allocated trace options of a namespace the node knows, in one
// Hop-by-Hop header: the kernel fills every one, and so does linerate's
// transit, byte for byte as the kernel (it filled the first four, counting
// the fifth as extra_traces, before).
func TestKernelFiveTraces(t *testing.T) {
	h := newHarness(t)
	kl := newKernelLab(t, h)
	transit := h.MustBuild("ioam.transit", fmt.Sprintf(`
node_id = %d
node_id_wide = "%#x"
timestamp = "posix"
decrement_hop_limit = true
egress_port = "eth1"
namespaces = [ { id = %d, data = %d, data_wide = "%#x" } ]
interfaces = [ { port = "eth0", id = %d, id_wide = %d }, { port = "eth1", id = %d, id_wide = %d } ]
`, kNodeID, uint64(kNodeIDWide), kNS, uint32(kNSData), uint64(kNSDataWide), kIngressID, kIngressWide, kEgressID, kEgressWide))
	const tt = 0xE00000 // hop limit and id, interfaces, timestamp seconds: exempt
	enc := h.MustBuild("ioam.encap", fmt.Sprintf(`
mode = "encap"
src = %q
dst = %q
namespaces = [ { id = %d } ]
[[profiles]]
trace = { namespace = %d, type = "%#06x", size = %d, fill = false }
`, kl.outerSrc, kl.outerDst, kNS, kNS, tt, 2*NodeLen(tt)*4))
	e := h.run(buildFrame(t, frameSpec{payload: 100}), 0, false, enc).data
	// The encapsulation's one trace option, five times in its place.
	const l3, hbh = 14, 14 + 40
	opt := e[hbh+4 : hbh+4+2+int(e[hbh+5])]
	hl := (int(e[hbh+1]) + 1) * 8
	n := 4 + 5*len(opt)
	if n%8 != 0 || len(opt)%4 != 0 {
		t.Fatalf("an option of %d bytes does not make a header of whole 8-byte units", len(opt))
	}
	f := append([]byte(nil), e[:hbh]...)
	f = append(f, e[hbh], byte(n/8-1), packet.IPv6OptPadN, 0)
	for range 5 {
		f = append(f, opt...)
	}
	f = append(f, e[hbh+hl:]...)
	binary.BigEndian.PutUint16(f[l3+4:], uint16(len(f)-hbh))
	k := kl.forward(t, h, f)
	if k == nil {
		t.Fatal("nothing came through the kernel")
	}
	l := h.run(f, 0, false, transit).data
	if len(k) != len(l) {
		t.Fatalf("kernel %d bytes, linerate %d", len(k), len(l))
	}
	skip := map[int]bool{}
	for j := range 5 {
		o := hbh + 4 + j*len(opt)
		tr := Trace(Option(k[o:]).Body())
		if tr.Overflow() || tr.RemainingLen() == len(tr.Data())/4 {
			t.Errorf("the kernel did not fill trace %d: % x", j+1, k[o:o+len(opt)])
		}
		node := o + 4 + TraceHeaderLen + tr.RemainingLen()*4
		for _, r := range kernelExempt(tt) {
			for i := r[0]; i < r[1]; i++ {
				skip[node+i] = true
			}
		}
	}
	var diffs []string
	for i := 12; i < len(k); i++ {
		if !skip[i] && k[i] != l[i] {
			diffs = append(diffs, fmt.Sprintf("@%d kernel %02x linerate %02x", i, k[i], l[i]))
		}
	}
	if len(diffs) > 0 {
		t.Errorf("differences:\n%s\nkernel   % x\nlinerate % x", strings.Join(diffs, "\n"), k[hbh:hbh+n], l[hbh:hbh+n])
	}
}
