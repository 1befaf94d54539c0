package rlnc

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/gf"
	"github.com/linerate/linerate/plugins"
	"github.com/linerate/linerate/plugins/stagetest"
)

// codedFrame builds an Ethernet/IPv6 CODED IP packet from fields and a block
// (fixed up: f.K and f.BlockLen are taken as given, so tests can lie).
func codedFrame(src, dst netip.Addr, f Fields, block []byte) []byte {
	hl := FixedLen + int(f.K)
	if int(f.K) < len(f.Vector) {
		hl = FixedLen + len(f.Vector)
	}
	d := make([]byte, 14+40+hl+len(block))
	binary.BigEndian.PutUint16(d[12:], 0x86DD)
	ip := packet.IPv6(d[14:])
	ip[0] = 0x60
	ip.SetPayloadLength(uint16(hl + len(block)))
	ip.SetNextHeader(NextHeader)
	ip.SetHopLimit(64)
	ip.SetSrc(src.As16())
	ip.SetDst(dst.As16())
	Header(d[54:]).Encode(&f)
	copy(d[54+FixedLen:], f.Vector)
	copy(d[54+hl:], block)
	return d
}

func goodFields(g uint16, k int, vec []byte) Fields {
	return Fields{NextHeader: 17, SessionID: 1, GenerationID: g, K: uint8(k), Version: 1, BlockLen: 16, Vector: vec}
}

