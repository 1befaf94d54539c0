package ioam

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/appliance/stats"
	"github.com/linerate/linerate/plugins"
)

// The quick paths (encap.quick, transit.quickRun, decap.quick, and the layout
// each stage remembers) must do exactly what the general per-packet path
// does: the same bytes, verdicts, parse records, scratch and counters. These
// tests run one stage instance through Process and a twin forced down the
// general path, over bursts that mix the common case with every way out of it.

// forceGeneral sets the test hook that sends every packet of st, an IOAM
// stage, down the general path.
func forceGeneral(st plugins.Stage) plugins.Stage {
	switch s := st.(type) {
	case *encap:
		s.general = true
	case *transit:
		s.general = true
	case *decap:
		s.general = true
	default:
		panic(fmt.Sprintf("forceGeneral: %T", st))
	}
	return st
}

// counterValues are the stage's counters and, for encap, its profiles'
// counters and sequence numbers, in field order.
func counterValues(st plugins.Stage) []uint64 {
	var out []uint64
	ctr := reflect.TypeOf((*stats.Counter)(nil))
	walk := func(v reflect.Value) {
		for i := range v.NumField() {
			f := v.Field(i)
			if f.Type() == ctr && !f.IsNil() {
				out = append(out, (*stats.Counter)(unsafe.Pointer(f.Pointer())).Local())
			}
		}
	}
	v := reflect.ValueOf(st).Elem()
	walk(v)
	if e, ok := st.(*encap); ok {
		for _, pr := range e.defaults {
			walk(reflect.ValueOf(pr).Elem())
			out = append(out, pr.seq)
		}
	}
	return out
}

type outcome struct {
	data    []byte
	verdict packet.Verdict
	reason  packet.Reason
	layers  *packet.Layers
	scratch *scratch
}

func outcomes(b *packet.Burst) []outcome {
	out := make([]outcome, b.N)
	for i := range b.N {
		p := b.H[i].P()
		out[i] = outcome{data: append([]byte(nil), p.Data()...), verdict: p.Verdict(), reason: p.Reason}
		if p.LayersValid() {
			l, c := *p.Layers(), *scratchOf(p)
			out[i].layers, out[i].scratch = &l, &c
		}
	}
	return out
}

// frameIn is a test frame, the port it arrives on, and how it is given.
type frameIn struct {
	name   string
	data   []byte
	port   uint16
	local  bool
	parsed bool // with the engine's parse record
}

// compareQuick runs frames, as one burst twice over, through a and b (twins;
// b takes the general path) and reports any difference.
func compareQuick(t *testing.T, h *harness, a, b plugins.Stage, frames []frameIn) {
	t.Helper()
	forceGeneral(b)
	for round := range 2 {
		var ba, bb packet.Burst
		for _, f := range frames {
			for _, bu := range []*packet.Burst{&ba, &bb} {
				hd := h.Pkt(f.data, f.port)
				if f.local {
					hd.P().SetFlag(packet.FlagLocal)
				}
				if f.parsed {
					if _, err := hd.P().ParseLayers(); err != nil {
						t.Fatalf("%s: %v", f.name, err)
					}
				}
				bu.Push(hd)
			}
		}
		a.Process(&h.Ctx, &ba)
		b.Process(&h.Ctx, &bb)
		oa, ob := outcomes(&ba), outcomes(&bb)
		for i := range oa {
			x, y := oa[i], ob[i]
			name := fmt.Sprintf("round %d, %s", round, frames[i].name)
			if !bytes.Equal(x.data, y.data) {
				t.Errorf("%s: bytes\nquick   %x\ngeneral %x", name, x.data, y.data)
			}
			if x.verdict != y.verdict || x.reason != y.reason {
				t.Errorf("%s: verdict %v %s, general %v %s", name, x.verdict, x.reason, y.verdict, y.reason)
			}
			if (x.layers == nil) != (y.layers == nil) || x.layers != nil && (*x.layers != *y.layers || *x.scratch != *y.scratch) {
				t.Errorf("%s: parse record or scratch differ\nquick   %+v %+v\ngeneral %+v %+v", name, x.layers, x.scratch, y.layers, y.scratch)
			}
		}
		if ca, cb := counterValues(a), counterValues(b); !reflect.DeepEqual(ca, cb) {
			t.Errorf("round %d: counters %v, general %v", round, ca, cb)
		}
		ba.N, bb.N = len(frames), len(frames)
		packet.Free(&ba)
		packet.Free(&bb)
	}
}

