package config

import (
	"encoding"
	"fmt"
	"strings"
	"testing"
	"time"
)

type valueCase struct {
	in   string
	want string // String() after parsing; "" when in must be refused
	err  string // part of the error, when refused
}

var durationCases = []valueCase{
	{in: "1ms", want: "1ms"},
	{in: "100us", want: "100us"},
	{in: "100µs", want: "100us"},
	{in: "10s", want: "10s"},
	{in: "1.5s", want: "1500ms"},
	{in: "90s", want: "90s"},
	{in: "2h", want: "2h"},
	{in: "1h30m", want: "90m"},
	{in: "1500ns", want: "1500ns"},
	{in: "0", want: "0s"},
	{in: "5", err: "needs a unit"},
	{in: "1 ms", err: "invalid duration"},
	{in: "-1ms", err: "negative"},
	{in: "", err: "invalid duration"},
}

var rateCases = []valueCase{
	{in: "10Gbit", want: "10Gbit"},
	{in: "100Mbit", want: "100Mbit"},
	{in: "1.5Gbps", want: "1.5Gbit"},
	{in: "64kbit", want: "64kbit"},
	{in: "64Kbps", want: "64kbit"},
	{in: "1 Mbit", want: "1Mbit"},
	{in: "1234bit", want: "1.234kbit"},
	{in: "1bps", want: "1bit"},
	{in: "2Tbit", want: "2Tbit"},
	{in: "0", want: "0"},
	{in: "", want: "0"},
	{in: "10", err: "needs a unit"},
	{in: "10GB/s", err: "in bytes"},
	{in: "0.5bit", err: "not a whole number"},
	{in: "1.2.3Gbit", err: "not a number"},
	{in: "1.Gbit", err: "not a number"},
	{in: "10Xbit", err: "unknown unit"},
	{in: "99999999999Tbit", err: "too large"},
}

var packetRateCases = []valueCase{
	{in: "1Mpps", want: "1Mpps"},
	{in: "500kpps", want: "500kpps"},
	{in: "100pps", want: "100pps"},
	{in: "1.5Mpps", want: "1.5Mpps"},
	{in: "200kpps", want: "200kpps"},
	{in: "0", want: "0"},
	{in: "1000", err: "needs a unit"},
	{in: "1Mbit", err: "unknown unit"},
}

var byteSizeCases = []valueCase{
	{in: "1GiB", want: "1GiB"},
	{in: "512MiB", want: "512MiB"},
	{in: "9000", want: "9000"},
	{in: "9000B", want: "9000"},
	{in: "64KiB", want: "64KiB"},
	{in: "1.5GiB", want: "1536MiB"},
	{in: "1MB", want: "1000000"},
	{in: "4gib", want: "4GiB"},
	{in: "0", want: "0"},
	{in: "", err: "not a number"},
	{in: "1.5B", err: "not a whole number"},
	{in: "4 parsecs", err: "unknown unit"},
	{in: "9000000TiB", err: "too large"},
}

var macCases = []valueCase{
	{in: "02:00:00:00:00:01", want: "02:00:00:00:00:01"},
	{in: "02-00-00-AA-00-01", want: "02:00:00:aa:00:01"},
	{in: "0200.0000.0001", want: "02:00:00:00:00:01"},
	{in: "02:00:00:00:00", err: "six bytes"},
	{in: "02:00:00:00:00:00:00:01", err: "six bytes"},
}

var prefixCases = []valueCase{
	{in: "2001:db8::/32", want: "2001:db8::/32"},
	{in: "10.0.0.0/8", want: "10.0.0.0/8"},
	{in: "10.0.0.1/8", err: `did you mean "10.0.0.0/8"`},
	{in: "2001:db8::", err: "invalid prefix"},
}

var addrCases = []valueCase{
	{in: "2001:db8::1", want: "2001:db8::1"},
	{in: "192.0.2.1", want: "192.0.2.1"},
	{in: "fe80::1%eth0", err: "zone"},
	{in: "2001:db8::/32", err: "invalid IP address"},
}

type textValue interface {
	encoding.TextUnmarshaler
	fmt.Stringer
}

