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
// The limit of max_entries is 2^24; the largest size here is 2^20 (a 64 MiB
// table): 2^24 would take 1 GiB on a machine shared with others, and
// behaves as 2^20 does, every lookup out of the caches.
func BenchmarkNeighbourScale(b *testing.B) {
	var base float64
	for i, n := range []int{1, 1 << 12, 1 << 16, 1 << 20} {
		b.Run(fmt.Sprintf("neighbours=%d", n), func(b *testing.B) {
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
			seq := make([][16]byte, 0, max(n, 1<<16))
			for len(seq) < cap(seq) {
				for _, j := range r.Perm(n) {
					seq = append(seq, addrs[j])
				}
			}
			lookup := func(a [16]byte) bool {
				_, st, ok := t.Lookup(1, a, now)
				if ok && st != Reachable {
					t.Use(1, a, now)
				}
				return ok && st == Reachable
			}
			for _, a := range seq {
				if !lookup(a) {
					b.Fatalf("%x: not a REACHABLE neighbour", a)
				}
			}
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			found := 0
			b.ReportAllocs()
			b.ResetTimer()
			c0 := cputime.Thread()
			for it := 0; it < b.N; it++ {
				for _, a := range seq[:packet.MaxBurst*(len(seq)/packet.MaxBurst)] {
					if lookup(a) {
						found++
					}
				}
			}
			cpu := cputime.Thread() - c0
			b.StopTimer()
			pkts := b.N * packet.MaxBurst * (len(seq) / packet.MaxBurst)
			if found != pkts {
				b.Fatalf("found %d of %d", found, pkts)
			}
			ns := float64(cpu) / float64(pkts)
			b.ReportMetric(ns, "ns/pkt")
			if i == 0 {
				base = ns
			}
			b.ReportMetric(ns/base, "x-smallest")
		})
	}
}
