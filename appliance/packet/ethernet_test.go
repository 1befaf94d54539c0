package packet

import (
	"bytes"
	"testing"
)

func TestEthernet(t *testing.T) {
	rows := []struct {
		name   string
		hex    string
		err    error
		tags   []VLANTag
		etype  uint16
		hdrLen int
		dst    MAC
		src    MAC
	}{
		{name: "untagged", hex: "020000000002 020000000001 86dd", etype: EtherTypeIPv6, hdrLen: 14,
			dst: MAC{2, 0, 0, 0, 0, 2}, src: MAC{2, 0, 0, 0, 0, 1}},
		{name: "802.1Q", hex: "ffffffffffff 020000000001 8100 a00a 0800", etype: EtherTypeIPv4, hdrLen: 18,
			tags: []VLANTag{{TPID: 0x8100, PCP: 5, VID: 10}},
			dst:  MAC{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, src: MAC{2, 0, 0, 0, 0, 1}},
		{name: "802.1ad QinQ", hex: "020000000002 020000000001 88a8 3064 8100 f0c8 86dd", etype: EtherTypeIPv6, hdrLen: 22,
			tags: []VLANTag{{TPID: 0x88a8, PCP: 1, DEI: true, VID: 100}, {TPID: 0x8100, PCP: 7, DEI: true, VID: 200}},
			dst:  MAC{2, 0, 0, 0, 0, 2}, src: MAC{2, 0, 0, 0, 0, 1}},
		{name: "double 8100", hex: "020000000002 020000000001 8100 0fff 8100 0001 0806", etype: EtherTypeARP, hdrLen: 22,
			tags: []VLANTag{{TPID: 0x8100, VID: 4095}, {TPID: 0x8100, VID: 1}},
			dst:  MAC{2, 0, 0, 0, 0, 2}, src: MAC{2, 0, 0, 0, 0, 1}},
		{name: "802.3 length", hex: "020000000002 020000000001 0040", etype: 0x40, hdrLen: 14,
			dst: MAC{2, 0, 0, 0, 0, 2}, src: MAC{2, 0, 0, 0, 0, 1}},
		{name: "short", hex: "020000000002 020000000001 86", err: ErrTruncated},
		{name: "tag without type", hex: "020000000002 020000000001 8100 0001", err: ErrTruncated},
		{name: "inner tag without type", hex: "020000000002 020000000001 88a8 0001 8100 0002", err: ErrTruncated},
		{name: "three tags", hex: "020000000002 020000000001 88a8 0001 8100 0002 8100 0003 0800", err: ErrTooManyVLANs},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			b := Ethernet(mustHex(t, row.hex))
			if err := b.Validate(); err != row.err {
				t.Fatalf("Validate = %v, want %v", err, row.err)
			}
			if row.err != nil {
				if b.IsValid() {
					t.Fatal("IsValid = true")
				}
				return
			}
			if b.Dst() != row.dst || b.Src() != row.src || b.EtherType() != row.etype ||
				b.HeaderLen() != row.hdrLen || b.NumTags() != len(row.tags) {
				t.Fatalf("dst %v src %v type %#x len %d tags %d", b.Dst(), b.Src(), b.EtherType(), b.HeaderLen(), b.NumTags())
			}
			for i, want := range row.tags {
				if got := b.Tag(i); got != want {
					t.Errorf("tag %d = %+v, want %+v", i, got, want)
				}
			}
			// Fields → Encode gives back the same bytes.
			f := b.Fields()
			if f.HeaderLen() != row.hdrLen {
				t.Fatalf("Fields.HeaderLen = %d", f.HeaderLen())
			}
			out := make(Ethernet, f.HeaderLen())
			out.Encode(&f)
			if !bytes.Equal(out, b[:row.hdrLen]) {
				t.Fatalf("Encode = %x, want %x", []byte(out), []byte(b))
			}
		})
	}
}

func TestEthernetSetters(t *testing.T) {
	b := Ethernet(mustHex(t, "020000000002 020000000001 8100 a00a 0800"))
	b.SwapMAC()
	if b.Dst() != (MAC{2, 0, 0, 0, 0, 1}) || b.Src() != (MAC{2, 0, 0, 0, 0, 2}) {
		t.Fatalf("SwapMAC: %v %v", b.Dst(), b.Src())
	}
	b.SetDst(MAC{1, 2, 3, 4, 5, 6})
	b.SetSrc(MAC{7, 8, 9, 10, 11, 12})
	b.SetEtherType(EtherTypeIPv6)
	b.SetTag(0, VLANTag{TPID: EtherTypeQinQ, PCP: 2, VID: 33})
	want := mustHex(t, "010203040506 0708090a0b0c 88a8 4021 86dd")
	if !bytes.Equal(b, want) {
		t.Fatalf("got %x\nwant %x", []byte(b), want)
	}
	if s := (MAC{0xde, 0xad, 0xbe, 0xef, 0, 1}).String(); s != "de:ad:be:ef:00:01" {
		t.Errorf("String = %q", s)
	}
	// Encode picks TPIDs for tags that name none: 88a8 outside, 8100 inside.
	f := EthernetFields{NumTags: 2, Tags: [2]VLANTag{{VID: 1}, {VID: 2}}, Type: EtherTypeIPv4}
	out := make(Ethernet, f.HeaderLen())
	out.Encode(&f)
	if out.Tag(0).TPID != EtherTypeQinQ || out.Tag(1).TPID != EtherTypeVLAN || out.EtherType() != EtherTypeIPv4 {
		t.Fatalf("default TPIDs: %x", []byte(out))
	}
}
