package route

import (
	"math/rand/v2"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/linerate/linerate/appliance/packet"
)

// always grants every token.
var always = NewLimiter(0, 1)

var (
	macA = packet.MAC{2, 0, 0, 0, 0, 0xa}
	macB = packet.MAC{2, 0, 0, 0, 0, 0xb}
)

func a16(s string) [16]byte { return netip.MustParseAddr(s).As16() }

func state(t *testing.T, tb *Table, port uint16, a [16]byte, now int64) (packet.MAC, State) {
	t.Helper()
	m, st, ok := tb.Lookup(port, a, now)
	if !ok {
		return m, Free
	}
	return m, st
}

// TestStateMachine walks the transitions of RFC 4861 §7.3.3 and Appendix C.
func TestStateMachine(t *testing.T) {
	p := DefaultParams
	tb := NewTable(p)
	x := a16("2001:db8::2")
	now := int64(1e9)

	// Resolution: INCOMPLETE, then a solicited advertisement makes it
	// REACHABLE.
	if !tb.Resolve(1, x, now) {
		t.Fatal("Resolve made no entry")
	}
	if tb.Resolve(1, x, now) {
		t.Error("Resolve twice asked for a second first probe")
	}
	if _, st := state(t, tb, 1, x, now); st != Incomplete {
		t.Fatalf("state %v", st)
	}
	g := tb.Gen()
	tb.Advert(1, x, macA, true, true, true, true, false, now)
	if m, st := state(t, tb, 1, x, now); st != Reachable || m != macA {
		t.Fatalf("after solicited NA: %v %v", m, st)
	}
	if tb.Gen() == g {
		t.Error("gen did not move when the entry got its address")
	}
	if es := tb.Entries(now); len(es) != 1 || !es[0].Router {
		t.Errorf("entries %+v", es)
	}
	// REACHABLE ages into STALE by itself.
	now += p.ReachableTime + 1
	if _, st := state(t, tb, 1, x, now); st != Stale {
		t.Fatalf("after ReachableTime: %v", st)
	}
	// Using it starts the delay, then unicast probes; a solicited NA confirms.
	tb.Use(1, x, now)
	if _, st := state(t, tb, 1, x, now); st != Probe {
		t.Fatalf("after Use: %v", st)
	}
	var buf [8]Solicit
	if s := tb.Scan(now, buf[:0]); len(s) != 0 {
		t.Errorf("probed before DelayFirstProbe: %v", s)
	}
	now += p.DelayFirstProbe
	s := tb.Scan(now, buf[:0])
	if len(s) != 1 || s[0].MAC != macA || s[0].Addr != x || s[0].Port != 1 {
		t.Fatalf("probe %+v", s)
	}
	tb.Advert(1, x, packet.MAC{}, false, true, false, true, false, now)
	if m, st := state(t, tb, 1, x, now); st != Reachable || m != macA {
		t.Fatalf("after probe answer: %v %v", m, st)
	}
	// An unsolicited NA without override and with another address only makes
	// the entry doubtful; with override it moves it.
	tb.Advert(1, x, macB, true, false, false, true, false, now)
	if m, st := state(t, tb, 1, x, now); st != Stale || m != macA {
		t.Fatalf("after NA O=0: %v %v", m, st)
	}
	tb.Advert(1, x, macB, true, false, true, true, false, now)
	if m, st := state(t, tb, 1, x, now); st != Stale || m != macB {
		t.Fatalf("after NA O=1: %v %v", m, st)
	}
	// A solicitation from it with its (same) address changes nothing; with a
	// new one it is STALE at the new address.
	tb.Learn(1, x, macB, always, false, now)
	tb.Learn(1, x, macA, always, false, now)
	if m, st := state(t, tb, 1, x, now); st != Stale || m != macA {
		t.Fatalf("after NS: %v %v", m, st)
	}
	// Same address, other port: another entry.
	if _, st := state(t, tb, 2, x, now); st != Free {
		t.Fatal("found the entry on another port")
	}
	// An advertisement for an unknown address is ignored (§7.2.5).
	y := a16("2001:db8::3")
	tb.Advert(1, y, macA, true, true, true, false, false, now)
	if _, st := state(t, tb, 1, y, now); st != Free {
		t.Fatal("an NA made an entry")
	}
	if tb.Len() != 1 {
		t.Errorf("Len %d", tb.Len())
	}
}

