package packet

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"math/rand/v2"
	"net/netip"
	"os/exec"
	"reflect"
	"strings"
	"testing"

	"github.com/linerate/linerate/internal/testenv"
)

// srhFigure is an SRH laid out field by field from the RFC 8754 §2 figure: next
// header UDP, Hdr Ext Len 6 (three segments), Segments Left 2, Last Entry 2,
// Flags 0, Tag 0x1234, Segment List [2001:db8::3, 2001:db8::2, 2001:db8::1].
// Scapy 2.5's IPv6ExtHdrSegmentRouting writes the same bytes.
const srhFigure = "11 06 04 02 02 00 1234" +
	"20010db8000000000000000000000003" +
	"20010db8000000000000000000000002" +
	"20010db8000000000000000000000001"

func TestSRH(t *testing.T) {
	b := SRH(mustHex(t, srhFigure))
	if err := b.Validate(); err != nil {
		t.Fatal(err)
	}
	if b.NextHeader() != ProtocolUDP || b.HdrExtLen() != 6 || b.Len() != 56 || b.RoutingType() != RoutingTypeSRH ||
		b.SegmentsLeft() != 2 || b.LastEntry() != 2 || b.NumSegments() != 3 || b.Flags() != 0 || b.Tag() != 0x1234 ||
		len(b.TLVArea()) != 0 {
		t.Fatal("fields")
	}
	for i, want := range []string{"2001:db8::3", "2001:db8::2", "2001:db8::1"} {
		if got := b.SegmentAddr(i); got != netip.MustParseAddr(want) {
			t.Errorf("segment %d = %v, want %s", i, got, want)
		}
	}
	if a, ok := b.ActiveSegment(); !ok || netip.AddrFrom16(a) != netip.MustParseAddr("2001:db8::1") {
		t.Errorf("ActiveSegment = %v %v", a, ok)
	}
	// An End behaviour: decrement Segments Left, take the next segment.
	b.SetSegmentsLeft(b.SegmentsLeft() - 1)
	if a, _ := b.ActiveSegment(); netip.AddrFrom16(a) != netip.MustParseAddr("2001:db8::2") {
		t.Errorf("ActiveSegment after End = %v", netip.AddrFrom16(a))
	}
	b.SetSegmentsLeft(3) // reduced SRH: the active segment is not in the list
	if err := b.Validate(); err != nil {
		t.Fatalf("SL = LE+1: %v", err)
	}
	if _, ok := b.ActiveSegment(); ok {
		t.Error("ActiveSegment beyond the list")
	}
	b.SetNextHeader(ProtocolNoNext)
	b.SetFlags(0x80)
	b.SetTag(7)
	b.SetSegment(1, netip.MustParseAddr("2001:db8::99").As16())
	if b.NextHeader() != ProtocolNoNext || b.Flags() != 0x80 || b.Tag() != 7 || b.SegmentAddr(1) != netip.MustParseAddr("2001:db8::99") {
		t.Error("setters")
	}
}

func TestSRHMalformed(t *testing.T) {
	rows := []struct {
		name string
		mod  func(b []byte) []byte
		err  error
	}{
		{"short", func(b []byte) []byte { return b[:7] }, ErrTruncated},
		{"header past data", func(b []byte) []byte { return b[:55] }, ErrExtTooLong},
		{"routing type 3", func(b []byte) []byte { b[2] = 3; return b }, ErrBadSRH},
		{"last entry past header", func(b []byte) []byte { b[4] = 3; return b }, ErrBadSRH},
		{"segments left past last entry + 1", func(b []byte) []byte { b[3] = 4; return b }, ErrBadSRH},
		{"hdr ext len odd, list fits", func(b []byte) []byte { b[1] = 7; return append(b, 1, 6, 0, 0, 0, 0, 0, 0) }, nil},
		{"TLV past header", func(b []byte) []byte { b[1] = 7; return append(b, 6, 7, 0, 0, 0, 0, 0, 0) }, ErrOptionTooLong},
		{"TLV type in last byte", func(b []byte) []byte { b[1] = 7; return append(b, 0, 0, 0, 0, 0, 0, 0, 6) }, ErrOptionTooLong},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			b := row.mod(mustHex(t, srhFigure))
			if err := SRH(b).Validate(); err != row.err {
				t.Fatalf("Validate = %v, want %v", err, row.err)
			}
			if SRH(b).IsValid() != (row.err == nil) {
				t.Fatal("IsValid disagrees")
			}
		})
	}
}

