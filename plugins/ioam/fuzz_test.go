package ioam

import (
	"bytes"
	"testing"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/plugins"
	"github.com/linerate/linerate/plugins/stagetest"
)

// Seed corpora start from valid options and packets the stages make.

func traceSeeds() [][]byte {
	var out [][]byte
	for _, tt := range []uint32{0xC00000, 0xF00000, 0xFC0000, 0x00E000, 0xFFF002} {
		b := make([]byte, TraceHeaderLen+NodeLen(tt)*4*2+8)
		Trace(b).Encode(123, tt, 0, (len(b)-TraceHeaderLen)/4-NodeLen(tt)-2)
		out = append(out, b)
	}
	return out
}

func FuzzOption(f *testing.F) {
	for _, tr := range traceSeeds() {
		f.Add(appendOption(nil, OptionTypeChanging, TypePreallocatedTrace, tr))
	}
	f.Add(appendOption(nil, OptionTypeStatic, TypeE2E, []byte{0, 1, 0x80, 0, 1, 2, 3, 4, 5, 6, 7, 8}))
	f.Fuzz(func(t *testing.T, b []byte) {
		o := Option(b)
		if o.Validate() != nil {
			return
		}
		again := appendOption(nil, o.OptionType(), o.IOAMType(), o.Body())
		if b[2] == 0 && !bytes.Equal(again, b[:o.Len()]) {
			t.Fatalf("round trip\n got % x\nwant % x", again, b[:o.Len()])
		}
		o2 := Option(again)
		if o2.Validate() != nil || o2.IOAMType() != o.IOAMType() || !bytes.Equal(o2.Body(), o.Body()) {
			t.Fatal("re-parse differs")
		}
	})
}

func FuzzTrace(f *testing.F) {
	for _, s := range traceSeeds() {
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, b []byte, incr bool) {
		tr := Trace(b)
		if tr.Validate(incr) != nil {
			return
		}
		// Header round trip: the fields make the same header (reserved byte
		// and flag bits as they were).
		c := append([]byte(nil), b...)
		Trace(c).Encode(tr.NamespaceID(), tr.TraceType(), tr.Flags(), tr.RemainingLen())
		c[7] = b[7]
		if !bytes.Equal(c[:TraceHeaderLen], b[:TraceHeaderLen]) {
			t.Fatalf("header round trip\n got % x\nwant % x", c[:8], b[:8])
		}
		if Trace(c).Validate(incr) != nil {
			t.Fatal("re-encoded header does not validate")
		}
		// Node data decodes without a panic, and what decodes re-encodes.
		data := tr.Data()
		if !incr {
			data = data[tr.RemainingLen()*4:]
		}
		for len(data) > 0 {
			n, size, ok := DecodeNode(data, tr.TraceType())
			if !ok || size == 0 {
				break
			}
			if n.Type != tr.TraceType() {
				t.Fatal("type")
			}
			data = data[size:]
		}
		// Filling a node never writes outside the trace.
		ns := Namespace{ID: tr.NamespaceID(), NodeID: 1}
		var pl nodePlan
		if !pl.build(&ns, tr.TraceType(), egressIDs{}) || incr {
			return
		}
		guard := append(append([]byte(nil), c...), 0xAA, 0xBB)
		tr = Trace(guard[:len(c)])
		if off, ok := claimPrealloc(tr, pl.words); ok {
			pl.write(tr[off:], &hopValues{time: &hopTime{}})
		}
		if guard[len(c)] != 0xAA || guard[len(c)+1] != 0xBB {
			t.Fatal("fill wrote past the trace")
		}
	})
}

func FuzzPOT(f *testing.F) {
	b := make([]byte, POTLen)
	POT(b).Encode(7, 0x0102030405060708, 0x1112131415161718)
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		p := POT(b)
		if p.Validate() != nil || p.POTType() != 0 || p.POTFlags() != 0 {
			return
		}
		c := make([]byte, POTLen)
		POT(c).Encode(p.NamespaceID(), p.Random(), p.Cumulative())
		if !bytes.Equal(c, b[:POTLen]) {
			t.Fatalf("round trip % x vs % x", c, b[:POTLen])
		}
	})
}

func FuzzE2E(f *testing.F) {
	for _, ty := range []uint16{0xF000, 0x8000, 0x3000} {
		b := make([]byte, 4+E2EDataLen(ty))
		E2E(b).Encode(1, ty, &E2EFields{Seq64: 9, Seq32: 8, Seconds: 7, Fraction: 6})
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e := E2E(b)
		if e.Validate() != nil {
			return
		}
		fl := e.Fields()
		c := make([]byte, 4+E2EDataLen(e.E2EType()))
		E2E(c).Encode(e.NamespaceID(), e.E2EType(), &fl)
		if !bytes.Equal(c, b[:len(c)]) {
			t.Fatalf("round trip % x vs % x", c, b[:len(c)])
		}
	})
}

func FuzzDEX(f *testing.F) {
	for _, ext := range []uint8{0, DEXFlowID, DEXSequence, DEXFlowID | DEXSequence} {
		b := make([]byte, DEXLen(ext))
		DEX(b).Encode(3, ext, 0xC00000, 5, 6)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		d := DEX(b)
		if d.Validate() != nil || d.Flags() != 0 || b[7] != 0 || d.ExtensionFlags()&^(DEXFlowID|DEXSequence) != 0 {
			return
		}
		var flow, seq uint32
		if d.ExtensionFlags()&DEXFlowID != 0 {
			flow = d.FlowID()
		}
		if d.ExtensionFlags()&DEXSequence != 0 {
			seq = d.Sequence()
		}
		c := make([]byte, DEXLen(d.ExtensionFlags()))
		DEX(c).Encode(d.NamespaceID(), d.ExtensionFlags(), d.TraceType(), flow, seq)
		if !bytes.Equal(c, b[:len(c)]) {
			t.Fatalf("round trip % x vs % x", c, b[:len(c)])
		}
	})
}