var quickTypes = []uint32{0x800000, 0xC00000, 0xF00000, 0x00E000, 0xFFF002}

// plainFrames are frames before encapsulation: the common case and its
// neighbours.
func plainFrames(t *testing.T) []frameIn {
	return []frameIn{
		{name: "66B", data: buildFrame(t, frameSpec{payload: 4})},
		{name: "1500B port1", data: buildFrame(t, frameSpec{payload: 1400}), port: 1},
		{name: "port2", data: buildFrame(t, frameSpec{payload: 100}), port: 2},
		{name: "local", data: buildFrame(t, frameSpec{payload: 100}), local: true},
		{name: "parsed", data: buildFrame(t, frameSpec{payload: 100}), parsed: true},
		{name: "vlan", data: buildFrame(t, frameSpec{payload: 100, vlan: 7})},
		{name: "too big for the MTU", data: buildFrame(t, frameSpec{payload: 1490})},
		{name: "hop limit 1", data: buildFrame(t, frameSpec{payload: 40, hopLimit: 1}), port: 1},
		{name: "port0 again", data: buildFrame(t, frameSpec{payload: 10})},
	}
}

func TestQuickEncap(t *testing.T) {
	for _, tt := range quickTypes {
		for _, mode := range []string{"encap", "auto", "inline"} {
			for _, extra := range []string{"", "hop_limit = 9\n"} {
				t.Run(fmt.Sprintf("%#06x/%s/%q", tt, mode, extra), func(t *testing.T) {
					h := newHarness(t)
					keys := strings.Replace(encapKeys(1, mode, fmt.Sprintf(`{ namespace = 123, type = "%#06x", hops = 3 }`, tt)), "[[profiles]]", extra+"[[profiles]]", 1)
					a := h.MustBuildNamed("ioam.encap", "a", keys)
					b := h.MustBuildNamed("ioam.encap", "b", keys)
					compareQuick(t, h, a, b, plainFrames(t))
				})
			}
		}
	}
}

// encapsulated are frames after an encapsulating node of trace type tt, with
// variants: a full trace, the L and O flags, an unknown namespace, a bad
// RemainingLen, a VLAN tag, a parse record.
func encapsulated(t *testing.T, h *harness, tt uint32) []frameIn {
	enc := h.MustBuildNamed("ioam.encap", "enc", encapKeys(1, "encap", fmt.Sprintf(`{ namespace = 123, type = "%#06x", hops = 3 }`, tt)))
	encL := h.MustBuildNamed("ioam.encap", "encL", encapKeys(1, "encap", fmt.Sprintf(`{ namespace = 123, type = "%#06x", hops = 3, loopback = true }`, tt)))
	var out []frameIn
	for _, f := range plainFrames(t) {
		if f.local || f.name == "too big for the MTU" {
			continue
		}
		r := h.run(f.data, 0, false, enc)
		if r.data == nil {
			t.Fatalf("%s: encap: %s", f.name, r.dropped)
		}
		f.data = r.data
		out = append(out, f)
	}
	base := out[0].data
	const tr = 14 + packet.IPv6Len + 4 + OptionHeaderLen // the trace header
	mod := func(name string, port uint16, fn func(d []byte)) {
		d := append([]byte(nil), base...)
		fn(d)
		out = append(out, frameIn{name: name, data: d, port: port})
	}
	mod("full", 1, func(d []byte) { d[tr+3] &^= 0x7F })
	mod("overflow", 0, func(d []byte) { d[tr+2] |= 0x04 })
	mod("loopback flag", 2, func(d []byte) { d[tr+2] |= 0x02 })
	mod("active flag", 0, func(d []byte) { d[tr+2] |= 0x01 })
	mod("unknown namespace", 0, func(d []byte) { binary.BigEndian.PutUint16(d[tr:], 7) })
	mod("RemainingLen beyond the data", 0, func(d []byte) { d[tr+3] |= 0x7F })
	mod("payload length short", 0, func(d []byte) { binary.BigEndian.PutUint16(d[14+4:], 8) })
	mod("inner hop limit 2", 1, func(d []byte) { d[14+7] = 2 })
	if r := h.run(buildFrame(t, frameSpec{payload: 60}), 0, false, encL); r.data != nil {
		out = append(out, frameIn{name: "loopback profile", data: r.data, port: 1})
	}
	out = append(out, frameIn{name: "not encapsulated", data: buildFrame(t, frameSpec{payload: 60})})
	out = append(out, frameIn{name: "66B again", data: base, port: 2})
	return out
}

