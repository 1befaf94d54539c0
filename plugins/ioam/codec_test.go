package ioam

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// kernelNodeLen is the Linux kernel's NodeLen (ioam6_trace_compute_nodelen):
// one word per bit of the short mask, two per bit of the wide mask, over the
// type as a big-endian word.
func kernelNodeLen(traceType uint32) int {
	w := traceType << 8
	return bits.OnesCount32(w&0xff1ffc00) + 2*bits.OnesCount32(w&0x00e00000)
}

func TestNodeLen(t *testing.T) {
	for _, c := range []struct {
		tt   uint32
		want int
	}{
		{0x800000, 1}, {0xC00000, 2}, {0xF00000, 4}, {0xFC0000, 6}, {0xFF0000, 8},
		{0x008000, 2}, {0x00E000, 6}, {0x80E000, 7}, {0x001000, 1},
		{0xFFF002, 15}, // bit 22 is not counted: the snapshot has its own length
		{0xFFFFFE, 25}, {0x000FFC, 10}, {0x000001, 0},
	} {
		if got := NodeLen(c.tt); got != c.want {
			t.Errorf("NodeLen(%#06x) = %d, want %d", c.tt, got, c.want)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		tt := r.Uint32() & 0xFFFFFF
		if NodeLen(tt) != kernelNodeLen(tt) {
			t.Fatalf("NodeLen(%#06x) = %d, kernel %d", tt, NodeLen(tt), kernelNodeLen(tt))
		}
	}
}

func TestTraceHeader(t *testing.T) {
	b := make([]byte, TraceHeaderLen+16)
	tr := Trace(b)
	tr.Encode(0x1234, 0xF00000, FlagLoopback|FlagActive, 4)
	// NodeLen 4 in the top 5 bits, L and A in the low two bits of byte 2
	// (the kernel's big-endian bitfields: nodelen:5, overflow:1, two unused).
	want := []byte{0x12, 0x34, 0x23, 0x04, 0xF0, 0x00, 0x00, 0x00}
	if !bytes.Equal(b[:8], want) {
		t.Fatalf("header % x, want % x", b[:8], want)
	}
	if tr.NamespaceID() != 0x1234 || tr.NodeLen() != 4 || tr.RemainingLen() != 4 || tr.TraceType() != 0xF00000 ||
		!tr.Loopback() || !tr.Active() || tr.Overflow() || tr.Flags() != FlagLoopback|FlagActive {
		t.Errorf("fields: ns %#x nodelen %d rem %d type %#x flags %x", tr.NamespaceID(), tr.NodeLen(), tr.RemainingLen(), tr.TraceType(), tr.Flags())
	}
	tr.SetOverflow()
	if !tr.Overflow() || b[2] != 0x27 {
		t.Errorf("overflow: byte 2 = %#x", b[2])
	}
	tr.SetFlags(0x1) // the reserved fourth flag lives in byte 3's top bit
	if b[3] != 0x84 || tr.Flags() != 1 || tr.RemainingLen() != 4 {
		t.Errorf("flag bit 3: byte 3 = %#x flags %x", b[3], tr.Flags())
	}
	tr.SetRemainingLen(127)
	if tr.RemainingLen() != 127 || b[3] != 0xFF {
		t.Errorf("remaining 127: byte 3 = %#x", b[3])
	}
}

func TestTraceValidate(t *testing.T) {
	mk := func(nodeLen int, tt uint32, rem, data int) Trace {
		b := make([]byte, TraceHeaderLen+data)
		Trace(b).Encode(1, tt, 0, rem)
		b[2] = uint8(nodeLen)<<3 | b[2]&7
		return Trace(b)
	}
	for _, c := range []struct {
		name string
		tr   Trace
		incr bool
		want error
	}{
		{"ok", mk(4, 0xF00000, 8, 32), false, nil},
		{"full", mk(4, 0xF00000, 0, 32), false, nil},
		{"truncated header", Trace(make([]byte, 7)), false, ErrTruncated},
		{"nodelen below type", mk(3, 0xF00000, 8, 32), false, ErrNodeLen},
		{"nodelen above type", mk(5, 0xF00000, 8, 32), false, ErrNodeLen},
		{"remaining beyond data", mk(4, 0xF00000, 9, 32), false, ErrRemainingLen},
		{"data beyond 244", mk(1, 0x800000, 0, 248), false, ErrTooLong},
		{"244 is fine", mk(1, 0x800000, 61, 244), false, nil},
		{"incremental ok", mk(2, 0xC00000, 10, 8), true, nil},
		{"incremental beyond 244", mk(2, 0xC00000, 60, 8), true, ErrTooLong},
		{"incremental odd data", mk(2, 0xC00000, 1, 6), true, ErrRemainingLen},
	} {
		if err := c.tr.Validate(c.incr); err != c.want {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

func TestOptionView(t *testing.T) {
	b := []byte{0x31, 0x0A, 0x00, 0x00, 1, 2, 3, 4, 5, 6, 7, 8, 0xEE}
	o := Option(b)
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	if o.OptionType() != 0x31 || o.OptDataLen() != 10 || o.IOAMType() != 0 || o.Len() != 12 || !bytes.Equal(o.Body(), b[4:12]) {
		t.Errorf("fields wrong: %x %d %d %d", o.OptionType(), o.OptDataLen(), o.IOAMType(), o.Len())
	}
	for _, bad := range [][]byte{{0x31}, {0x31, 0x01, 0, 0}, {0x31, 0x0A, 0, 0, 1, 2}} {
		if Option(bad).Validate() != ErrTruncated {
			t.Errorf("% x: want ErrTruncated", bad)
		}
	}
	if !IsIOAM(0x31) || !IsIOAM(0x11) || IsIOAM(0x05) || IsIOAM(0x01) {
		t.Error("IsIOAM")
	}
}

// Every field of a node's data is written where DecodeNode reads it back.
func TestNodePlanRoundTrip(t *testing.T) {
	ns := Namespace{ID: 7, NodeID: 0xABCDEF, NodeIDWide: 0x0102030405060708 & (1<<56 - 1), Data: 0xDA7A0001,
		DataWide: 0x1122334455667788, Timestamp: TimestampPOSIX, HasSchema: true, SchemaID: 0x123456, Schema: []byte{1, 2, 3, 4, 5, 6, 7, 8}}
	tm := &hopTime{}
	tm.sec[TimestampPOSIX], tm.frac[TimestampPOSIX] = 1700000000, 123456
	v := &hopValues{hopLimit: 63, ingress: 11, ingressW: 0x11111111, delay: 999, queue: 5, buffer: 77, time: tm}
	for _, tt := range []uint32{0x800000, 0xC00000, 0xF00000, 0xFC0000, 0xFFF002, 0x00E000, 0xFFFFFE, 0x80E002} {
		var pl nodePlan
		if !pl.build(&ns, tt, egressIDs{short: 22, wide: 0x22222222}) {
			t.Fatalf("%#06x: build failed", tt)
		}
		buf := make([]byte, pl.size)
		pl.write(buf, v)
		n, size, ok := DecodeNode(buf, tt)
		if !ok || size != pl.size {
			t.Fatalf("%#06x: decode ok=%v size %d, plan %d", tt, ok, size, pl.size)
		}
		check := func(bit uint32, name string, got, want uint64) {
			t.Helper()
			if tt&bit != 0 && got != want {
				t.Errorf("%#06x %s = %#x, want %#x", tt, name, got, want)
			}
		}
		check(TraceHopLimNodeID, "hop limit", uint64(n.HopLimit), 63)
		check(TraceHopLimNodeID, "node id", uint64(n.NodeID), 0xABCDEF)
		check(TraceIfIDs, "ingress", uint64(n.IngressIf), 11)
		check(TraceIfIDs, "egress", uint64(n.EgressIf), 22)
		check(TraceTimestampSeconds, "seconds", uint64(n.Seconds), 1700000000)
		check(TraceTimestampFraction, "fraction", uint64(n.Fraction), 123456)
		check(TraceTransitDelay, "delay", uint64(n.TransitDelay), 999)
		check(TraceNamespaceData, "ns data", uint64(n.NamespaceData), 0xDA7A0001)
		check(TraceQueueDepth, "queue", uint64(n.QueueDepth), 5)
		check(TraceChecksumComplement, "checksum complement", uint64(n.ChecksumComplement), 0xFFFFFFFF)
		check(TraceHopLimNodeIDWide, "wide hop limit", uint64(n.HopLimit), 63)
		check(TraceHopLimNodeIDWide, "wide id", n.NodeIDWide, ns.NodeIDWide)
		check(TraceIfIDsWide, "wide ingress", uint64(n.IngressIfWide), 0x11111111)
		check(TraceIfIDsWide, "wide egress", uint64(n.EgressIfWide), 0x22222222)
		check(TraceNamespaceDataWide, "wide ns data", n.NamespaceDataWide, 0x1122334455667788)
		check(TraceBufferOccupancy, "buffer", uint64(n.BufferOccupancy), 77)
		check(TraceOpaqueState, "schema id", uint64(n.SchemaID), 0x123456)
		if tt&TraceOpaqueState != 0 && !bytes.Equal(buf[n.OpaqueOff:n.OpaqueOff+n.OpaqueLen], ns.Schema) {
			t.Errorf("%#06x: opaque data % x", tt, buf[n.OpaqueOff:n.OpaqueOff+n.OpaqueLen])
		}
		// Undefined bits 12-21 are all ones, after the defined fields.
		if tt&TraceUndefined != 0 {
			k := bits.OnesCount32(tt & TraceUndefined)
			off := NodeLen(tt)*4 - 4*k
			for i := 0; i < k; i++ {
				if binary.BigEndian.Uint32(buf[off+4*i:]) != 0xFFFFFFFF {
					t.Errorf("%#06x: undefined field %d not all ones", tt, i)
				}
			}
		}
	}
	// Without a schema the snapshot is one word: length 0, schema id all ones.
	var pl nodePlan
	plain := ns
	plain.HasSchema = false
	pl.build(&plain, 0x800002, egressIDs{})
	if pl.size != 8 || pl.words != 2 || !bytes.Equal(pl.image[4:8], []byte{0x00, 0xFF, 0xFF, 0xFF}) {
		t.Errorf("empty snapshot: size %d words %d % x", pl.size, pl.words, pl.image[:8])
	}
}

func TestFillPrealloc(t *testing.T) {
	ns := Namespace{ID: 1, NodeID: 5}
	var pl nodePlan
	pl.build(&ns, 0x800000, egressIDs{})
	b := make([]byte, TraceHeaderLen+8)
	tr := Trace(b)
	tr.Encode(1, 0x800000, 0, 2)
	v := &hopValues{hopLimit: 9}
	fillPrealloc := func(tr Trace, pl *nodePlan, v *hopValues) bool {
		off, ok := claimPrealloc(tr, pl.words)
		if ok {
			pl.write(tr[off:], v)
		}
		return ok
	}
	if !fillPrealloc(tr, &pl, v) || tr.RemainingLen() != 1 || !bytes.Equal(b[12:16], []byte{9, 0, 0, 5}) {
		t.Fatalf("first fill: rem %d % x", tr.RemainingLen(), b)
	}
	v.hopLimit = 8
	if !fillPrealloc(tr, &pl, v) || tr.RemainingLen() != 0 || !bytes.Equal(b[8:12], []byte{8, 0, 0, 5}) {
		t.Fatalf("second fill: rem %d % x", tr.RemainingLen(), b)
	}
	before := append([]byte(nil), b[8:]...)
	if fillPrealloc(tr, &pl, v) || !tr.Overflow() || !bytes.Equal(b[8:], before) {
		t.Fatalf("third fill must set O and write nothing: % x", b)
	}
	// Once O is set, later nodes write nothing either.
	tr.SetRemainingLen(2)
	if fillPrealloc(tr, &pl, v) {
		t.Fatal("filled a trace whose O flag is set")
	}
}

func TestPOTDeal(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	const p = 0xFFFFFFFFFFFFFFC5 // 2^64-59
	keys, err := DealPOT(4, p, r)
	if err != nil {
		t.Fatal(err)
	}
	for range 100 {
		rnd := keys[0].Random(r)
		cml := uint64(0)
		for i := range keys {
			cml = keys[i].Update(rnd, cml)
		}
		if !keys[3].Verify(rnd, cml) {
			t.Fatal("a full path does not verify")
		}
		// Skipping a node fails.
		skip := uint64(0)
		for i := range keys {
			if i != 1 {
				skip = keys[i].Update(rnd, skip)
			}
		}
		if keys[3].Verify(rnd, skip) {
			t.Fatal("a path that skipped a node verifies")
		}
		if keys[3].Verify(rnd^1, cml) {
			t.Fatal("a changed random number verifies")
		}
	}
	if _, err := DealPOT(3, 1<<63, r); err == nil {
		t.Error("a composite modulus was accepted")
	}
}

func TestPOTKeyFile(t *testing.T) {
	dir := t.TempDir()
	keys, _ := DealPOT(2, 0xFFFFFFFFFFFFFFC5, rand.New(rand.NewPCG(1, 1)))
	path := filepath.Join(dir, "k.toml")
	if err := WritePOTKey(path, &keys[1]); err != nil {
		t.Fatal(err)
	}
	k, err := LoadPOTKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if *k != keys[1] {
		t.Errorf("read back %+v", *k)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = LoadPOTKey(path)
	if err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("a world-readable key file: %v", err)
	}
	bad := filepath.Join(dir, "bad.toml")
	_ = os.WriteFile(bad, []byte("prime = \"0x10\"\nshare = \"1\"\npublic_share = \"1\"\nlpc = \"1\"\nsecret = \"0xdeadbeef\"\n"), 0o600)
	_, err = LoadPOTKey(bad)
	if err == nil || strings.Contains(err.Error(), "deadbeef") {
		t.Errorf("bad prime: %v (must fail without quoting the key)", err)
	}
	if s := k.String(); strings.Contains(s, "0x") {
		t.Errorf("String leaks: %s", s)
	}
}

func TestE2EAndDEX(t *testing.T) {
	b := make([]byte, 4+E2EDataLen(0xF000))
	E2E(b).Encode(9, 0xF000, &E2EFields{Seq64: 0x0102030405060708, Seq32: 0x0A0B0C0D, Seconds: 100, Fraction: 200})
	want := []byte{0, 9, 0xF0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 0x0A, 0x0B, 0x0C, 0x0D, 0, 0, 0, 100, 0, 0, 0, 200}
	if !bytes.Equal(b, want) {
		t.Fatalf("E2E % x", b)
	}
	if f := E2E(b).Fields(); f.Seq64 != 0x0102030405060708 || f.Seq32 != 0x0A0B0C0D || f.Seconds != 100 || f.Fraction != 200 {
		t.Errorf("E2E fields %+v", f)
	}
	if E2E(b[:10]).Validate() != ErrTruncated {
		t.Error("short E2E accepted")
	}
	d := make([]byte, DEXLen(DEXFlowID|DEXSequence))
	DEX(d).Encode(3, DEXFlowID|DEXSequence, 0xC00000, 77, 88)
	want = []byte{0, 3, 0, 0xC0, 0xC0, 0, 0, 0, 0, 0, 0, 77, 0, 0, 0, 88}
	if !bytes.Equal(d, want) {
		t.Fatalf("DEX % x", d)
	}
	x := DEX(d)
	if x.FlowID() != 77 || x.Sequence() != 88 || x.TraceType() != 0xC00000 {
		t.Error("DEX fields")
	}
	d2 := make([]byte, DEXLen(DEXSequence))
	DEX(d2).Encode(3, DEXSequence, 0x800000, 0, 5)
	if DEX(d2).Sequence() != 5 || len(d2) != 12 {
		t.Error("DEX sequence without flow id")
	}
	if DEX(d2[:10]).Validate() != ErrTruncated {
		t.Error("short DEX accepted")
	}
}