func TestNamedDrops(t *testing.T) {
	blk := make([]byte, 16)
	blk[1] = 8
	for _, kind := range []string{"rlnc.recoder", "rlnc.decoder"} {
		t.Run(kind, func(t *testing.T) {
			h := newHarness(t)
			st := h.MustBuildNamed(kind, "st", "window = 16\nmemory = \"1MiB\"\n")
			zeroK := goodFields(1, 3, nil)
			zeroK.K = 0
			badLen := goodFields(1, 3, []byte{1, 2, 3})
			badLen.BlockLen = 17
			field := goodFields(1, 3, []byte{1, 2, 3})
			field.Field = 2
			version := goodFields(1, 3, []byte{1, 2, 3})
			version.Version = 2
			used := goodFields(1, 3, []byte{1, 2, 3})
			used.BlocksUsed = 2
			zeroN := goodFields(1, 3, []byte{1, 2, 3})
			zeroN.BlockLen = 0
			sysBad := goodFields(1, 3, []byte{1, 2, 0})
			sysBad.Flags = FlagSystematic
			cases := []struct {
				name   string
				frame  []byte
				reason string
			}{
				{"K=0", codedFrame(testSrc, testDst, zeroK, blk), "rlnc_zero_k"},
				{"N inconsistent", codedFrame(testSrc, testDst, badLen, blk), "rlnc_bad_length"},
				{"N=0", codedFrame(testSrc, testDst, zeroN, nil), "rlnc_small_n"},
				{"zero vector", codedFrame(testSrc, testDst, goodFields(1, 3, []byte{0, 0, 0}), blk), "rlnc_zero_vector"},
				{"unknown field", codedFrame(testSrc, testDst, field, blk), "rlnc_unknown_field"},
				{"version", codedFrame(testSrc, testDst, version, blk), "rlnc_bad_version"},
				{"coefficient beyond k′", codedFrame(testSrc, testDst, used, blk), "rlnc_bad_blocks_used"},
				{"systematic not unit", codedFrame(testSrc, testDst, sysBad, blk), "rlnc_bad_systematic"},
				{"truncated", codedFrame(testSrc, testDst, goodFields(1, 3, []byte{1, 2, 3}), blk)[:54+10], "rlnc_truncated"},
				// Frames cut short, their IPv6 Payload Length as sent: still CODED IP.
				{"frame cut in the block", codedFrame(testSrc, testDst, goodFields(1, 3, []byte{1, 2, 3}), blk)[:54+15+9], "rlnc_bad_length"},
				{"frame cut in the vector", codedFrame(testSrc, testDst, goodFields(1, 3, []byte{1, 2, 3}), blk)[:54+13], "rlnc_truncated"},
				{"frame cut in the IPv6 header", codedFrame(testSrc, testDst, goodFields(1, 3, []byte{1, 2, 3}), blk)[:14+30], "rlnc_truncated"},
				{"newest generation 100", codedFrame(testSrc, testDst, goodFields(100, 3, []byte{1, 2, 3}), blk), ""},
				{"stale: 16 behind", codedFrame(testSrc, testDst, goodFields(84, 3, []byte{1, 2, 3}), blk), "rlnc_stale_gen"},
				{"stale across the wrap", codedFrame(testSrc, testDst, goodFields(100+32768+1, 3, []byte{1, 2, 3}), blk), "rlnc_stale_gen"},
				// RFC 1982 leaves a distance of exactly 2^15 undefined: behind.
				{"exactly 2^15 ahead", codedFrame(testSrc, testDst, goodFields(100+32768, 3, []byte{1, 2, 3}), blk), "rlnc_stale_gen"},
				{"15 behind is in the window", codedFrame(testSrc, testDst, goodFields(85, 3, []byte{1, 2, 3}), blk), ""},
				{"same vector again", codedFrame(testSrc, testDst, goodFields(85, 3, []byte{2, 4, 6}), blk), "rlnc_non_innovative"},
				{"K differs in the generation", codedFrame(testSrc, testDst, goodFields(85, 4, []byte{1, 2, 3, 4}), append(blk[:0:0], blk...)), "rlnc_gen_mismatch"},
			}
			for _, tc := range cases {
				if strings.HasPrefix(tc.name, "truncated") {
					// Keep the IPv6 Payload Length honest so the IPv6 parse succeeds.
					packet.IPv6(tc.frame[14:]).SetPayloadLength(10)
				}
				o := h.Run(h.bursts([][]byte{tc.frame}, 0)[0], st)
				for _, e := range h.Env.TakeEmitted() {
					packet.FreeOne(e.H)
				}
				stagetest.Free(h.produce(st)...)
				stagetest.Free(o.Continued...)
				if tc.reason == "" {
					if len(o.Dropped) != 0 {
						t.Errorf("%s: dropped %v", tc.name, o.Dropped)
					}
					continue
				}
				if o.Dropped[tc.reason] != 1 {
					t.Errorf("%s: dropped %v, want %s", tc.name, o.Dropped, tc.reason)
				}
			}
			// Not CODED IP at all: passes untouched.
			u := udpFrame(testSrc, testDst, 1, 2, []byte("hello"))
			o := h.Run(h.bursts([][]byte{u}, 0)[0], st)
			if len(o.Continued) != 1 || !bytes.Equal(o.Continued[0].P().Data(), u) {
				t.Errorf("a UDP packet did not pass untouched: %+v", o)
			}
			stagetest.Free(o.Continued...)
			st.(plugins.Stopper).Stop(&h.Ctx)
		})
	}
}

