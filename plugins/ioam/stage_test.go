package ioam

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/plugins"
	"github.com/linerate/linerate/plugins/stagetest"
)

// nodeKeys is the node config of test node k: ids k, namespace 123 with
// data, interface ids by port.
func nodeKeys(k int) string {
	return fmt.Sprintf(`
node_id = %d
node_id_wide = %d
timestamp = "posix"
egress_port = "eth1"
namespaces = [ { id = 123, data = %d, data_wide = %d } ]
interfaces = [ { port = "eth0", id = %d, id_wide = %d }, { port = "eth1", id = %d, id_wide = %d } ]
`, k, 0x100+k, 0xD0+k, 0xDD00+k, 10*k, 1000*k, 10*k+1, 1000*k+1)
}

func encapKeys(k int, mode, trace string) string {
	return nodeKeys(k) + fmt.Sprintf(`
mode = %q
src = "2001:db8:e::1"
dst = "2001:db8:d::1"
[[profiles]]
name = "all"
trace = %s
`, mode, trace)
}

// parsed checks that the engine's own parse of d agrees with the Layers
// record the stage left, when it left one.
func checkLayers(t *testing.T, p *packet.Packet) {
	t.Helper()
	if !p.LayersValid() {
		return
	}
	var want packet.Layers
	if err := packet.Parse(p.Data(), &want); err != nil {
		t.Fatalf("stage left a valid Layers record on a packet Parse rejects: %v", err)
	}
	if got := *p.Layers(); got != want {
		t.Errorf("Layers record\n got %+v\nwant %+v", got, want)
	}
}

// layersCheck is a stage that checks the Layers record of every packet.
type layersCheck struct{ t *testing.T }

func (c layersCheck) Process(ctx *plugins.Context, b *packet.Burst) {
	for i := 0; i < b.N; i++ {
		checkLayers(c.t, b.H[i].P())
	}
}

// parseStage parses every packet, as a classify stage before IOAM would.
type parseStage struct{}

func (parseStage) Process(ctx *plugins.Context, b *packet.Burst) {
	for i := 0; i < b.N; i++ {
		_, _ = b.H[i].P().ParseLayers()
	}
}

// hbhOptions returns the options header at off of d, and checks what the
// kernel's ip6_parse_tlv checks: TLVs end at the header's end, no more than
// 7 bytes of padding in a row, PadN data zero, IOAM options 4n-aligned
// relative to the IPv6 header at l3.
func kernelCheckHeader(t *testing.T, d []byte, l3, off int) {
	t.Helper()
	n := (int(d[off+1]) + 1) * 8
	h := d[off : off+n]
	pad := 0
	for i := 2; i < n; {
		if h[i] == 0 {
			pad++
			i++
		} else {
			if i+2 > n || i+2+int(h[i+1]) > n {
				t.Fatalf("option at %d runs past the header: % x", i, h)
			}
			ol := 2 + int(h[i+1])
			if h[i] == 1 {
				pad += ol
				for _, x := range h[i+2 : i+ol] {
					if x != 0 {
						t.Fatalf("PadN with nonzero data: % x", h)
					}
				}
			} else {
				pad = 0
				if IsIOAM(h[i]) && (off+i-l3)&3 != 0 {
					t.Fatalf("IOAM option at %d not 4n-aligned from the IPv6 header", off+i-l3)
				}
			}
			i += ol
		}
		if pad > 7 {
			t.Fatalf("more than 7 bytes of padding in a row: % x", h)
		}
	}
}

