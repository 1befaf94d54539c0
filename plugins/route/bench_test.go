package route

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/internal/cputime"
	"github.com/linerate/linerate/plugins/stagetest"
)

// BenchmarkRoute routes bursts of 64 frames whose next hop is resolved: parse,
// LPM, neighbour lookup, hop limit (TTL and checksum), MAC rewrite. Each
// iteration first restores the 54 (34) header bytes it changes, which the
// figure includes.
func BenchmarkRoute(b *testing.B) {
	for _, v := range []int{6, 4} {
		b.Run(fmt.Sprintf("ip=%d/size=128", v), func(b *testing.B) {
			h := newHarness(b)
			r := h.build("route", "")
			now := h.Clock.Now()
			h.routed().Neighbors().SetStatic(port1, a16("2001:db8:2::2"), host2, now)
			h.routed().Neighbors().SetStatic(port1, a16("::ffff:198.51.100.2"), host2, now)
			frame := udp6(b, host1, mac0, "2001:db8:1::2", "2001:db8:2::2", 64, 128-62-4)
			if v == 4 {
				frame = udp4(b, host1, mac0, "192.0.2.2", "198.51.100.2", 64, 128-42-4)
			}
			var bu packet.Burst
			for range packet.MaxBurst {
				bu.Push(h.Pkt(frame, port0))
			}
			hdr := 14 + 40
			if v == 4 {
				hdr = 14 + 20
			}
			h.Ctx.Now = now
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			b.ResetTimer()
			cpu := cputime.Thread()
			for b.Loop() {
				for i := 0; i < bu.N; i++ {
					p := bu.H[i].P()
					copy(p.Data()[:hdr], frame)
					p.InvalidateLayers()
					p.Continue()
				}
				r.Process(&h.Ctx, &bu)
			}
			cpu = cputime.Thread() - cpu
			b.StopTimer()
			if bu.P(0).Verdict() != packet.Forward || bu.P(0).OutPort != port1 {
				b.Fatalf("verdict %v", bu.P(0).Verdict())
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*packet.MaxBurst), "ns/pkt")
			b.ReportMetric(float64(b.N*packet.MaxBurst)/b.Elapsed().Seconds()/1e6, "Mpps")
			// The figures every stage benchmark reports (plugins/stagetest):
			// the stage's own in CPU time, less the restores timed alone.
			c0 := cputime.Thread()
			for range b.N {
				for i := 0; i < bu.N; i++ {
					p := bu.H[i].P()
					copy(p.Data()[:hdr], frame)
					p.InvalidateLayers()
					p.Continue()
				}
			}
			restore := cputime.Thread() - c0
			pkts := b.N * packet.MaxBurst
			stagetest.ReportAlone(b, float64(cpu-restore)/float64(pkts), len(frame), pkts)
			packet.Free(&bu)
		})
		b.Run(fmt.Sprintf("ip=%d/size=128/engine", v), func(b *testing.B) {
			frame := udp6(b, host1, mac0, "2001:db8:1::2", "2001:db8:2::2", 64, 128-62-4)
			if v == 4 {
				frame = udp4(b, host1, mac0, "192.0.2.2", "198.51.100.2", 64, 128-42-4)
			}
			stagetest.InEngine(b, stagetest.EngineSpec{Kind: "route", Frames: [][]byte{frame},
				Rx: "eth0", Ports: []string{"eth1"},
				PortKeys: map[string]string{
					"eth0": fmt.Sprintf("mac = %q\naddresses = [\"2001:db8:1::1/64\", \"192.0.2.1/24\"]", mac0),
					"eth1": fmt.Sprintf("mac = %q\naddresses = [\"2001:db8:2::1/64\", \"198.51.100.1/24\"]", mac1),
				},
				Sections: fmt.Sprintf("[[neighbors]]\naddress = \"2001:db8:2::2\"\nmac = %q\nport = \"eth1\"\n"+
					"[[neighbors]]\naddress = \"198.51.100.2\"\nmac = %q\nport = \"eth1\"\n", host2, host2)})
		})
	}
}

