package route

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/plugins/stagetest"
)

// burstKeys draws n keys on ports 0 to 2 from addrs, and addresses no entry
// has.
func burstKeys(r *rand.Rand, addrs [][16]byte, n int) []Key {
	keys := make([]Key, n)
	for i := range keys {
		keys[i].Port = uint16(r.IntN(3))
		if r.IntN(4) == 0 || len(addrs) == 0 {
			keys[i].Addr = a16("2001:db8:ffff::")
			keys[i].Addr[15] = byte(r.Uint32())
		} else {
			keys[i].Addr = addrs[r.IntN(len(addrs))]
		}
	}
	return keys
}

// TestLookupBurstAgrees: on tables in every state (INCOMPLETE, REACHABLE,
// REACHABLE gone STALE by time, STALE, PROBE, STATIC, deleted), on right and
// wrong ports, for bursts shorter and longer than packet.MaxBurst,
// LookupBurst answers what Lookup answers, key by key.
func TestLookupBurstAgrees(t *testing.T) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 28))
		p := DefaultParams
		p.Capacity = 8 << r.IntN(10)
		tb := NewTable(p)
		addrs := make([][16]byte, 0, p.Capacity)
		for range p.Capacity * 3 / 2 {
			var a [16]byte
			a[0], a[1] = 0x20, 0x01
			a[14], a[15] = byte(r.Uint32()), byte(r.Uint32())
			port := uint16(r.IntN(2))
			now := r.Int64N(100e9)
			mac := packet.MAC{2, 0, 0, 0, a[14], a[15]}
			switch r.IntN(7) {
			case 0:
				tb.Resolve(port, a, now)
			case 1:
				tb.Resolve(port, a, now)
				tb.Advert(port, a, mac, true, true, true, r.IntN(2) == 0, false, now)
			case 2:
				tb.Learn(port, a, mac, always, false, now)
			case 3:
				tb.Learn(port, a, mac, always, false, now)
				tb.Use(port, a, now+1)
			case 4:
				tb.SetStatic(port, a, mac, now)
			case 5:
				tb.Delete(port, a)
			default:
				if len(addrs) > 0 {
					tb.Delete(port, addrs[r.IntN(len(addrs))])
				}
			}
			addrs = append(addrs, a)
		}
		for _, n := range []int{0, 1, 7, 63, 64, 65, 200} {
			keys := burstKeys(r, addrs, n)
			found := make([]Found, n)
			now := r.Int64N(200e9)
			tb.LookupBurst(keys, found, now)
			hits := 0
			for i, k := range keys {
				m, st, ok := tb.Lookup(k.Port, k.Addr, now)
				if want := (Found{MAC: m, State: st, OK: ok}); found[i] != want {
					t.Fatalf("seed %d, burst of %d, key %d (%d %x): LookupBurst %+v, Lookup %+v",
						seed, n, i, k.Port, k.Addr, found[i], want)
				}
				if ok {
					hits++
				}
			}
			if n >= 63 && hits == 0 {
				t.Fatalf("seed %d: no key of %d in the table: the test proves nothing", seed, n)
			}
		}
	}
}

// TestLookupBurstTagCollision: a slot whose tag matches but whose key does
// not (tags are 31 bits of the hash) comes before the key's own slot in its
// bucket; LookupBurst reads past it to the key's entry, as Lookup does.
func TestLookupBurstTagCollision(t *testing.T) {
	tb := NewTable(Params{Capacity: 8, ReachableTime: 30e9})
	x := a16("2001:db8::2")
	b, tag := tb.locate(1, x)
	// Way 0: another address with x's tag, then x in way 1.
	other := a16("2001:db8::3")
	b.write(0, tag, 1, other, pack(macB, Static, 0), 1)
	tb.count.Add(1)
	tb.SetStatic(1, x, macA, 1)
	if b.tag[1].Load() != tag {
		t.Fatal("x is not in way 1")
	}
	keys := []Key{{1, x}, {1, other}, {2, x}}
	var found [3]Found
	tb.LookupBurst(keys, found[:], 2)
	if want := (Found{MAC: macA, State: Static, OK: true}); found[0] != want {
		t.Errorf("x: %+v, want %+v", found[0], want)
	}
	// other is in x's bucket, not its own: neither finds it.
	if found[1].OK || found[2].OK {
		t.Errorf("other %+v, x on port 2 %+v", found[1], found[2])
	}
	if _, _, ok := tb.Lookup(1, other, 2); ok {
		t.Error("Lookup found the address out of its bucket")
	}
}