func TestEncapModeLayout(t *testing.T) {
	h := newHarness(t)
	enc := h.MustBuild("ioam.encap", encapKeys(1, "encap", `{ namespace = 123, type = "0xF00000", hops = 4 }`))
	in := buildFrame(t, frameSpec{payload: 100})
	r := h.run(in, 0, false, enc, layersCheck{t})
	d := r.data
	if r.dropped != "" {
		t.Fatalf("dropped: %s", r.dropped)
	}
	// Outer IPv6 (40) + HbH of 4 + 4 + 8 + 64 = 80 bytes.
	if len(d) != len(in)+40+80 {
		t.Fatalf("length %d, want %d", len(d), len(in)+120)
	}
	if !bytes.Equal(d[:14], in[:14]) {
		t.Error("Ethernet header changed")
	}
	outer := packet.IPv6(d[14:])
	inner := packet.IPv6(in[14:])
	if outer.TrafficClass() != inner.TrafficClass() || outer.FlowLabel() != inner.FlowLabel() || outer.HopLimit() != inner.HopLimit() {
		t.Error("outer header does not copy the inner's traffic class, flow label and hop limit")
	}
	if outer.NextHeader() != 0 || int(outer.PayloadLength()) != 80+len(in)-14 ||
		outer.SrcAddr().String() != "2001:db8:e::1" || outer.DstAddr().String() != "2001:db8:d::1" {
		t.Errorf("outer header: nh %d len %d %s → %s", outer.NextHeader(), outer.PayloadLength(), outer.SrcAddr(), outer.DstAddr())
	}
	hbh := d[54:134]
	wantHead := []byte{41, 9, 0x01, 0x00, 0x31, 74, 0x00, 0x00, 0, 123, 4 << 3, 16 - 4, 0xF0, 0, 0, 0}
	if !bytes.Equal(hbh[:16], wantHead) {
		t.Errorf("HbH head % x\n     want % x", hbh[:16], wantHead)
	}
	// The encapsulating node's data at the end of the pre-allocated space:
	// hop limit and id, interface ids (in: eth0 = 10, out: eth1 = 11), time.
	node := hbh[80-16:]
	if node[0] != 64 || binary.BigEndian.Uint32(node[0:])&0xFFFFFF != 1 ||
		binary.BigEndian.Uint16(node[4:]) != 10 || binary.BigEndian.Uint16(node[6:]) != 11 {
		t.Errorf("encap node data % x", node)
	}
	sec, us := binary.BigEndian.Uint32(node[8:]), binary.BigEndian.Uint32(node[12:])
	if int64(sec) != testSec || us != 0 {
		t.Errorf("timestamp %d.%06d, want the harness clock", sec, us)
	}
	if !bytes.Equal(hbh[16:80-16], make([]byte, 48)) {
		t.Error("free trace space not zero")
	}
	if !bytes.Equal(d[134:], in[14:]) {
		t.Error("inner packet changed")
	}
	kernelCheckHeader(t, d, 14, 54)
}

func TestInlineLayout(t *testing.T) {
	h := newHarness(t)
	enc := h.MustBuild("ioam.encap", encapKeys(1, "auto", `{ namespace = 123, type = "0xC00000", size = 12 }`))
	in := buildFrame(t, frameSpec{payload: 40})
	// auto: a local packet goes inline.
	r := h.run(in, 0, true, parseStage{}, enc, layersCheck{t})
	d := r.data
	// HbH: 4 + 4 + 8 + 12 = 28 → padded to 32 with a PadN of 2 (4 bytes) at the end.
	if len(d) != len(in)+32 {
		t.Fatalf("length %d, want %d", len(d), len(in)+32)
	}
	ip := packet.IPv6(d[14:])
	if ip.NextHeader() != 0 || int(ip.PayloadLength()) != len(in)-54+32 {
		t.Errorf("IPv6: nh %d len %d", ip.NextHeader(), ip.PayloadLength())
	}
	want := []byte{17, 3, 0x01, 0x00, 0x31, 22, 0, 0, 0, 123, 2 << 3, 1, 0xC0, 0, 0}
	if !bytes.Equal(d[54:69], want) {
		t.Errorf("HbH % x\nwant % x", d[54:69], want)
	}
	if !bytes.Equal(d[82:86], []byte{0x01, 0x02, 0, 0}) {
		t.Errorf("trailing pad % x", d[82:86])
	}
	kernelCheckHeader(t, d, 14, 54)
	if !bytes.Equal(d[86:], in[54:]) {
		t.Error("payload changed")
	}
	// A forwarded packet under auto goes in an outer header instead.
	r = h.run(in, 0, false, enc)
	if packet.IPv6(r.data[14:]).DstAddr().String() != "2001:db8:d::1" {
		t.Error("auto mode did not encapsulate a forwarded packet")
	}
	// inline without inline_transit leaves forwarded packets alone.
	h2 := newHarness(t)
	enc2 := h2.MustBuild("ioam.encap", encapKeys(1, "inline", `{ namespace = 123, type = "0xC00000", size = 12 }`))
	r = h2.run(in, 0, false, enc2)
	if !bytes.Equal(r.data, in) || h2.Counter("not_local") != 1 {
		t.Error("inline touched a forwarded packet without inline_transit")
	}
}

