package packet

import (
	"bytes"
	"testing"
)

func TestIPv6Options(t *testing.T) {
	type opt struct {
		typ  uint8
		data string
		off  int
	}
	rows := []struct {
		name string
		hex  string
		err  error
		opts []opt
	}{
		{name: "router alert + PadN (RFC 2711)", hex: "11 00 05020000 0100",
			opts: []opt{{5, "0000", 2}, {IPv6OptPadN, "", 6}}},
		{name: "Pad1 only", hex: "3b 00 000000000000",
			opts: []opt{{0, "", 2}, {0, "", 3}, {0, "", 4}, {0, "", 5}, {0, "", 6}, {0, "", 7}}},
		{name: "jumbo payload (RFC 2675)", hex: "3b 00 c204 00012345",
			opts: []opt{{0xc2, "00012345", 2}}},
		{name: "16 bytes, PadN 3", hex: "3b 01 1e06 010203040506 0103 000000 00",
			opts: []opt{{0x1e, "010203040506", 2}, {IPv6OptPadN, "000000", 10}, {0, "", 15}}},
		{name: "short", hex: "3b 00 000000", err: ErrTruncated},
		{name: "header past data", hex: "3b 01 0000000000000000", err: ErrExtTooLong},
		{name: "option past header", hex: "3b 00 1e07 00000000", err: ErrOptionTooLong},
		{name: "type in last byte", hex: "3b 00 0000000000 1e", err: ErrOptionTooLong},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			b := IPv6Options(mustHex(t, row.hex))
			if err := b.Validate(); err != row.err {
				t.Fatalf("Validate = %v, want %v", err, row.err)
			}
			if row.err != nil {
				return
			}
			it := b.Options()
			var got []IPv6Option
			for o, ok := it.Next(); ok; o, ok = it.Next() {
				i := len(got)
				if i >= len(row.opts) {
					t.Fatalf("extra option %+v", o)
				}
				w := row.opts[i]
				if o.Type != w.typ || !bytes.Equal(o.Data, mustHex(t, w.data)) || it.Off() != w.off {
					t.Fatalf("option %d = %d %x at %d, want %+v", i, o.Type, o.Data, it.Off(), w)
				}
				got = append(got, o)
			}
			if it.Err() != nil || len(got) != len(row.opts) {
				t.Fatalf("%d options, err %v", len(got), it.Err())
			}
			// Round trip: PutIPv6Options of the same options gives the same bytes.
			out := make([]byte, 64)
			n, err := PutIPv6Options(out, b.NextHeader(), got)
			if err != nil || !bytes.Equal(out[:n], b) {
				t.Fatalf("PutIPv6Options = %x, %v; want %x", out[:n], err, []byte(b))
			}
		})
	}
}

func TestIPv6OptionFields(t *testing.T) {
	o := IPv6Option{Type: 0xc2}
	if o.Action() != 3 || o.MayChange() || o.IsPadding() {
		t.Fatal("0xc2")
	}
	o = IPv6Option{Type: 0x31} // IOAM (RFC 9486): skip, may change
	if o.Action() != 0 || !o.MayChange() || o.IsPadding() {
		t.Fatal("0x31")
	}
	if !(IPv6Option{Type: IPv6OptPad1}).IsPadding() || (IPv6Option{Type: IPv6OptPad1}).Len() != 1 {
		t.Fatal("Pad1")
	}
}

func TestPutIPv6Options(t *testing.T) {
	rows := []struct {
		name string
		opts []IPv6Option
		want string
		err  error
	}{
		{name: "empty: one PadN", want: "3a 00 0104 00000000"},
		{name: "RA: PadN of 0", opts: []IPv6Option{{Type: 5, Data: []byte{0, 0}}}, want: "3a 00 05020000 0100"},
		{name: "7 bytes: Pad1", opts: []IPv6Option{{Type: 0x1e, Data: []byte{1, 2, 3}}}, want: "3a 00 1e03010203 00"},
		{name: "exactly 8", opts: []IPv6Option{{Type: 0x1e, Data: []byte{1, 2, 3, 4}}}, want: "3a 00 1e0401020304"},
		{name: "9: grows to 16", opts: []IPv6Option{{Type: 0x1e, Data: []byte{1, 2, 3, 4, 5}}},
			want: "3a 01 1e050102030405 0105 0000000000"},
		{name: "option data over 255", opts: []IPv6Option{{Type: 0x1e, Data: make([]byte, 256)}}, err: ErrBadLength},
		{name: "header over 2048", opts: []IPv6Option{{Type: 0x1e, Data: make([]byte, 255)}, {Type: 0x1e, Data: make([]byte, 255)},
			{Type: 0x1e, Data: make([]byte, 255)}, {Type: 0x1e, Data: make([]byte, 255)}, {Type: 0x1e, Data: make([]byte, 255)},
			{Type: 0x1e, Data: make([]byte, 255)}, {Type: 0x1e, Data: make([]byte, 255)}, {Type: 0x1e, Data: make([]byte, 255)},
			{Type: 0x1e, Data: make([]byte, 255)}}, err: ErrBadLength},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			out := make([]byte, 4096)
			n, err := PutIPv6Options(out, ProtocolICMPv6, row.opts)
			if err != row.err {
				t.Fatalf("err %v, want %v", err, row.err)
			}
			if err != nil {
				return
			}
			if want := mustHex(t, row.want); !bytes.Equal(out[:n], want) || n != IPv6OptionsLen(row.opts) {
				t.Fatalf("got %x, want %x", out[:n], want)
			}
			if err := IPv6Options(out[:n]).Validate(); err != nil {
				t.Fatal(err)
			}
		})
	}
	if _, err := PutIPv6Options(make([]byte, 7), 0, nil); err != ErrNoSpace {
		t.Fatalf("short buffer: %v", err)
	}
}