// A decoded generation's late packets are dropped as rlnc_late.
func TestDecoderLate(t *testing.T) {
	h := newHarness(t)
	dec := h.MustBuildNamed("rlnc.decoder", "dec", "memory = \"1MiB\"\n")
	r := rand.New(rand.NewPCG(1, 1))
	src := source(r, 2, 64)
	blocks := make([][]byte, 2)
	for i, f := range src {
		blocks[i] = make([]byte, 64)
		binary.BigEndian.PutUint16(blocks[i], uint16(len(f)-54))
		copy(blocks[i][2:], f[54:])
	}
	var frames [][]byte
	for _, v := range [][]byte{{1, 1}, {1, 2}, {3, 7}} {
		blk := make([]byte, 64)
		gf.MulAddMulti([][]byte{blk}, blocks, v)
		f := goodFields(0, 2, v)
		f.BlockLen = 64
		frames = append(frames, codedFrame(testSrc, testDst, f, blk))
	}
	o := h.Run(h.bursts(frames, 0)[0], dec)
	if o.Dropped["rlnc_late"] != 1 || o.Consumed != 2 {
		t.Fatalf("want 2 consumed and 1 late, got %+v", o)
	}
	out := h.produce(dec)
	if len(out) != 2 {
		t.Fatalf("%d delivered", len(out))
	}
	for i, hd := range out {
		// The frames were built without Ethernet addresses; the decoder takes
		// its headers from the coded packets.
		if got := hd.P().Data(); !bytes.Equal(got[14:], src[i][14:]) {
			t.Errorf("packet %d:\n%x\nwant\n%x", i, got, src[i])
		}
	}
	stagetest.Free(out...)
}

func TestEncoderMatchAndPass(t *testing.T) {
	h := newHarness(t)
	enc := h.MustBuildNamed("rlnc.encoder", "enc", `k = 4
block = 100
too_big = "pass"
session_length = 1
memory = "1MiB"
pool_buffers = 256
[[match]]
dst = "2001:db8:2::/48"
udp_dst_port = 20000
session = 9
`)
	r := rand.New(rand.NewPCG(2, 2))
	frames := source(r, 6, 100) // 6 packets: one generation of 4, then session ended
	other := udpFrame(testSrc, netip.MustParseAddr("2001:db8:9::1"), 10000, 20000, []byte("not matched"))
	port := udpFrame(testSrc, testDst, 10000, 20001, []byte("other port"))
	big := udpFrame(testSrc, testDst, 10000, 20000, make([]byte, 91)) // 8+91 > 98
	frag := udpFrame(testSrc, testDst, 10000, 20000, []byte("fragment"))
	frag = append(frag[:54:54], append([]byte{17, 0, 0, 0, 0, 0, 0, 1}, frag[54:]...)...)
	packet.IPv6(frag[14:]).SetNextHeader(packet.ProtocolFragment)
	packet.IPv6(frag[14:]).SetPayloadLength(packet.IPv6(frag[14:]).PayloadLength() + 8)
	in := append([][]byte{other, port, big, frag}, frames...)
	o := h.Run(h.bursts(in, 0)[0], enc)
	if len(o.Continued) != 6 || o.Consumed != 4 {
		t.Fatalf("want 6 passed (unmatched ×2, too big, fragment, session ended ×2) and 4 taken: %+v", o)
	}
	for i, want := range [][]byte{other, port, big, frag, frames[4], frames[5]} {
		if !bytes.Equal(o.Continued[i].P().Data(), want) {
			t.Errorf("passed packet %d changed", i)
		}
	}
	stagetest.Free(o.Continued...)
	for name, want := range map[string]uint64{"uncoded_too_big": 1, "uncoded_ext": 1, "uncoded_session_ended": 2, "source_blocks": 4, "generations_sent": 1, "coded_sent": 4} {
		if got := h.StageCounter("enc", name); got != want {
			t.Errorf("%s = %d, want %d", name, got, want)
		}
	}
	coded := h.produce(enc)
	for _, hd := range coded {
		ch := codedHeader(t, hd)
		if ch.SessionID() != 9 || ch.SessionLength() != 1 || ch.K() != 4 || ch.BlockLen() != 100 || ch.NextHeader() != 17 {
			t.Errorf("header %+v", ch.Fields())
		}
	}
	stagetest.Free(coded...)

	// too_big = "drop" drops instead.
	h2 := newHarness(t)
	enc2 := h2.MustBuildNamed("rlnc.encoder", "enc", "k = 4\nblock = 100\ntoo_big = \"drop\"\nmemory = \"1MiB\"\npool_buffers = 256\n")
	o = h2.Run(h2.bursts([][]byte{big}, 0)[0], enc2)
	if o.Dropped["rlnc_too_big"] != 1 {
		t.Errorf("too_big = drop: %+v", o)
	}
}