// packetSeeds are frames the stages make: every option kind, both modes.
func packetSeeds(t testing.TB) [][]byte {
	h := newHarness(t)
	var out [][]byte
	for _, mode := range []string{"encap", "inline"} {
		for _, opt := range []string{"preallocated", "incremental"} {
			enc := h.MustBuild("ioam.encap", nodeKeys(1)+`
mode = "`+mode+`"
inline_transit = true
src = "2001:db8:e::1"
dst = "2001:db8:d::1"
[[profiles]]
trace = { namespace = 123, type = "0xFC0000", hops = 3, option = "`+opt+`", loopback = true }
e2e = { namespace = 123, type = "0xF000" }
dex = { namespace = 123, type = "0xC00000", flow_id = 1, sequence = true }
`)
			out = append(out, h.run(buildFrame(t, frameSpec{payload: 40}), 0, false, enc).data)
		}
	}
	out = append(out, buildFrame(t, frameSpec{payload: 20, vlan: 5}))
	return out
}

// Any frame through transit and decap: no panic, every buffer back in its
// pool, and what decap passes on still parses as far as it did before.
func FuzzStages(f *testing.F) {
	for _, s := range packetSeeds(f) {
		f.Add(s)
	}
	h := newHarness(f)
	tr := h.MustBuild("ioam.transit", nodeKeys(2)+"loopback = true\n")
	inc := h.MustBuild("ioam.transit", nodeKeys(3)+"decrement_hop_limit = true\n")
	dec := h.MustBuild("ioam.decap", nodeKeys(4)+"loopback = true\n")
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 1500 {
			return
		}
		h.T = t
		r := h.run(b, 0, false, tr, inc, dec)
		stagetest.FreeSent(h.Env.TakeEmitted())
		if r.data != nil {
			var l packet.Layers
			_ = packet.Parse(r.data, &l)
		}
		if n := h.pool.InUse(); n != 0 {
			t.Fatalf("%d buffers leaked", n)
		}
	})
}

// Encap then decap gives back any IPv6 frame it took, byte for byte.
func FuzzEncapDecap(f *testing.F) {
	for _, s := range packetSeeds(f)[4:] {
		f.Add(s, false)
	}
	f.Add(buildFrame(f, frameSpec{payload: 3}), true)
	h := newHarness(f)
	build := func(mode string) [2]plugins.Stage {
		enc := h.MustBuild("ioam.encap", nodeKeys(1)+`
mode = "`+mode+`"
inline_transit = true
src = "2001:db8:e::1"
dst = "2001:db8:d::1"
[[profiles]]
trace = { namespace = 123, type = "0xF00000", hops = 3 }
e2e = { namespace = 123, type = "0xF000" }
`)
		return [2]plugins.Stage{enc, h.MustBuild("ioam.decap", nodeKeys(4))}
	}
	modes := [2][2]plugins.Stage{build("encap"), build("inline")}
	f.Fuzz(func(t *testing.T, b []byte, inline bool) {
		if len(b) > 1400 {
			return
		}
		var l packet.Layers
		if packet.Parse(b, &l) != nil || l.IPVersion != 6 {
			return
		}
		// Options already in the packet would go with linerate's.
		if l.HopByHop != 0 || l.DestOpts1 != 0 || l.DestOpts2 != 0 {
			return
		}
		h.T = t
		st := modes[0]
		if inline {
			st = modes[1]
		}
		mid := h.run(b, 0, true, st[0])
		if bytes.Equal(mid.data, b) {
			return // left alone (too big, no room)
		}
		out := h.run(mid.data, 0, false, st[1])
		if !bytes.Equal(out.data, b) {
			t.Fatalf("encap+decap changed the frame\n in % x\nmid % x\nout % x", b, mid.data, out.data)
		}
	})
}

// The fast path accepts only what the full walk accepts, and finds the same
// trace: a differential check of fastTrace against scanPacket.
func FuzzFastTrace(f *testing.F) {
	for _, s := range packetSeeds(f) {
		f.Add(s)
	}
	h := newHarness(f)
	enc := h.MustBuild("ioam.encap", encapKeys(1, "encap", `{ namespace = 123, type = "0xF00000", hops = 3 }`))
	f.Add(h.run(buildFrame(f, frameSpec{payload: 10}), 0, false, enc).data)
	f.Fuzz(func(t *testing.T, b []byte) {
		opt, hl := fastTrace(b, 14)
		if opt == 0 {
			return
		}
		var s scan
		if err := scanPacket(b, 14, &s); err != nil {
			t.Fatalf("fastTrace took a packet scanPacket refuses: %v", err)
		}
		if s.nTrace != 1 || s.trace[0] != opt || s.hbhLen != hl || s.pot != 0 || s.dex != 0 || s.dest != 0 || s.hbhMore {
			t.Fatalf("fastTrace found %d/%d, scanPacket %+v", opt, hl, s)
		}
		var fs scan
		if fastScan(b, 14, opt, hl, &fs); fs != s {
			t.Fatalf("fastScan %+v, scanPacket %+v", fs, s)
		}
	})
}
