package rlnc

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

// hdr builds header bytes: the 12 fixed octets, the vector and the block.
func hdr(fixed string, vec, block []byte) []byte {
	b, err := hex.DecodeString(strings.ReplaceAll(fixed, " ", ""))
	if err != nil {
		panic(err)
	}
	return append(append(b, vec...), block...)
}

func TestParseRows(t *testing.T) {
	blk4 := []byte{0, 2, 0xAA, 0xBB}
	for _, tc := range []struct {
		name string
		b    []byte
		err  error
	}{
		{"coded K=3 N=4", hdr("11 07 0000 0005 03 10 0004 00 00", []byte{1, 2, 3}, blk4), nil},
		{"systematic block 1", hdr("11 07 0000 0005 03 10 0004 80 00", []byte{0, 1, 0}, blk4), nil},
		{"short k′=2", hdr("11 07 0000 0005 03 10 0004 00 02", []byte{9, 8, 0}, blk4), nil},
		{"K=1", hdr("06 01 0001 ffff 01 10 0004 00 00", []byte{0x53}, blk4), nil},
		{"empty", nil, ErrTruncated},
		{"11 octets", hdr("11 07 0000 0005 03 10 0004 00", nil, nil), ErrTruncated},
		{"version 0", hdr("11 07 0000 0005 03 00 0004 00 00", []byte{1, 2, 3}, blk4), ErrVersion},
		{"version 2", hdr("11 07 0000 0005 03 20 0004 00 00", []byte{1, 2, 3}, blk4), ErrVersion},
		{"field GF(2)", hdr("11 07 0000 0005 03 11 0004 00 00", []byte{1, 2, 3}, blk4), ErrField},
		{"field GF(2^16)", hdr("11 07 0000 0005 03 13 0004 00 00", []byte{1, 2, 3}, blk4), ErrField},
		{"field 15", hdr("11 07 0000 0005 03 1f 0004 00 00", []byte{1, 2, 3}, blk4), ErrField},
		{"K=0", hdr("11 07 0000 0005 00 10 0004 00 00", nil, blk4), ErrZeroK},
		{"vector cut", hdr("11 07 0000 0005 03 10 0004 00 00", []byte{1, 2}, nil), ErrTruncated},
		{"N too long", hdr("11 07 0000 0005 03 10 0005 00 00", []byte{1, 2, 3}, blk4), ErrLength},
		{"N too short", hdr("11 07 0000 0005 03 10 0003 00 00", []byte{1, 2, 3}, blk4), ErrLength},
		{"N=0", hdr("11 07 0000 0005 03 10 0000 00 00", []byte{1, 2, 3}, nil), ErrSmallN},
		{"N=1", hdr("11 07 0000 0005 03 10 0001 00 00", []byte{1, 2, 3}, []byte{0}), ErrSmallN},
		{"N=2, an empty packet", hdr("11 07 0000 0005 03 10 0002 00 00", []byte{1, 2, 3}, []byte{0, 0}), nil},
		{"k′ > K", hdr("11 07 0000 0005 03 10 0004 00 04", []byte{1, 2, 3}, blk4), ErrBlocksUsed},
		{"coefficient beyond k′", hdr("11 07 0000 0005 03 10 0004 00 02", []byte{1, 2, 3}, blk4), ErrBlocksUsed},
		{"all-zero vector", hdr("11 07 0000 0005 03 10 0004 00 00", []byte{0, 0, 0}, blk4), ErrZeroVector},
		{"systematic with two", hdr("11 07 0000 0005 03 10 0004 80 00", []byte{1, 1, 0}, blk4), ErrNotSystematic},
		{"systematic not one", hdr("11 07 0000 0005 03 10 0004 80 00", []byte{0, 2, 0}, blk4), ErrNotSystematic},
		{"systematic zero", hdr("11 07 0000 0005 03 10 0004 80 00", []byte{0, 0, 0}, blk4), ErrZeroVector},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := Parse(tc.b)
			if !errors.Is(err, tc.err) {
				t.Fatalf("Parse: %v, want %v", err, tc.err)
			}
			if err != nil {
				if h != nil {
					t.Errorf("a view came back with error %v", err)
				}
				if reasonOf(err) == 0 {
					t.Errorf("no drop reason for %v", err)
				}
				return
			}
			if h.Len() != len(tc.b) {
				t.Errorf("Len %d, have %d bytes", h.Len(), len(tc.b))
			}
		})
	}
}

