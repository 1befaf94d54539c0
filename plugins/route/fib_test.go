package route

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
)

// refLookup is longest-prefix match by brute force.
func refLookup(routes []Route, a netip.Addr) (Route, bool) {
	best, found := Route{}, false
	for _, r := range routes {
		if r.Prefix.Contains(a) && (!found || r.Prefix.Bits() > best.Prefix.Bits()) {
			best, found = r, true
		}
	}
	return best, found
}

func randAddr(r *rand.Rand, v4 bool) netip.Addr {
	if v4 {
		return netip.AddrFrom4([4]byte{byte(r.IntN(4)), byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256))})
	}
	var a [16]byte
	a[0], a[1] = 0x20, 0x01
	a[2] = byte(r.IntN(4))
	for i := 3; i < 16; i++ {
		a[i] = byte(r.IntN(256))
	}
	return netip.AddrFrom16(a)
}

// randomRoutes makes n distinct prefixes of both families, clustered so that
// they nest.
func randomRoutes(r *rand.Rand, n int) []Route {
	seen := map[netip.Prefix]bool{}
	var out []Route
	for len(out) < n {
		v4 := r.IntN(2) == 0
		bits := r.IntN(33)
		if !v4 {
			bits = []int{0, 16, 24, 32, 48, 56, 60, 64, 96, 127, 128}[r.IntN(11)]
			if r.IntN(3) == 0 {
				bits = r.IntN(129)
			}
		}
		p := netip.PrefixFrom(randAddr(r, v4), bits).Masked()
		if seen[p] {
			continue
		}
		seen[p] = true
		k := []Kind{Local, Connected, Gateway}[r.IntN(3)]
		rt := Route{Prefix: p, Kind: k, Port: uint16(r.IntN(4))}
		if k == Gateway {
			rt.Via = randAddr(r, v4)
		}
		out = append(out, rt)
	}
	return out
}

// TestFIBAgainstBruteForce looks up random addresses, and addresses inside and
// at the edges of every prefix, in random tables.
func TestFIBAgainstBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 20 {
		routes := randomRoutes(r, 1+r.IntN(300))
		f, err := BuildFIB(routes)
		if err != nil {
			t.Fatal(err)
		}
		if f.Len() != len(routes) {
			t.Fatalf("Len %d, want %d", f.Len(), len(routes))
		}
		var probes []netip.Addr
		for range 2000 {
			probes = append(probes, randAddr(r, r.IntN(2) == 0))
		}
		for _, rt := range routes {
			probes = append(probes, rt.Prefix.Addr())
			// The last address of the prefix.
			a := rt.Prefix.Addr().AsSlice()
			for i := rt.Prefix.Bits(); i < len(a)*8; i++ {
				a[i/8] |= 0x80 >> (i % 8)
			}
			last, _ := netip.AddrFromSlice(a)
			probes = append(probes, last)
		}
		for _, a := range probes {
			want, wok := refLookup(routes, a)
			got, gok := f.Lookup(a)
			if wok != gok {
				t.Fatalf("round %d: %s found %v, want %v (%v)", round, a, gok, wok, want.Prefix)
			}
			if !wok {
				continue
			}
			wh := NextHop{Kind: want.Kind, Port: want.Port}
			if want.Kind == Gateway {
				wh.Via = want.Via.As16()
			}
			if got != wh {
				t.Fatalf("round %d: %s → %+v, want %+v (%s)", round, a, got, wh, want.Prefix)
			}
		}
	}
}

func TestFIBDuplicate(t *testing.T) {
	p := netip.MustParsePrefix("2001:db8::/32")
	if _, err := BuildFIB([]Route{{Prefix: p, Kind: Connected}, {Prefix: p, Kind: Gateway}}); err == nil {
		t.Error("built a table with a prefix twice")
	}
	// Host bits are masked, so these are the same prefix too.
	if _, err := BuildFIB([]Route{{Prefix: netip.MustParsePrefix("10.0.0.0/8"), Kind: Connected},
		{Prefix: netip.MustParsePrefix("10.1.0.0/8"), Kind: Connected}}); err == nil {
		t.Error("built a table with 10.0.0.0/8 twice")
	}
}

