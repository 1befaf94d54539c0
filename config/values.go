package config

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// Value types for config structs. Each decodes from a TOML string with
// UnmarshalText, refuses other TOML types with a clear message (UnmarshalTOML),
// and prints back in a form it parses (String, MarshalText).

// Duration is a non-negative time span written with a unit: "1ms", "100us",
// "1.5s", "2m". The units are those of time.ParseDuration (ns, us or µs, ms, s, m,
// h). A bare number is refused, except "0".
type Duration time.Duration

func (d *Duration) UnmarshalText(b []byte) error {
	s := string(b)
	v, err := time.ParseDuration(s)
	if err != nil {
		if s != "" && strings.Trim(s, "0123456789.") == "" {
			return fmt.Errorf("duration %q needs a unit: ns, us, ms, s, m or h (e.g. \"1ms\")", s)
		}
		return fmt.Errorf("invalid duration %q: write a number and a unit: ns, us, ms, s, m or h (e.g. \"100us\")", s)
	}
	if v < 0 {
		return fmt.Errorf("duration %q is negative", s)
	}
	*d = Duration(v)
	return nil
}

func (d *Duration) UnmarshalTOML(v any) error { return fromString(v, `"1ms"`, d) }

func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// String writes d in the largest unit that holds it exactly: "1ms", "100us", "90s".
func (d Duration) String() string {
	if d == 0 {
		return "0s"
	}
	v := time.Duration(d)
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}, {time.Millisecond, "ms"}, {time.Microsecond, "us"}} {
		if v%u.d == 0 {
			return strconv.FormatInt(int64(v/u.d), 10) + u.name
		}
	}
	return strconv.FormatInt(int64(v), 10) + "ns"
}

// Rate is a bit rate in bits per second: "10Gbit", "100Mbit", "1.5Gbps", "64kbit".
// Prefixes are decimal (k, M, G, T, in either case) and "bps" means bits per
// second. "0" and "" are zero, which stages read as "no limit".
type Rate uint64

var rateUnits = []unit{{1e12, "Tbit"}, {1e9, "Gbit"}, {1e6, "Mbit"}, {1e3, "kbit"}, {1, "bit"}}

func (r *Rate) UnmarshalText(b []byte) error {
	s := string(b)
	num, u := splitUnit(s)
	if u == "" {
		if num == "0" || s == "" {
			*r = 0
			return nil
		}
		return fmt.Errorf("rate %q needs a unit: bit, kbit, Mbit, Gbit or Tbit (e.g. \"10Gbit\")", s)
	}
	if strings.ContainsRune(u, 'B') {
		return fmt.Errorf("rate %q is in bytes; rates are bits per second (bit, kbit, Mbit, Gbit, Tbit or bps, kbps …)", s)
	}
	mult, ok := siPrefix(strings.ToLower(u), "bit", "bps", "bit/s")
	if !ok {
		return fmt.Errorf("rate %q: unknown unit %q; use bit, kbit, Mbit, Gbit or Tbit (or bps, kbps, Mbps, Gbps)", s, u)
	}
	v, err := scale(num, mult)
	if err != nil {
		return fmt.Errorf("rate %q: %v", s, err)
	}
	*r = Rate(v)
	return nil
}

func (r *Rate) UnmarshalTOML(v any) error { return fromString(v, `"10Gbit"`, r) }

func (r Rate) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// String writes r in the largest unit that keeps it readable, exactly: "1.5Gbit".
func (r Rate) String() string { return format(uint64(r), rateUnits) }

// PacketRate is a packet rate in packets per second: "1Mpps", "500kpps",
// "100pps", "1.5Mpps". "0" and "" are zero ("no limit").
type PacketRate uint64

var packetRateUnits = []unit{{1e9, "Gpps"}, {1e6, "Mpps"}, {1e3, "kpps"}, {1, "pps"}}

func (r *PacketRate) UnmarshalText(b []byte) error {
	s := string(b)
	num, u := splitUnit(s)
	if u == "" {
		if num == "0" || s == "" {
			*r = 0
			return nil
		}
		return fmt.Errorf("packet rate %q needs a unit: pps, kpps, Mpps or Gpps (e.g. \"1Mpps\")", s)
	}
	mult, ok := siPrefix(strings.ToLower(u), "pps")
	if !ok {
		return fmt.Errorf("packet rate %q: unknown unit %q; use pps, kpps, Mpps or Gpps", s, u)
	}
	v, err := scale(num, mult)
	if err != nil {
		return fmt.Errorf("packet rate %q: %v", s, err)
	}
	*r = PacketRate(v)
	return nil
}

