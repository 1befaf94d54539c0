package lpm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
)

func TestMain(m *testing.M) {
	// The race detector watches only the heap: keep the tables there, so a
	// read or write that skipped sync/atomic would be reported.
	heapTables = true
	os.Exit(m.Run())
}

// ref is longest-prefix match by linear scan over the rules.
type ref map[netip.Prefix]uint32

func (r ref) lookup(a netip.Addr) (uint32, bool) {
	best, nh := -1, uint32(0)
	for p, h := range r {
		if p.Bits() > best && p.Contains(a) {
			best, nh = p.Bits(), h
		}
	}
	return nh, best >= 0
}

// table is either family's Table behind one face, for the shared tests.
type table interface {
	insert(p netip.Prefix, nh uint32) (bool, error)
	delete(p netip.Prefix) error
	lookup(a netip.Addr) (uint32, bool)
	burst(as []netip.Addr) []uint32
	Stats() Stats
	Len() int
}

// t4 looks odd addresses up with a Reader4 made with the table, before any
// change (so older than every entry it reads), and even ones with the table:
// every check holds both to the same answers (a prefix's first address is
// even, its last odd).
type t4 struct {
	*Table4
	r Reader4
}

func newT4(x *Table4) t4 { return t4{x, x.Reader()} }

func u32(a netip.Addr) uint32 { b := a.As4(); return binary.BigEndian.Uint32(b[:]) }

func (t t4) insert(p netip.Prefix, nh uint32) (bool, error) {
	return t.Insert(u32(p.Addr()), p.Bits(), nh)
}
func (t t4) delete(p netip.Prefix) error { return t.Delete(u32(p.Addr()), p.Bits()) }
func (t t4) lookup(a netip.Addr) (uint32, bool) {
	if u32(a)&1 == 1 {
		if nh := t.r.NextHop(u32(a)); nh != NoNextHop {
			return nh, true
		}
		return 0, false
	}
	return t.Lookup(u32(a))
}
func (t t4) burst(as []netip.Addr) []uint32 {
	d, nh := make([]uint32, len(as)), make([]uint32, len(as))
	for i, a := range as {
		d[i] = u32(a)
	}
	t.LookupBurst(d, nh)
	return nh
}

type t6 struct{ *Table6 }

func (t t6) insert(p netip.Prefix, nh uint32) (bool, error) {
	return t.Insert(p.Addr().As16(), p.Bits(), nh)
}
func (t t6) delete(p netip.Prefix) error        { return t.Delete(p.Addr().As16(), p.Bits()) }
func (t t6) lookup(a netip.Addr) (uint32, bool) { return t.Lookup(a.As16()) }
func (t t6) burst(as []netip.Addr) []uint32 {
	d, nh := make([][16]byte, len(as)), make([]uint32, len(as))
	for i, a := range as {
		d[i] = a.As16()
	}
	t.LookupBurst(d, nh)
	return nh
}

func newTable(tb testing.TB, v4 bool, groups int) table {
	tb.Helper()
	if v4 {
		x, err := New4(groups)
		if err != nil {
			tb.Fatal(err)
		}
		return newT4(x)
	}
	x, err := New6(groups)
	if err != nil {
		tb.Fatal(err)
	}
	return t6{x}
}

// randPrefix draws prefixes clustered so that they nest and share groups:
// IPv4 under 10.0.0.0/14, IPv6 under 2001:db8::/46, lengths across every
// stride, a few short ones (a /8 writes 2^16 entries) and /0.
func randPrefix(r *rand.Rand, v4 bool) netip.Prefix {
	if v4 {
		a := [4]byte{10, byte(r.IntN(4)), byte(r.IntN(256)), byte(r.IntN(256))}
		bits := []int{0, 8, 12, 14, 16, 20, 22, 23, 24, 24, 24, 25, 26, 28, 30, 31, 32, 32}[r.IntN(18)]
		if r.IntN(3) == 0 {
			bits = 14 + r.IntN(19)
		}
		return netip.PrefixFrom(netip.AddrFrom4(a), bits).Masked()
	}
	var a [16]byte
	copy(a[:], []byte{0x20, 0x01, 0x0d, 0xb8, 0, byte(r.IntN(4))})
	for i := 6; i < 16; i++ {
		a[i] = byte(r.IntN(4))
	}
	bits := []int{0, 8, 16, 23, 24, 25, 32, 40, 46, 47, 48, 48, 56, 64, 64, 72, 96, 120, 127, 128}[r.IntN(20)]
	if r.IntN(3) == 0 {
		bits = 46 + r.IntN(83)
	}
	return netip.PrefixFrom(netip.AddrFrom16(a), bits).Masked()
}

