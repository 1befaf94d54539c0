package route

import (
	"encoding/binary"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/linerate/linerate/appliance/lpm"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/plugins/stagetest"
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
		// Lengths of every stride, and a default; few shorter than /8 (a /1
		// writes 8M entries of tbl24, which tests need not pay for often).
		bits := 8 + r.IntN(25)
		if !v4 {
			bits = []int{0, 16, 24, 32, 48, 56, 60, 64, 96, 127, 128}[r.IntN(11)]
			if r.IntN(3) == 0 {
				bits = 8 + r.IntN(121)
			}
		}
		switch r.IntN(200) {
		case 0, 1:
			bits = 0
		case 2:
			bits = 4 + r.IntN(4)
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
			if *got != wh {
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
	d4, d6, nh := []uint32{0x01020304}, [][16]byte{a6}, []*NextHop{nil}
	if n := testing.AllocsPerRun(1000, func() {
		f.Lookup6(a6)
		f.Lookup4(a4)
		r := f.Reader()
		r.Lookup4(a4)
		f.Lookup4Burst(d4, nh)
		f.Lookup6Burst(d6, nh)
	}); n != 0 {
		t.Errorf("%v allocations per lookup", n)
	}
}

// TestLookupInlined: FIB.Lookup4 and Reader.Lookup4 (with lpm's NextHop
// inside them) are within the compiler's inlining budget. A call cost more
// than the lookup itself (the caller's registers are saved and reloaded
// around it, as Go has no callee-saved registers): 3.8 ns a hot lookup
// against 2.2 inlined, so a change that pushes either over the budget is a
// regression this test names.
func TestLookupInlined(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no go command to check inlining with: %v", err)
		}
		t.Skip("no go command on PATH")
	}
	out, err := exec.Command(goCmd, "build", "-gcflags=-m", "-o", os.DevNull, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build -gcflags=-m: %v\n%s", err, out)
	}
	for _, fn := range []string{`\(\*FIB\)\.Lookup4`, `Reader\.Lookup4`} {
		re := regexp.MustCompile(`(?m)^.*fib\.go:\d+:\d+: (can|cannot) inline ` + fn + `\b.*$`)
		m := re.FindSubmatch(out)
		if m == nil {
			t.Fatalf("no inlining verdict for %s in:\n%s", fn, out)
		}
		if string(m[1]) != "can" {
			t.Errorf("not inlined: %s", m[0])
		}
	}
}

// TestHopTable: a next hop's record is 32 bytes, so that a lookup finds it
// with a shift (a multiply by its 22 bytes before the padding), and the id
// table has a slot for every id lpm can hold plus slot 0 for none, so that
// Reader.Lookup4 indexes it by lpm's Slot with no bounds check.
func TestHopTable(t *testing.T) {
	if n := unsafe.Sizeof(hop{}); n != 32 {
		t.Errorf("hop is %d bytes, want 32", n)
	}
	if n := len(hopTable{}); n != lpm.MaxNextHop+2 {
		t.Errorf("the id table has %d slots, want %d", n, lpm.MaxNextHop+2)
	}
}

func wantHop(r Route) NextHop {
	h := NextHop{Kind: r.Kind, Port: r.Port}
	if r.Kind == Gateway {
		h.Via = r.Via.As16()
	}
	return h
}

