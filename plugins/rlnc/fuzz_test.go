package rlnc

import (
	"bytes"
	"testing"
)

// FuzzHeader: Parse never panics, and a header it accepts survives
// Fields → Encode → Parse unchanged, byte for byte.
func FuzzHeader(f *testing.F) {
	blk := []byte{0, 2, 0xAA, 0xBB}
	for _, seed := range [][]byte{
		hdr("11 07 0000 0005 03 10 0004 00 00", []byte{1, 2, 3}, blk),
		hdr("11 07 0000 0005 03 10 0004 80 00", []byte{0, 1, 0}, blk),
		hdr("11 07 0000 0005 03 10 0004 00 02", []byte{9, 8, 0}, blk),
		hdr("06 01 0001 ffff 01 10 0004 00 00", []byte{0x53}, blk),
		hdr("11 2a 0010 8000 10 10 0008 00 00", bytes.Repeat([]byte{0x1d}, 16), make([]byte, 8)),
		hdr("11 07 0000 0005 00 10 0004 00 00", nil, blk),
		hdr("11 07 0000 0005 03 10 0004 00 00", []byte{0, 0, 0}, blk),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := Parse(b)
		if err != nil {
			if reasonOf(err) == 0 {
				t.Fatalf("error %v has no drop reason", err)
			}
			return
		}
		fl := h.Fields()
		out := make([]byte, h.Len())
		Header(out).Encode(&fl)
		copy(Header(out).Block(), h.Block())
		if !bytes.Equal(out, b) {
			t.Fatalf("re-encoded\n%x\nfrom\n%x", out, b)
		}
		h2, err := Parse(out)
		if err != nil {
			t.Fatalf("re-encoded header rejected: %v", err)
		}
		f2 := h2.Fields()
		if f2.GenerationID != fl.GenerationID || f2.BlocksUsed != fl.BlocksUsed || !bytes.Equal(f2.Vector, fl.Vector) ||
			f2.Flags != fl.Flags || f2.BlockLen != fl.BlockLen || f2.NextHeader != fl.NextHeader {
			t.Fatalf("fields changed: %+v → %+v", fl, f2)
		}
		if h2.BlocksUsed() > h2.K() || h2.Version() != Version || h2.Field() != FieldGF256 {
			t.Fatalf("accepted header breaks an invariant: %+v", f2)
		}
	})
}