// BenchmarkAnswerNS turns bursts of Neighbor Solicitations into Advertisements
// in place: validation, checksum, learning (an update of a known entry), and
// the NA with its checksum.
func BenchmarkAnswerNS(b *testing.B) {
	h := newHarness(b)
	n := h.build("neighbor", `reply_rate = "0"`)
	frame := nsFrame(b, host1, "2001:db8:1::2", "2001:db8:1::1", true)
	var bu packet.Burst
	for range packet.MaxBurst {
		bu.Push(h.Pkt(frame, port0))
	}
	h.Ctx.Now = h.Clock.Now()
	b.ResetTimer()
	for b.Loop() {
		for i := 0; i < bu.N; i++ {
			p := bu.H[i].P()
			p.SetWindow(p.Offset(), len(frame))
			copy(p.Data(), frame)
			p.Continue()
		}
		n.Process(&h.Ctx, &bu)
	}
	b.StopTimer()
	if bu.P(0).Verdict() != packet.Forward {
		b.Fatalf("verdict %v", bu.P(0).Verdict())
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*packet.MaxBurst), "ns/pkt")
	packet.Free(&bu)
}

// The FIB's benchmarks. Run them with
//
//	go test -run '^$' -bench 'Lookup[46](Burst)?$|Update[46]$' ./plugins/route
//
// Tables are BGP-like and seeded (bgpTable4, bgpTable6); the table of N routes
// is the first N prefixes of the largest. The traffic is fixed whatever the
// table's size, because a DIR-24-8 lookup costs what the traffic's locality
// makes it cost: hot is 1024 destinations, cold 2^20, both drawn (seeded) from
// the prefixes of the largest table, the same arrays for every N.

// lookupSizes are the route counts; IPv6's largest is a full table's 230k.
var (
	lookupSizes4 = []int{10, 1000, 100000, 1000000}
	lookupSizes6 = []int{10, 1000, 100000, 230000}
)

const (
	hotDsts  = 1 << 10
	coldDsts = 1 << 20
	perIter  = 64 // lookups per b.Loop iteration, so the loop's own cost is spread
)

// cpuPerLookup reports ns/lookup from the thread's CPU time, not the wall
// clock: on a shared 2-vCPU machine the time a thread waits for a CPU is not
// the lookup's. Defer its result.
func cpuPerLookup(b *testing.B) func() {
	runtime.LockOSThread()
	c0 := cputime.Thread()
	return func() {
		cpu := cputime.Thread() - c0
		runtime.UnlockOSThread()
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*perIter), "ns/lookup")
	}
}

// pick draws a length from a table of per-mille weights.
func pick(r *rand.Rand, mix [][2]int) int {
	n := r.IntN(1000)
	for _, m := range mix {
		if n -= m[1]; n < 0 {
			return m[0]
		}
	}
	return mix[0][0]
}

// IPv4 lengths per mille, close to a full table's (mostly /24), and 2% longer
// than /24 as an edge router's own routes add.
var mix4 = [][2]int{{24, 580}, {23, 95}, {22, 110}, {21, 45}, {20, 40}, {19, 30}, {18, 15}, {17, 10}, {16, 15},
	{15, 5}, {14, 5}, {13, 4}, {12, 3}, {11, 2}, {10, 1}, {25, 4}, {26, 4}, {27, 3}, {28, 3}, {29, 2}, {30, 2},
	{32, 2}}

// bgpTable4 makes n distinct unicast IPv4 prefixes (1.0.0.0–223.255.255.255).
func bgpTable4(n int) []netip.Prefix {
	r := rand.New(rand.NewPCG(24, 1))
	seen := make(map[netip.Prefix]bool, n)
	out := make([]netip.Prefix, 0, n)
	for len(out) < n {
		a := netip.AddrFrom4([4]byte{byte(1 + r.IntN(223)), byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256))})
		p := netip.PrefixFrom(a, pick(r, mix4)).Masked()
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// IPv6 lengths per mille: /48 and /32 first, as in a full table.
var mix6 = [][2]int{{48, 450}, {32, 120}, {44, 80}, {40, 60}, {36, 40}, {29, 50}, {46, 30}, {47, 20}, {56, 40},
	{64, 40}, {28, 20}, {30, 10}, {128, 20}, {34, 10}, {38, 10}}

