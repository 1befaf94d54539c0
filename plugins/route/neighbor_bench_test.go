package route

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/internal/cputime"
)

// BenchmarkNeighbourScale looks up next hops as the route stage does per
// packet (Lookup, and Use on an entry that is not REACHABLE), in a cache
// of N entries made with max_entries = N, full: every entry is one
// neighbour, all REACHABLE. The lookups visit every entry, once per N, in a
// seeded random order (the addresses are laid out in that order up front,
// so the benchmark's own reads are sequential). The smallest size runs
// first: x-smallest is each size's ns/pkt over its ns/pkt in the same run.
//
// neighbours=N/burst makes the same lookups a burst of packet.MaxBurst at a
// time (LookupBurst), as the route stage now does; its x-smallest is over
// the smallest size's burst figure, and x-single is its ns/pkt over
// neighbours=N's, same run.
//
// The limit of max_entries is 2^24; the largest size here is 2^20 (a 64 MiB
// table): 2^24 would take 1 GiB on a machine shared with others, and
// behaves as 2^20 does, every lookup out of the caches.
func BenchmarkNeighbourScale(b *testing.B) {
	var base, baseBurst float64
	for i, n := range []int{1, 1 << 12, 1 << 16, 1 << 20} {
		var fx *scaleFixture
		fixture := func(b *testing.B) *scaleFixture {
			if fx == nil {
				fx = newScaleFixture(b, n)
			}
			return fx
		}
		var single float64
		b.Run(fmt.Sprintf("neighbours=%d", n), func(b *testing.B) {
			fx := fixture(b)
			t, now := fx.t, fx.now
			seq := fx.seq[:packet.MaxBurst*(len(fx.seq)/packet.MaxBurst)]
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			found := 0
			b.ReportAllocs()
			b.ResetTimer()
			c0 := cputime.Thread()
			for it := 0; it < b.N; it++ {
				for _, k := range seq {
					_, st, ok := t.Lookup(k.Port, k.Addr, now)
					if ok && st != Reachable {
						t.Use(k.Port, k.Addr, now)
					}
					if ok && st == Reachable {
						found++
					}
				}
			}
			cpu := cputime.Thread() - c0
			b.StopTimer()
			ns := fx.check(b, found, cpu)
			if i == 0 {
				base = ns
			}
			single = ns
			b.ReportMetric(ns/base, "x-smallest")
		})
		b.Run(fmt.Sprintf("neighbours=%d/burst", n), func(b *testing.B) {
			fx := fixture(b)
			t, now := fx.t, fx.now
			seq := fx.seq[:packet.MaxBurst*(len(fx.seq)/packet.MaxBurst)]
			var res [packet.MaxBurst]Found
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			found := 0
			b.ReportAllocs()
			b.ResetTimer()
			c0 := cputime.Thread()
			for it := 0; it < b.N; it++ {
				for j := 0; j < len(seq); j += packet.MaxBurst {
					keys := seq[j : j+packet.MaxBurst]
					t.LookupBurst(keys, res[:], now)
					for k := range res {
						if res[k].OK && res[k].State != Reachable {
							t.Use(keys[k].Port, keys[k].Addr, now)
						}
						if res[k].OK && res[k].State == Reachable {
							found++
						}
					}
				}
			}
			cpu := cputime.Thread() - c0
			b.StopTimer()
			ns := fx.check(b, found, cpu)
			if i == 0 {
				baseBurst = ns
			}
			b.ReportMetric(ns/baseBurst, "x-smallest")
			if single > 0 {
				b.ReportMetric(ns/single, "x-single")
			}
		})
	}
}

// scaleFixture is BenchmarkNeighbourScale's table of n neighbours and the
// order its lookups visit them in, made once for both of a size's cases.
type scaleFixture struct {
	t   *Table
	now int64
	seq []Key
}

func newScaleFixture(b *testing.B, n int) *scaleFixture {
	p := DefaultParams
	p.Capacity = n
	t := NewTable(p)
	r := rand.New(rand.NewPCG(uint64(n), 28))
	now := int64(time.Hour)
	unlimited := NewLimiter(0, 1)
	addrs := make([][16]byte, 0, n)
	for len(addrs) < n {
		var a [16]byte
		binary.BigEndian.PutUint64(a[:], 0x20010db8_00000000|r.Uint64()&0xffff_ffff)
		binary.BigEndian.PutUint64(a[8:], r.Uint64())
		mac := packet.MAC{2, 0, byte(len(addrs) >> 24), byte(len(addrs) >> 16), byte(len(addrs) >> 8), byte(len(addrs))}
		// A full bucket refuses a new neighbour; draw another.
		if t.Learn(1, a, mac, unlimited, false, now) {
			t.Advert(1, a, mac, true, true, true, false, false, now)
			addrs = append(addrs, a)
		}
		if len(addrs) < n && t.Len() == t.Capacity() {
			b.Fatalf("%d entries fill a table of %d", t.Len(), t.Capacity())
		}
	}
	if t.Len() != n {
		b.Fatalf("%d entries, want %d", t.Len(), n)
	}
	// The visiting order: a permutation, repeated to at least 64k
	// lookups so that small tables are not timed on one address.
	seq := make([]Key, 0, max(n, 1<<16))
	for len(seq) < cap(seq) {
		for _, j := range r.Perm(n) {
			seq = append(seq, Key{Port: 1, Addr: addrs[j]})
		}
	}
	for _, k := range seq {
		if _, st, ok := t.Lookup(k.Port, k.Addr, now); !ok || st != Reachable {
			b.Fatalf("%x: not a REACHABLE neighbour", k.Addr)
		}
	}
	return &scaleFixture{t: t, now: now, seq: seq}
}

// check fails b unless every timed lookup found its neighbour, and reports
// the CPU time per lookup as ns/pkt, which it returns.
func (fx *scaleFixture) check(b *testing.B, found int, cpu time.Duration) float64 {
	pkts := b.N * packet.MaxBurst * (len(fx.seq) / packet.MaxBurst)
	if found != pkts {
		b.Fatalf("found %d of %d", found, pkts)
	}
	ns := float64(cpu) / float64(pkts)
	b.ReportMetric(ns, "ns/pkt")
	return ns
}
