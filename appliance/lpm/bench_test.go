package lpm

import (
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/linerate/linerate/internal/cputime"
)

// BenchmarkTable4 looks up 1024 destinations (/24s of a table of 2^16 random
// /24s, and 2% /28s) with Lookup and LookupBurst, beside the bare loop: one
// load per destination of a fully written 64 MiB []uint32 at index
// destination>>8. ns/lookup is the thread's CPU time over the lookups.
func BenchmarkTable4(b *testing.B) {
	heapTables = false
	defer func() { heapTables = true }()
	x, err := New4(1 << 12)
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	var routes []uint32
	for i := range 1 << 16 {
		a := r.Uint32()
		bits := 24
		if i%50 == 0 {
			bits = 28
		}
		if _, err := x.Insert(a, bits, uint32(i)); err != nil {
			b.Fatal(err)
		}
		routes = append(routes, a)
	}
	d := make([]uint32, 1024)
	for i := range d {
		d[i] = routes[r.IntN(len(routes))]
	}
	bare := make([]uint32, 1<<24)
	for i := range bare {
		bare[i] = uint32(i)
	}
	var sink uint32
	measure := func(b *testing.B, per int, fn func(i int)) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		c0 := cputime.Thread()
		for i := 0; b.Loop(); i++ {
			fn(i)
		}
		b.ReportMetric(float64((cputime.Thread()-c0).Nanoseconds())/float64(b.N*per), "ns/lookup")
	}
	b.Run("bare", func(b *testing.B) {
		measure(b, len(d), func(int) {
			for _, a := range d {
				sink += bare[a>>8]
			}
		})
	})
	b.Run("lookup", func(b *testing.B) {
		measure(b, len(d), func(int) {
			for _, a := range d {
				nh, _ := x.Lookup(a)
				sink += nh
			}
		})
	})
	nh := make([]uint32, 64)
	b.Run("burst", func(b *testing.B) {
		measure(b, len(d), func(int) {
			for i := 0; i < len(d); i += 64 {
				x.LookupBurst(d[i:i+64], nh)
				sink += nh[0]
			}
		})
	})
	runtime.KeepAlive(sink)
}