// Systematic mode sends each block uncoded at once on every link, then the
// repair packets; a generation short at the flush time goes with k′.
func TestEncoderSystematicFlushLinks(t *testing.T) {
	h := newHarness(t)
	enc := h.MustBuildNamed("rlnc.encoder", "enc", `k = 8
block = 200
systematic = true
flush = "1ms"
memory = "1MiB"
pool_buffers = 256
[[links]]
port = "eth0"
coded = 10
[[links]]
port = "mem0"
repair_ratio = 0.5
`)
	r := rand.New(rand.NewPCG(3, 3))
	frames := source(r, 11, 200)
	h.Run(h.bursts(frames, 0)[0], enc)
	em := h.Env.TakeEmitted()
	perPort := map[uint16][]packet.Handle{}
	for _, e := range em {
		perPort[e.Port] = append(perPort[e.Port], e.H)
	}
	// Generation 0: 8 systematic + 2 repair on eth0, 8 + 4 on mem0.
	// Generation 1: 3 systematic each so far.
	if len(perPort[0]) != 13 || len(perPort[2]) != 15 {
		t.Fatalf("eth0 got %d, mem0 got %d; want 13 and 15", len(perPort[0]), len(perPort[2]))
	}
	for port, hs := range perPort {
		for i, hd := range hs[:8] {
			ch := codedHeader(t, hd)
			if !ch.Systematic() || ch.Vector()[i] != 1 || ch.GenerationID() != 0 {
				t.Errorf("port %d packet %d: %+v", port, i, ch.Fields())
			}
		}
		for _, hd := range hs[8 : len(hs)-3] {
			if ch := codedHeader(t, hd); ch.Systematic() || ch.BlocksUsed() != 8 {
				t.Errorf("port %d repair: %+v", port, ch.Fields())
			}
		}
	}
	h.Clock.Advance(2 * time.Millisecond)
	h.Tick(enc)
	em2 := h.Env.TakeEmitted()
	// Flushed with k′ = 3: eth0 gets ceil(10·3/8) − 3 = 1 repair, mem0 ceil(1.5) = 2.
	if len(em2) != 3 {
		t.Fatalf("flush sent %d packets, want 3", len(em2))
	}
	for _, e := range em2 {
		ch := codedHeader(t, e.H)
		if ch.GenerationID() != 1 || ch.BlocksUsed() != 3 || ch.Fields().BlocksUsed != 3 {
			t.Errorf("flushed packet %+v", ch.Fields())
		}
		for i, c := range ch.Vector() {
			if (i < 3) != (c != 0) {
				t.Errorf("vector %x: coefficients 0..2 non-zero, the rest zero", ch.Vector())
			}
		}
		packet.FreeOne(e.H)
	}
	for _, e := range em {
		packet.FreeOne(e.H)
	}
	if h.StageCounter("enc", "generations_short") != 1 {
		t.Error("short generation not counted")
	}
}