func TestValues(t *testing.T) {
	for _, g := range []struct {
		name  string
		mk    func() textValue
		cases []valueCase
	}{
		{"Duration", func() textValue { return new(Duration) }, durationCases},
		{"Rate", func() textValue { return new(Rate) }, rateCases},
		{"PacketRate", func() textValue { return new(PacketRate) }, packetRateCases},
		{"ByteSize", func() textValue { return new(ByteSize) }, byteSizeCases},
		{"MAC", func() textValue { return new(MAC) }, macCases},
		{"Prefix", func() textValue { return new(Prefix) }, prefixCases},
		{"Addr", func() textValue { return new(Addr) }, addrCases},
	} {
		for _, c := range g.cases {
			v := g.mk()
			err := v.UnmarshalText([]byte(c.in))
			switch {
			case c.want == "" && err == nil:
				t.Errorf("%s %q: accepted as %s", g.name, c.in, v)
			case c.want == "" && !strings.Contains(err.Error(), c.err):
				t.Errorf("%s %q: error %q does not say %q", g.name, c.in, err, c.err)
			case c.want != "" && err != nil:
				t.Errorf("%s %q: %v", g.name, c.in, err)
			case c.want != "" && v.String() != c.want:
				t.Errorf("%s %q: String() = %q, want %q", g.name, c.in, v.String(), c.want)
			case c.want != "":
				// What String writes parses back to the same value.
				again := g.mk()
				if err := again.UnmarshalText([]byte(v.String())); err != nil || again.String() != v.String() {
					t.Errorf("%s %q: %q does not parse back: %v", g.name, c.in, v.String(), err)
				}
			}
		}
	}
}

func TestValueNumbers(t *testing.T) {
	var d Duration
	_ = d.UnmarshalText([]byte("1.5ms"))
	if time.Duration(d) != 1500*time.Microsecond {
		t.Errorf("1.5ms = %v", time.Duration(d))
	}
	var r Rate
	_ = r.UnmarshalText([]byte("1.5Gbps"))
	if r != 1_500_000_000 {
		t.Errorf("1.5Gbps = %d", r)
	}
	var b ByteSize
	_ = b.UnmarshalText([]byte("512MiB"))
	if b != 512<<20 {
		t.Errorf("512MiB = %d", b)
	}
}

// In a config file, value types refuse TOML types other than strings (a
// ByteSize also takes an integer count of bytes), with the key's line.
func TestValueTypesInTOML(t *testing.T) {
	tab, err := ParseTable("v.toml", []byte(`delay = 5
rate = 10.5
size = 4096
mac = 2
when = "2"
prefix = "2001:db8::/48"
big = -1
`))
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Delay  Duration      `toml:"delay"`
		Rate   Rate          `toml:"rate"`
		Size   ByteSize      `toml:"size"`
		MAC    MAC           `toml:"mac"`
		When   time.Duration `toml:"when"`
		Prefix Prefix        `toml:"prefix"`
		Big    ByteSize      `toml:"big"`
	}
	err = tab.Decode(&v)
	want := strings.Join([]string{
		`v.toml:1: delay: expected a string such as "1ms", found integer 5`,
		`v.toml:2: rate: expected a string such as "10Gbit", found float 10.5`,
		`v.toml:4: mac: expected a string such as "02:00:00:00:00:01", found integer 2`,
		`v.toml:5: when: invalid duration: "2"`,
		`v.toml:7: big: size -1 is negative`,
	}, "\n")
	if err == nil || err.Error() != want {
		t.Errorf("got:\n%v\nwant:\n%s", err, want)
	}
	if v.Size != 4096 || v.Prefix.String() != "2001:db8::/48" {
		t.Errorf("size %v prefix %v", v.Size, v.Prefix)
	}
}

// fuzzRoundTrip checks parse → String → parse gives the same value.
func fuzzRoundTrip[T any, P interface {
	*T
	textValue
}](t *testing.T, s string) {
	var a T
	if P(&a).UnmarshalText([]byte(s)) != nil {
		return
	}
	out := P(&a).String()
	var b T
	if err := P(&b).UnmarshalText([]byte(out)); err != nil {
		t.Fatalf("%q → %q does not parse: %v", s, out, err)
	}
	if P(&b).String() != out {
		t.Fatalf("%q → %q → %q", s, out, P(&b).String())
	}
}

func FuzzValues(f *testing.F) {
	for _, cs := range [][]valueCase{durationCases, rateCases, packetRateCases, byteSizeCases, macCases, prefixCases, addrCases} {
		for _, c := range cs {
			f.Add(c.in)
		}
	}
	f.Fuzz(func(t *testing.T, s string) {
		fuzzRoundTrip[Duration](t, s)
		fuzzRoundTrip[Rate](t, s)
		fuzzRoundTrip[PacketRate](t, s)
		fuzzRoundTrip[ByteSize](t, s)
		fuzzRoundTrip[MAC](t, s)
		fuzzRoundTrip[Prefix](t, s)
		fuzzRoundTrip[Addr](t, s)
	})
}