// An existing Hop-by-Hop header grows; its Router Alert keeps its place and
// alignment.
func TestInlineGrowsHopByHop(t *testing.T) {
	h := newHarness(t)
	enc := h.MustBuild("ioam.encap", encapKeys(1, "inline", `{ namespace = 123, type = "0xF00000", size = 16 }`)+
		"\n[profiles.e2e]\nnamespace = 123\ntype = \"0xF000\"\n")
	ra := []byte{0, 0, 0x05, 0x02, 0x00, 0x00, 0x01, 0x00}
	in := buildFrame(t, frameSpec{payload: 30, ext: [][]byte{ra}, extTypes: []uint8{0}})
	r := h.run(in, 0, true, enc)
	d := r.data
	var l packet.Layers
	if err := packet.Parse(d, &l); err != nil {
		t.Fatal(err)
	}
	if l.HopByHop != 54 || l.DestOpts2 == 0 || l.Flags&packet.FlagUDP == 0 {
		t.Fatalf("layers %+v", l)
	}
	if !bytes.Equal(d[56:60], ra[2:6]) {
		t.Errorf("router alert moved: % x", d[54:64])
	}
	kernelCheckHeader(t, d, 14, 54)
	kernelCheckHeader(t, d, 14, int(l.DestOpts2))
	var s scan
	if err := scanPacket(d, 14, &s); err != nil {
		t.Fatal(err)
	}
	if s.nTrace != 1 || s.e2e == 0 || !s.hbhMore {
		t.Errorf("scan %+v", s)
	}
	if l.UDPChecksum(d) != packet.UDP(d[l.L4:]).Checksum() {
		t.Error("UDP checksum no longer valid")
	}
	// decap gives back the original.
	dec := h.MustBuild("ioam.decap", nodeKeys(9))
	r = h.run(d, 0, false, dec)
	if !bytes.Equal(r.data, in) {
		t.Errorf("decap did not restore the packet\n got % x\nwant % x", r.data, in)
	}
}

// A path encap → transit → transit → decap: each node's data in its place,
// then the packet as it was.
func TestPath(t *testing.T) {
	for _, mode := range []string{"encap", "inline"} {
		for _, opt := range []string{"preallocated", "incremental"} {
			t.Run(mode+"/"+opt, func(t *testing.T) {
				h := newHarness(t)
				trace := fmt.Sprintf(`{ namespace = 123, type = "0xFC0000", option = %q, hops = 5 }`, opt)
				enc := h.MustBuild("ioam.encap", encapKeys(1, mode, trace))
				t1 := h.MustBuild("ioam.transit", nodeKeys(2))
				t2 := h.MustBuild("ioam.transit", nodeKeys(3)+"decrement_hop_limit = true\n")
				dec := h.MustBuild("ioam.decap", nodeKeys(4)+"export = true\n")
				in := buildFrame(t, frameSpec{payload: 200, hopLimit: 50})
				r := h.run(in, 0, true, enc, layersCheck{t}, t1, layersCheck{t}, t2, layersCheck{t}, dec)
				want := append([]byte(nil), in...)
				if mode == "inline" {
					want[14+7]-- // the second transit routes
				}
				if !bytes.Equal(r.data, want) {
					t.Fatalf("decap output differs from the input\n got % x\nwant % x", r.data, want)
				}
				recs := drainRecords(t, dec)
				if len(recs) != 1 {
					t.Fatalf("%d records", len(recs))
				}
				hops := recs[0].Hops()
				if len(hops) != 4 {
					t.Fatalf("%d hops: %+v", len(hops), hops)
				}
				hl := []uint8{50, 50, 49, 49}
				for i, hop := range hops {
					k := i + 1
					if hop.NodeID != uint32(k) || hop.HopLimit != hl[i] || hop.IngressIf != uint16(10*k) || hop.EgressIf != uint16(10*k+1) ||
						hop.NamespaceData != uint32(0xD0+k) {
						t.Errorf("hop %d: %+v", i, hop.Node)
					}
				}
				if recs[0].TraceNS != 123 || recs[0].TraceType != 0xFC0000 || recs[0].NodeLen != 6 {
					t.Errorf("record header %+v", recs[0])
				}
				if h.Counter("filled") != 2 {
					t.Errorf("filled %d", h.Counter("filled"))
				}
			})
		}
	}
}

// drainRecords takes what a stage exported, without its goroutine.
func drainRecords(t *testing.T, st plugins.Stage) []Record {
	t.Helper()
	rs, ok := st.(recordStage)
	if !ok || rs.exporterOf() == nil {
		t.Fatal("stage has no export")
	}
	buf := make([]Record, 64)
	var out []Record
	for _, r := range rs.exporterOf().rings {
		n := r.Drain(buf)
		out = append(out, buf[:n]...)
	}
	return out
}