// TestResolutionFails: an INCOMPLETE entry is solicited MaxMulticastProbes times
// RetransTime apart, then removed; an entry in use that stops answering too.
func TestResolutionFails(t *testing.T) {
	p := DefaultParams
	tb := NewTable(p)
	x := a16("192.0.2.7")
	now := int64(0)
	tb.Resolve(0, x, now) // the caller sends probe 1
	var buf [8]Solicit
	sent := 1
	for range 10 {
		now += p.RetransTime
		sent += len(tb.Scan(now, buf[:0]))
	}
	if sent != p.MaxMulticastProbes {
		t.Errorf("%d solicitations, want %d", sent, p.MaxMulticastProbes)
	}
	if _, st := state(t, tb, 0, x, now); st != Free {
		t.Errorf("state %v after failing", st)
	}
	if st := tb.Stats(); st.Failed != 1 || st.Created != 1 || st.Removed != 1 || tb.Len() != 0 {
		t.Errorf("stats %+v len %d", st, tb.Len())
	}

	tb.Resolve(0, x, now)
	tb.Advert(0, x, macA, true, true, true, false, false, now)
	now += p.ReachableTime + 1
	tb.Use(0, x, now)
	now += p.DelayFirstProbe
	probes := 0
	for range 10 {
		for _, s := range tb.Scan(now, buf[:0]) {
			if s.MAC != macA {
				t.Errorf("probe not unicast: %+v", s)
			}
			probes++
		}
		now += p.RetransTime
	}
	if probes != p.MaxUnicastProbes {
		t.Errorf("%d probes, want %d", probes, p.MaxUnicastProbes)
	}
	if _, st := state(t, tb, 0, x, now); st != Free {
		t.Errorf("state %v after the probes failed", st)
	}
}

func TestStaleTimeAndStatic(t *testing.T) {
	p := DefaultParams
	tb := NewTable(p)
	x, y := a16("2001:db8::2"), a16("2001:db8::3")
	tb.Learn(0, x, macA, always, false, 0)
	tb.SetStatic(0, y, macB, 0)
	now := p.StaleTime + 1
	var buf [8]Solicit
	for range tb.Capacity() / scanSlots * 2 {
		tb.scanAt.Store(0)
		tb.Scan(now, buf[:0])
	}
	if _, st := state(t, tb, 0, x, now); st != Free {
		t.Errorf("a STALE entry survived StaleTime: %v", st)
	}
	if m, st := state(t, tb, 0, y, now); st != Static || m != macB {
		t.Errorf("static entry: %v %v", m, st)
	}
	// Nothing learnt changes a static entry.
	tb.Learn(0, y, macA, always, false, now)
	tb.Advert(0, y, macA, true, true, true, false, false, now)
	if m, _ := state(t, tb, 0, y, now); m != macB {
		t.Error("a static entry was overwritten")
	}
	if !tb.Delete(0, y) || tb.Delete(0, y) || tb.Len() != 0 {
		t.Error("Delete")
	}
}

// TestFloodBounded fills the table with solicitations from random sources, as
// an attacker would: it never grows past its capacity, and the entries in use
// (REACHABLE, PROBE) and the static ones all survive.
func TestFloodBounded(t *testing.T) {
	p := DefaultParams
	p.Capacity = 256
	tb := NewTable(p)
	now := int64(1e9)
	var keep [][16]byte
	for i := range 100 {
		a := netip.AddrFrom16(a16("2001:db8:1::")).Next()
		for range i {
			a = a.Next()
		}
		k := a.As16()
		if i%10 == 0 {
			tb.SetStatic(0, k, macB, now)
		} else {
			tb.Resolve(0, k, now)
			tb.Advert(0, k, macA, true, true, true, false, false, now)
		}
		keep = append(keep, k)
	}
	r := rand.New(rand.NewPCG(7, 8))
	made := 0
	for range 100_000 {
		var a [16]byte
		a[0], a[1] = 0xfe, 0x80
		for i := 8; i < 16; i++ {
			a[i] = byte(r.Uint32())
		}
		if tb.Learn(0, a, macA, always, false, now) {
			made++
		}
		if tb.Len() > tb.Capacity() {
			t.Fatalf("%d entries in a table of %d", tb.Len(), tb.Capacity())
		}
	}
	if tb.Capacity() != 256 || tb.Len() != 256 {
		t.Errorf("capacity %d, len %d", tb.Capacity(), tb.Len())
	}
	for _, k := range keep {
		if _, st := state(t, tb, 0, k, now); st != Reachable && st != Static {
			t.Fatalf("%v was pushed out by the flood: %v", netip.AddrFrom16(k), st)
		}
	}
	if st := tb.Stats(); st.Created-st.Removed != 256 || made == 0 || st.Evicted == 0 {
		t.Errorf("stats %+v, %d made", st, made)
	}
	// Resolution still finds room, at the expense of flood entries.
	for i := range 50 {
		k := a16("2001:db8:2::")
		k[15] = byte(i)
		tb.Resolve(0, k, now)
		if _, st := state(t, tb, 0, k, now); st != Incomplete {
			t.Fatalf("resolution found no room: %v", st)
		}
	}
}