func TestQuickTransit(t *testing.T) {
	for _, tt := range quickTypes {
		for _, extra := range []string{"", "decrement_hop_limit = true\n"} {
			t.Run(fmt.Sprintf("%#06x/%q", tt, extra), func(t *testing.T) {
				h := newHarness(t)
				frames := encapsulated(t, h, tt)
				a := h.MustBuildNamed("ioam.transit", "a", nodeKeys(2)+extra)
				b := h.MustBuildNamed("ioam.transit", "b", nodeKeys(2)+extra)
				compareQuick(t, h, a, b, frames)
			})
		}
	}
}

func TestQuickDecap(t *testing.T) {
	for _, tt := range quickTypes {
		for _, extra := range []string{"", "histograms = false\n", "histograms = false\nmode = \"encap\"\n",
			"histograms = false\nmode = \"inline\"\n", "remove = false\n", "fill = false\nhistograms = false\n"} {
			t.Run(fmt.Sprintf("%#06x/%q", tt, extra), func(t *testing.T) {
				h := newHarness(t)
				frames := encapsulated(t, h, tt)
				a := h.MustBuildNamed("ioam.decap", "a", nodeKeys(3)+extra)
				b := h.MustBuildNamed("ioam.decap", "b", nodeKeys(3)+extra)
				compareQuick(t, h, a, b, frames)
				ha, hb := a.(*decap), b.(*decap)
				for k := range ha.hops {
					if x, y := ha.hops[k].Snapshot(), hb.hops[k].Snapshot(); !reflect.DeepEqual(x, y) {
						t.Errorf("hop %d histogram differs", k+1)
					}
				}
			})
		}
	}
}

// FuzzTraceLayout: a layout remembered from a valid packet matches a packet
// only where fastTrace accepts it, at the same place and length, and matches
// every packet fastTrace accepts whose headers agree.
func FuzzTraceLayout(f *testing.F) {
	h := newHarness(f)
	var bases [][]byte
	for _, tt := range quickTypes {
		enc := h.MustBuildNamed("ioam.encap", fmt.Sprintf("enc%x", tt), encapKeys(1, "encap", fmt.Sprintf(`{ namespace = 123, type = "%#06x", hops = 3 }`, tt)))
		d := h.run(buildFrame(f, frameSpec{payload: 20}), 0, false, enc).data
		bases = append(bases, d)
		f.Add(uint8(len(bases)-1), d)
	}
	f.Fuzz(func(t *testing.T, which uint8, d []byte) {
		base := bases[int(which)%len(bases)]
		var m traceLayout
		opt0, hl0 := fastTrace(base, 14)
		if opt0 == 0 {
			t.Fatal("fastTrace rejects a base frame")
		}
		m.set(base, 14, hl0)
		opt, hl := fastTrace(d, 14)
		if m.match(d, 14) {
			if opt != opt0 || hl != hl0 {
				t.Fatalf("match on a packet fastTrace gives %d,%d (layout %d,%d)", opt, hl, opt0, hl0)
			}
			return
		}
		if opt != 0 && len(d) >= 14+packet.IPv6Len+16 {
			var n traceLayout
			n.set(d, 14, hl)
			if n.hbh == m.hbh && n.trh == m.trh {
				t.Fatalf("no match on a packet fastTrace accepts with the same headers")
			}
		}
	})
}

// moveHead moves as copy does, overlapping or not, at every length.
func TestMoveHead(t *testing.T) {
	for n := 1; n <= 40; n++ {
		for _, dst := range []int{0, 1, 5, 8, 13, 40} {
			for _, src := range []int{0, 3, 8, 14, 40} {
				d, want := make([]byte, 96), make([]byte, 96)
				for i := range d {
					d[i], want[i] = byte(i+1), byte(i+1)
				}
				copy(want[dst:dst+n], want[src:src+n])
				moveHead(d, dst, src, n)
				if !bytes.Equal(d, want) {
					t.Fatalf("n %d dst %d src %d:\n got %v\nwant %v", n, dst, src, d, want)
				}
			}
		}
	}
}