// The MTU check: a coded packet must fit N ≤ MTU − 52 − K on every link.
func TestMTUCheck(t *testing.T) {
	h := newHarness(t)
	_, err := h.BuildNamed("rlnc.encoder", "enc", "k = 64\nblock = 1400\n[[links]]\nport = \"eth0\"\n")
	if err == nil || !strings.Contains(err.Error(), "MTU") || !strings.Contains(err.Error(), "1384") {
		t.Errorf("K=64 N=1400 on a 1500 MTU: %v", err)
	}
	if _, err := h.BuildNamed("rlnc.encoder", "ok", "k = 48\nblock = 1400\nmemory = \"1MiB\"\npool_buffers = 64\n[[links]]\nport = \"eth0\"\n"); err != nil {
		t.Errorf("K=48 N=1400 fits 1500: %v", err)
	}
	if _, err := h.BuildNamed("rlnc.encoder", "jumbo", "k = 64\nblock = 8800\nmemory = \"1MiB\"\npool_buffers = 64\n[[links]]\nport = \"mem0\"\n"); err != nil {
		t.Errorf("K=64 N=8800 fits 9000: %v", err)
	}
	_, err = h.BuildNamed("rlnc.recoder", "rec", "k = 32\nblock = 1420\n[[links]]\nport = \"eth1\"\n")
	if err == nil || !strings.Contains(err.Error(), "MTU") {
		t.Errorf("recoder K=32 N=1420 on 1500: %v", err)
	}
	_, err = h.BuildNamed("rlnc.encoder", "chain", "k = 16\nblock = 1440\nmtu = 1500\n")
	if err == nil || !strings.Contains(err.Error(), "chain") {
		t.Errorf("chain link with mtu 1500: %v", err)
	}
	if _, err := h.BuildNamed("rlnc.recoder", "x", "k = 16\n"); err == nil {
		t.Error("k without block accepted")
	}
}

// Sessions belong to one lcore: a packet of another lcore's session is handed
// to its owner.
func TestHandoff(t *testing.T) {
	h := newHarness(t)
	h.Env.Instances = 4
	dec := h.MustBuildNamed("rlnc.decoder", "dec", "memory = \"1MiB\"\n")
	var frames [][]byte
	for i := 0; i < 32; i++ {
		src := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 15: byte(i)})
		frames = append(frames, codedFrame(src, testDst, goodFields(0, 3, []byte{1, 2, 3}), make([]byte, 16)))
	}
	o := h.Run(h.bursts(frames, 0)[0], dec)
	handed := len(h.Env.Handoffs)
	if handed == 0 || handed == 32 || o.Consumed != 32-handed {
		t.Fatalf("handed %d of 32, consumed %d", handed, o.Consumed)
	}
	for _, e := range h.Env.Handoffs {
		if int(e.Port) == 0 || e.H.P().Verdict() != packet.Handoff {
			t.Errorf("handed to %d with verdict %v", e.Port, e.H.P().Verdict())
		}
		packet.FreeOne(e.H)
	}
}

// A paced recoder link sends no faster than its rate, and each packet it
// sends mixes everything held at that moment.
func TestRecoderPacing(t *testing.T) {
	h := newHarness(t)
	rec := h.MustBuildNamed("rlnc.recoder", "rec", `memory = "1MiB"
coded = 8
[[links]]
port = "mem0"
rate = "10Mbit"
`)
	var frames [][]byte
	for i := 0; i < 8; i++ {
		v := make([]byte, 8)
		v[i] = 1
		f := goodFields(0, 8, v)
		f.Flags = FlagSystematic
		frames = append(frames, codedFrame(testSrc, testDst, f, make([]byte, 16)))
	}
	// All 8 arrive at once; the link may send one 124-byte frame per
	// (124+24)·8/10e6 s = 118.4 µs.
	h.Run(h.bursts(frames, 0)[0], rec)
	sent := 0
	var vecs [][]byte
	for step := 0; step < 100; step++ {
		h.produce(rec)
		for _, e := range h.Env.TakeEmitted() {
			sent++
			ch := codedHeader(t, e.H)
			if ch.Systematic() {
				t.Error("recoded packet kept the systematic flag")
			}
			vecs = append(vecs, append([]byte(nil), ch.Vector()...))
			packet.FreeOne(e.H)
		}
		h.Clock.Advance(10 * time.Microsecond)
	}
	// 1 ms: at most ceil(1000/118.4) = 9, and the budget is 8.
	if sent != 8 {
		t.Errorf("sent %d in 1 ms, want 8", sent)
	}
	for i, v := range vecs {
		if bytes.IndexByte(v, 0) >= 0 {
			t.Errorf("packet %d vector %x: should mix all 8 held blocks", i, v)
		}
	}
	if rec.(plugins.Holder).Held() != 0 {
		t.Error("credits left after the budget was spent")
	}
	if h.StageCounter("rec", "generations_opened") != 1 {
		t.Error("generation count")
	}
}