// TestConcurrent reads while writers change the same entries; under -race it
// checks the seqlock, and every read must be an address some writer wrote.
func TestConcurrent(t *testing.T) {
	tb := NewTable(Params{Capacity: 64, ReachableTime: 1e12, RetransTime: 1e9, StaleTime: 1e13, MaxMulticastProbes: 3, MaxUnicastProbes: 3})
	keys := make([][16]byte, 40)
	for i := range keys {
		keys[i] = a16("2001:db8::1")
		keys[i][15] = byte(i)
	}
	valid := map[packet.MAC]bool{macA: true, macB: true}
	var stop atomic.Bool
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 9))
			for !stop.Load() {
				k := keys[r.IntN(len(keys))]
				switch r.IntN(4) {
				case 0:
					tb.Resolve(3, k, 1)
				case 1:
					tb.Advert(3, k, macA, true, true, true, false, false, 1)
				case 2:
					tb.Learn(3, k, macB, always, false, 1)
				default:
					tb.Delete(3, k)
				}
			}
		}()
	}
	reads := 0
	for range 200_000 {
		k := keys[reads%len(keys)]
		reads++
		m, st, ok := tb.Lookup(3, k, 1)
		if ok && st.HasMAC() && !valid[m] {
			t.Fatalf("torn read: %v %v", m, st)
		}
	}
	stop.Store(true)
	wg.Wait()
	if tb.Len() > tb.Capacity() || tb.Len() < 0 {
		t.Errorf("len %d", tb.Len())
	}
}

func TestTableNoAllocs(t *testing.T) {
	tb := NewTable(DefaultParams)
	x := a16("2001:db8::2")
	tb.Resolve(0, x, 0)
	tb.Advert(0, x, macA, true, true, true, false, false, 0)
	var buf [8]Solicit
	if n := testing.AllocsPerRun(1000, func() {
		tb.Lookup(0, x, 1)
		tb.Learn(0, x, macA, always, true, 1)
		tb.Scan(2e9, buf[:0])
	}); n != 0 {
		t.Errorf("%v allocations", n)
	}
}

func BenchmarkNeighborLookup(b *testing.B) {
	tb := NewTable(DefaultParams)
	keys := make([][16]byte, 1024)
	for i := range keys {
		keys[i] = a16("2001:db8::")
		keys[i][14], keys[i][15] = byte(i>>8), byte(i)
		tb.Resolve(0, keys[i], 0)
		tb.Advert(0, keys[i], macA, true, true, true, false, false, 0)
	}
	for i := 0; b.Loop(); i++ {
		tb.Lookup(0, keys[i&1023], 1)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/lookup")
}

func TestLimiter(t *testing.T) {
	l := NewLimiter(1000, 10) // 1 ms a token, bursts of 10
	n := 0
	for range 100 {
		if l.Allow(0) {
			n++
		}
	}
	if n != 10 {
		t.Errorf("burst allowed %d, want 10", n)
	}
	if l.Allow(500_000) {
		t.Error("allowed half a token later")
	}
	if !l.Allow(1_000_000) {
		t.Error("refused a token 1 ms later")
	}
	n = 0
	for now := int64(2e6); now < 1e9+2e6; now += 10_000 {
		if l.Allow(now) {
			n++
		}
	}
	if n < 995 || n > 1010 {
		t.Errorf("%d tokens in a second at 1000/s", n)
	}
	u := NewLimiter(0, 1)
	for range 100 {
		if !u.Allow(0) {
			t.Fatal("rate 0 limits")
		}
	}
}

// TestLearnTokens: only new entries take a token; updates of known ones do
// not, so a flood's spent bucket never stops known neighbours from updating.
func TestLearnTokens(t *testing.T) {
	tb := NewTable(DefaultParams)
	lim := NewLimiter(1, 1) // one token, then one a second
	x, y := a16("2001:db8::2"), a16("2001:db8::3")
	if !tb.Learn(0, x, macA, lim, false, 0) {
		t.Fatal("the first entry was refused")
	}
	if tb.Learn(0, y, macA, lim, false, 0) {
		t.Fatal("a second entry without a token")
	}
	tb.Learn(0, x, macB, lim, false, 0)
	if m, _ := state(t, tb, 0, x, 0); m != macB {
		t.Error("a known entry did not update without a token")
	}
	if !tb.Learn(0, y, macA, lim, false, 1e9) {
		t.Error("no token a second later")
	}
	if tb.Learn(0, a16("2001:db8::4"), macA, nil, false, 2e9) {
		t.Error("made an entry with no limiter")
	}
}