func (r *PacketRate) UnmarshalTOML(v any) error { return fromString(v, `"1Mpps"`, r) }

func (r PacketRate) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

func (r PacketRate) String() string { return format(uint64(r), packetRateUnits) }

// ByteSize is a size in bytes: "1GiB", "512MiB", "64KiB", "9000", or a TOML
// integer. Binary units (KiB, MiB, GiB, TiB) are powers of 1024; decimal ones
// (kB, MB, GB, TB) powers of 1000; B or no unit is bytes. Case is ignored.
type ByteSize int64

var byteUnits = []unit{{1 << 40, "TiB"}, {1 << 30, "GiB"}, {1 << 20, "MiB"}, {1 << 10, "KiB"}}

func (b *ByteSize) UnmarshalText(text []byte) error {
	s := string(text)
	num, u := splitUnit(s)
	var mult uint64
	switch strings.ToLower(u) {
	case "", "b":
		mult = 1
	case "kib":
		mult = 1 << 10
	case "mib":
		mult = 1 << 20
	case "gib":
		mult = 1 << 30
	case "tib":
		mult = 1 << 40
	case "kb":
		mult = 1e3
	case "mb":
		mult = 1e6
	case "gb":
		mult = 1e9
	case "tb":
		mult = 1e12
	default:
		return fmt.Errorf("size %q: unknown unit %q; use B, KiB, MiB, GiB, TiB (or kB, MB, GB, TB)", s, u)
	}
	v, err := scale(num, mult)
	if err != nil {
		return fmt.Errorf("size %q: %v", s, err)
	}
	if v > math.MaxInt64 {
		return fmt.Errorf("size %q is too large", s)
	}
	*b = ByteSize(v)
	return nil
}

// UnmarshalTOML takes a string, or an integer count of bytes.
func (b *ByteSize) UnmarshalTOML(v any) error {
	if n, ok := v.(int64); ok {
		if n < 0 {
			return fmt.Errorf("size %d is negative", n)
		}
		*b = ByteSize(n)
		return nil
	}
	return fromString(v, `"512MiB"`, b)
}

func (b ByteSize) MarshalText() ([]byte, error) { return []byte(b.String()), nil }

// String writes b in the largest binary unit that holds it exactly ("512MiB"),
// or as a plain count of bytes ("9000").
func (b ByteSize) String() string {
	for _, u := range byteUnits {
		if b != 0 && uint64(b)%u.v == 0 {
			return strconv.FormatUint(uint64(b)/u.v, 10) + u.name
		}
	}
	return strconv.FormatInt(int64(b), 10)
}

// MAC is an Ethernet address, written "02:00:00:00:00:01" (or with '-', or as
// "0200.0000.0001").
type MAC [6]byte

func (m *MAC) UnmarshalText(b []byte) error {
	hw, err := net.ParseMAC(string(b))
	if err != nil || len(hw) != 6 {
		return fmt.Errorf("invalid MAC address %q: want six bytes such as \"02:00:00:00:00:01\"", b)
	}
	copy(m[:], hw)
	return nil
}

func (m *MAC) UnmarshalTOML(v any) error { return fromString(v, `"02:00:00:00:00:01"`, m) }

func (m MAC) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

func (m MAC) String() string { return net.HardwareAddr(m[:]).String() }

// Prefix is an IP prefix, "2001:db8::/32" or "10.0.0.0/8". Host bits must be
// zero: "10.0.0.1/8" is refused, as it is more likely a mistake than a route.
type Prefix struct{ netip.Prefix }

func (p *Prefix) UnmarshalText(b []byte) error {
	v, err := netip.ParsePrefix(string(b))
	if err != nil {
		return fmt.Errorf("invalid prefix %q: want an address and a length such as \"2001:db8::/32\"", b)
	}
	if v != v.Masked() {
		return fmt.Errorf("prefix %q has host bits set; did you mean %q?", b, v.Masked().String())
	}
	p.Prefix = v
	return nil
}

func (p *Prefix) UnmarshalTOML(v any) error { return fromString(v, `"2001:db8::/32"`, p) }

