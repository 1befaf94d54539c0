package external

import (
	"log/slog"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/linerate/linerate/appliance/memif"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/appliance/stats"
	"github.com/linerate/linerate/plugins"
	"github.com/linerate/linerate/plugins/stagetest"
)

// BenchmarkLend is the lcore's side of a stage out of process, against the
// same work in process, in one run: bursts of 64 packets of 64 bytes from a
// shared pool, given Continue by a pass-through stage in process
// (baseline), or lent to the plugin, answered Continue by a minimal peer on
// the same thread (it reads each descriptor and writes its result, as the
// SDK does), and taken back by Produce. Both report packets/s, and the
// thread's CPU ns per packet (cpu-ns/packet), which a busy machine disturbs
// less; the difference is what lending and taking back cost the lcore per
// packet.
func BenchmarkLend(b *testing.B) {
	h := stagetest.NewHarness(b, 0)
	pool, err := packet.NewSlab(packet.SlabConfig{Name: "bench-lend", Buffers: 4096, Shared: true})
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	frame := make([]byte, 60)
	fill := func(bu *packet.Burst) {
		pool.Alloc(bu, packet.MaxBurst)
		for _, hd := range bu.Handles() {
			d, _ := hd.P().Append(len(frame))
			copy(d, frame)
		}
	}
	ctx := &h.Ctx
	b.Run("in-process", func(b *testing.B) {
		var bu packet.Burst
		b.ReportAllocs()
		cpu := startThreadCPU(b)
		for i := 0; i < b.N; i++ {
			fill(&bu)
			for _, hd := range bu.Handles() {
				hd.P().Continue()
			}
			pool.Free(&bu)
		}
		cpu.report(b, b.N*packet.MaxBurst)
		b.ReportMetric(float64(b.N*packet.MaxBurst)/b.Elapsed().Seconds(), "packets/s")
	})
	b.Run("lent", func(b *testing.B) {
		in, peer := lendRig(b, pool)
		var bu, out packet.Burst
		var last uint16
		b.ReportAllocs()
		cpu := startThreadCPU(b)
		for i := 0; i < b.N; i++ {
			fill(&bu)
			in.Process(ctx, &bu)
			bu.N = 0 // every packet was lent (Consume): the engine drops them from the burst
			// The peer: a result per lent packet, window unchanged, Continue.
			rx, tx := peer.C2S[0], peer.S2C[0]
			for n := rx.Head() - last; n > 0; n-- {
				d := rx.Load(last)
				*tx.D(last) = memif.Desc{Region: d.Region, Offset: d.Offset, Length: d.Length}
				last++
			}
			rx.SetTail(last)
			tx.SetTail(last)
			out.N = 0
			in.Produce(ctx, &out)
			if out.N != packet.MaxBurst {
				b.Fatalf("%d of %d back", out.N, packet.MaxBurst)
			}
			pool.Free(&out)
		}
		cpu.report(b, b.N*packet.MaxBurst)
		b.ReportMetric(float64(b.N*packet.MaxBurst)/b.Elapsed().Seconds(), "packets/s")
	})
}

// threadCPU is the CPU time of the benchmark's thread, locked to it, from
// a start: a machine shared with other work takes the thread off its CPU
// for a while, which this does not count, as the wall time does.
type threadCPU struct{ t0 time.Duration }

func startThreadCPU(b *testing.B) threadCPU {
	runtime.LockOSThread()
	b.Cleanup(runtime.UnlockOSThread)
	b.ResetTimer()
	return threadCPU{threadNow()}
}

// report gives the thread's CPU ns per packet since the start (cpu-ns/packet).
func (c threadCPU) report(b *testing.B, packets int) {
	b.ReportMetric(float64(threadNow()-c.t0)/float64(max(packets, 1)), "cpu-ns/packet")
}