// Extension headers (here Hop-by-Hop) ride in the outer chain and come back.
func TestExtensionChain(t *testing.T) {
	h := newHarness(t)
	enc := h.MustBuildNamed("rlnc.encoder", "enc", "k = 2\nblock = 120\nmemory = \"1MiB\"\npool_buffers = 64\n")
	dec := h.MustBuildNamed("rlnc.decoder", "dec", "memory = \"1MiB\"\n")
	var frames [][]byte
	for i := 0; i < 2; i++ {
		u := udpFrame(testSrc, testDst, 5, 6, []byte(fmt.Sprintf("payload %d", i)))
		// Insert an 8-byte Hop-by-Hop header with a PadN option.
		hbh := []byte{17, 0, 1, 4, 0, 0, 0, 0}
		f := append(append(u[:54:54], hbh...), u[54:]...)
		ip := packet.IPv6(f[14:])
		ip.SetNextHeader(0)
		ip.SetPayloadLength(ip.PayloadLength() + 8)
		frames = append(frames, f)
	}
	h.Run(h.bursts(frames, 0)[0], enc)
	coded := h.produce(enc)
	if len(coded) != 2 {
		t.Fatalf("%d coded", len(coded))
	}
	for _, hd := range coded {
		l, _ := hd.P().ParseLayers()
		if l.HopByHop == 0 || l.Proto != NextHeader {
			t.Errorf("coded packet lost the Hop-by-Hop header: %+v", l)
		}
	}
	o := h.Run(handlesBursts(coded)[0], dec)
	out := h.produce(dec)
	if o.Consumed != 2 || len(out) != 2 {
		t.Fatalf("consumed %d, delivered %d", o.Consumed, len(out))
	}
	for i, hd := range out {
		if !bytes.Equal(hd.P().Data(), frames[i]) {
			t.Errorf("packet %d:\n%x\nwant\n%x", i, hd.P().Data(), frames[i])
		}
	}
	stagetest.Free(out...)
}

// Non-innovative packets before full rank, many more than the decoder's spare
// columns, and a systematic packet already in the span: the generation still
// decodes, byte for byte, and no dependent packet is kept.
func TestDecoderDependent(t *testing.T) {
	h := newHarness(t)
	dec := h.MustBuildNamed("rlnc.decoder", "dec", "memory = \"1MiB\"\n")
	r := rand.New(rand.NewPCG(5, 5))
	src := source(r, 3, 64)
	blocks := make([][]byte, 3)
	for i, f := range src {
		blocks[i] = make([]byte, 64)
		binary.BigEndian.PutUint16(blocks[i], uint16(len(f)-54))
		copy(blocks[i][2:], f[54:])
	}
	frame := func(v []byte, sys bool) []byte {
		blk := make([]byte, 64)
		gf.MulAddMulti([][]byte{blk}, blocks, v)
		f := goodFields(0, 3, v)
		f.BlockLen = 64
		if sys {
			f.Flags = FlagSystematic
		}
		return codedFrame(testSrc, testDst, f, blk)
	}
	frames := [][]byte{frame([]byte{1, 2, 3}, false), frame([]byte{0, 1, 0}, true)}
	// 2·(1,2,3) + c·(0,1,0) span nothing new: 20 of them.
	for c := byte(1); c <= 20; c++ {
		frames = append(frames, frame([]byte{2, gf.Mul8(2, 2) ^ c, gf.Mul8(2, 3)}, false))
	}
	frames = append(frames, frame([]byte{9, 9, 8}, false))
	o := h.Run(h.bursts(frames, 0)[0], dec)
	if o.Dropped["rlnc_non_innovative"] != 20 || o.Consumed != 2 || len(o.Continued) != 1 {
		t.Fatalf("want 20 non-innovative, 2 consumed, 1 systematic delivered: %+v", o)
	}
	out := append(o.Continued, h.produce(dec)...)
	if len(out) != 3 {
		t.Fatalf("%d delivered", len(out))
	}
	got := map[string]bool{}
	for _, hd := range out {
		got[string(hd.P().Data()[14:])] = true
	}
	for i, f := range src {
		if !got[string(f[14:])] {
			t.Errorf("original %d not delivered", i)
		}
	}
	stagetest.Free(out...)
	if h.StageCounter("dec", "echelon_rebuilds") == 0 {
		t.Error("20 dependent packets should have used up the spare columns")
	}
	if h.StageCounter("dec", "innovative") != 3 {
		t.Errorf("%d kept, want 3", h.StageCounter("dec", "innovative"))
	}
}