// IfAddr is an interface address: an address and the length of its on-link
// prefix, "2001:db8:1::1/64" or "192.0.2.1/24". Unlike Prefix, the host bits are
// the point.
type IfAddr struct{ netip.Prefix }

func (a *IfAddr) UnmarshalText(b []byte) error {
	v, err := netip.ParsePrefix(string(b))
	if err != nil {
		if _, aerr := netip.ParseAddr(string(b)); aerr == nil {
			return fmt.Errorf("interface address %q has no prefix length: write it as \"%s/64\" (IPv6) or \"%s/24\" (IPv4)", b, b, b)
		}
		return fmt.Errorf("invalid interface address %q: want an address and its prefix length such as \"2001:db8:1::1/64\"", b)
	}
	a.Prefix = v
	return nil
}

func (a *IfAddr) UnmarshalTOML(v any) error { return fromString(v, `"2001:db8:1::1/64"`, a) }

// Addr is an IPv4 or IPv6 address without a zone: "2001:db8::1", "192.0.2.1".
type Addr struct{ netip.Addr }

func (a *Addr) UnmarshalText(b []byte) error {
	v, err := netip.ParseAddr(string(b))
	if err != nil {
		return fmt.Errorf("invalid IP address %q", b)
	}
	if v.Zone() != "" {
		return fmt.Errorf("IP address %q has a zone; zones are not used here", b)
	}
	a.Addr = v
	return nil
}

func (a *Addr) UnmarshalTOML(v any) error { return fromString(v, `"2001:db8::1"`, a) }

// fromString hands a TOML string to u, and refuses any other TOML type.
func fromString(v any, example string, u interface{ UnmarshalText([]byte) error }) error {
	s, ok := v.(string)
	if !ok {
		return fmt.Errorf("expected a string such as %s, found %s", example, describe(v))
	}
	return u.UnmarshalText([]byte(s))
}

type unit struct {
	v    uint64
	name string
}

// splitUnit splits "1.5Gbit" into "1.5" and "Gbit"; one space may separate them.
func splitUnit(s string) (num, u string) {
	i := 0
	for i < len(s) && (isDigit(s[i]) || s[i] == '.') {
		i++
	}
	return s[:i], strings.TrimPrefix(s[i:], " ")
}

// siPrefix matches u (lower case) against an optional k, m, g or t prefix and one
// of the base units, and returns the multiplier.
func siPrefix(u string, bases ...string) (uint64, bool) {
	mult := uint64(1)
	for _, base := range bases {
		if u == base {
			return 1, true
		}
	}
	if len(u) < 2 {
		return 0, false
	}
	switch u[0] {
	case 'k':
		mult = 1e3
	case 'm':
		mult = 1e6
	case 'g':
		mult = 1e9
	case 't':
		mult = 1e12
	default:
		return 0, false
	}
	for _, base := range bases {
		if u[1:] == base {
			return mult, true
		}
	}
	return 0, false
}

var errNotWhole = errors.New("not a whole number of units")

// scale computes num × mult exactly, num being a decimal such as "1.5". It must
// come out whole and fit in 64 bits.
func scale(num string, mult uint64) (uint64, error) {
	ip, fp, dot := strings.Cut(num, ".")
	if ip == "" || dot && fp == "" || strings.Contains(fp, ".") {
		return 0, fmt.Errorf("%q is not a number", num)
	}
	r, ok := new(big.Rat).SetString(num)
	if !ok {
		return 0, fmt.Errorf("%q is not a number", num)
	}
	r.Mul(r, new(big.Rat).SetUint64(mult))
	if !r.IsInt() {
		return 0, errNotWhole
	}
	if !r.Num().IsUint64() {
		return 0, errors.New("too large")
	}
	return r.Num().Uint64(), nil
}

// format writes v in the largest of units (largest first) that v reaches, with
// as many decimals as it takes to stay exact.
func format(v uint64, units []unit) string {
	if v == 0 {
		return "0"
	}
	u := units[len(units)-1]
	for _, c := range units {
		if v >= c.v {
			u = c
			break
		}
	}
	s := strconv.FormatUint(v/u.v, 10)
	if frac := v % u.v; frac != 0 {
		digits := len(strconv.FormatUint(u.v, 10)) - 1
		f := strconv.FormatUint(frac, 10)
		f = strings.Repeat("0", digits-len(f)) + f
		s += "." + strings.TrimRight(f, "0")
	}
	return s + u.name
}