func threadNow() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// BenchmarkLendCrossCore is BenchmarkLend with the peer on a CPU of its own,
// as a plugin runs: the lcore's thread pinned to CPU 0 lends bursts of 64
// and takes results back, while the peer's thread, pinned to CPU 1, polls
// the lent ring and answers Continue (reading each descriptor and writing
// its result, as the SDK does). A burst is lent when the ring has room for
// it. What it adds to BenchmarkLend is the cost of the rings' cache lines
// moving between the two CPUs; on a busy machine, also the time the peer's
// thread is off its CPU (read it on a quiet one). The baseline, in the
// same run, is the in-process loop of BenchmarkLend on CPU 0. Both report
// packets/s taken back (in process: passed) per second of the lcore.
func BenchmarkLendCrossCore(b *testing.B) {
	if runtime.NumCPU() < 2 {
		b.Skip("needs 2 CPUs")
	}
	h := stagetest.NewHarness(b, 0)
	pool, err := packet.NewSlab(packet.SlabConfig{Name: "bench-lend-x", Buffers: 4096, Shared: true})
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	fill := func(bu *packet.Burst) {
		pool.Alloc(bu, packet.MaxBurst)
		for _, hd := range bu.Handles() {
			d, _ := hd.P().Append(60)
			d[0], d[59] = 1, 2
		}
	}
	ctx := &h.Ctx
	// onCPU runs f on a thread of its own pinned to cpu, and waits for it.
	onCPU := func(cpu int, f func()) {
		done := make(chan struct{})
		go func() {
			defer close(done)
			runtime.LockOSThread() // never unlocked: the thread ends with its pinning
			var set unix.CPUSet
			set.Set(cpu)
			if err := unix.SchedSetaffinity(0, &set); err != nil {
				b.Error(err)
				return
			}
			f()
		}()
		<-done
	}
	b.Run("in-process", func(b *testing.B) {
		var bu packet.Burst
		b.ReportAllocs()
		b.ResetTimer()
		onCPU(0, func() {
			for i := 0; i < b.N; i++ {
				fill(&bu)
				for _, hd := range bu.Handles() {
					hd.P().Continue()
				}
				pool.Free(&bu)
			}
		})
		b.ReportMetric(float64(b.N*packet.MaxBurst)/b.Elapsed().Seconds(), "packets/s")
	})
	b.Run("lent", func(b *testing.B) {
		in, peer := lendRig(b, pool)
		var stop atomic.Bool
		peerDone := make(chan struct{})
		go func() {
			defer close(peerDone)
			onCPU(1, func() {
				rx, tx := peer.C2S[0], peer.S2C[0]
				var last uint16
				for !stop.Load() {
					n := min(rx.Head()-last, packet.MaxBurst)
					for k := uint16(0); k < n; k++ {
						d := rx.Load(last + k)
						*tx.D(last + k) = memif.Desc{Region: d.Region, Offset: d.Offset, Length: d.Length}
					}
					last += n
					rx.SetTail(last)
					tx.SetTail(last)
				}
			})
		}()
		var bu, out packet.Burst
		back := 0
		b.ReportAllocs()
		b.ResetTimer()
		onCPU(0, func() {
			take := func() {
				out.N = 0
				in.Produce(ctx, &out)
				back += out.N
				pool.Free(&out)
			}
			for i := 0; i < b.N; i++ {
				// A burst goes when the ring has room for it: a descheduled
				// peer (a busy machine) shows as time, not as drops.
				for len(in.lent)-in.Held() < packet.MaxBurst {
					take()
				}
				fill(&bu)
				in.Process(ctx, &bu)
				bu.N = 0 // every packet was lent (Consume)
				take()
			}
			for in.Held() > 0 {
				take()
			}
		})
		b.StopTimer()
		stop.Store(true)
		<-peerDone
		if back != b.N*packet.MaxBurst {
			b.Fatalf("%d back of %d", back, b.N*packet.MaxBurst)
		}
		b.ReportMetric(float64(back)/b.Elapsed().Seconds(), "packets/s")
	})
}

// lendRig is an instance with a live link to an in-process memif server,
// whose view of the rings it returns.
func lendRig(b testing.TB, pool *packet.Slab) (*instance, *memif.Conn) {
	return lendRigOf(b, pool, true)
}