// probes are addresses where answers change: each prefix's first and last
// address and their neighbours, and random ones in the cluster.
func probes(r *rand.Rand, v4 bool, rules ref, n int) []netip.Addr {
	var out []netip.Addr
	k := 0
	for p := range rules { // map order: a random sample of 100
		if k++; k > 100 {
			break
		}
		first := p.Addr()
		b := first.AsSlice()
		for i := p.Bits(); i < len(b)*8; i++ {
			b[i/8] |= 0x80 >> (i % 8)
		}
		last, _ := netip.AddrFromSlice(b)
		for _, a := range []netip.Addr{first, last, first.Prev(), last.Next()} {
			if a.IsValid() {
				out = append(out, a)
			}
		}
	}
	for range n {
		out = append(out, randPrefix(r, v4).Addr())
	}
	return out[:len(out):len(out)]
}

func check(t *testing.T, tab table, rules ref, as []netip.Addr, when string) {
	t.Helper()
	burst := tab.burst(as)
	for i, a := range as {
		want, wok := rules.lookup(a)
		got, gok := tab.lookup(a)
		if got != want || gok != wok {
			t.Fatalf("%s: lookup %s = %d %v, want %d %v", when, a, got, gok, want, wok)
		}
		if !wok {
			want = NoNextHop
		}
		if burst[i] != want {
			t.Fatalf("%s: burst lookup %s = %d, want %d", when, a, burst[i], want)
		}
	}
}

// TestAgainstLinearScan replays random inserts, replaces and deletes of
// nesting prefixes on both families and checks every answer against a linear
// scan of the rules, at the edges of every prefix; deleting everything leaves
// no group in use.
func TestAgainstLinearScan(t *testing.T) {
	for _, v4 := range []bool{true, false} {
		name := map[bool]string{true: "v4", false: "v6"}[v4]
		t.Run(name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(7, map[bool]uint64{true: 4, false: 6}[v4]))
			tab := newTable(t, v4, 1<<14)
			rules := ref{}
			steps := 3000
			if raceOn {
				steps = 600
			}
			for step := range steps {
				p := randPrefix(r, v4)
				if len(rules) > 300 { // keep the table small: delete one
					for p = range rules {
						break
					}
				}
				_, have := rules[p]
				switch {
				case have && (len(rules) > 300 || r.IntN(3) > 0):
					if err := tab.delete(p); err != nil {
						t.Fatalf("step %d: delete %s: %v", step, p, err)
					}
					delete(rules, p)
				default:
					nh := uint32(r.IntN(MaxNextHop + 1))
					replaced, err := tab.insert(p, nh)
					if err != nil || replaced != have {
						t.Fatalf("step %d: insert %s: replaced %v (had it: %v), %v", step, p, replaced, have, err)
					}
					rules[p] = nh
				}
				if tab.Len() != len(rules) {
					t.Fatalf("step %d: Len %d, want %d", step, tab.Len(), len(rules))
				}
				if step%50 == 49 {
					check(t, tab, rules, probes(r, v4, rules, 200), fmt.Sprintf("step %d", step))
				}
			}
			for p := range rules {
				if err := tab.delete(p); err != nil {
					t.Fatalf("delete %s: %v", p, err)
				}
				delete(rules, p)
			}
			check(t, tab, rules, probes(r, v4, rules, 500), "emptied")
			if s := tab.Stats(); s.Groups != 0 || s.Rules != 0 {
				t.Errorf("emptied table: %+v", s)
			}
		})
	}
}

// step is one change of a table: "add" p → nh, or "del" p.
type step struct {
	op string
	p  netip.Prefix
	nh uint32
}

// runSteps makes each change to tab and rules, and checks every address of
// as against rules after it.
func runSteps(t *testing.T, tab table, rules ref, steps []step, as []netip.Addr) {
	t.Helper()
	for i, s := range steps {
		var err error
		if s.op == "add" {
			_, err = tab.insert(s.p, s.nh)
			rules[s.p] = s.nh
		} else {
			err = tab.delete(s.p)
			delete(rules, s.p)
		}
		if err != nil {
			t.Fatalf("step %d %s %s: %v", i, s.op, s.p, err)
		}
		check(t, tab, rules, as, s.op+" "+s.p.String())
	}
}