func TestSRHTLVs(t *testing.T) {
	// One segment, then an HMAC TLV (RFC 8754 §2.1.2: type 5, D bit, key id,
	// 32 bytes of HMAC), Pad1, and PadN.
	h := "3b 07 04 00 00 00 0000" + "20010db8000000000000000000000001" +
		"05 26 0000 0000000a" + strings.Repeat("ab", 32) + "00" + "04 00"
	// 8 + 16 + 40 + 1 + 2 = 67: not a multiple of 8, so pad the header length.
	b := mustHex(t, h)
	b[1] = uint8((len(b)+7)/8 - 1)
	n := (int(b[1]) + 1) * 8
	b = append(b, make([]byte, n-len(b))...)
	// Replace the trailing zero bytes by a PadN covering them.
	copy(b[67-2:], []byte{SRHTLVPadN, uint8(n - 67)})
	if err := SRH(b).Validate(); err != nil {
		t.Fatalf("Validate: %v\n%s", err, hex.Dump(b))
	}
	it := SRH(b).TLVs()
	var types []uint8
	for tlv, ok := it.Next(); ok; tlv, ok = it.Next() {
		types = append(types, tlv.Type)
		if tlv.Type == SRHTLVHMAC && (len(tlv.Data) != 38 || tlv.Data[5] != 0x0a) {
			t.Errorf("HMAC TLV data %x", tlv.Data)
		}
	}
	if !reflect.DeepEqual(types, []uint8{SRHTLVHMAC, SRHTLVPad1, SRHTLVPadN}) || it.Err() != nil {
		t.Fatalf("TLV types %v, err %v", types, it.Err())
	}
	// Round trip through Fields and PutSRH.
	f := SRH(b).Fields()
	out := make([]byte, 256)
	m, err := PutSRH(out, &f)
	if err != nil || !bytes.Equal(out[:m], b) {
		t.Fatalf("PutSRH = %x, %v\nwant %x", out[:m], err, b)
	}
}

func TestPutSRH(t *testing.T) {
	seg := func(s string) [16]byte { return netip.MustParseAddr(s).As16() }
	f := SRHFields{
		NextHeader: ProtocolUDP, SegmentsLeft: 2, Tag: 0x1234,
		Segments: [][16]byte{seg("2001:db8::3"), seg("2001:db8::2"), seg("2001:db8::1")},
	}
	out := make([]byte, 128)
	n, err := PutSRH(out, &f)
	if err != nil || !bytes.Equal(out[:n], mustHex(t, srhFigure)) || n != f.Len() {
		t.Fatalf("PutSRH = %x, %v", out[:n], err)
	}
	// A TLV that leaves the header short of 8-byte units gets padding.
	f.TLVs = []SRHTLV{{Type: 6, Data: []byte("abc")}}
	n, err = PutSRH(out, &f)
	if err != nil || n != 64 || !bytes.Equal(out[56:64], []byte{6, 3, 'a', 'b', 'c', SRHTLVPadN, 1, 0}) {
		t.Fatalf("PutSRH with TLV = %x, %v", out[:n], err)
	}
	if err := SRH(out[:n]).Validate(); err != nil {
		t.Fatal(err)
	}
	f.TLVs = []SRHTLV{{Type: 6, Data: []byte("abcd")}} // 8+48+6 = 62: a PadN of length 0
	n, _ = PutSRH(out, &f)
	if n != 64 || out[62] != SRHTLVPadN || out[63] != 0 {
		t.Fatalf("2 bytes of padding: %x", out[56:n])
	}
	f.TLVs = []SRHTLV{{Type: 6, Data: []byte("abcde")}}
	n, _ = PutSRH(out, &f)
	if n != 64 || out[63] != SRHTLVPad1 {
		t.Fatalf("1 byte of padding: %x", out[56:n])
	}

	errs := []struct {
		name string
		f    SRHFields
		buf  int
		err  error
	}{
		{"no segments", SRHFields{}, 64, ErrBadSRH},
		{"128 segments", SRHFields{Segments: make([][16]byte, 128)}, 4096, ErrBadSRH},
		{"segments left > n", SRHFields{Segments: make([][16]byte, 2), SegmentsLeft: 3}, 64, ErrBadSRH},
		{"TLV over 255", SRHFields{Segments: make([][16]byte, 1), TLVs: []SRHTLV{{Type: 6, Data: make([]byte, 256)}}}, 4096, ErrBadLength},
		{"header over 2048", SRHFields{Segments: make([][16]byte, 127), TLVs: []SRHTLV{{Type: 6, Data: make([]byte, 10)}}}, 4096, ErrBadLength},
		{"short buffer", SRHFields{Segments: make([][16]byte, 2)}, 39, ErrNoSpace},
	}
	for _, e := range errs {
		if _, err := PutSRH(make([]byte, e.buf), &e.f); err != e.err {
			t.Errorf("%s: %v, want %v", e.name, err, e.err)
		}
	}
	// The largest: 127 segments, Hdr Ext Len 254.
	big := SRHFields{Segments: make([][16]byte, 127), SegmentsLeft: 126}
	buf := make([]byte, 4096)
	if n, err := PutSRH(buf, &big); err != nil || n != 8+127*16 || SRH(buf[:n]).Validate() != nil {
		t.Fatalf("127 segments: %d %v", n, err)
	}
}