func TestOverflowAndUnknownNamespace(t *testing.T) {
	h := newHarness(t)
	enc := h.MustBuild("ioam.encap", encapKeys(1, "encap", `{ namespace = 123, type = "0x800000", hops = 2 }`))
	t1 := h.MustBuild("ioam.transit", nodeKeys(2))
	t2 := h.MustBuild("ioam.transit", nodeKeys(3))
	in := buildFrame(t, frameSpec{payload: 20})
	afterEnc := h.run(in, 0, false, enc).data
	afterT1 := h.run(afterEnc, 0, false, t1).data
	afterT2 := h.run(afterT1, 0, false, t2).data
	tr := Trace(Option(afterT2[14+40+4:]).Body())
	if !tr.Overflow() || tr.RemainingLen() != 0 {
		t.Errorf("third node: O %v rem %d", tr.Overflow(), tr.RemainingLen())
	}
	if !bytes.Equal(afterT2[14+40+4+12:], afterT1[14+40+4+12:]) {
		t.Error("the node without room wrote data")
	}
	if h.Counter("overflow") != 1 {
		t.Errorf("overflow counter %d", h.Counter("overflow"))
	}
	// A node that knows only namespace 0 leaves namespace 123 alone.
	h2 := newHarness(t)
	other := h2.MustBuild("ioam.transit", "node_id = 77\n")
	r := h2.run(afterEnc, 0, false, other)
	if !bytes.Equal(r.data, afterEnc) || h2.Counter("unknown_namespace") != 1 {
		t.Error("unknown namespace touched")
	}
}

// Namespace 0 is known to every node, with the node's top-level ids.
func TestNamespaceZero(t *testing.T) {
	h := newHarness(t)
	enc := h.MustBuild("ioam.encap", "node_id = 1\nmode = \"inline\"\n[[profiles]]\ntrace = { namespace = 0, type = \"0x800000\", hops = 3 }\n")
	tr := h.MustBuild("ioam.transit", "node_id = 2\n")
	dec := h.MustBuild("ioam.decap", "node_id = 3\nexport = true\n")
	h.run(buildFrame(t, frameSpec{}), 0, true, enc, tr, dec)
	recs := drainRecords(t, dec)
	if len(recs) != 1 {
		t.Fatal("no record")
	}
	var ids []uint32
	for _, hop := range recs[0].Hops() {
		ids = append(ids, hop.NodeID)
	}
	if !reflect.DeepEqual(ids, []uint32{1, 2, 3}) {
		t.Errorf("node ids %v", ids)
	}
}

// Malformed IOAM options are dropped with a reason that names the fault.
func TestMalformedDrops(t *testing.T) {
	h := newHarness(t)
	enc := h.MustBuild("ioam.encap", encapKeys(1, "inline", `{ namespace = 123, type = "0xF00000", hops = 2 }`))
	good := h.run(buildFrame(t, frameSpec{payload: 40}), 0, true, enc).data
	const hbh, opt = 54, 58 // the HbH header and the trace option
	for _, c := range []struct {
		name   string
		mutate func(d []byte) []byte
		reason string
	}{
		{"nodelen below the trace type", func(d []byte) []byte { d[opt+6] = 3<<3 | d[opt+6]&7; return d }, "ioam_bad_length"},
		{"remaining beyond the data", func(d []byte) []byte { d[opt+7] = 0x7F; return d }, "ioam_bad_length"},
		{"option runs past the header", func(d []byte) []byte { d[opt+1] = 200; return d }, "ioam_truncated"},
		{"option data too short for a trace", func(d []byte) []byte {
			// Opt Data Len 8: a 6-byte trace header, then padding to the end.
			d[opt+1] = 8
			putPad(d[opt+10 : hbh+(int(d[hbh+1])+1)*8])
			return d
		}, "ioam_truncated"},
		{"HbH beyond the packet", func(d []byte) []byte { d[hbh+1] = 100; return d }, "ioam_hbh_too_long"},
		{"trace data beyond 244 bytes", func(d []byte) []byte {
			// 245 bytes of data: Opt Data Len 255, the most it can say.
			return bigTrace(t, 245)
		}, "ioam_option_too_long"},
		{"misaligned", func(d []byte) []byte {
			d[hbh+2], d[hbh+3] = 0x00, 0x00 // Pad1, Pad1 keeps the length
			return misalign(t, d)
		}, "ioam_misaligned"},
		{"IPv6 payload beyond the frame", func(d []byte) []byte { return d[:len(d)-10] }, "ioam_hbh_too_long"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := c.mutate(append([]byte(nil), good...))
			for _, kind := range []string{"ioam.transit", "ioam.decap"} {
				st := h.MustBuild(kind, nodeKeys(2))
				r := h.run(d, 0, false, st)
				if r.dropped != c.reason {
					t.Errorf("%s: %q, want %q", kind, r.dropped, c.reason)
				}
			}
		})
	}
}