// bgpTable6 makes n distinct IPv6 prefixes as the registries hand them out:
// /32s (and shorter) under the RIRs' /12s, and longer ones under a pool of
// those /32s, numbered densely from the start of each, as ISPs number their
// customers.
func bgpTable6(n int) []netip.Prefix {
	r := rand.New(rand.NewPCG(26, 1))
	rirs := [][2]byte{{0x20, 0x01}, {0x24, 0x00}, {0x26, 0x00}, {0x28, 0x00}, {0x2a, 0x00}, {0x2c, 0x00}}
	lir := func() [16]byte {
		var a [16]byte
		rir := rirs[r.IntN(len(rirs))]
		a[0], a[1] = rir[0], rir[1]|byte(r.IntN(16))
		a[2], a[3] = byte(r.IntN(256)), byte(r.IntN(256))
		return a
	}
	pool := make([][16]byte, max(n/8, 16))
	for i := range pool {
		pool[i] = lir()
	}
	seen := make(map[netip.Prefix]bool, n)
	out := make([]netip.Prefix, 0, n)
	for len(out) < n {
		bits := pick(r, mix6)
		a := lir()
		if bits > 32 {
			a = pool[r.IntN(len(pool))]
			a[4], a[5] = byte(r.IntN(16)), byte(r.IntN(256))
			a[6], a[7] = byte(r.IntN(4)), byte(r.IntN(256))
			for i := 8; i < 16; i++ {
				a[i] = byte(r.IntN(256))
			}
		}
		p := netip.PrefixFrom(netip.AddrFrom16(a), bits).Masked()
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// dsts draws n addresses inside prefixes of ps, seeded.
func dsts(ps []netip.Prefix, n int, seed uint64) []netip.Addr {
	r := rand.New(rand.NewPCG(seed, 2))
	out := make([]netip.Addr, n)
	for i := range out {
		p := ps[r.IntN(len(ps))]
		a := p.Addr().AsSlice()
		for j := p.Bits(); j < len(a)*8; j++ {
			if r.IntN(2) == 1 {
				a[j/8] |= 0x80 >> (j % 8)
			}
		}
		out[i], _ = netip.AddrFromSlice(a)
	}
	return out
}

// benchRoute routes p through one of 64 gateways on 4 ports.
func benchRoute(p netip.Prefix, i int) Route {
	via := netip.AddrFrom4([4]byte{192, 0, 2, byte(1 + i%64)})
	if p.Addr().Is6() {
		via = netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 15: byte(1 + i%64)})
	}
	return Route{Prefix: p, Kind: Gateway, Port: uint16(i % 4), Via: via, Static: true}
}

// heapInUse is the live heap after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// fibBytes is what f costs: its heap and the table pages memory holds.
func fibBytes(f *FIB, heap0 uint64) float64 {
	s4, s6 := f.MemStats()
	return float64(max(int64(heapInUse())-int64(heap0), 0)) + float64(s4.Resident+s6.Resident)
}

// BenchmarkLookup4 looks IPv4 destinations up in BGP-like tables of 10 to 1M
// routes, with Reader.Lookup4 (the tables, then the next hop; one Reader for
// each iteration's 64 lookups), beside the bare
// loop: over the same destination array, the same number of loads of a fully
// written 64 MiB []uint32 at index destination>>8, summed. That is the one
// tbl24 read no DIR-24-8 lookup avoids, without the validity checks, the
// group read, the default or the next-hop fetch. Each sub-benchmark reports
// ns/lookup; routes=N also B/route (heap and resident table pages over N).
func BenchmarkLookup4(b *testing.B) { benchLookup4(b, false) }

// BenchmarkLookup4Burst is BenchmarkLookup4 with FIB.Lookup4Burst, 64
// destinations a call.
func BenchmarkLookup4Burst(b *testing.B) { benchLookup4(b, true) }