func TestCases(t *testing.T) {
	tab := newTable(t, true, 16)
	rules := ref{}
	pfx := netip.MustParsePrefix
	steps := []step{
		{"add", pfx("0.0.0.0/0"), 1},
		{"add", pfx("192.0.2.0/24"), 2},
		{"add", pfx("192.0.2.128/25"), 3},
		{"add", pfx("192.0.2.129/32"), 4},
		{"add", pfx("192.0.0.0/16"), 5}, // under the /24 and the group: only its own entries change
		{"del", pfx("192.0.2.0/24"), 0}, // the /16 takes its entries back, in the group too
		{"add", pfx("192.0.2.0/25"), 6}, // the group is all /25s and a /32 now
		{"del", pfx("192.0.2.129/32"), 0},
		{"del", pfx("192.0.2.128/25"), 0},
		{"del", pfx("192.0.2.0/25"), 0}, // folds the group back
		{"del", pfx("0.0.0.0/0"), 0},
		{"add", pfx("192.0.0.0/6"), 7}, // 2^18 entries of tbl24, under the group
		{"del", pfx("192.0.0.0/16"), 0},
	}
	as := []netip.Addr{netip.MustParseAddr("192.0.2.0"), netip.MustParseAddr("192.0.2.127"),
		netip.MustParseAddr("192.0.2.128"), netip.MustParseAddr("192.0.2.129"), netip.MustParseAddr("192.0.2.255"),
		netip.MustParseAddr("192.0.3.1"), netip.MustParseAddr("192.1.0.0"), netip.MustParseAddr("10.0.0.1")}
	runSteps(t, tab, rules, steps, as)
	if g := tab.Stats().Groups; g != 0 {
		t.Errorf("%d groups in use with no prefix longer than /24", g)
	}
}

// TestDefaultWithGroups: the default route is not in tbl24 but in the
// default group and in the empty entries of the other groups, so adding,
// replacing and deleting it while groups are in use (in both families, with
// groups under empty entries and under shorter prefixes) must reach every
// one of them, and a group folding back under it must leave tbl24 empty.
func TestDefaultWithGroups(t *testing.T) {
	pfx := netip.MustParsePrefix
	for _, v4 := range []bool{true, false} {
		t.Run(map[bool]string{true: "v4", false: "v6"}[v4], func(t *testing.T) {
			tab := newTable(t, v4, 64)
			rules := ref{}
			steps := []step{
				{"add", pfx("192.0.2.128/25"), 1}, // a group under an empty entry
				{"add", pfx("198.51.100.0/26"), 2},
				{"add", pfx("198.51.0.0/16"), 3}, // and one under a /16
				{"add", pfx("0.0.0.0/0"), 4},     // reaches both groups' empty halves
				{"add", pfx("203.0.113.7/32"), 5},
				{"add", pfx("0.0.0.0/0"), 6}, // replaced: everywhere
				{"del", pfx("192.0.2.128/25"), 0},
				{"del", pfx("0.0.0.0/0"), 0},
				{"add", pfx("0.0.0.0/0"), 7},
				{"del", pfx("203.0.113.7/32"), 0}, // folds to the default: tbl24 keeps 0
				{"del", pfx("198.51.100.0/26"), 0},
				{"del", pfx("0.0.0.0/0"), 0},
				{"del", pfx("198.51.0.0/16"), 0},
			}
			if !v4 {
				six := map[string]string{"192.0.2.128/25": "2001:db8:1::/48", "198.51.100.0/26": "2001:db8:2:3::/64",
					"198.51.0.0/16": "2001:db8::/32", "0.0.0.0/0": "::/0", "203.0.113.7/32": "2001:db8:5::7/128"}
				for i := range steps {
					steps[i].p = pfx(six[steps[i].p.String()])
				}
			}
			var as []netip.Addr
			for _, s := range steps {
				as = append(as, probes(rand.New(rand.NewPCG(1, 2)), v4, ref{s.p: 0}, 0)...)
			}
			runSteps(t, tab, rules, steps, as)
			if st := tab.Stats(); st.Groups != 0 {
				t.Errorf("%d groups in use in an empty table", st.Groups)
			}
		})
	}
}