// bigTrace is a frame whose trace option carries n bytes of data.
func bigTrace(t *testing.T, n int) []byte {
	body := make([]byte, TraceHeaderLen+n)
	Trace(body).Encode(123, 0x800000, 0, 0)
	opt := appendOption(nil, OptionTypeChanging, TypePreallocatedTrace, body)
	hdr := make([]byte, freshHeaderLen(len(opt)))
	putFreshHeader(hdr, 0, opt)
	return buildFrame(t, frameSpec{ext: [][]byte{hdr}, extTypes: []uint8{0}, payload: 10})
}

// misalign is a frame whose trace option starts 3 bytes into its header,
// after a Pad1: 43 bytes from the IPv6 header.
func misalign(t *testing.T, _ []byte) []byte {
	body := make([]byte, TraceHeaderLen+8)
	Trace(body).Encode(123, 0x800000, 0, 2)
	opt := appendOption(nil, OptionTypeChanging, TypePreallocatedTrace, body)
	hdr := make([]byte, (3+len(opt)+7)&^7)
	hdr[1] = uint8(len(hdr)/8 - 1)
	hdr[2] = packet.IPv6OptPad1
	copy(hdr[3:], opt)
	putPad(hdr[3+len(opt):])
	return buildFrame(t, frameSpec{ext: [][]byte{hdr}, extTypes: []uint8{0}, payload: 10})
}

func TestIncrementalGrowth(t *testing.T) {
	h := newHarness(t)
	// 0xC00000 is 8 bytes per node: each transit adds a word pair and the
	// header re-pads to 8n.
	enc := h.MustBuild("ioam.encap", encapKeys(1, "inline", `{ namespace = 123, type = "0xE00000", option = "incremental", hops = 3 }`))
	t1 := h.MustBuild("ioam.transit", nodeKeys(2))
	t2 := h.MustBuild("ioam.transit", nodeKeys(3))
	t3 := h.MustBuild("ioam.transit", nodeKeys(4))
	in := buildFrame(t, frameSpec{payload: 64})
	d := h.run(in, 0, true, enc).data
	for k, st := range []plugins.Stage{t1, t2, t3} {
		d = h.run(d, 0, false, st).data
		var l packet.Layers
		if err := packet.Parse(d, &l); err != nil {
			t.Fatalf("after transit %d: %v", k+1, err)
		}
		kernelCheckHeader(t, d, 14, 54)
		tr := Trace(Option(d[58:]).Body())
		if err := tr.Validate(true); err != nil {
			t.Fatal(err)
		}
		nodes := 2 + k
		if k == 2 {
			nodes = 3 // the fourth node finds no room
			if !tr.Overflow() {
				t.Error("no overflow on the fourth node")
			}
		}
		if len(tr.Data()) != nodes*12 {
			t.Errorf("after transit %d: %d bytes of data, want %d", k+1, len(tr.Data()), nodes*12)
		}
		// Newest first.
		if id := binary.BigEndian.Uint32(tr.Data()) & 0xFFFFFF; k < 2 && id != uint32(k+2) {
			t.Errorf("after transit %d: first node id %d", k+1, id)
		}
		if l.UDPChecksum(d) != packet.UDP(d[l.L4:]).Checksum() {
			t.Error("UDP checksum broken")
		}
	}
}

// potKeyFiles deals one secret's POT shares to three nodes (seeded) and
// writes each node's key file: encap, transit, decap.
func potKeyFiles(tb testing.TB) []string {
	tb.Helper()
	dir := tb.TempDir()
	keys, err := DealPOT(3, 0xFFFFFFFFFFFFFFC5, rand.New(rand.NewPCG(3, 4)))
	if err != nil {
		tb.Fatal(err)
	}
	var files []string
	for i := range keys {
		f := filepath.Join(dir, fmt.Sprintf("node%d.toml", i))
		if err := WritePOTKey(f, &keys[i]); err != nil {
			tb.Fatal(err)
		}
		files = append(files, f)
	}
	return files
}

// POT: encapsulating node, transit and verifier hold the shares of one
// secret; the verifier accepts the full path and refuses one that skipped the
// transit.
func TestPOTPath(t *testing.T) {
	files := potKeyFiles(t)
	h := newHarness(t)
	enc := h.MustBuild("ioam.encap", encapKeys(1, "encap", `{ namespace = 123, type = "0x800000", hops = 3 }`)+
		fmt.Sprintf("pot = { namespace = 123, key_file = %q }\n", files[0]))
	tr := h.MustBuild("ioam.transit", nodeKeys(2)+fmt.Sprintf("pot = [ { namespace = 123, key_file = %q } ]\n", files[1]))
	dec := h.MustBuild("ioam.decap", nodeKeys(3)+"export = true\n"+fmt.Sprintf("pot = [ { namespace = 123, key_file = %q } ]\n", files[2]))
	in := buildFrame(t, frameSpec{payload: 10})
	for range 20 {
		h.run(in, 0, false, enc, tr, dec)
	}
	h.run(in, 0, false, enc, dec)
	if v, iv := h.Counter("pot_valid"), h.Counter("pot_invalid"); v != 20 || iv != 1 {
		t.Errorf("pot_valid %d pot_invalid %d, want 20 and 1", v, iv)
	}
	recs := drainRecords(t, dec)
	if len(recs) != 21 || recs[0].POTResult != POTValid || recs[20].POTResult != POTInvalid || recs[0].POTNS != 123 {
		t.Errorf("records: %d, first %d last %d", len(recs), recs[0].POTResult, recs[len(recs)-1].POTResult)
	}
}