func benchLookup4(b *testing.B, burst bool) {
	sizes := lookupSizes4
	if testing.Short() {
		sizes = sizes[:3]
	}
	table := bgpTable4(sizes[len(sizes)-1])
	traffic := map[string][]uint32{}   // for the burst and the bare loop
	traffic4 := map[string][][4]byte{} // the same, as Lookup4 takes them
	for name, n := range map[string]int{"hot": hotDsts, "cold": coldDsts} {
		for _, a := range dsts(table, n, uint64(n)) {
			b := a.As4()
			traffic[name] = append(traffic[name], binary.BigEndian.Uint32(b[:]))
			traffic4[name] = append(traffic4[name], b)
		}
	}
	bare := make([]uint32, 1<<24)
	for i := range bare {
		bare[i] = uint32(i)
	}
	var sink uint32
	for _, tr := range []string{"hot", "cold"} {
		d := traffic[tr]
		mask := len(d) - 1
		b.Run("traffic="+tr+"/bare", func(b *testing.B) {
			defer cpuPerLookup(b)()
			var sum uint32 // in a register, as in the lookup loops
			for i := 0; b.Loop(); i += perIter {
				for j := range perIter {
					sum += bare[d[(i+j)&mask]>>8]
				}
			}
			sink += sum
		})
	}
	heap0 := heapInUse()
	f, err := NewFIB()
	if err != nil {
		b.Fatal(err)
	}
	have := 0
	for _, n := range sizes {
		for ; have < n; have++ {
			if err := f.Add(benchRoute(table[have], have)); err != nil {
				b.Fatal(err)
			}
		}
		perRoute := fibBytes(f, heap0) / float64(n)
		for _, tr := range []string{"hot", "cold"} {
			d, d4 := traffic[tr], traffic4[tr]
			mask := len(d) - 1
			b.Run(fmt.Sprintf("traffic=%s/routes=%d", tr, n), func(b *testing.B) {
				defer cpuPerLookup(b)()
				var nh [perIter]*NextHop
				var sum uint32
				for i := 0; b.Loop(); i += perIter {
					if burst {
						f.Lookup4Burst(d[i&mask:i&mask+perIter], nh[:])
						if nh[0] != nil {
							sum += uint32(nh[0].Port)
						}
						continue
					}
					r := f.Reader() // once a run of lookups, as a burst would
					for j := range perIter {
						if h, ok := r.Lookup4(d4[(i+j)&mask]); ok {
							sum += uint32(h.Port)
						}
					}
				}
				sink += sum
				b.ReportMetric(perRoute, "B/route")
			})
		}
	}
	runtime.KeepAlive(sink)
}

// traceReads6 is what a lookup of each of d reads in f's IPv6 table: the
// entries a lookup reads on average, and how many distinct 64-byte lines
// the whole of d touches at each level (tbl24, then one group per byte),
// which, beside the caches' sizes, says which level misses.
func traceReads6(f *FIB, d [][16]byte) (reads float64, lines []int) {
	var seen []map[uint32]bool
	n := 0
	for _, a := range d {
		f.v6.Trace(a, func(level int, at uint32) {
			for len(seen) <= level {
				seen = append(seen, map[uint32]bool{})
			}
			seen[level][at/16] = true
			n++
		})
	}
	for _, m := range seen {
		lines = append(lines, len(m))
	}
	return float64(n) / float64(len(d)), lines
}

// BenchmarkLookup6 is BenchmarkLookup4 for IPv6, up to a full table's 230k
// routes; its bare loop reads the 64 MiB array at the destination's first 24
// bits.
func BenchmarkLookup6(b *testing.B) { benchLookup6(b, false) }

// BenchmarkLookup6Burst is BenchmarkLookup6 with FIB.Lookup6Burst.
func BenchmarkLookup6Burst(b *testing.B) { benchLookup6(b, true) }

func benchLookup6(b *testing.B, burst bool) {
	sizes := lookupSizes6
	if testing.Short() {
		sizes = sizes[:3]
	}
	table := bgpTable6(sizes[len(sizes)-1])
	traffic := map[string][][16]byte{}
	for name, n := range map[string]int{"hot": hotDsts, "cold": coldDsts} {
		for _, a := range dsts(table, n, uint64(n)) {
			traffic[name] = append(traffic[name], a.As16())
		}
	}
	bare := make([]uint32, 1<<24)
	for i := range bare {
		bare[i] = uint32(i)
	}
	var sink uint32
	for _, tr := range []string{"hot", "cold"} {
		d := traffic[tr]
		mask := len(d) - 1
		b.Run("traffic="+tr+"/bare", func(b *testing.B) {
			defer cpuPerLookup(b)()
			for i := 0; b.Loop(); i += perIter {
				for j := range perIter {
					a := &d[(i+j)&mask]
					sink += bare[uint32(a[0])<<16|uint32(a[1])<<8|uint32(a[2])]
				}
			}
		})
	}
	heap0 := heapInUse()
	f, err := NewFIB()
	if err != nil {
		b.Fatal(err)
	}
	have := 0
	var nh [perIter]*NextHop
	for _, n := range sizes {
		for ; have < n; have++ {
			if err := f.Add(benchRoute(table[have], have)); err != nil {
				b.Fatal(err)
			}
		}
		perRoute := fibBytes(f, heap0) / float64(n)
		for _, tr := range []string{"hot", "cold"} {
			d := traffic[tr]
			mask := len(d) - 1
			reads, lines := traceReads6(f, d)
			b.Run(fmt.Sprintf("traffic=%s/routes=%d", tr, n), func(b *testing.B) {
				b.Logf("%d destinations: %.2f entries read a lookup; distinct cache lines by level: %v",
					len(d), reads, lines)
				b.ReportMetric(reads, "reads/lookup")
				defer cpuPerLookup(b)()
				for i := 0; b.Loop(); i += perIter {
					if burst {
						f.Lookup6Burst(d[i&mask:i&mask+perIter], nh[:])
						if nh[0] != nil {
							sink += uint32(nh[0].Port)
						}
						continue
					}
					for j := range perIter {
						if h, ok := f.Lookup6(d[(i+j)&mask]); ok {
							sink += uint32(h.Port)
						}
					}
				}
				b.ReportMetric(perRoute, "B/route")
			})
		}
	}
	runtime.KeepAlive(sink)
}

