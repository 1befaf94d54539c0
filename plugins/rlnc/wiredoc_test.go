package rlnc

import (
	"bytes"
	"encoding/hex"
	"os"
	"strings"
	"testing"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/gf"
)

// hexBlocks returns the ```hex blocks of a markdown text by the text of their
// first comment line up to its colon.
func hexBlocks(t *testing.T, md string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for {
		_, rest, ok := strings.Cut(md, "```hex\n")
		if !ok {
			return out
		}
		block, after, _ := strings.Cut(rest, "```")
		md = after
		name := ""
		var digits strings.Builder
		for _, line := range strings.Split(block, "\n") {
			line = strings.TrimSpace(line)
			if c, ok := strings.CutPrefix(line, "#"); ok {
				if name == "" {
					name, _, _ = strings.Cut(strings.TrimSpace(c), ":")
				}
				continue
			}
			digits.WriteString(strings.ReplaceAll(line, " ", ""))
		}
		b, err := hex.DecodeString(digits.String())
		if err != nil {
			t.Fatalf("hex block %q: %v", name, err)
		}
		out[name] = b
	}
}

// TestWireDocExample checks every octet of the worked example in
// docs/rlnc-wire.md with the codec and the gf kernels.
func TestWireDocExample(t *testing.T) {
	md, err := os.ReadFile("../../docs/rlnc-wire.md")
	if err != nil {
		t.Fatalf("docs/rlnc-wire.md: %v", err)
	}
	hb := hexBlocks(t, string(md))
	for _, name := range []string{"original 0", "block 0", "block 1", "block 2", "coded packet", "systematic packet, source block 1"} {
		if hb[name] == nil {
			t.Fatalf("no hex block %q (have %d blocks)", name, len(hb))
		}
	}
	blocks := [][]byte{hb["block 0"], hb["block 1"], hb["block 2"]}
	var orig packet.Layers
	if err := packet.ParseIP(hb["original 0"], &orig); err != nil || orig.Flags&packet.FlagUDP == 0 {
		t.Fatalf("original 0: %v flags %v", err, orig.Flags)
	}
	upper := hb["original 0"][orig.L4:orig.End]
	if n, err := SourceLen(blocks[0]); err != nil || !bytes.Equal(blocks[0][LenPrefix:LenPrefix+n], upper) ||
		len(blocks[0]) != 12 {
		t.Errorf("block 0 is not length ‖ UDP datagram ‖ padding of original 0")
	}
	for i, b := range blocks {
		n, err := SourceLen(b)
		if err != nil || len(b) != 12 || !bytes.Equal(b[LenPrefix+n:], make([]byte, 12-LenPrefix-n)) {
			t.Errorf("block %d: length %d %v, padding not zero", i, n, err)
		}
	}

	var l packet.Layers
	pkt := hb["coded packet"]
	if err := packet.ParseIP(pkt, &l); err != nil || l.Proto != NextHeader || int(l.End) != len(pkt) {
		t.Fatalf("coded packet: %v, proto %d", err, l.Proto)
	}
	h, err := Parse(pkt[l.L4:l.End])
	if err != nil {
		t.Fatal(err)
	}
	f := h.Fields()
	if f.NextHeader != 17 || f.SessionID != 7 || f.SessionLength != 0 || f.GenerationID != 5 || f.K != 3 ||
		f.Version != 1 || f.Field != 0 || f.BlockLen != 12 || f.Flags != 0 || h.BlocksUsed() != 3 ||
		!bytes.Equal(f.Vector, []byte{0x02, 0x03, 0x8e}) {
		t.Errorf("coded packet fields %+v", f)
	}
	want := make([]byte, 12)
	gf.MulAddMulti([][]byte{want}, blocks, f.Vector)
	if !bytes.Equal(h.Block(), want) {
		t.Errorf("coded block %x, gf says %x", h.Block(), want)
	}
	if gf.Mul8(2, 0x0a)^gf.Mul8(3, 0x0a)^gf.Mul8(0x8e, 0x09) != 0x80 || gf.Mul8(2, 0x27)^gf.Mul8(3, 0x27)^gf.Mul8(0x8e, 0x27) != 0xba {
		t.Error("the products worked out in the text are wrong")
	}

	sys := hb["systematic packet, source block 1"]
	if err := packet.ParseIP(sys, &l); err != nil || l.Proto != NextHeader {
		t.Fatalf("systematic packet: %v", err)
	}
	hs, err := Parse(sys[l.L4:l.End])
	if err != nil || !hs.Systematic() || !bytes.Equal(hs.Vector(), []byte{0, 1, 0}) || !bytes.Equal(hs.Block(), blocks[1]) {
		t.Errorf("systematic packet: %v %x %x", err, hs.Vector(), hs.Block())
	}

	// Decoding by inversion gives the blocks back: the coded packet with
	// two systematic ones spans the generation.
	m, _ := gf.MatrixFrom(3, 3, []byte{0x02, 0x03, 0x8e, 0, 1, 0, 1, 0, 0})
	inv, err := m.Invert()
	if err != nil {
		t.Fatal(err)
	}
	got := [][]byte{make([]byte, 12), make([]byte, 12), make([]byte, 12)}
	gf.MulMulti(got, [][]byte{h.Block(), blocks[1], blocks[0]}, inv.Data())
	for i := range got {
		if !bytes.Equal(got[i], blocks[i]) {
			t.Errorf("decoded block %d %x, want %x", i, got[i], blocks[i])
		}
	}
}
