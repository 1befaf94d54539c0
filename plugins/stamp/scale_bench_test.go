package stamp

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/plugins"
)

// The scaling benchmarks measure how a packet's cost grows with the number
// of sessions. Each runs its smallest size first and reports every size's
// ns/pkt (thread CPU time per packet) and x-smallest (that over the same
// run's smallest size). The traffic visits every session: packet k belongs
// to session perm[k mod N], a seeded random permutation, so each session is
// hit once per N packets and never twice in a row.
//
// SSIDs are 16 bits (RFC 8972 §3) and the registry keys sessions by SSID
// alone, so 65535 is the most sessions a role can have: it stands for the
// issue's 100k. The sessions are added as a config file's are, in one
// table swap (putRfs, putTxs).

// scaleSizes are the session counts of the reflector. The collector stops
// at 10,000: a sender session holds 29 KiB of statistics (a 740-byte hot
// record; three 8 KiB histograms' counts and the 4 KiB IPDV window out of
// line), so 65535 of them would take 1.9 GiB.
var (
	scaleSizes     = []int{1, 1000, MaxSessions}
	collectorSizes = []int{1, 1000, 10000}
)

// scaleBaseline keeps the smallest size's ns/pkt of the running benchmark.
type scaleBaseline struct{ ns float64 }

// report reports ns/pkt and, beside the baseline, x-smallest. The first
// size sets the baseline.
func (sb *scaleBaseline) report(b *testing.B, cpu *cpuTimer, packets float64, first bool) {
	ns := float64(cpu.total) / packets
	b.ReportMetric(ns, "ns/pkt")
	if first {
		sb.ns = ns
	}
	if sb.ns > 0 {
		b.ReportMetric(ns/sb.ns, "x-smallest")
	}
}

// scalePerm is a seeded random order of n sessions, SSIDs 1..n.
func scalePerm(n int) []uint16 {
	r := rand.New(rand.NewPCG(uint64(n), 28))
	ids := make([]uint16, n)
	for i, j := range r.Perm(n) {
		ids[i] = uint16(j + 1)
	}
	return ids
}

// scaleFrames makes a test packet as it reaches the reflector and its reply
// as it reaches the collector, stateful, over 3 segments each way, from
// session 7 of benchKeys; session 7 is then removed, so that the SSIDs are
// free for the benchmark's own sessions.
func scaleFrames(b *testing.B, bs *benchSetup) (rfl plugins.Stage, test, reply []byte) {
	h := bs.h
	sk, rk := benchKeys(false, "")
	snd := h.MustBuildNamed("stamp.sender", "tx", sk)
	rfl = h.MustBuildNamed("stamp.reflector", "refl", rk)
	test = arrive(b, h.produce(snd)[0])
	rr := h.run(test, 0, rfl)
	if rr.dropped != "" {
		b.Fatal(rr.dropped)
	}
	reply = arrive(b, rr.data)
	reg := h.registry()
	if _, err := reg.dropTx(7); err != nil {
		b.Fatal(err)
	}
	if _, err := reg.dropRf(7); err != nil {
		b.Fatal(err)
	}
	return rfl, test, reply
}