func TestIPv6Fragment(t *testing.T) {
	b := IPv6Fragment(mustHex(t, "11 00 05a9 deadbeef"))
	if err := b.Validate(); err != nil {
		t.Fatal(err)
	}
	if b.NextHeader() != ProtocolUDP || b.FragmentOffset() != 0x05a8 || !b.More() || b.ID() != 0xdeadbeef {
		t.Fatalf("%d %d %v %#x", b.NextHeader(), b.FragmentOffset(), b.More(), b.ID())
	}
	out := make(IPv6Fragment, 8)
	out.Encode(b.NextHeader(), b.FragmentOffset(), b.More(), b.ID())
	if !bytes.Equal(out, b) {
		t.Fatalf("Encode = %x", []byte(out))
	}
	if IPv6Fragment(b[:7]).Validate() != ErrTruncated {
		t.Fatal("short fragment header")
	}
}

func TestIPv6Routing(t *testing.T) {
	b := IPv6Routing(mustHex(t, "3b 01 03 02 00000000 0000000000000000"))
	if err := b.Validate(); err != nil {
		t.Fatal(err)
	}
	if b.NextHeader() != ProtocolNoNext || b.HdrExtLen() != 1 || b.Len() != 16 || b.RoutingType() != 3 ||
		b.SegmentsLeft() != 2 || len(b.TypeData()) != 12 {
		t.Fatal("fields")
	}
	b.SetSegmentsLeft(1)
	b.SetNextHeader(ProtocolUDP)
	if b.SegmentsLeft() != 1 || b.NextHeader() != ProtocolUDP {
		t.Fatal("setters")
	}
	if IPv6Routing(b[:15]).Validate() != ErrExtTooLong || IPv6Routing(b[:7]).Validate() != ErrTruncated {
		t.Fatal("malformed")
	}
}

func TestAH(t *testing.T) {
	// RFC 4302: Payload Len 4 → (4+2)×4 = 24 bytes: 12 fixed, 12 of ICV
	// (HMAC-SHA1-96).
	b := AH(mustHex(t, "11 04 0000 00000100 00000007 0102030405060708090a0b0c"))
	if err := b.Validate(); err != nil {
		t.Fatal(err)
	}
	if b.NextHeader() != ProtocolUDP || b.PayloadLen() != 4 || b.Len() != 24 || b.SPI() != 0x100 || b.Seq() != 7 ||
		!bytes.Equal(b.ICV(), mustHex(t, "0102030405060708090a0b0c")) {
		t.Fatal("fields")
	}
	rows := []struct {
		hex string
		err error
	}{
		{"11 01 0000 00000100 00000007", nil}, // no ICV
		{"11 01 0000 00000100 000000", ErrTruncated},
		{"11 00 0000 00000100 00000007", ErrBadLength},
		{"11 02 0000 00000100 00000007", ErrExtTooLong},
	}
	for _, row := range rows {
		if err := AH(mustHex(t, row.hex)).Validate(); err != row.err {
			t.Errorf("%s: %v, want %v", row.hex, err, row.err)
		}
	}
}

func TestESP(t *testing.T) {
	b := ESP(mustHex(t, "00001000 00000001 ffff"))
	if b.Validate() != nil || b.SPI() != 0x1000 || b.Seq() != 1 {
		t.Fatal("fields")
	}
	if ESP(b[:7]).Validate() != ErrTruncated {
		t.Fatal("short")
	}
}