// TestLookupBurstConcurrent reads bursts while writers make, change, evict
// and delete the same entries. Every MAC written for key i is macFor(i, _):
// a read that paired one entry's address with another's MAC, or saw half a
// write, shows a MAC no writer wrote for that key. Under -race it checks
// the seqlock as LookupBurst uses it.
func TestLookupBurstConcurrent(t *testing.T) {
	tb := NewTable(Params{Capacity: 64, ReachableTime: 1e12, RetransTime: 1e9, StaleTime: 1e13,
		MaxMulticastProbes: 3, MaxUnicastProbes: 3})
	macFor := func(i, v int) packet.MAC { return packet.MAC{2, byte(v), 0, 0, 0, byte(i)} }
	addrs := make([][16]byte, 100) // more than fit: writers evict
	for i := range addrs {
		addrs[i] = a16("2001:db8::1")
		addrs[i][15] = byte(i)
	}
	for i, a := range addrs[:50] {
		tb.SetStatic(3, a, macFor(i, 3), 1)
	}
	var stop atomic.Bool
	var writes atomic.Int64
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 10))
			for !stop.Load() {
				i := r.IntN(len(addrs))
				k := addrs[i]
				switch r.IntN(5) {
				case 0:
					tb.Resolve(3, k, 1)
				case 1:
					tb.Advert(3, k, macFor(i, 1), true, true, true, false, false, 1)
				case 2:
					tb.Learn(3, k, macFor(i, 2), always, false, 1)
				case 3:
					tb.SetStatic(3, k, macFor(i, 3), 1)
				default:
					tb.Delete(3, k)
				}
				writes.Add(1)
			}
		}()
	}
	keys := make([]Key, len(addrs))
	for i, a := range addrs {
		keys[i] = Key{Port: 3, Addr: a}
	}
	found := make([]Found, len(keys))
	hits := 0
	// Until the writers have changed the table many times over, however the
	// goroutines are scheduled.
	for r := 0; r < 3000 || writes.Load() < 20000; r++ {
		tb.LookupBurst(keys, found, 1)
		for i, f := range found {
			if !f.OK {
				continue
			}
			hits++
			if f.State == Free {
				t.Fatalf("key %d: a free slot found", i)
			}
			if f.State.HasMAC() && (f.MAC[5] != byte(i) || f.MAC[1] == 0 || f.MAC[1] > 3) {
				t.Fatalf("key %d: torn read: %v %v", i, f.MAC, f.State)
			}
		}
	}
	stop.Store(true)
	wg.Wait()
	if hits == 0 {
		t.Error("no lookup found an entry: the test proves nothing")
	}
}

// TestLookupBurstNoAllocs: a burst of packet.MaxBurst, and a longer one done
// in groups, allocate nothing.
func TestLookupBurstNoAllocs(t *testing.T) {
	tb := NewTable(DefaultParams)
	keys := make([]Key, 3*packet.MaxBurst/2)
	for i := range keys {
		keys[i] = Key{Port: 1, Addr: a16("2001:db8::")}
		keys[i].Addr[15] = byte(i)
		if i%2 == 0 {
			tb.SetStatic(1, keys[i].Addr, macA, 0)
		}
	}
	found := make([]Found, len(keys))
	for _, n := range []int{packet.MaxBurst, len(keys)} {
		if a := testing.AllocsPerRun(100, func() { tb.LookupBurst(keys[:n], found, 1) }); a != 0 {
			t.Errorf("burst of %d: %v allocations", n, a)
		}
		if !found[0].OK || found[1].OK {
			t.Errorf("burst of %d: %+v %+v", n, found[0], found[1])
		}
	}
}

// TestRouteBurstAsOneByOne: the route stage's answer to a burst, whose next
// hops it looks up together, is what it answers to the same packets one
// burst each: verdicts, solicitations, holds, probes, and the cache after.
// The table is one bucket; the burst's first packet, to an unknown next hop,
// evicts the oldest STALE neighbour, which the next packet routes to: one at
// a time, that packet finds no entry and is held; a stage that used the
// burst's lookup made before the eviction would forward it.
func TestRouteBurstAsOneByOne(t *testing.T) {
	addr := func(i int) string { return fmt.Sprintf("2001:db8:2::%x", 0x10+i) }
	run := func(oneByOne bool) (fates []string, counters map[string]uint64, solicits int, entries []Entry) {
		h := newHarness(t)
		n := h.build("neighbor", "max_entries = 8")
		r := h.build("route", "")
		tb := h.routed().Neighbors()
		now := h.Clock.Now()
		// Seven STALE neighbours, the first the oldest, and one REACHABLE.
		for i := range 7 {
			tb.Learn(port1, a16(addr(i)), packet.MAC{2, 0, 0, 0, 9, byte(i)}, always, false, now-1e9+int64(i))
		}
		tb.Resolve(port1, a16(addr(7)), now)
		tb.Advert(port1, a16(addr(7)), packet.MAC{2, 0, 0, 0, 9, 7}, true, true, true, false, false, now)
		var frames [][]byte
		for _, i := range []int{8, 0, 1, 1, 7, 8} { // 8: no entry
			frames = append(frames, udp6(t, host1, mac0, "2001:db8:1::2", addr(i), 64, 10))
		}
		var os []stagetest.Outcome
		if oneByOne {
			for _, f := range frames {
				os = append(os, h.run(port0, [][]byte{f}, n, r))
			}
		} else {
			os = append(os, h.run(port0, frames, n, r))
		}
		for _, o := range os {
			for _, f := range o.Fates {
				d, why := f.Take()
				if d != nil {
					why = fmt.Sprintf("forwarded to %d, %x", f.Port, d[:6])
				}
				fates = append(fates, why)
			}
		}
		counters = map[string]uint64{}
		for _, c := range []string{"forwarded", "held", "resolutions"} {
			counters[c] = h.Counter(c)
		}
		for _, e := range h.Env.TakeEmitted() {
			stagetest.TakeData(e.H)
			solicits++
		}
		return fates, counters, solicits, tb.Entries(now)
	}
	f1, c1, s1, e1 := run(true)
	fb, cb, sb, eb := run(false)
	if fmt.Sprint(f1) != fmt.Sprint(fb) {
		t.Errorf("fates one by one:\n%q\nin a burst:\n%q", f1, fb)
	}
	if fmt.Sprint(c1) != fmt.Sprint(cb) || s1 != sb {
		t.Errorf("counters one by one %v, %d solicitations; in a burst %v, %d", c1, s1, cb, sb)
	}
	if fmt.Sprint(e1) != fmt.Sprint(eb) {
		t.Errorf("cache one by one:\n%+v\nafter the burst:\n%+v", e1, eb)
	}
	// What the case is about happened: the evicted neighbour's packet held.
	if c1["held"] < 3 || c1["forwarded"] == 0 || c1["resolutions"] < 2 {
		t.Errorf("counters %v: the eviction case did not happen", c1)
	}
}