func TestE2EAndDEXPath(t *testing.T) {
	h := newHarness(t)
	enc := h.MustBuild("ioam.encap", nodeKeys(1)+`
mode = "encap"
src = "2001:db8:e::1"
dst = "2001:db8:d::1"
[[profiles]]
e2e = { namespace = 123, type = "0xF000" }
dex = { namespace = 123, type = "0xC00000", flow_id = 42, sequence = true }
`)
	tr := h.MustBuild("ioam.transit", nodeKeys(2)+"export = true\n")
	dec := h.MustBuild("ioam.decap", nodeKeys(3)+"export = true\n")
	in := buildFrame(t, frameSpec{payload: 10})
	for i := range 3 {
		h.Clock.Set(testStart + int64(i)*int64(time.Millisecond))
		r := h.run(in, 0, false, enc, tr, dec)
		if !bytes.Equal(r.data, in) {
			t.Fatalf("packet %d not restored", i)
		}
	}
	recs := drainRecords(t, dec)
	if len(recs) != 3 {
		t.Fatalf("%d records", len(recs))
	}
	for i, r := range recs {
		if r.Have&HaveE2E == 0 || r.E2E.Seq64 != uint64(i) || r.E2E.Seq32 != uint32(i) || r.E2ENS != 123 {
			t.Errorf("record %d E2E %+v", i, r.E2E)
		}
		wantUs := uint32(i * 1000)
		if int64(r.E2E.Seconds) != testSec || r.E2E.Fraction != wantUs {
			t.Errorf("record %d E2E time %d.%06d", i, r.E2E.Seconds, r.E2E.Fraction)
		}
		if r.Have&HaveDEX == 0 || r.DEXFlow != 42 || r.DEXSeq != uint32(i) || r.DEXType != 0xC00000 {
			t.Errorf("record %d DEX %+v", i, r)
		}
	}
	dex := drainRecords(t, tr)
	if len(dex) != 3 || dex[2].Role != RoleTransit || dex[2].DEXSeq != 2 {
		t.Fatalf("transit DEX records: %d", len(dex))
	}
	hops := dex[0].Hops()
	if len(hops) != 1 || hops[0].NodeID != 2 || hops[0].IngressIf != 20 {
		t.Errorf("DEX node data %+v", hops)
	}
	line, err := recs[1].MarshalLine("dec")
	if err != nil || !strings.Contains(string(line), `"seq64":1`) || !strings.Contains(string(line), `"flow_id":42`) {
		t.Errorf("JSON line %s (%v)", line, err)
	}
}

// Per-hop and end-to-end delays from the trace timestamps land in the
// histograms.
func TestDelayHistograms(t *testing.T) {
	h := newHarness(t)
	enc := h.MustBuild("ioam.encap", encapKeys(1, "encap", `{ namespace = 123, type = "0x300000", hops = 4 }`))
	t1 := h.MustBuild("ioam.transit", nodeKeys(2))
	t2 := h.MustBuild("ioam.transit", nodeKeys(3))
	dec := h.MustBuild("ioam.decap", nodeKeys(4))
	in := buildFrame(t, frameSpec{payload: 10})
	d := h.run(in, 0, false, enc).data
	h.Clock.Advance(1 * time.Millisecond)
	d = h.run(d, 0, false, t1).data
	h.Clock.Advance(2 * time.Millisecond)
	d = h.run(d, 0, false, t2).data
	h.Clock.Advance(3 * time.Millisecond)
	h.run(d, 0, false, dec)
	for name, want := range map[string]uint64{"hop1_delay": 1e6, "hop2_delay": 2e6, "hop3_delay": 3e6, "e2e_delay": 6e6} {
		s := h.Hist(name)
		if s.Count != 1 || s.Max < want*99/100 || s.Max > want*101/100 {
			t.Errorf("%s: n=%d max %d, want %d", name, s.Count, s.Max, want)
		}
	}
}