// TestDecodedHeaders pins what a decoded packet's headers are
// (docs/rlnc-wire.md, "Headers of a decoded packet"). The originals of one
// generation differ in MAC, traffic class, flow label and hop limit; their
// coded packets arrive from two neighbours with hop limits lowered on the
// way. Decoded, each original has its own addresses, extension headers and
// upper layer, byte for byte; its traffic class and flow label are the
// generation's first original's, which every coded packet carried; its
// Ethernet header and hop limit are those of the coded packet it came in:
// for a decoded block, the generation's first to arrive.
func TestDecodedHeaders(t *testing.T) {
	for _, sys := range []bool{false, true} {
		t.Run(fmt.Sprintf("systematic=%v", sys), func(t *testing.T) {
			h := newHarness(t)
			enc := h.MustBuildNamed("rlnc.encoder", "enc", fmt.Sprintf("k = 3\nblock = 100\ncoded = 3\nsystematic = %v\n"+
				"memory = \"1MiB\"\npool_buffers = 64\n", sys))
			dec := h.MustBuildNamed("rlnc.decoder", "dec", "memory = \"1MiB\"\n")
			var orig [][]byte
			for i := 0; i < 3; i++ {
				f := udpFrame(testSrc, testDst, 5, 6, []byte(fmt.Sprintf("original %d", i)))
				f[11] = byte(0x10 + i) // source MAC
				ip := packet.IPv6(f[14:])
				binary.BigEndian.PutUint32(ip[0:], 6<<28|uint32(0x20+4*i)<<20|uint32(0x12340+i)) // TC, flow label
				ip.SetHopLimit(uint8(64 - i))
				orig = append(orig, f)
			}
			h.Run(h.bursts(orig, 0)[0], enc)
			coded := h.produce(enc)
			if len(coded) != 3 {
				t.Fatalf("%d coded packets", len(coded))
			}
			for i, hd := range coded {
				d := hd.P().Data()
				d[11] = byte(0xa0 + i)    // the neighbour it came from
				d[14+7] = uint8(50 - 3*i) // hops on the way
			}
			arrived := make([][]byte, len(coded))
			for i, hd := range coded {
				arrived[i] = append([]byte(nil), hd.P().Data()[:14+40]...)
			}
			o := h.Run(handlesBursts(coded)[0], dec)
			out := append(o.Continued, h.produce(dec)...)
			if len(out) != 3 {
				t.Fatalf("%d delivered", len(out))
			}
			for i, hd := range out {
				from := arrived[0] // decoded: the generation's first coded packet
				if sys {
					from = arrived[i] // systematic: delivered in place
				}
				want := append([]byte(nil), orig[i]...)
				copy(want[:14], from[:14])
				copy(want[14:18], orig[0][14:18])
				want[14+7] = from[14+7]
				if got := hd.P().Data(); !bytes.Equal(got, want) {
					t.Errorf("packet %d:\n%x\nwant\n%x", i, got, want)
				}
			}
			stagetest.Free(out...)
		})
	}
}
