package stamp

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"net/netip"
	"os"
	"reflect"
	"testing"

	"github.com/linerate/linerate/appliance/clock"
)

// golden is testdata/golden.json, written by testdata/golden.py from the RFC
// figures with Python's struct and hmac.
type golden struct {
	Key     string `json:"key"`
	Packets []struct {
		Name   string `json:"name"`
		Role   string `json:"role"`
		Auth   bool   `json:"auth"`
		Hex    string `json:"hex"`
		Seq    uint32 `json:"seq"`
		TS     uint64 `json:"ts"`
		UnixNs int64  `json:"unix_ns"`
		EE     uint16 `json:"ee"`
		SSID   uint16 `json:"ssid"`
		RX     uint64 `json:"rx"`
		SSeq   uint32 `json:"sseq"`
		STS    uint64 `json:"sts"`
		SEE    uint16 `json:"see"`
		TTL    uint8  `json:"ttl"`
		TLVMAC string `json:"tlv_hmac"`
	} `json:"packets"`
	ErrorEstimates []struct {
		ErrorNs    int64 `json:"error_ns"`
		Scale      uint8 `json:"scale"`
		Multiplier uint8 `json:"multiplier"`
	} `json:"error_estimates"`
	TLVs map[string]string `json:"tlvs"`
}