// BenchmarkScaleReflector reflects bursts of 64 test packets of a stateful
// reflector's N sessions (3-segment SRH in, 3-segment return path out): the
// session lookup, its checks and its sequence, and the whole reply.
func BenchmarkScaleReflector(b *testing.B) {
	var base scaleBaseline
	for i, n := range scaleSizes {
		b.Run(fmt.Sprintf("sessions=%d", n), func(b *testing.B) {
			bs := newBenchSetup(b)
			h := bs.h
			rfl, test, _ := scaleFrames(b, bs)
			reg := h.registry()
			ret := []netip.Addr{netip.MustParseAddr("2001:db8:e::2"), netip.MustParseAddr("2001:db8:e::1")}
			// As a config file's sessions load: built, then added in one swap.
			d := reg.reflectors["refl"].defaults
			rss := make([]*rfSession, n)
			for id := 1; id <= n; id++ {
				c := ReflectorSession{SSID: uint16(id), Stage: "refl", Stateful: true, ReturnPath: ret}
				s, err := buildRf(c, &d)
				if err != nil {
					b.Fatal(err)
				}
				s.running.Store(true)
				rss[id-1] = s
			}
			if _, err := reg.putRfs(rss); err != nil {
				b.Fatal(err)
			}
			perm := scalePerm(n)
			pay, _ := payloadOf(b, test)
			ssidOff := len(test) - len(pay) + 14
			bu := fillBurst(b, h, test)
			headroom := bu.H[0].P().Headroom()
			k := 0
			load := func() {
				for j := 0; j < bu.N; j++ {
					p := bu.H[j].P()
					p.SetWindow(headroom, len(test))
					d := p.Data()
					copy(d, test)
					binary.BigEndian.PutUint16(d[ssidOff:], perm[k])
					if k++; k == n {
						k = 0
					}
					p.Continue()
				}
			}
			// Warm-up: every session once, every reply whole.
			for w := 0; w < (n+packet.MaxBurst-1)/packet.MaxBurst; w++ {
				load()
				rfl.Process(&bs.ctx, bu)
				for j := 0; j < bu.N; j++ {
					if p := bu.H[j].P(); p.Verdict() != packet.Continue || p.Len() != len(test) {
						b.Fatalf("warm-up: verdict %v reason %v", p.Verdict(), p.Reason)
					}
				}
			}
			r0 := h.StageCounter("refl", "reflected")
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var cpu cpuTimer
			b.ReportAllocs()
			b.ResetTimer()
			cpu.resume()
			for it := 0; it < b.N; it++ {
				load()
				rfl.Process(&bs.ctx, bu)
			}
			cpu.pause()
			b.StopTimer()
			if got := h.StageCounter("refl", "reflected") - r0; got != uint64(b.N)*packet.MaxBurst {
				b.Fatalf("reflected %d of %d", got, b.N*packet.MaxBurst)
			}
			base.report(b, &cpu, float64(b.N)*packet.MaxBurst, i == 0)
		})
	}
}

// BenchmarkScaleCollector takes bursts of 64 replies of N sender sessions,
// each with the next sequence number of its session: the session lookup,
// the record, the session's statistics (loss window, IPDV, histograms) and
// its FIFO, which the control plane drains between bursts, off the clock.
func BenchmarkScaleCollector(b *testing.B) {
	var base scaleBaseline
	for i, n := range collectorSizes {
		b.Run(fmt.Sprintf("sessions=%d", n), func(b *testing.B) {
			bs := newBenchSetup(b)
			h := bs.h
			_, _, reply := scaleFrames(b, bs)
			coll := h.MustBuildNamed("stamp.collector", "coll", "")
			reg := h.registry()
			// FIFOs of 64 records: drained every drainEvery bursts, in
			// which a session gets at most 64*drainEvery/n + 1 replies.
			const records = 64
			drainEvery := max(1, min(1024, (records-1)*n/packet.MaxBurst))
			d := reg.senders["tx"].defaults
			sessions := make([]*txSession, n)
			for id := 1; id <= n; id++ {
				c := SenderSession{SSID: uint16(id), Stage: "tx", Reflector: addrR, Stateful: true,
					Segments: []netip.Addr{netip.MustParseAddr("2001:db8:e::1"),
						netip.MustParseAddr("2001:db8:e::2")},
					Interval: time.Millisecond, Records: records}
				s, err := buildTx(c, &d)
				if err != nil {
					b.Fatal(err)
				}
				sessions[id-1] = s
			}
			if _, err := reg.putTxs(sessions); err != nil {
				b.Fatal(err)
			}
			perm := scalePerm(n)
			seqs := make([]uint32, n+1)
			pay, _ := payloadOf(b, reply)
			ssidOff := len(reply) - len(pay) + 14
			seqOff := len(reply) - len(pay) + 24 // the sender sequence (reflector layout)
			bu := fillBurst(b, h, reply)
			headroom := bu.H[0].P().Headroom()
			k := 0
			load := func() {
				for j := 0; j < bu.N; j++ {
					p := bu.H[j].P()
					p.SetWindow(headroom, len(reply))
					d := p.Data()
					copy(d, reply)
					id := perm[k]
					binary.BigEndian.PutUint16(d[ssidOff:], id)
					binary.BigEndian.PutUint32(d[seqOff:], seqs[id])
					seqs[id]++
					if k++; k == n {
						k = 0
					}
					p.Continue()
				}
			}
			drain := func() {
				for _, s := range sessions {
					if s.waiting() > 0 {
						s.drain(0)
					}
				}
			}
			for w := 0; w < (n+packet.MaxBurst-1)/packet.MaxBurst; w++ {
				load()
				coll.Process(&bs.ctx, bu)
				for j := 0; j < bu.N; j++ {
					if p := bu.H[j].P(); p.Verdict() != packet.Consume {
						b.Fatalf("warm-up: verdict %v reason %v", p.Verdict(), p.Reason)
					}
				}
				if w%drainEvery == drainEvery-1 {
					drain()
				}
			}
			drain()
			r0, lost0, dups0 := h.StageCounter("coll", "records"), h.StageCounter("coll", "records_lost"),
				h.StageCounter("coll", "duplicates")
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var cpu cpuTimer
			b.ReportAllocs()
			b.ResetTimer()
			cpu.resume()
			for it := 0; it < b.N; it++ {
				load()
				coll.Process(&bs.ctx, bu)
				if it%drainEvery == drainEvery-1 {
					cpu.pause()
					b.StopTimer()
					drain() // the control plane's work, on another core
					b.StartTimer()
					cpu.resume()
				}
			}
			cpu.pause()
			b.StopTimer()
			if got := h.StageCounter("coll", "records") - r0; got != uint64(b.N)*packet.MaxBurst {
				b.Fatalf("records %d of %d", got, b.N*packet.MaxBurst)
			}
			if lost := h.StageCounter("coll", "records_lost") - lost0; lost != 0 {
				b.Fatalf("%d records lost: the FIFOs were not drained in time", lost)
			}
			if dups := h.StageCounter("coll", "duplicates") - dups0; dups != 0 {
				b.Fatalf("%d duplicates", dups)
			}
			base.report(b, &cpu, float64(b.N)*packet.MaxBurst, i == 0)
		})
	}
}

