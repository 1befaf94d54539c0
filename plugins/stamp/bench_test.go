package stamp

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/linerate/linerate/appliance/clock"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/internal/cputime"
	"github.com/linerate/linerate/plugins"
	"github.com/linerate/linerate/plugins/stagetest"
)

// cpuTimer measures the benchmark goroutine's thread CPU time: on a shared
// machine the wall clock also counts the time other processes had the CPU.
// Mpps is reported from it; "wall-Mpps" from b.Elapsed.
type cpuTimer struct {
	total, start time.Duration
}

func (c *cpuTimer) resume() { c.start = cputime.Thread() }
func (c *cpuTimer) pause()  { c.total += cputime.Thread() - c.start }

func (c *cpuTimer) report(b *testing.B, packets float64) {
	b.ReportMetric(packets/(float64(c.total)/1e9)/1e6, "Mpps")
	b.ReportMetric(float64(c.total)/packets, "cpu-ns/pkt")
	b.ReportMetric(packets/b.Elapsed().Seconds()/1e6, "wall-Mpps")
}

// benchEnv is an Env whose Free keeps the handle: benchmarks reuse their
// packets.
type benchEnv struct{ stagetest.Env }

func (e *benchEnv) Free(h packet.Handle) {}

// benchSetup builds stages for a benchmark: a harness with the host clock.
type benchSetup struct {
	h   *harness
	clk *clock.System
	env *benchEnv
	ctx plugins.Context
}

func newBenchSetup(b *testing.B) *benchSetup {
	h := newHarness(b)
	clk := clock.NewSystem()
	b.Cleanup(clk.Close)
	bs := &benchSetup{h: h, clk: clk, env: &benchEnv{}}
	bs.ctx = plugins.Context{Clock: clk, Log: slog.New(slog.DiscardHandler), Env: bs.env}
	return bs
}

// segments3 is a 3-segment forward path: two End SIDs and the reflector.
var segments3 = `segments = ["2001:db8:e::1", "2001:db8:e::2"]`

const return3 = `return_path = ["2001:db8:e::2", "2001:db8:e::1"]`

func benchKeys(auth bool, key string) (sender, reflector string) {
	sender = fmt.Sprintf(`
src = "%s"
interval = "1us"
synchronized = true
clock_error = "1us"
[[sessions]]
ssid = 7
reflector = "%s"
reflector_mode = "stateful"
%s
`, addrS, addrR, segments3)
	// One source sends everything here: its per-source limit is off.
	reflector = "rate_limit = \"0\"\n[[sessions]]\nssid = 7\nmode = \"stateful\"\n" + return3 + "\n"
	if auth {
		sender += fmt.Sprintf("authenticated = true\nkey_file = %q\n", key)
		reflector += fmt.Sprintf("authenticated = true\nkey_file = %q\n", key)
	}
	return sender, reflector
}

// arrive turns a sender frame into what reaches the reflector: every segment
// done.
func arrive(b testing.TB, f []byte) []byte {
	for {
		_, l := payloadOf(b, f)
		srh := l.SRH(f)
		if srh == nil || srh.SegmentsLeft() == 0 {
			return f
		}
		f = endSRv6(b, f)
	}
}

// fill loads a burst of 64 packets with frame.
func fillBurst(b *testing.B, h *harness, frame []byte) *packet.Burst {
	bu := &packet.Burst{}
	for i := 0; i < packet.MaxBurst; i++ {
		bu.Push(h.Pkt(frame, 0))
	}
	b.Cleanup(func() { packet.Free(bu) })
	return bu
}

// reload restores every packet of the burst to frame, as a NIC's next
// burst would be, with a fresh verdict.
func reload(bu *packet.Burst, frame []byte, headroom int, seq *uint32, seqOff int) {
	for i := 0; i < bu.N; i++ {
		p := bu.H[i].P()
		p.SetWindow(headroom, len(frame))
		d := p.Data()
		copy(d, frame)
		if seqOff >= 0 {
			binary.BigEndian.PutUint32(d[seqOff:], *seq)
			*seq++
		}
		p.Continue()
	}
}

