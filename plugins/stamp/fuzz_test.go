package stamp

import (
	"bytes"
	"reflect"
	"testing"
)

// seedPackets adds the golden packets and a few TLV areas to a fuzz corpus.
func seedPackets(f *testing.F, role string) {
	g := loadGolden(f)
	for _, p := range g.Packets {
		if p.Role == role {
			f.Add(unhex(f, p.Hex), p.Auth)
		}
	}
	for _, v := range g.TLVs {
		base := make([]byte, BaseLen)
		f.Add(append(base, unhex(f, v)...), false)
	}
	f.Add(make([]byte, BaseAuthLen), true)
}

// Parse → encode → parse gives back the same fields, and encoding is stable.
func FuzzSender(f *testing.F) {
	seedPackets(f, "sender")
	f.Fuzz(func(t *testing.T, data []byte, auth bool) {
		a, err := ParseSender(data, auth)
		if err != nil {
			return
		}
		buf := make([]byte, a.Len())
		n, err := EncodeSender(buf, &a)
		if err != nil || n != len(buf) {
			t.Fatalf("encode: %v", err)
		}
		b, err := ParseSender(buf, auth)
		if err != nil || !reflect.DeepEqual(a, b) {
			t.Fatalf("round trip: %v\n%+v\n%+v", err, a, b)
		}
		buf2 := make([]byte, b.Len())
		if _, err := EncodeSender(buf2, &b); err != nil || !bytes.Equal(buf, buf2) {
			t.Fatal("encoding not stable")
		}
	})
}

func FuzzReflector(f *testing.F) {
	seedPackets(f, "reflector")
	f.Fuzz(func(t *testing.T, data []byte, auth bool) {
		a, err := ParseReflector(data, auth)
		if err != nil {
			return
		}
		buf := make([]byte, a.Len())
		if _, err := EncodeReflector(buf, &a); err != nil {
			t.Fatalf("encode: %v", err)
		}
		b, err := ParseReflector(buf, auth)
		if err != nil || !reflect.DeepEqual(a, b) {
			t.Fatalf("round trip: %v\n%+v\n%+v", err, a, b)
		}
	})
}

// TLV areas: the walk never panics, and a well-formed area round-trips; every
// typed decoder copes with any value.
func FuzzTLVs(f *testing.F) {
	g := loadGolden(f)
	for _, v := range g.TLVs {
		f.Add(unhex(f, v))
	}
	f.Add([]byte{0x80, 2, 0, 4, 0, 0, 0, 0})
	f.Add([]byte{0, 10, 0, 8, 0, 1, 0, 4, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, area []byte) {
		ts, err := ParseTLVs(area)
		it := NewTLVIter(area)
		for tv, ok := it.Next(); ok; tv, ok = it.Next() {
			tv.WellFormed()
			v := tv.Value()
			_, _ = DecodeClassOfService(v)
			_, _ = DecodeTimestampInfo(v)
			_, _ = DecodeDirectMeasurement(v)
			_, _ = DecodeAccessReport(v)
			_, _ = DecodeFollowUpTelemetry(v)
			_, _ = DecodeDestinationNodeAddress(v)
			if l, err := DecodeLocation(v); err == nil {
				if got := l.Encode(nil); !bytes.Equal(got, v) {
					t.Fatalf("location round trip %x → %x", v, got)
				}
			}
			if rp, err := DecodeReturnPath(v); err == nil {
				rp.SRv6Segments()
			}
		}
		if err != nil {
			return
		}
		buf := make([]byte, TLVsLen(ts))
		n, err := PutTLVs(buf, ts)
		if err != nil || !bytes.Equal(buf[:n], area) {
			t.Fatalf("put: %v\n got %x\nwant %x", err, buf[:n], area)
		}
		ts2, err := ParseTLVs(buf)
		if err != nil || !reflect.DeepEqual(ts, ts2) {
			t.Fatal("TLV round trip differs")
		}
	})
}