// TestFIBUpdatesAgainstBruteForce adds, replaces and deletes random routes of
// both families one at a time, in place, and after every few changes checks
// lookups (random addresses and the edges of every prefix), Get, Len and
// Routes against a linear scan of the routes that should be there.
func TestFIBUpdatesAgainstBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	f, err := NewFIB()
	if err != nil {
		t.Fatal(err)
	}
	want := map[netip.Prefix]Route{}
	pool := randomRoutes(r, 600)
	old := f.Reader() // before any route or next hop: it must see them all
	for step := range 2500 {
		rt := pool[r.IntN(len(pool))]
		rt.Port = uint16(r.IntN(4)) // a new next hop when it replaces
		rt.Static = r.IntN(2) == 0
		_, have := want[rt.Prefix]
		switch op := r.IntN(3); {
		case op == 0 && have:
			got, err := f.Delete(rt.Prefix)
			if err != nil || got != want[rt.Prefix] {
				t.Fatalf("step %d: delete %s: %+v %v, want %+v", step, rt.Prefix, got, err, want[rt.Prefix])
			}
			delete(want, rt.Prefix)
		case op == 0:
			if _, err := f.Delete(rt.Prefix); err == nil {
				t.Fatalf("step %d: deleted %s, not in the table", step, rt.Prefix)
			}
		case op == 1:
			if err := f.Add(rt); (err == nil) == have {
				t.Fatalf("step %d: add %s: %v (in the table: %v)", step, rt.Prefix, err, have)
			}
			if !have {
				want[rt.Prefix] = rt
			}
		default:
			replaced, err := f.Replace(rt)
			if err != nil || replaced != have {
				t.Fatalf("step %d: replace %s: %v %v (in the table: %v)", step, rt.Prefix, replaced, err, have)
			}
			want[rt.Prefix] = rt
		}
		if step%100 != 99 {
			continue
		}
		routes := slices.Collect(maps.Values(want))
		if f.Len() != len(routes) {
			t.Fatalf("step %d: Len %d, want %d", step, f.Len(), len(routes))
		}
		got := f.Routes()
		if len(got) != len(routes) {
			t.Fatalf("step %d: Routes lists %d, want %d", step, len(got), len(routes))
		}
		for _, g := range got {
			if w, ok := want[g.Prefix]; !ok || w != g {
				t.Fatalf("step %d: Routes has %+v, want %+v", step, g, w)
			}
			if x, ok := f.Get(g.Prefix); !ok || x != g {
				t.Fatalf("step %d: Get %s = %+v", step, g.Prefix, x)
			}
		}
		probes := []netip.Addr{}
		for range 300 {
			probes = append(probes, randAddr(r, r.IntN(2) == 0))
		}
		for _, rt := range routes {
			probes = append(probes, rt.Prefix.Addr(), lastAddr(rt.Prefix))
		}
		var d4 []uint32
		var d6 [][16]byte
		var w4, w6 []*NextHop
		for _, a := range probes {
			w, wok := refLookup(routes, a)
			h, ok := f.Lookup(a)
			if ok != wok || ok && *h != wantHop(w) {
				t.Fatalf("step %d: %s → %+v %v, want %+v %v (%s)", step, a, h, ok, wantHop(w), wok, w.Prefix)
			}
			if a.Is4() {
				b := a.As4()
				if g, gok := old.Lookup4(b); g != h || gok != ok {
					t.Fatalf("step %d: %s → %+v %v through a Reader, %+v %v through the FIB", step, a, g, gok, h, ok)
				}
				d4, w4 = append(d4, binary.BigEndian.Uint32(b[:])), append(w4, h)
			} else {
				d6, w6 = append(d6, a.As16()), append(w6, h)
			}
		}
		// The burst lookups (more than one chunk of 64) answer as Lookup.
		g4, g6 := make([]*NextHop, len(d4)), make([]*NextHop, len(d6))
		f.Lookup4Burst(d4, g4)
		f.Lookup6Burst(d6, g6)
		if !slices.Equal(g4, w4) || !slices.Equal(g6, w6) {
			t.Fatalf("step %d: the burst lookups differ from Lookup", step)
		}
	}
}

func lastAddr(p netip.Prefix) netip.Addr {
	a := p.Addr().AsSlice()
	for i := p.Bits(); i < len(a)*8; i++ {
		a[i/8] |= 0x80 >> (i % 8)
	}
	last, _ := netip.AddrFromSlice(a)
	return last
}