func TestLoopback(t *testing.T) {
	h := newHarness(t)
	enc := h.MustBuild("ioam.encap", "export = true\n"+encapKeys(1, "encap", `{ namespace = 123, type = "0xC00000", hops = 4, loopback = true }`))
	tr := h.MustBuild("ioam.transit", nodeKeys(2)+"loopback = true\nloopback_src = \"2001:db8:7::2\"\n")
	dec := h.MustBuild("ioam.decap", nodeKeys(3)+"loopback = true\n")
	in := buildFrame(t, frameSpec{payload: 500})
	r := h.run(in, 0, false, enc, tr, dec)
	if !bytes.Equal(r.data, in) {
		t.Fatal("the data packet did not go on unchanged")
	}
	if len(h.Env.Emitted) != 2 {
		t.Fatalf("%d looped-back copies, want 2", len(h.Env.Emitted))
	}
	c := h.Env.Emitted[0].H.P().Data()
	ip := packet.IPv6(c[14:])
	if ip.DstAddr().String() != "2001:db8:e::1" || ip.SrcAddr().String() != "2001:db8:7::2" || len(c) != 14+40+(int(c[55])+1)*8 {
		t.Errorf("copy: %s → %s, %d bytes", ip.SrcAddr(), ip.DstAddr(), len(c))
	}
	if c[54] != packet.ProtocolNoNext || Trace(Option(c[58:]).Body()).Loopback() {
		t.Error("copy: next header or L flag")
	}
	// The copies come home to the encapsulating node, which ends them.
	var recs int
	for _, e := range h.Env.TakeEmitted() {
		if h.run(stagetest.TakeData(e.H), 1, false, enc).dropped == "consumed" {
			recs++
		}
	}
	if recs != 2 || h.Counter("loopback_received") != 2 {
		t.Errorf("loopback_received %d", h.Counter("loopback_received"))
	}
	got := drainRecords(t, enc)
	if len(got) != 2 || got[0].Role != RoleLoopback || len(got[0].Hops()) != 2 || len(got[1].Hops()) != 3 {
		t.Errorf("loopback records: %d", len(got))
	}
}

// An incremental trace grows in front of a POT and a DEX option: they move,
// keep their 4n alignment, and still verify and decode downstream.
func TestIncrementalBeforeOtherOptions(t *testing.T) {
	dir := t.TempDir()
	keys, err := DealPOT(3, 0xFFFFFFFFFFFFFFC5, rand.New(rand.NewPCG(9, 9)))
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for i := range keys {
		f := filepath.Join(dir, fmt.Sprintf("k%d.toml", i))
		if err := WritePOTKey(f, &keys[i]); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	h := newHarness(t)
	for _, mode := range []string{"inline", "encap"} {
		enc := h.MustBuild("ioam.encap", encapKeys(1, mode, `{ namespace = 123, type = "0xD00000", option = "incremental", hops = 4 }`)+
			fmt.Sprintf("pot = { namespace = 123, key_file = %q }\n", files[0])+
			"dex = { namespace = 123, type = \"0x800000\", flow_id = 5, sequence = true }\n")
		tr := h.MustBuild("ioam.transit", nodeKeys(2)+fmt.Sprintf("pot = [ { namespace = 123, key_file = %q } ]\n", files[1]))
		dec := h.MustBuild("ioam.decap", nodeKeys(3)+"export = true\n"+fmt.Sprintf("pot = [ { namespace = 123, key_file = %q } ]\n", files[2]))
		in := buildFrame(t, frameSpec{payload: 33})
		mid := h.run(in, 0, true, enc, tr).data
		kernelCheckHeader(t, mid, 14, 54)
		var s scan
		if err := scanPacket(mid, 14, &s); err != nil || s.nTrace != 1 || s.pot == 0 || s.dex == 0 {
			t.Fatalf("%s: after transit: %v %+v", mode, err, s)
		}
		out := h.run(mid, 0, false, dec).data
		if !bytes.Equal(out, in) {
			t.Errorf("%s: not restored\n got % x\nwant % x", mode, out, in)
		}
		recs := drainRecords(t, dec)
		if len(recs) != 1 || recs[0].POTResult != POTValid || recs[0].DEXFlow != 5 || len(recs[0].Hops()) != 3 {
			t.Errorf("%s: record %+v", mode, recs)
		}
	}
}

// Inline encap grows a Hop-by-Hop header the packet has only when it is well
// formed: one whose option runs past it (which the kernel would drop), or
// which runs past the packet, is dropped with a reason that says so, and so is
// a Destination Options header the E2E option would grow.
func TestInlineRefusesMalformedHeader(t *testing.T) {
	h := newHarness(t)
	enc := h.MustBuild("ioam.encap", encapKeys(1, "inline", `{ namespace = 123, type = "0xC00000", hops = 2 }`))
	encE2E := h.MustBuildNamed("ioam.encap", "e2e", encapKeys(1, "inline", `{ namespace = 123, type = "0xC00000", hops = 2 }`)+
		"e2e = { namespace = 123, type = \"0x8000\" }\n")
	ra := []byte{0, 0, 0x05, 0x02, 0x00, 0x00, 0x01, 0x00}
	overrun := []byte{0, 0, 0x05, 0x07, 0x00, 0x00, 0x01, 0x00} // Router Alert of 7 bytes in a header of 8
	for _, c := range []struct {
		name   string
		st     plugins.Stage
		frame  []byte
		reason string
	}{
		{"well formed", enc, buildFrame(t, frameSpec{payload: 20, ext: [][]byte{ra}, extTypes: []uint8{0}}), ""},
		{"option past the Hop-by-Hop header", enc, buildFrame(t, frameSpec{payload: 20, ext: [][]byte{overrun}, extTypes: []uint8{0}}),
			"ioam_option_overrun"},
		{"Hop-by-Hop header past the packet", enc, func() []byte {
			d := buildFrame(t, frameSpec{payload: 0, ext: [][]byte{ra}, extTypes: []uint8{0}})
			d[55] = 2 // 24 bytes, where 16 are left
			return d
		}(), "ioam_hbh_too_long"},
		{"option past the Destination Options header", encE2E,
			buildFrame(t, frameSpec{payload: 20, ext: [][]byte{ra, overrun}, extTypes: []uint8{0, packet.ProtocolDestOpts}}),
			"ioam_option_overrun"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := h.run(c.frame, 0, true, c.st)
			if r.dropped != c.reason {
				t.Fatalf("%q, want %q", r.dropped, c.reason)
			}
			if c.reason == "" {
				kernelCheckHeader(t, r.data, 14, 54)
			}
		})
	}
}