// benchUpdates replays a BGP-like update stream on a table of the routes in
// table, with a reader looking up cold traffic all the while: each update
// withdraws a prefix of the table or announces it again with another next
// hop, alternately. It reports updates/s and the 99th percentile of one
// update's latency (p99-ns), both from the writer thread's CPU time (latencies
// scaled by its share of the CPU, cputime.Share), and the bare run replays the same stream on a Go
// map of prefix to next hop, the least any table with a rules list does.
func benchUpdates(b *testing.B, table []netip.Prefix, lookup func(f *FIB, i int)) {
	run := func(b *testing.B, apply func(i int, p netip.Prefix) error, f *FIB) {
		var stop atomic.Bool
		var wg sync.WaitGroup
		if f != nil {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; !stop.Load(); i++ {
					lookup(f, i)
				}
			}()
		}
		lat := make([]int64, 0, 1<<20)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		share, c0 := cputime.NewShare(), cputime.Thread()
		i := 0
		for ; b.Loop(); i++ {
			p := table[(i/2*7919)%len(table)]
			t0 := time.Now()
			if err := apply(i, p); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, int64(share.Scale(time.Since(t0))))
		}
		cpu := cputime.Thread() - c0
		b.StopTimer()
		// Updates come in pairs, a withdrawal then the announcement: one
		// left half done is finished, so that the next run (-count, the
		// benchmark's own reruns) finds the whole table again.
		if i%2 == 1 {
			if err := apply(i, table[(i/2*7919)%len(table)]); err != nil {
				b.Fatal(err)
			}
		}
		stop.Store(true)
		wg.Wait()
		slices.Sort(lat)
		b.ReportMetric(float64(b.N)/cpu.Seconds(), "updates/s")
		b.ReportMetric(float64(lat[len(lat)*99/100]), "p99-ns")
	}
	b.Run("bare", func(b *testing.B) {
		m := make(map[netip.Prefix]uint32, len(table))
		for i, p := range table {
			m[p] = uint32(i)
		}
		run(b, func(i int, p netip.Prefix) error {
			if i%2 == 0 {
				delete(m, p)
			} else {
				m[p] = uint32(i)
			}
			return nil
		}, nil)
	})
	f, err := NewFIB()
	if err != nil {
		b.Fatal(err)
	}
	for i, p := range table {
		if err := f.Add(benchRoute(p, i)); err != nil {
			b.Fatal(err)
		}
	}
	b.Run(fmt.Sprintf("routes=%d", len(table)), func(b *testing.B) {
		run(b, func(i int, p netip.Prefix) error {
			if i%2 == 0 {
				_, err := f.Delete(p)
				return err
			}
			return f.Add(benchRoute(p, i))
		}, f)
	})
}

// BenchmarkUpdate4 replays updates on the 1M-route IPv4 table.
func BenchmarkUpdate4(b *testing.B) {
	n := lookupSizes4[len(lookupSizes4)-1]
	if testing.Short() {
		n = 100000
	}
	table := bgpTable4(n)
	var d [][4]byte
	for _, a := range dsts(table, coldDsts, 3) {
		d = append(d, a.As4())
	}
	benchUpdates(b, table, func(f *FIB, i int) { f.Lookup4(d[i&(coldDsts-1)]) })
}

// BenchmarkUpdate6 replays updates on the 230k-route IPv6 table.
func BenchmarkUpdate6(b *testing.B) {
	n := lookupSizes6[len(lookupSizes6)-1]
	if testing.Short() {
		n = 100000
	}
	table := bgpTable6(n)
	var d [][16]byte
	for _, a := range dsts(table, coldDsts, 3) {
		d = append(d, a.As16())
	}
	benchUpdates(b, table, func(f *FIB, i int) { f.Lookup6(d[i&(coldDsts-1)]) })
}