// BenchmarkReflector reflects bursts of 64 test packets that came over a
// 3-segment SRv6 path, stateful, with a 3-segment return path: per packet
// the reload (a 150-byte copy, as a NIC's DMA), the parse, the checks, the
// payload and header rewrite, T3, the HMACs and the UDP checksum.
func BenchmarkReflector(b *testing.B) {
	for _, auth := range []bool{false, true} {
		b.Run(fmt.Sprintf("auth=%v/srh=3", auth), func(b *testing.B) {
			bs := newBenchSetup(b)
			h := bs.h
			key := writeKey(b, strings.Repeat("42", 32))
			sk, rk := benchKeys(auth, key)
			snd := h.MustBuildNamed("stamp.sender", "tx", sk)
			rfl := h.MustBuildNamed("stamp.reflector", "refl", rk)
			frame := arrive(b, h.produce(snd)[0])
			bu := fillBurst(b, h, frame)
			headroom := bu.H[0].P().Headroom()
			// One warm-up burst: the reply must come out whole.
			reload(bu, frame, headroom, nil, -1)
			rfl.Process(&bs.ctx, bu)
			if p := bu.H[0].P(); p.Verdict() != packet.Continue || p.Len() != len(frame) {
				b.Fatalf("warm-up: verdict %v reason %v", p.Verdict(), p.Reason)
			}
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var cpu cpuTimer
			b.ReportAllocs()
			b.ResetTimer()
			cpu.resume()
			for i := 0; i < b.N; i++ {
				reload(bu, frame, headroom, nil, -1)
				rfl.Process(&bs.ctx, bu)
			}
			cpu.pause()
			b.StopTimer()
			if got := h.StageCounter("refl", "reflected"); got != uint64(b.N+1)*packet.MaxBurst {
				b.Fatalf("reflected %d of %d", got, (b.N+1)*packet.MaxBurst)
			}
			cpu.report(b, float64(b.N)*packet.MaxBurst)
			// The figures every stage benchmark reports (plugins/stagetest):
			// the stage's own, less the reloads timed alone.
			c0 := cputime.Thread()
			for i := 0; i < b.N; i++ {
				reload(bu, frame, headroom, nil, -1)
			}
			pkts := b.N * packet.MaxBurst
			stagetest.ReportAlone(b, float64(cpu.total-(cputime.Thread()-c0))/float64(pkts), len(frame), pkts)
		})
	}
	b.Run("auth=false/srh=3/engine", func(b *testing.B) {
		h := newBenchSetup(b).h
		sk, rk := benchKeys(false, "")
		snd := h.MustBuildNamed("stamp.sender", "tx", sk)
		frame := arrive(b, h.produce(snd)[0])
		stagetest.InEngine(b, stagetest.EngineSpec{Kind: "stamp.reflector", Keys: rk, Frames: [][]byte{frame},
			Rx: "eth0", Ports: []string{"eth1"}})
	})
}