// Loopback at the default rate answers a whole burst of packets with the L
// flag (up to an rx burst back to back), then 1000 copies a second; with a
// loopback_burst of its own, that many.
func TestLoopbackBurst(t *testing.T) {
	for _, c := range []struct {
		keys        string
		first, more int // sent of 2×64 at once, and of 64 after 10 ms
	}{
		{"", 64, 10},
		{"loopback_burst = 5\n", 5, 5}, // 10 ms refill 10, but 5 at most
		{"loopback_rate = \"100pps\"\nloopback_burst = 1\n", 1, 1},
	} {
		t.Run(c.keys, func(t *testing.T) {
			h := newHarness(t)
			enc := h.MustBuild("ioam.encap", encapKeys(1, "encap", `{ namespace = 123, type = "0xC00000", hops = 3, loopback = true }`))
			tr := h.MustBuild("ioam.transit", nodeKeys(2)+"loopback = true\n"+c.keys)
			frame := h.run(buildFrame(t, frameSpec{payload: 20}), 0, false, enc).data
			send := func(n int) int {
				b := &packet.Burst{}
				for range n {
					b.Push(h.Pkt(frame, 0))
				}
				h.runBurst(b, tr)
				em := h.Env.TakeEmitted()
				stagetest.FreeSent(em)
				return len(em)
			}
			// A burst of five: every one answered.
			if n := send(5); n != min(5, c.first) {
				t.Fatalf("a burst of 5 got %d copies, want %d", n, min(5, c.first))
			}
			h.Clock.Advance(time.Second) // the bucket refills
			if n := send(64) + send(64); n != c.first {
				t.Errorf("two bursts of 64 at once got %d copies, want %d", n, c.first)
			}
			h.Clock.Advance(10 * time.Millisecond)
			if n := send(64); n != c.more {
				t.Errorf("64 more after 10 ms got %d copies, want %d", n, c.more)
			}
			if sent, limited := h.Counter("loopback_sent"), h.Counter("loopback_limited"); sent+limited != 5+3*64 {
				t.Errorf("loopback_sent %d + loopback_limited %d, want %d", sent, limited, 5+3*64)
			}
		})
	}
}

// A trace without hops or size is refused with what to set, not "size 0".
func TestTraceNeedsHopsOrSize(t *testing.T) {
	h := newHarness(t)
	_, err := h.Build("ioam.encap", encapKeys(1, "encap", `{ namespace = 123, type = "0xF00000" }`))
	if err == nil || !strings.Contains(err.Error(), "trace needs hops") || !strings.Contains(err.Error(), "or size") {
		t.Errorf("error %v", err)
	}
	if _, err := h.Build("ioam.encap", encapKeys(1, "encap", `{ namespace = 123, type = "0xF00000", hops = -1 }`)); err == nil {
		t.Error("negative hops accepted")
	}
}