func TestBadInput(t *testing.T) {
	x, err := New4(1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := x.Insert(0, 33, 1); !errors.Is(err, ErrLength) {
		t.Errorf("/33: %v", err)
	}
	if _, err := x.Insert(0, -1, 1); !errors.Is(err, ErrLength) {
		t.Errorf("/-1: %v", err)
	}
	if _, err := x.Insert(0, 8, MaxNextHop+1); !errors.Is(err, ErrNextHop) {
		t.Errorf("next hop %d: %v", MaxNextHop+1, err)
	}
	if err := x.Delete(0x0a000000, 8); !errors.Is(err, ErrNotFound) {
		t.Errorf("delete of an absent prefix: %v", err)
	}
	y, err := New6(1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := y.Insert([16]byte{}, 129, 1); !errors.Is(err, ErrLength) {
		t.Errorf("/129: %v", err)
	}
	for _, g := range []int{0, -1, MaxGroups + 1} {
		if _, err := New4(g); err == nil {
			t.Errorf("New4(%d) made a table", g)
		}
	}
	if x.Len() != 0 || y.Len() != 0 {
		t.Errorf("failed updates left %d and %d prefixes", x.Len(), y.Len())
	}
}

// TestFullAndReclaim: a pool of two groups takes two /24s with longer
// prefixes; the third is refused with ErrFull and changes nothing; a folded
// group stays bound to its /24 until Reclaim, after the grace period.
func TestFullAndReclaim(t *testing.T) {
	x, err := New4(2)
	if err != nil {
		t.Fatal(err)
	}
	a := func(s string) uint32 { return u32(netip.MustParseAddr(s)) }
	for i, s := range []string{"10.0.1.0", "10.0.2.0"} {
		if _, err := x.Insert(a(s), 25, uint32(i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := x.Insert(a("10.0.3.0"), 26, 9); !errors.Is(err, ErrFull) {
		t.Fatalf("third group: %v", err)
	}
	if nh, ok := x.Lookup(a("10.0.3.1")); ok || x.Len() != 2 {
		t.Fatalf("a refused insert changed the table: %d %v, %d prefixes", nh, ok, x.Len())
	}
	// /25 under a bound group needs no new one.
	if err := x.Delete(a("10.0.1.0"), 25); err != nil {
		t.Fatal(err)
	}
	if s := x.Stats(); s.Groups != 1 || s.GroupsBound != 1 {
		t.Fatalf("after the fold: %+v", s)
	}
	if _, err := x.Insert(a("10.0.3.0"), 26, 9); !errors.Is(err, ErrFull) {
		t.Fatalf("a bound group went to another /24 without a grace period: %v", err)
	}
	if _, err := x.Insert(a("10.0.1.128"), 25, 3); err != nil {
		t.Fatalf("the bound group's own /24: %v", err)
	}
	if err := x.Delete(a("10.0.1.128"), 25); err != nil {
		t.Fatal(err)
	}
	synced := false
	if n := x.Reclaim(func() { synced = true }); n != 1 || !synced {
		t.Fatalf("Reclaim freed %d, synced %v", n, synced)
	}
	if _, err := x.Insert(a("10.0.3.0"), 26, 9); err != nil {
		t.Fatalf("after Reclaim: %v", err)
	}
	if nh, ok := x.Lookup(a("10.0.3.1")); !ok || nh != 9 {
		t.Fatalf("10.0.3.1 → %d %v", nh, ok)
	}
}

// TestConcurrentReaders: one writer churns prefixes inside stable ones while
// readers look up; every answer must be one the address could have at some
// moment (its stable prefix's or a churned prefix's holding it), never a
// torn or foreign entry. Run under -race, it also proves every shared read and
// write is atomic.
func TestConcurrentReaders(t *testing.T) {
	for _, v4 := range []bool{true, false} {
		t.Run(map[bool]string{true: "v4", false: "v6"}[v4], func(t *testing.T) {
			r := rand.New(rand.NewPCG(11, 12))
			tab := newTable(t, v4, 4096)
			stable := ref{}
			base := netip.MustParsePrefix("10.0.0.0/14")
			if !v4 {
				base = netip.MustParsePrefix("2001:db8::/46")
			}
			if _, err := tab.insert(base, 1); err != nil {
				t.Fatal(err)
			}
			stable[base] = 1
			var churn []netip.Prefix
			for len(churn) < 64 {
				p := randPrefix(r, v4)
				if p.Bits() > base.Bits() {
					churn = append(churn, p)
				}
			}
			as := probes(r, v4, ref{churn[0]: 0}, 256)
			for _, p := range churn {
				as = append(as, p.Addr())
			}
			// Churned prefix i carries next hop 100+i: any of them holding a
			// may answer.
			allowed := make([]map[uint32]bool, len(as))
			for i, a := range as {
				allowed[i] = map[uint32]bool{}
				if nh, ok := stable.lookup(a); ok {
					allowed[i][nh] = true
				} else {
					allowed[i][NoNextHop] = true
				}
				for j, p := range churn {
					if p.Contains(a) {
						allowed[i][uint32(100+j)] = true
					}
				}
			}
			var stop atomic.Bool
			var wg sync.WaitGroup
			errs := make(chan string, 4)
			for range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for !stop.Load() {
						for i, a := range as {
							nh, ok := tab.lookup(a)
							if !ok {
								nh = NoNextHop
							}
							if !allowed[i][nh] {
								select {
								case errs <- a.String():
								default:
								}
								return
							}
						}
					}
				}()
			}
			for round := range 300 {
				j := r.IntN(len(churn))
				if _, err := tab.insert(churn[j], uint32(100+j)); err != nil {
					t.Fatal(err)
				}
				if round%2 == 1 {
					k := r.IntN(len(churn))
					if err := tab.delete(churn[k]); err != nil && !errors.Is(err, ErrNotFound) {
						t.Fatal(err)
					}
				}
			}
			stop.Store(true)
			wg.Wait()
			select {
			case a := <-errs:
				t.Fatalf("a reader saw an impossible next hop for %s", a)
			default:
			}
		})
	}
}

func TestLookupNoAllocs(t *testing.T) {
	x, _ := New4(4)
	y, _ := New6(4)
	if _, err := x.Insert(0x0a000000, 28, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := y.Insert([16]byte{0x20, 1, 0xd, 0xb8}, 48, 1); err != nil {
		t.Fatal(err)
	}
	d4, d6, nh := []uint32{0x0a000001}, [][16]byte{{0x20, 1, 0xd, 0xb8}}, []uint32{0}
	if n := testing.AllocsPerRun(100, func() {
		x.Lookup(0x0a000001)
		r := x.Reader()
		r.NextHop(0x0a000001)
		y.Lookup([16]byte{0x20, 1, 0xd, 0xb8})
		x.LookupBurst(d4, nh)
		y.LookupBurst(d6, nh)
	}); n != 0 {
		t.Errorf("%v allocations per lookup", n)
	}
}

// TestMappedMemory: outside the race detector's heap, tables are mappings
// whose pages cost memory only when written, and a default route writes
// none of tbl24.
func TestMappedMemory(t *testing.T) {
	heapTables = false
	defer func() { heapTables = true }()
	x, err := New4(1 << 16)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := x.Insert(0, 0, 1); err != nil {
		t.Fatal(err)
	}
	for i := range uint32(1000) {
		if _, err := x.Insert(0x0a000000|i<<8, 24, i); err != nil {
			t.Fatal(err)
		}
	}
	// 1000 /24s in a row: 4000 bytes of tbl24, one or two (huge) pages of a
	// mapped 64 MiB tbl24, and of 64 MiB of groups the first page, where the
	// default group is.
	if s := x.Stats(); s.Resident > 3*hugePage || s.Resident <= 0 {
		t.Errorf("resident %d bytes after a default and 1000 /24s", s.Resident)
	}
	if nh, ok := x.Lookup(0x0b000000); !ok || nh != 1 {
		t.Errorf("default → %d %v", nh, ok)
	}
}

// TestTrace: Trace visits exactly the entries a lookup reads: tbl24 alone
// for a prefix of at most /24, one group more per byte down to the longest
// prefix on the address's path, and tbl24 then the default group for an
// address under no prefix.
func TestTrace(t *testing.T) {
	x, err := New6(16)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"2001:db8::/32", "2001:db8:1::/48", "2a00::/16"} {
		p := netip.MustParsePrefix(s)
		if _, err := x.Insert(p.Addr().As16(), p.Bits(), 1); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		addr   string
		levels []int
	}{
		{"2001:db8:1::1", []int{0, 1, 2, 3}}, // bytes 3, 4 and 5 below tbl24
		{"2001:db8:2::1", []int{0, 1, 2, 3}}, // the /32's entry, in the /48's groups
		{"2001:db8:100::1", []int{0, 1, 2}},  // byte 4 leaves the /48's path
		{"2001:db9::1", []int{0, 1}},         // no prefix, in the /32's group
		{"2a00::1", []int{0}},
		{"3000::1", []int{0, 1}}, // the default group
	} {
		var got []int
		x.Trace(netip.MustParseAddr(c.addr).As16(), func(level int, at uint32) { got = append(got, level) })
		if !slices.Equal(got, c.levels) {
			t.Errorf("%s: levels read %v, want %v", c.addr, got, c.levels)
		}
	}
}