// spareRig is lendRig on a shared pool of its own, of buffers buffers, with
// spares spare buffers for the plugin's emits (ids handed out from 0). The
// pool is closed at the test's end, and must then have none in use.
func spareRig(t *testing.T, name string, buffers, spares int) (*packet.Slab, *instance, *memif.Conn) {
	t.Helper()
	pool, err := packet.NewSlab(packet.SlabConfig{Name: name, Buffers: buffers, Shared: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := pool.Close(); err != nil {
			t.Error(err)
		}
	})
	in, peer := lendRig(t, pool)
	in.emitPool = pool
	in.spare = make([]packet.Handle, spares)
	for id := spares - 1; id >= 0; id-- {
		in.freeIDs = append(in.freeIDs, uint16(id))
	}
	return pool, in, peer
}

// lendRigOf is lendRig, with the spare and emit rings or (a plugin of
// extension version 1) without.
func lendRigOf(b testing.TB, pool *packet.Slab, emits bool) (*instance, *memif.Conn) {
	sock := filepath.Join(b.TempDir(), "m.sock")
	ln, err := memif.Listen(sock)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	accepted := make(chan *memif.Conn, 1)
	go func() {
		max := 1
		if emits {
			max = 2
		}
		c, err := ln.Accept(memif.ServerConfig{MaxC2S: max, MaxS2C: max, PollC2S: true})
		if err != nil {
			b.Error(err)
		}
		accepted <- c
	}()
	rb := uint32(memif.RingBytes(10))
	rings, err := memif.NewRegion("bench-rings", 4*int(rb))
	if err != nil {
		b.Fatal(err)
	}
	fd, mem, _, _ := pool.SharedMemory()
	l := &link{rings: rings, gen: 1, emits: emits}
	l.regionOf[pool.ID()] = 1
	l.base[pool.ID()] = uintptr(unsafe.Pointer(unsafe.SliceData(mem)))
	c, err := memif.Dial(memif.ClientConfig{Socket: sock, Regions: []*memif.Region{rings, {Mem: mem, FD: fd}},
		Rings: ringSpecs(rb, emits)})
	if err != nil {
		b.Fatal(err)
	}
	l.conn = c
	peer := <-accepted
	b.Cleanup(func() { peer.Close(); l.close() })
	sv := &supervisor{next: make([]atomic.Pointer[link], 1), inst: make([]*instance, 1),
		log: slog.New(slog.DiscardHandler)}
	sv.next[0].Store(l)
	in := &instance{sv: sv, lent: make([]packet.Handle, 1024), lentAt: make([]int64, 1024), mask: 1023,
		latency: stats.NewHistogram(), stall: int64(10 * time.Millisecond)}
	set := &stats.Set{}
	in.c = counters{lent: set.New("lent", ""), returned: set.New("returned", ""), forwarded: set.New("forwarded", ""),
		dropped: set.New("dropped", ""), consumed: set.New("consumed", ""), marked: set.New("marked", ""),
		copies: set.New("copies", ""), badWindow: set.New("bad_window", ""), reclaimed: set.New("reclaimed", ""),
		lost: set.New("plugin_lost", ""), restarts: set.New("plugin_restarts", ""),
		emitted: set.New("emitted", ""), badEmit: set.New("bad_emit", ""), badResult: set.New("bad_result", ""),
		bypassed: set.New("plugin_bypassed", "")}
	in.sync()
	if in.l == nil {
		b.Fatal("no link")
	}
	return in, peer
}

var _ plugins.Stage = (*instance)(nil)

func ringSpecs(rb uint32, emits bool) []memif.RingSpec {
	if !emits {
		return []memif.RingSpec{{Kind: memif.C2S, Log2: 10}, {Kind: memif.S2C, Offset: 2 * rb, Log2: 10}}
	}
	return []memif.RingSpec{{Kind: memif.C2S, Log2: 10}, {Kind: memif.C2S, Index: 1, Offset: rb, Log2: 10},
		{Kind: memif.S2C, Offset: 2 * rb, Log2: 10}, {Kind: memif.S2C, Index: 1, Offset: 3 * rb, Log2: 10}}
}