// BenchmarkScaleSender runs one lcore's sender with N sessions, each at its
// own rate: session i sends every N·2µs·(0.5…1.5), a seeded draw, so the
// lcore's total stays near 500 kpps whatever N is. Each poll advances
// virtual time by 16 µs (about 8 packets due); ns/pkt is the sender's CPU
// time per packet sent, the polls that find nothing due included.
func BenchmarkScaleSender(b *testing.B) {
	var base scaleBaseline
	for i, n := range []int{1, 100, 10000} {
		b.Run(fmt.Sprintf("sessions=%d", n), func(b *testing.B) {
			bs := newBenchSetup(b)
			h := bs.h
			snd := h.MustBuildNamed("stamp.sender", "tx", fmt.Sprintf("src = %q\nsynchronized = true\n", addrS)).(*sender)
			reg := h.registry()
			r := rand.New(rand.NewPCG(uint64(n), 28))
			d := reg.senders["tx"].defaults
			tss := make([]*txSession, n)
			for id := 1; id <= n; id++ {
				iv := time.Duration(float64(n) * 2000 * (0.5 + r.Float64()))
				c := SenderSession{SSID: uint16(id), Stage: "tx", Reflector: addrR, Interval: iv, Records: 1}
				s, err := buildTx(c, &d)
				if err != nil {
					b.Fatal(err)
				}
				if err := s.start(); err != nil {
					b.Fatal(err)
				}
				tss[id-1] = s
			}
			if _, err := reg.putTxs(tss); err != nil {
				b.Fatal(err)
			}
			const step = 16 * time.Microsecond
			bu := &packet.Burst{}
			now := int64(time.Second)
			poll := func() int {
				now += int64(step)
				bs.ctx.Now = now
				snd.Produce(&bs.ctx, bu)
				sent := bu.N
				packet.Free(bu)
				return sent
			}
			// Warm-up: two of the longest intervals, so that the start
			// (every session due at once) is over.
			for end := now + int64(n)*2*3000; now < end; {
				poll()
			}
			sent0 := h.StageCounter("tx", "sent")
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var cpu cpuTimer
			b.ReportAllocs()
			b.ResetTimer()
			cpu.resume()
			sent := 0
			for it := 0; it < b.N; it++ {
				sent += poll()
			}
			cpu.pause()
			b.StopTimer()
			if got := h.StageCounter("tx", "sent") - sent0; got != uint64(sent) || sent == 0 {
				b.Fatalf("sent %d, counted %d", sent, got)
			}
			b.ReportMetric(float64(sent)/float64(b.N), "pkts/poll")
			base.report(b, &cpu, float64(sent), i == 0)
		})
	}
}