// BenchmarkCollector takes bursts of 64 reflected packets (3-segment SRH,
// stateful reflector), each with its own sequence number: parse, session,
// HMACs, T4, the record into the FIFO and the metrics (histograms, IPDV,
// loss window).
func BenchmarkCollector(b *testing.B) {
	for _, auth := range []bool{false, true} {
		b.Run(fmt.Sprintf("auth=%v/srh=3", auth), func(b *testing.B) {
			bs := newBenchSetup(b)
			h := bs.h
			key := writeKey(b, strings.Repeat("42", 32))
			sk, rk := benchKeys(auth, key)
			snd := h.MustBuildNamed("stamp.sender", "tx", sk)
			rfl := h.MustBuildNamed("stamp.reflector", "refl", rk)
			coll := h.MustBuildNamed("stamp.collector", "coll", "")
			s := h.registry().tx.Load().get(7)
			// Distinct replies: unauthenticated ones get their sequence
			// number written per packet; authenticated ones are signed, so a
			// set of them is made up front and cycled.
			var frames [][]byte
			n := 1
			if auth {
				n = 1024
			}
			for i := 0; i < n; i++ {
				h.advance(time.Millisecond)
				rr := h.run(arrive(b, h.produce(snd)[0]), 0, rfl)
				if rr.dropped != "" {
					b.Fatal(rr.dropped)
				}
				frames = append(frames, arrive(b, rr.data))
			}
			_, l := payloadOf(b, frames[0])
			seqOff := int(l.L4) + packet.UDPLen + 24 // the sender sequence (reflector layout)
			if auth {
				seqOff = -1
			}
			bu := fillBurst(b, h, frames[0])
			headroom := bu.H[0].P().Headroom()
			var seq uint32
			reload(bu, frames[0], headroom, &seq, seqOff)
			coll.Process(&bs.ctx, bu)
			if p := bu.H[0].P(); p.Verdict() != packet.Consume {
				b.Fatalf("warm-up: verdict %v reason %v", p.Verdict(), p.Reason)
			}
			s.rx.reset()
			s.drain(0)
			dups0 := h.StageCounter("coll", "duplicates")
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var cpu cpuTimer
			b.ReportAllocs()
			b.ResetTimer()
			cpu.resume()
			k := 0
			for i := 0; i < b.N; i++ {
				if auth {
					for j := 0; j < bu.N; j++ {
						p := bu.H[j].P()
						f := frames[k]
						p.SetWindow(headroom, len(f))
						copy(p.Data(), f)
						p.Continue()
						k++
					}
					if k == len(frames) {
						k = 0
						cpu.pause()
						b.StopTimer()
						s.rx.reset() // a new run: the cycled sequence numbers are not duplicates
						b.StartTimer()
						cpu.resume()
					}
				} else {
					reload(bu, frames[0], headroom, &seq, seqOff)
				}
				coll.Process(&bs.ctx, bu)
				if i&31 == 31 { // 2048 records, half the default FIFO
					cpu.pause()
					b.StopTimer()
					s.drain(0) // the control plane's work, on another core
					b.StartTimer()
					cpu.resume()
				}
			}
			cpu.pause()
			b.StopTimer()
			if got := h.StageCounter("coll", "records"); got != uint64(b.N+1)*packet.MaxBurst {
				b.Fatalf("records %d of %d", got, (b.N+1)*packet.MaxBurst)
			}
			if dups := h.StageCounter("coll", "duplicates") - dups0; dups != 0 {
				b.Fatalf("%d duplicates", dups)
			}
			cpu.report(b, float64(b.N)*packet.MaxBurst)
		})
	}
}

// BenchmarkSender makes test packets from a session's template.
func BenchmarkSender(b *testing.B) {
	for _, auth := range []bool{false, true} {
		b.Run(fmt.Sprintf("auth=%v/srh=3", auth), func(b *testing.B) {
			bs := newBenchSetup(b)
			h := bs.h
			key := writeKey(b, strings.Repeat("42", 32))
			sk, _ := benchKeys(auth, key)
			snd := h.MustBuildNamed("stamp.sender", "tx", sk).(*sender)
			s := h.registry().tx.Load().get(7)
			bu := &packet.Burst{}
			bs.ctx.Now = bs.clk.Now()
			snd.Produce(&bs.ctx, bu) // the schedule starts
			packet.Free(bu)
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var cpu cpuTimer
			b.ReportAllocs()
			b.ResetTimer()
			cpu.resume()
			for i := 0; i < b.N; i++ {
				bu.N = 0
				for bu.N < packet.MaxBurst {
					snd.send(&bs.ctx, s, bu, bs.ctx.Now)
				}
				packet.Free(bu)
			}
			cpu.pause()
			b.StopTimer()
			cpu.report(b, float64(b.N)*packet.MaxBurst)
		})
	}
}