// TestFIBConcurrentReaders: readers look up while one writer adds, replaces
// and deletes routes with next hops they have never seen (so the next-hop id
// table grows under them). Every answer must be one the address could have:
// its covering stable route's, or one of the churned routes' holding it. Under
// -race this also checks the readers' path for data races on the heap; the
// tables and the next-hop table are mappings the detector does not watch
// (lpm's own tests put its tables on the heap; the next-hop slots' order is
// argued at FIB).
func TestFIBConcurrentReaders(t *testing.T) {
	f, err := BuildFIB([]Route{
		{Prefix: netip.MustParsePrefix("10.0.0.0/8"), Kind: Connected, Port: 1},
		{Prefix: netip.MustParsePrefix("2001:db8::/32"), Kind: Connected, Port: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(31, 32))
	var churn []netip.Prefix
	for _, s := range []string{"10.1.0.0/16", "10.1.2.0/24", "10.1.2.128/25", "10.1.2.129/32", "10.9.0.0/20",
		"2001:db8:1::/48", "2001:db8:1:2::/64", "2001:db8:1:2::1/128", "2001:db8:1:200::/56"} {
		churn = append(churn, netip.MustParsePrefix(s))
	}
	var as []netip.Addr
	for _, p := range churn {
		as = append(as, p.Addr(), lastAddr(p), lastAddr(p).Next())
	}
	const gateways = 200 // every churned route's next hop is a gateway .1 to .200 on port 2
	var stop atomic.Bool
	var wg sync.WaitGroup
	bad := make(chan string, 2)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for pass := 0; !stop.Load(); pass++ {
				rd := f.Reader() // one a pass, as the route stage makes one a burst
				for _, a := range as {
					h, ok := f.Lookup(a)
					if a.Is4() && pass%2 == 1 {
						h, ok = rd.Lookup4(a.As4())
					}
					switch {
					case !ok:
					case h.Kind == Connected && h.Port == 1:
						continue
					case h.Kind == Gateway && h.Port == 2 && h.Via[15] >= 1 && h.Via[15] <= gateways:
						continue
					}
					select {
					case bad <- fmt.Sprintf("%s → %+v %v", a, h, ok):
					default:
					}
					return
				}
			}
		}()
	}
	for i := range 400 {
		p := churn[r.IntN(len(churn))]
		via := netip.AddrFrom4([4]byte{10, 0, 0, byte(1 + i%gateways)})
		if p.Addr().Is6() {
			via = netip.MustParseAddr("2001:db8::").Next()
			b := via.As16()
			b[15] = byte(1 + i%gateways)
			via = netip.AddrFrom16(b)
		}
		if r.IntN(3) == 0 {
			_, _ = f.Delete(p)
		} else if _, err := f.Replace(Route{Prefix: p, Kind: Gateway, Port: 2, Via: via, Static: i%2 == 0}); err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
	select {
	case s := <-bad:
		t.Fatalf("a reader saw an impossible answer: %s", s)
	default:
	}
}

// FuzzFIBUpdates applies any sequence of adds, replaces and deletes to a FIB
// and holds it to a linear scan of the routes.
func FuzzFIBUpdates(f *testing.F) {
	f.Add([]byte{0, 8, 10, 0, 0, 1, 24, 10, 1, 1, 2, 8, 10, 0, 0})
	f.Add([]byte{0x80, 32, 0x20, 0x01, 0, 0x81, 48, 0x20, 0x01, 1, 0x82, 32, 0x20, 0x01, 0})
	f.Add([]byte{0, 0, 0, 0, 0, 0x80, 0, 0, 0, 0, 1, 32, 10, 0, 0, 2, 0, 0, 0, 0})
	fib, err := NewFIB()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, ops []byte) {
		want := map[netip.Prefix]Route{}
		defer func() {
			for p := range want {
				if _, err := fib.Delete(p); err != nil {
					t.Fatalf("clean-up: %v", err)
				}
			}
		}()
		for ; len(ops) >= 5; ops = ops[5:] {
			// op, length, then 3 bytes of address in a small cluster.
			v6, op := ops[0]&0x80 != 0, ops[0]&3
			a := netip.AddrFrom4([4]byte{10, ops[2] & 7, ops[3], ops[4]})
			// /0 and /8 up: a /1 to /7 writes 2^17 to 2^23 entries, seconds
			// an input.
			bits := int(ops[1]) % 33
			if v6 {
				a = netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, ops[2] & 7, ops[3], 15: ops[4]})
				bits = int(ops[1]) % 129
			}
			if bits > 0 && bits < 8 {
				bits += 8
			}
			rt := Route{Prefix: netip.PrefixFrom(a, bits).Masked(), Kind: Connected, Port: uint16(ops[0] >> 2 & 7)}
			_, have := want[rt.Prefix]
			switch op {
			case 0:
				if err := fib.Add(rt); (err == nil) == have {
					t.Fatalf("add %s: %v (in the table: %v)", rt.Prefix, err, have)
				}
				if !have {
					want[rt.Prefix] = rt
				}
			case 1:
				if _, err := fib.Replace(rt); err != nil {
					t.Fatal(err)
				}
				want[rt.Prefix] = rt
			default:
				if _, err := fib.Delete(rt.Prefix); (err == nil) != have {
					t.Fatalf("delete %s: %v (in the table: %v)", rt.Prefix, err, have)
				}
				delete(want, rt.Prefix)
			}
		}
		routes := slices.Collect(maps.Values(want))
		if fib.Len() != len(routes) {
			t.Fatalf("Len %d, want %d", fib.Len(), len(routes))
		}
		for _, rt := range routes {
			for _, a := range []netip.Addr{rt.Prefix.Addr(), lastAddr(rt.Prefix), lastAddr(rt.Prefix).Next()} {
				if !a.IsValid() {
					continue
				}
				w, wok := refLookup(routes, a)
				h, ok := fib.Lookup(a)
				if ok != wok || ok && *h != wantHop(w) {
					t.Fatalf("%s → %+v %v, want %+v (%s)", a, h, ok, wantHop(w), w.Prefix)
				}
			}
		}
	})
}