func TestFieldsRoundTrip(t *testing.T) {
	b := hdr("11 07 0102 fffe 03 10 0004 80 02", []byte{0, 1, 0}, []byte{0, 1, 0x42, 0})
	h, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	f := h.Fields()
	want := Fields{NextHeader: 17, SessionID: 7, SessionLength: 0x0102, GenerationID: 0xfffe, K: 3, Version: 1,
		Field: 0, BlockLen: 4, Flags: 0x80, BlocksUsed: 2, Vector: []byte{0, 1, 0}}
	if f.NextHeader != want.NextHeader || f.SessionID != want.SessionID || f.SessionLength != want.SessionLength ||
		f.GenerationID != want.GenerationID || f.K != want.K || f.Version != want.Version || f.Field != want.Field ||
		f.BlockLen != want.BlockLen || f.Flags != want.Flags || f.BlocksUsed != want.BlocksUsed || !bytes.Equal(f.Vector, want.Vector) {
		t.Fatalf("Fields %+v, want %+v", f, want)
	}
	if !h.Systematic() || h.BlocksUsed() != 2 || h.K() != 3 || h.BlockLen() != 4 {
		t.Errorf("accessors: systematic %v k′ %d K %d N %d", h.Systematic(), h.BlocksUsed(), h.K(), h.BlockLen())
	}
	out := make([]byte, len(b))
	Header(out).Encode(&f)
	copy(Header(out).Block(), h.Block())
	if !bytes.Equal(out, b) {
		t.Fatalf("Encode:\n%x\nwant\n%x", out, b)
	}
	if n, err := SourceLen(h.Block()); err != nil || n != 1 {
		t.Errorf("SourceLen %d %v", n, err)
	}
	if _, err := SourceLen([]byte{0, 3, 1, 2}); !errors.Is(err, ErrShortBlock) {
		t.Errorf("SourceLen of an overlong prefix: %v", err)
	}
}

func TestSerial(t *testing.T) {
	for _, tc := range []struct {
		a, b uint16
		d    int
	}{
		{0, 1, 1}, {1, 0, -1}, {65535, 0, 1}, {0, 65535, -1}, {65000, 200, 736}, {100, 100, 0}, {0, 32767, 32767}, {0, 32769, -32767},
	} {
		if got := serialDiff(tc.a, tc.b); got != tc.d {
			t.Errorf("serialDiff(%d, %d) = %d, want %d", tc.a, tc.b, got, tc.d)
		}
	}
	var d doneBits
	d.set(65535)
	d.set(3)
	d.advance(65535, 2) // 0, 1, 2 are new
	if !d.has(65535) || !d.has(3) {
		t.Error("advance cleared a bit outside (from, to]")
	}
	d.set(1)
	d.advance(2, 3)
	if d.has(3) || !d.has(1) {
		t.Error("advance to 3 must clear 3 and only 3")
	}
	d.advance(3, 3+MaxWindow)
	if d.has(1) || d.has(65535) {
		t.Error("a jump of a whole window must clear everything")
	}
}

func TestPRNGNonZero(t *testing.T) {
	r := prng{s: 1}
	var seen [256]int
	buf := make([]byte, 1<<16)
	r.nonZero(buf)
	for _, c := range buf {
		seen[c]++
	}
	if seen[0] != 0 {
		t.Fatal("nonZero produced a zero")
	}
	for c := 1; c < 256; c++ {
		// 65536/255 ≈ 257 each; 6σ ≈ 96.
		if seen[c] < 150 || seen[c] > 370 {
			t.Errorf("byte %#x drawn %d times of 65536", c, seen[c])
		}
	}
}