func TestFIBDefaultAndHost(t *testing.T) {
	f, err := BuildFIB([]Route{
		{Prefix: netip.MustParsePrefix("::/0"), Kind: Gateway, Port: 1, Via: netip.MustParseAddr("2001:db8:1::9")},
		{Prefix: netip.MustParsePrefix("0.0.0.0/0"), Kind: Gateway, Port: 2, Via: netip.MustParseAddr("192.0.2.9")},
		{Prefix: netip.MustParsePrefix("2001:db8:1::1/128"), Kind: Local, Port: 1},
		{Prefix: netip.MustParsePrefix("2001:db8:1::/64"), Kind: Connected, Port: 1},
		{Prefix: netip.MustParsePrefix("192.0.2.1/32"), Kind: Local, Port: 2},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		a    string
		kind Kind
		port uint16
	}{
		{"2001:db8:1::1", Local, 1}, {"2001:db8:1::2", Connected, 1}, {"2001:db8:9::1", Gateway, 1},
		{"192.0.2.1", Local, 2}, {"198.51.100.7", Gateway, 2}, {"::ffff:192.0.2.1", Local, 2},
	} {
		h, ok := f.Lookup(netip.MustParseAddr(c.a))
		if !ok || h.Kind != c.kind || h.Port != c.port {
			t.Errorf("%s → %+v %v", c.a, h, ok)
		}
	}
	if h, _ := f.Lookup(netip.MustParseAddr("198.51.100.7")); netip.AddrFrom16(h.Via).Unmap() != netip.MustParseAddr("192.0.2.9") {
		t.Errorf("IPv4 via %v", netip.AddrFrom16(h.Via))
	}
	rs := f.Routes()
	if len(rs) != 5 || !rs[0].Prefix.Addr().Is4() || rs[len(rs)-1].Prefix.Addr().Is4() {
		t.Errorf("Routes not IPv4 first: %v", rs)
	}
}

func TestFIBNoAllocs(t *testing.T) {
	f, err := BuildFIB(randomRoutes(rand.New(rand.NewPCG(3, 4)), 200))
	if err != nil {
		t.Fatal(err)
	}
	a6 := netip.MustParseAddr("2001:db8::1").As16()
	a4 := [4]byte{1, 2, 3, 4}
	if n := testing.AllocsPerRun(1000, func() { f.Lookup6(a6); f.Lookup4(a4) }); n != 0 {
		t.Errorf("%v allocations per lookup", n)
	}
}

// BenchmarkLookup6 looks up random addresses in tables of typical shape: host
// routes, connected /64s, a few aggregates and a default.
func BenchmarkLookup6(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{16, 1000, 100000} {
		var routes []Route
		seen := map[netip.Prefix]bool{}
		for len(routes) < n {
			bits := []int{128, 64, 64, 64, 48, 56}[r.IntN(6)]
			p := netip.PrefixFrom(randAddr(r, false), bits).Masked()
			if !seen[p] {
				seen[p] = true
				routes = append(routes, Route{Prefix: p, Kind: Connected})
			}
		}
		routes = append(routes, Route{Prefix: netip.MustParsePrefix("::/0"), Kind: Gateway})
		f, err := BuildFIB(routes)
		if err != nil {
			b.Fatal(err)
		}
		addrs := make([][16]byte, 1024)
		for i := range addrs {
			if i%2 == 0 {
				addrs[i] = routes[r.IntN(len(routes))].Prefix.Addr().As16()
			} else {
				addrs[i] = randAddr(r, false).As16()
			}
		}
		b.Run(fmt.Sprintf("routes=%d", n), func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				f.Lookup6(addrs[i&1023])
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/lookup")
		})
	}
}