// TestRouteBurstLookups: the route stage looks a burst's destinations up
// together (lookupBurst) before routing its packets one by one; in a burst
// that mixes families, routed, unrouted, local and non-IP packets, each
// packet must still get its own destination's route.
func TestRouteBurstLookups(t *testing.T) {
	h := newHarness(t)
	r := h.build("route", "")
	now := h.Clock.Now()
	h.routed().Neighbors().SetStatic(port1, a16("2001:db8:2::2"), host2, now)
	h.routed().Neighbors().SetStatic(port1, a16("::ffff:198.51.100.2"), host2, now)
	h.routed().Neighbors().SetStatic(port0, a16("2001:db8:1::2"), host1, now)
	if _, _, err := h.routed().AddRoute(netip.MustParsePrefix("203.0.113.0/24"), netip.MustParseAddr("198.51.100.2"), "", false); err != nil {
		t.Fatal(err)
	}
	arp := make([]byte, 60)
	copy(arp, mac0[:])
	copy(arp[6:], host1[:])
	arp[12], arp[13] = 0x08, 0x06
	frames := [][]byte{
		udp6(t, host1, mac0, "2001:db8:1::2", "2001:db8:2::2", 64, 100), // forward, port 1
		udp4(t, host1, mac0, "192.0.2.2", "203.0.113.9", 64, 100),       // static route, port 1
		udp6(t, host1, mac0, "2001:db8:1::2", "2001:db8:9::1", 64, 100), // no route
		arp, // not IP: passed on
		udp4(t, host1, mac0, "192.0.2.2", "192.0.2.1", 64, 100),         // local
		udp4(t, host1, mac0, "192.0.2.2", "198.18.0.1", 64, 100),        // no route
		udp6(t, host1, mac0, "2001:db8:2::2", "2001:db8:1::1", 64, 100), // local
		udp4(t, host1, mac0, "192.0.2.2", "198.51.100.2", 64, 100),      // connected, port 1
		udp6(t, host2, mac1, "2001:db8:2::2", "2001:db8:1::2", 64, 100), // back, port 0
	}
	want := []struct {
		v      packet.Verdict
		port   uint16
		reason string
	}{
		{packet.Forward, port1, ""}, {packet.Forward, port1, ""}, {packet.Drop, 0, "route_no_route"},
		{packet.Continue, 0, ""}, {packet.Continue, 0, ""}, {packet.Drop, 0, "route_no_route"},
		{packet.Continue, 0, ""}, {packet.Forward, port1, ""}, {packet.Forward, port0, ""},
	}
	o := h.run(port0, frames[:8], r)
	o2 := h.run(port1, frames[8:], r)
	fates := append(o.Fates, o2.Fates...)
	for i, w := range want {
		f := fates[i]
		if f.Verdict != w.v || w.v == packet.Forward && f.Port != w.port || f.Reason != w.reason {
			t.Errorf("packet %d: %v port %d %q, want %v port %d %q", i, f.Verdict, f.Port, f.Reason, w.v, w.port, w.reason)
		}
	}
	for _, s := range append(o.Forwarded, o2.Forwarded...) {
		stagetest.TakeData(s.H)
	}
	for _, hd := range append(o.Continued, o2.Continued...) {
		stagetest.TakeData(hd)
	}
}