func loadGolden(t testing.TB) *golden {
	t.Helper()
	b, err := os.ReadFile("testdata/golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var g golden
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	return &g
}

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func goldenKey(t testing.TB, g *golden) *Key {
	t.Helper()
	k, err := NewKey(unhex(t, g.Key))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// The Go codecs read and write the golden packets byte for byte, and sign them
// with the same HMAC.
func TestGoldenPackets(t *testing.T) {
	g := loadGolden(t)
	key := goldenKey(t, g)
	for _, p := range g.Packets {
		t.Run(p.Name, func(t *testing.T) {
			want := unhex(t, p.Hex)
			switch p.Role {
			case "sender":
				f, err := ParseSender(want, p.Auth)
				if err != nil {
					t.Fatal(err)
				}
				if f.Seq != p.Seq || f.Timestamp != p.TS || uint16(f.ErrorEstimate) != p.EE || f.SSID != p.SSID {
					t.Fatalf("parsed %+v", f)
				}
				if p.UnixNs != 0 && f.ErrorEstimate.PTP() {
					if got := clock.FromPTP(f.Timestamp) - 37e9; got != p.UnixNs {
						t.Errorf("PTP timestamp is %d ns, want %d", got, p.UnixNs)
					}
				} else if p.UnixNs != 0 {
					if got := clock.NTP(p.UnixNs); got != f.Timestamp {
						t.Errorf("clock.NTP(%d) = %#x, the packet has %#x", p.UnixNs, got, f.Timestamp)
					}
				}
				buf := make([]byte, f.Len())
				n, err := EncodeSender(buf, &f)
				if err != nil || !bytes.Equal(buf[:n], want) {
					t.Fatalf("encode: %v\n got %x\nwant %x", err, buf[:n], want)
				}
				if p.Auth {
					if !key.VerifyBase(want) {
						t.Error("golden HMAC does not verify")
					}
					clear(buf[HMACCovered:BaseAuthLen])
					if err := key.SignBase(buf); err != nil || !bytes.Equal(buf, want) {
						t.Errorf("SignBase: %v\n got %x\nwant %x", err, buf, want)
					}
					view := SenderPacketAuth(want)
					if view.Seq() != p.Seq || view.Timestamp() != p.TS || view.SSID() != p.SSID || uint16(view.ErrorEstimate()) != p.EE {
						t.Error("SenderPacketAuth view disagrees")
					}
				} else {
					view := SenderPacket(want)
					if view.Seq() != p.Seq || view.Timestamp() != p.TS || view.SSID() != p.SSID || uint16(view.ErrorEstimate()) != p.EE {
						t.Error("SenderPacket view disagrees")
					}
				}
				if p.TLVMAC != "" {
					ok, err := key.VerifyTLVs(want, BaseLen)
					if !ok || err != nil {
						t.Errorf("HMAC TLV does not verify: %v", err)
					}
					c := append([]byte(nil), want...)
					off, found, _ := hmacTLV(c, BaseLen)
					if !found {
						t.Fatal("no HMAC TLV found")
					}
					clear(c[off+TLVHeaderLen : off+TLVHeaderLen+HMACLen])
					if ok, err := key.SignTLVs(c, BaseLen); !ok || err != nil || !bytes.Equal(c, want) {
						t.Errorf("SignTLVs: %v %v", ok, err)
					}
					if hex.EncodeToString(want[off+4:off+20]) != p.TLVMAC {
						t.Error("HMAC TLV offset")
					}
				}
			case "reflector":
				f, err := ParseReflector(want, p.Auth)
				if err != nil {
					t.Fatal(err)
				}
				if f.Seq != p.Seq || f.Timestamp != p.TS || uint16(f.ErrorEstimate) != p.EE || f.SSID != p.SSID ||
					f.ReceiveTimestamp != p.RX || f.SenderSeq != p.SSeq || f.SenderTimestamp != p.STS ||
					uint16(f.SenderErrorEstimate) != p.SEE || f.SenderTTL != p.TTL {
					t.Fatalf("parsed %+v", f)
				}
				buf := make([]byte, f.Len())
				n, err := EncodeReflector(buf, &f)
				if err != nil || !bytes.Equal(buf[:n], want) {
					t.Fatalf("encode: %v\n got %x\nwant %x", err, buf[:n], want)
				}
				if p.Auth {
					if !key.VerifyBase(want) {
						t.Error("golden HMAC does not verify")
					}
					v := ReflectorPacketAuth(want)
					if v.SenderSeq() != p.SSeq || v.SenderTTL() != p.TTL || v.ReceiveTimestamp() != p.RX || v.SenderTimestamp() != p.STS {
						t.Error("ReflectorPacketAuth view disagrees")
					}
					bad := append([]byte(nil), want...)
					bad[80] ^= 1 // the TTL is covered
					if key.VerifyBase(bad) {
						t.Error("a changed TTL still verifies")
					}
				} else {
					v := ReflectorPacket(want)
					if v.SenderSeq() != p.SSeq || v.SenderTTL() != p.TTL || v.ReceiveTimestamp() != p.RX || v.SenderTimestamp() != p.STS {
						t.Error("ReflectorPacket view disagrees")
					}
				}
			}
		})
	}
}

func TestGoldenErrorEstimates(t *testing.T) {
	for _, e := range loadGolden(t).ErrorEstimates {
		got := ErrorEstimateFor(true, false, e.ErrorNs)
		if got.Scale() != e.Scale || got.Multiplier() != e.Multiplier {
			t.Errorf("%d ns: scale %d multiplier %d, want %d %d", e.ErrorNs, got.Scale(), got.Multiplier(), e.Scale, e.Multiplier)
		}
		if e.ErrorNs > 0 && got.Nanoseconds() < float64(e.ErrorNs)-1e-9 {
			t.Errorf("%d ns encodes as %g ns: understated", e.ErrorNs, got.Nanoseconds())
		}
	}
}

// The typed TLV codecs make the golden TLV values.
func TestGoldenTLVs(t *testing.T) {
	g := loadGolden(t)
	build := map[string][]byte{
		"extra_padding":            AppendTLV(nil, FlagU, TLVExtraPadding, make([]byte, 12)),
		"location":                 AppendTLV(nil, FlagU, TLVLocation, LocationRequest()),
		"timestamp_info":           tlvOf(TLVTimestampInfo, TimestampInfo{}.Encode()),
		"class_of_service":         tlvOf(TLVClassOfService, ClassOfService{DSCP1: 46}.Encode()),
		"direct_measurement":       tlvOf(TLVDirectMeasurement, DirectMeasurement{SenderTx: 5}.Encode()),
		"access_report":            tlvOf(TLVAccessReport, AccessReport{ID: 1, ReturnCode: 1}.Encode()),
		"follow_up_telemetry":      tlvOf(TLVFollowUpTelemetry, FollowUpTelemetry{}.Encode()),
		"destination_node_address": AppendTLV(nil, FlagU, TLVDestinationNodeAddress, DestinationNodeAddress(netip.MustParseAddr("2001:db8:b::2"))),
		"return_path": AppendTLV(nil, FlagU, TLVReturnPath, ReturnPathSRv6([]netip.Addr{
			netip.MustParseAddr("2001:db8:e::1"), netip.MustParseAddr("2001:db8:a::2")})),
	}
	for name, want := range g.TLVs {
		got, ok := build[name]
		if !ok {
			t.Errorf("no builder for %s", name)
			continue
		}
		if !bytes.Equal(got, unhex(t, want)) {
			t.Errorf("%s:\n got %x\nwant %s", name, got, want)
		}
		it := NewTLVIter(got)
		tv, ok := it.Next()
		if !ok || !tv.WellFormed() || TLVName(tv.Type()) != name {
			t.Errorf("%s: not well formed or misnamed (%s)", name, TLVName(tv.Type()))
		}
	}
	// Decoders give back what went in.
	cb := ClassOfService{DSCP1: 46, DSCP2: 10, ECN: 3, RP: 1}.Encode()
	cos, _ := DecodeClassOfService(cb[:])
	if cos != (ClassOfService{46, 10, 3, 1}) {
		t.Errorf("CoS %+v", cos)
	}
	dm, _ := DecodeDirectMeasurement(func() []byte { b := DirectMeasurement{1, 2, 3}.Encode(); return b[:] }())
	if dm != (DirectMeasurement{1, 2, 3}) {
		t.Errorf("DM %+v", dm)
	}
	rp, err := DecodeReturnPath(ReturnPathSRv6([]netip.Addr{netip.MustParseAddr("2001:db8::1")}))
	segs, ok := rp.SRv6Segments()
	if err != nil || !ok || len(segs) != 1 || segs[0] != netip.MustParseAddr("2001:db8::1") {
		t.Errorf("return path %v %v %v", segs, ok, err)
	}
}

func tlvOf(typ uint8, v any) []byte {
	var b []byte
	switch x := v.(type) {
	case [4]byte:
		b = x[:]
	case [12]byte:
		b = x[:]
	case [16]byte:
		b = x[:]
	}
	return AppendTLV(nil, FlagU, typ, b)
}

// Field offsets, one row per RFC figure.
func TestLayouts(t *testing.T) {
	for _, c := range []struct {
		name string
		l    *layout
		want layout
	}{
		{"sender (RFC 8762 Fig. 2)", &senderLayout, layout{44, 0, 4, 12, 14, -1, -1, -1, -1, -1, -1}},
		{"sender auth (Fig. 3)", &senderAuthLayout, layout{112, 0, 16, 24, 26, -1, -1, -1, -1, -1, 96}},
		{"reflector (Fig. 4)", &reflectorLayout, layout{44, 0, 4, 12, 14, 16, 24, 28, 36, 40, -1}},
		{"reflector auth (Fig. 5)", &reflectorAuthLayout, layout{112, 0, 16, 24, 26, 32, 48, 64, 72, 80, 96}},
	} {
		if *c.l != c.want {
			t.Errorf("%s: %+v", c.name, *c.l)
		}
	}
}

func TestErrorEstimate(t *testing.T) {
	e := MakeErrorEstimate(true, true, 63, 255)
	if !e.Synchronized() || !e.PTP() || e.Scale() != 63 || e.Multiplier() != 255 || uint16(e) != 0xFFFF {
		t.Errorf("%#x", uint16(e))
	}
	if MakeErrorEstimate(false, false, 0, 0).Validate() != ErrMultiplier {
		t.Error("zero multiplier accepted")
	}
	// 1 ms: 2^-32 s units = 4294967.296 → scale 15, multiplier 132 (132·2^15 = 4325376 ≥ 4294967).
	e = ErrorEstimateFor(false, false, 1e6)
	if e.Synchronized() || e.PTP() || e.Nanoseconds() < 1e6 || e.Nanoseconds() > 1.01e6 {
		t.Errorf("1 ms: scale %d mult %d = %g ns", e.Scale(), e.Multiplier(), e.Nanoseconds())
	}
}

// Table of TLV areas, malformed ones included.
func TestTLVIter(t *testing.T) {
	for _, c := range []struct {
		name  string
		area  []byte
		types []uint8
		err   error
	}{
		{"empty", nil, nil, nil},
		{"one", AppendTLV(nil, 0, 1, []byte{1, 2}), []uint8{1}, nil},
		{"two", AppendTLV(AppendTLV(nil, 0, 3, make([]byte, 4)), 0, 8, make([]byte, 16)), []uint8{3, 8}, nil},
		{"header cut", []byte{0x80, 1, 0}, nil, ErrTLVOverrun},
		{"length overruns", []byte{0x80, 1, 0, 9, 1, 2}, nil, ErrTLVOverrun},
		{"good then overrun", append(AppendTLV(nil, 0, 1, nil), 0, 2, 0, 4), []uint8{1}, ErrTLVOverrun},
	} {
		t.Run(c.name, func(t *testing.T) {
			it := NewTLVIter(c.area)
			var got []uint8
			for tv, ok := it.Next(); ok; tv, ok = it.Next() {
				got = append(got, tv.Type())
			}
			if !reflect.DeepEqual(got, c.types) || it.Err() != c.err {
				t.Errorf("types %v err %v", got, it.Err())
			}
		})
	}
}

func TestWellFormed(t *testing.T) {
	for _, c := range []struct {
		name string
		tlv  []byte
		ok   bool
	}{
		{"cos 4", AppendTLV(nil, 0, TLVClassOfService, make([]byte, 4)), true},
		{"cos 3", AppendTLV(nil, 0, TLVClassOfService, make([]byte, 3)), false},
		{"dm 12", AppendTLV(nil, 0, TLVDirectMeasurement, make([]byte, 12)), true},
		{"dm 8", AppendTLV(nil, 0, TLVDirectMeasurement, make([]byte, 8)), false},
		{"hmac 15", AppendTLV(nil, 0, TLVHMAC, make([]byte, 15)), false},
		{"location short", AppendTLV(nil, 0, TLVLocation, make([]byte, 3)), false},
		{"location request", AppendTLV(nil, 0, TLVLocation, LocationRequest()), true},
		{"location bad sub", AppendTLV(nil, 0, TLVLocation, AppendTLV([]byte{0, 0, 0, 0}, 0, SubDestinationIP, make([]byte, 4))), false},
		{"dna 16", AppendTLV(nil, 0, TLVDestinationNodeAddress, make([]byte, 16)), true},
		{"dna 5", AppendTLV(nil, 0, TLVDestinationNodeAddress, make([]byte, 5)), false},
		{"rp empty", AppendTLV(nil, 0, TLVReturnPath, nil), false},
		{"rp srv6 17", AppendTLV(nil, 0, TLVReturnPath, AppendTLV(nil, 0, SubReturnSRv6, make([]byte, 17))), false},
		{"rp cc", AppendTLV(nil, 0, TLVReturnPath, ReturnPathControlCode(1)), true},
		{"unknown type", AppendTLV(nil, 0, 200, make([]byte, 3)), true},
	} {
		it := NewTLVIter(c.tlv)
		tv, _ := it.Next()
		if tv.WellFormed() != c.ok {
			t.Errorf("%s: WellFormed %v", c.name, !c.ok)
		}
	}
}

func TestHMACTLVPlacement(t *testing.T) {
	key, _ := NewKey(make([]byte, 32))
	base := make([]byte, BaseLen)
	hm := AppendTLV(nil, 0, TLVHMAC, make([]byte, 16))
	ok := append(append(append([]byte(nil), base...), AppendTLV(nil, 0, TLVTimestampInfo, make([]byte, 4))...), hm...)
	if found, err := key.SignTLVs(ok, BaseLen); !found || err != nil {
		t.Fatalf("sign: %v %v", found, err)
	}
	if v, err := key.VerifyTLVs(ok, BaseLen); !v || err != nil {
		t.Fatal("does not verify")
	}
	ok[4] ^= 1 // outside the covered octets: the timestamp
	if v, _ := key.VerifyTLVs(ok, BaseLen); !v {
		t.Error("the HMAC TLV covers only the Sequence Number and the TLVs")
	}
	ok[0] ^= 1
	if v, _ := key.VerifyTLVs(ok, BaseLen); v {
		t.Error("a changed Sequence Number verifies")
	}
	notLast := append(append(append([]byte(nil), base...), hm...), AppendTLV(nil, 0, TLVTimestampInfo, make([]byte, 4))...)
	if _, err := key.VerifyTLVs(notLast, BaseLen); err != ErrHMACNotLast {
		t.Errorf("HMAC before another TLV: %v", err)
	}
	padAfter := append(append(append([]byte(nil), base...), hm...), AppendTLV(nil, 0, TLVExtraPadding, make([]byte, 4))...)
	if _, err := key.SignTLVs(padAfter, BaseLen); err != nil {
		t.Errorf("Extra Padding after the HMAC TLV: %v", err)
	}
}

func TestKeyFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := dir + "/" + name
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	hexKey := "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
	k, err := LoadKey(write("good", hexKey+"\n", 0o600))
	if err != nil || len(k.b) != 32 || k.b[31] != 0x1f {
		t.Fatalf("hex key: %v", err)
	}
	if _, err := LoadKey(write("open", hexKey, 0o644)); err == nil {
		t.Error("a group-readable key file was accepted")
	}
	if _, err := LoadKey(write("short", "00112233", 0o600)); err == nil {
		t.Error("a 4-byte key was accepted")
	}
	raw, err := LoadKey(write("raw", "this is a raw passphrase!", 0o400))
	if err != nil || string(raw.b) != "this is a raw passphrase!" {
		t.Errorf("raw key: %v", err)
	}
	// The key never shows in errors or formatting.
	_, err = LoadKey(write("open2", "supersecretsupersecret", 0o640))
	if err == nil || bytes.Contains([]byte(err.Error()), []byte("supersecret")) {
		t.Errorf("error %v", err)
	}
	for _, s := range []string{raw.String(), raw.GoString()} {
		if bytes.Contains([]byte(s), []byte("passphrase")) {
			t.Errorf("%q shows the key", s)
		}
	}
	if _, err := LoadKeyNamed(dir, "../good"); err == nil {
		t.Error("a key name with a path was accepted")
	}
	if k, err := LoadKeyNamed(dir, "good"); err != nil || len(k.b) != 32 {
		t.Errorf("named key: %v", err)
	}
}

// Every parse → encode → parse of a valid packet is the identity.
func TestRoundTrip(t *testing.T) {
	f := SenderFields{Seq: 9, Timestamp: 1 << 40, ErrorEstimate: 0x8001, SSID: 3, TLVs: []TLVFields{
		{Flags: FlagU, Type: TLVClassOfService, Value: []byte{0xb8, 0, 0, 0}},
		{Flags: FlagU, Type: 99, Value: []byte{1, 2, 3}},
	}}
	buf := make([]byte, f.Len())
	if _, err := EncodeSender(buf, &f); err != nil {
		t.Fatal(err)
	}
	g, err := ParseSender(buf, false)
	if err != nil || !reflect.DeepEqual(f, g) {
		t.Fatalf("%v\n%+v\n%+v", err, f, g)
	}
	r := ReflectorFields{Auth: true, Seq: 1, SSID: 5, SenderTTL: 64, ReceiveTimestamp: 77, SenderSeq: 3}
	buf = make([]byte, r.Len())
	if _, err := EncodeReflector(buf, &r); err != nil {
		t.Fatal(err)
	}
	r2, err := ParseReflector(buf, true)
	if err != nil || !reflect.DeepEqual(r, r2) {
		t.Fatalf("%v\n%+v\n%+v", err, r, r2)
	}
	if _, err := ParseSender(make([]byte, 43), false); err != ErrShort {
		t.Error("43 octets parsed")
	}
	if _, err := ParseReflector(make([]byte, 111), true); err != ErrShort {
		t.Error("111 octets parsed in authenticated mode")
	}
}
