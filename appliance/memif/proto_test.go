package memif

import (
	"testing"
)

// TestMsgRoundTrip holds Encode and Decode to each other for every message,
// and to libmemif's offsets for hello and add_ring.
func TestMsgRoundTrip(t *testing.T) {
	msgs := []Msg{
		{Type: MsgAck},
		{Type: MsgHello, Name: "DPDK 22.11.11", MinVersion: Version, MaxVersion: Version, MaxRegion: 255, MaxC2S: 3, MaxS2C: 1, MaxLog2Ring: 14},
		{Type: MsgInit, Version: Version, ID: 7, Secret: "s3cret", Name: "linerate"},
		{Type: MsgAddRegion, Index: 2, Size: 1 << 33},
		{Type: MsgAddRing, Flags: addRingFlagC2S, Index: 1, Region: 0, Offset: 4224, Log2Ring: 10},
		{Type: MsgConnect, Name: "if0"},
		{Type: MsgConnected, Name: "if1"},
		{Type: MsgDisconnect, Code: 3, Reason: "Incorrect secret"},
	}
	for _, m := range msgs {
		var b [MsgSize]byte
		m.Encode(&b)
		got, err := Decode(b[:])
		if err != nil || got != m {
			t.Errorf("%s: decoded %+v, %v", m.Type, got, err)
		}
	}
	var b [MsgSize]byte
	msgs[1].Encode(&b)
	// memif_msg_hello_t: name[32], min, max, max_region, max_m2s_ring, max_s2m_ring, max_log2_ring_size
	if b[0] != 2 || b[2] != 'D' || b[40] != 1 || b[42] != 3 || b[44] != 14 {
		t.Errorf("hello bytes % x", b[:48])
	}
	msgs[4].Encode(&b)
	// memif_msg_add_ring_t: flags, index, region, offset, log2_ring_size, private_hdr_size
	if b[2] != 1 || b[4] != 1 || b[8] != 0x80 || b[9] != 0x10 || b[12] != 10 {
		t.Errorf("add_ring bytes % x", b[:16])
	}
}

// TestDecodeRefuses: a wrong size or an unknown type is an error.
func TestDecodeRefuses(t *testing.T) {
	if _, err := Decode(make([]byte, 127)); err == nil {
		t.Error("127 bytes decoded")
	}
	b := make([]byte, MsgSize)
	b[0] = 9
	if _, err := Decode(b); err == nil {
		t.Error("type 9 decoded")
	}
}

// FuzzDecode: any 128 bytes decode or fail without a panic, and what decodes
// encodes to a message that decodes the same.
func FuzzDecode(f *testing.F) {
	for _, m := range []Msg{{Type: MsgHello, Name: "x"}, {Type: MsgAddRing, Index: 1}, {Type: MsgDisconnect, Reason: "r"}} {
		var b [MsgSize]byte
		m.Encode(&b)
		f.Add(b[:])
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		m, err := Decode(in)
		if err != nil {
			return
		}
		var b [MsgSize]byte
		m.Encode(&b)
		m2, err := Decode(b[:])
		if err != nil || m2 != m {
			// Strings stop at the first NUL and lose what follows; nothing else
			// may change.
			t.Fatalf("re-decoded %+v as %+v (%v)", m, m2, err)
		}
	})
}

// TestBufBounds: a descriptor is inside its region or refused.
func TestBufBounds(t *testing.T) {
	r, err := NewRegion("t", 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rs := []*Region{r}
	for _, c := range []struct {
		d  Desc
		ok bool
	}{
		{Desc{Offset: 0, Length: 4096}, true},
		{Desc{Offset: 4000, Length: 96}, true},
		{Desc{Offset: 4000, Length: 97}, false},
		{Desc{Offset: 0xFFFFFFFF, Length: 0xFFFFFFFF}, false},
		{Desc{Region: 1, Length: 1}, false},
	} {
		if _, ok := Buf(rs, c.d); ok != c.ok {
			t.Errorf("%+v: %v", c.d, ok)
		}
	}
}