// TestSRHScapy compares PutSRH with the SRH Scapy (a separate implementation, in
// Python) builds from the same fields, and reads Scapy's bytes back.
func TestSRHScapy(t *testing.T) {
	err := exec.Command("/usr/bin/python3", "-c", "import scapy.layers.inet6").Run()
	testenv.Require(t, "python3-scapy (/usr/bin/python3)", err == nil)

	type tc struct {
		NH, SL, Flags int
		Tag           int
		Segs          []string
		TLV           string // hex of one TLV's value, or ""
	}
	r := rand.New(rand.NewPCG(31, 32))
	var cases []tc
	var fields []SRHFields
	for i := 0; i < 40; i++ {
		n := 1 + r.IntN(10)
		c := tc{NH: []int{ProtocolUDP, ProtocolIPv6, ProtocolNoNext, ProtocolIPv4}[r.IntN(4)], SL: r.IntN(n + 1), Tag: r.IntN(65536)}
		if r.IntN(2) == 0 {
			c.Flags = r.IntN(256)
		}
		f := SRHFields{NextHeader: uint8(c.NH), SegmentsLeft: uint8(c.SL), Flags: uint8(c.Flags), Tag: uint16(c.Tag)}
		for j := 0; j < n; j++ {
			a := [16]byte(randBytes(r, 16))
			f.Segments = append(f.Segments, a)
			c.Segs = append(c.Segs, netip.AddrFrom16(a).String())
		}
		if r.IntN(3) == 0 {
			v := randBytes(r, 1+r.IntN(20))
			c.TLV = hex.EncodeToString(v)
			f.TLVs = []SRHTLV{{Type: 6, Data: v}}
		}
		cases = append(cases, c)
		fields = append(fields, f)
	}
	in, _ := json.Marshal(cases)
	// Scapy splits Flags into the bits of draft-ietf-6man-segment-routing-header:
	// U P O A H and three unused.
	const script = `
import json, sys
from scapy.layers.inet6 import IPv6ExtHdrSegmentRouting as S, IPv6ExtHdrSegmentRoutingTLV as T
for c in json.load(sys.stdin):
    tlvs = []
    if c["TLV"]:
        v = bytes.fromhex(c["TLV"])
        tlvs = [T(type=6, len=len(v), value=v)]
    f = c["Flags"]
    p = S(nh=c["NH"], segleft=c["SL"], lastentry=len(c["Segs"]) - 1, tag=c["Tag"],
          addresses=c["Segs"], tlv_objects=tlvs,
          unused1=f >> 7, protected=(f >> 6) & 1, oam=(f >> 5) & 1, alert=(f >> 4) & 1, hmac=(f >> 3) & 1, unused2=f & 7)
    print(bytes(p).hex())
`
	cmd := exec.Command("/usr/bin/python3", "-c", script)
	cmd.Stdin = bytes.NewReader(in)
	outb, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("scapy: %v\n%s", err, outb)
	}
	lines := strings.Fields(string(outb))
	if len(lines) != len(cases) {
		t.Fatalf("scapy printed %d lines for %d cases:\n%s", len(lines), len(cases), outb)
	}
	for i, line := range lines {
		want, _ := hex.DecodeString(line)
		buf := make([]byte, 512)
		n, err := PutSRH(buf, &fields[i])
		if err != nil {
			t.Fatal(err)
		}
		got := buf[:n]
		// Scapy pads with PadN where PutSRH uses Pad1 for one byte; compare up
		// to the padding, then check both are well-formed.
		body := 8 + 16*len(fields[i].Segments)
		if len(fields[i].TLVs) > 0 {
			body += 2 + len(fields[i].TLVs[0].Data)
		}
		if len(want) < body || !bytes.Equal(got[2:body], want[2:body]) || got[0] != want[0] {
			t.Fatalf("case %d %+v:\n got %x\nscapy %x", i, cases[i], got, want)
		}
		s := SRH(want)
		if err := s.Validate(); err != nil {
			t.Fatalf("case %d: scapy's SRH: %v", i, err)
		}
		if s.NextHeader() != fields[i].NextHeader || s.SegmentsLeft() != fields[i].SegmentsLeft || s.Tag() != fields[i].Tag ||
			s.Flags() != fields[i].Flags || s.NumSegments() != len(fields[i].Segments) || s.Segment(0) != fields[i].Segments[0] {
			t.Fatalf("case %d: reading scapy's SRH: %+v", i, s.Fields())
		}
	}
}
