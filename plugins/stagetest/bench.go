package stagetest

// Figures every stage benchmark reports, so that a stage's figure means the
// same thing in every package:
//
//	stage-ns/pkt          the stage alone on a burst loop (Alone): its Process
//	                      per packet, less the loop's own reset of the packets
//	engine+stage-ns/pkt   the stage inside an engine on mem ports (InEngine): a
//	                      replay source, a mem link, rx, the stage, tx to a null
//	                      port, all on one lcore
//	engine-ns/pkt         the same engine without the stage, in the same run
//	bare-ns/pkt           the bare loop under both: allocate, write the frame,
//	                      swap its MACs, free (BenchmarkForwardMem's baseline)
//	stage-x-bare, engine+stage-x-bare   the ratios to the bare loop
//
// Alone and ReportAlone give the first with bare-ns/pkt and stage-x-bare;
// InEngine the others.
//
// Every figure is CPU time of the benchmark's own thread (internal/cputime),
// so what else a shared machine runs does not count, and every ratio is to a
// baseline measured in the same run, interleaved with the figure.

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"log/slog"

	"github.com/linerate/linerate/appliance"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/appliance/stats"
	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/internal/cputime"
	"github.com/linerate/linerate/plugins"

	_ "github.com/linerate/linerate/ports/mem" // mem and null ports
)

// Bare times the bare loop for frames of size bytes: allocate a burst,
// write the frame into each packet, swap its MACs, free the burst; rounds
// times. It returns the thread's CPU time per packet, in ns.
func Bare(size, rounds int) (float64, error) {
	pool, err := packet.NewSlab(packet.SlabConfig{Name: "stagetest-bare", Buffers: 1024})
	if err != nil {
		return 0, err
	}
	defer pool.Close()
	frame := make([]byte, max(size, 14))
	for i := range frame {
		frame[i] = byte(i)
	}
	var bu packet.Burst
	c0 := cputime.Thread()
	for range rounds {
		bareRound(pool, &bu, frame)
	}
	return float64(cputime.Thread()-c0) / float64(rounds*packet.MaxBurst), nil
}

func bareRound(pool *packet.Slab, bu *packet.Burst, frame []byte) {
	pool.Alloc(bu, packet.MaxBurst)
	for j := 0; j < bu.N; j++ {
		d, _ := bu.H[j].P().Append(len(frame))
		copy(d, frame)
		packet.Ethernet(d).SwapMAC()
	}
	pool.Free(bu)
}

// Alone times a stage on a burst loop: b.N rounds of reset (put the burst's
// pkts packets back as they were before the stage) then process (the stage's
// Process on the burst), less as many resets timed alone. It reports
// stage-ns/pkt, the bare loop for frames of frameLen bytes in the same run
// (bare-ns/pkt) and their ratio (stage-x-bare), and returns stage-ns/pkt.
func Alone(b *testing.B, pkts, frameLen int, reset, process func()) float64 {
	b.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	reset()
	process()
	c0 := cputime.Thread()
	for range b.N {
		reset()
	}
	resetNs := cputime.Thread() - c0
	b.ResetTimer()
	c0 = cputime.Thread()
	for range b.N {
		reset()
		process()
	}
	cpu := cputime.Thread() - c0
	b.StopTimer()
	stage := float64(max(cpu-resetNs, 0)) / (float64(b.N) * float64(pkts))
	ReportAlone(b, stage, frameLen, b.N*pkts)
	return stage
}

// ReportAlone reports a stage's own cost, stage ns a packet over pkts
// packets of frameLen bytes, as Alone does: stage-ns/pkt, the bare loop over
// as many packets (bare-ns/pkt, timed now) and their ratio (stage-x-bare). For
// a benchmark that times its stage itself.
func ReportAlone(b *testing.B, stage float64, frameLen, pkts int) {
	b.Helper()
	bare, err := Bare(frameLen, max(pkts/packet.MaxBurst, 1))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(stage, "stage-ns/pkt")
	b.ReportMetric(bare, "bare-ns/pkt")
	b.ReportMetric(stage/bare, "stage-x-bare")
}

// EngineSpec is a stage to time inside an engine.
type EngineSpec struct {
	// Kind and Keys are the stage under test as a [[pipelines.stages]]
	// table would give them (Keys: TOML lines, without the kind).
	Kind, Keys string
	// Frames are what the stage is given, one per packet in turn.
	Frames [][]byte
	// Ports are the names of ports the keys name (an egress port): each is
	// made a null port, which frees what it is given.
	Ports []string
	// Sections are top-level TOML tables the stage reads ([[routes]] …).
	Sections string
	// Rx names the port the stage receives on, the far end of the mem link
	// (a port its keys name as an interface, say); "st-m1" when empty.
	Rx string
	// PortKeys are more TOML lines for the [[ports]] table of Rx or of one
	// of Ports, by name: a routed port's mac and addresses, say.
	PortKeys map[string]string
}

// InEngine times the stage inside an engine on mem ports, stepped on the
// benchmark's locked goroutine (appliance.Options.Manual): one lcore replays
// s.Frames (each copied into a fresh buffer, as a port's rx would fill it)
// over a mem link to a pipeline that receives them, runs the stage and
// transmits what it forwards, and whatever is still at Continue, to a null
// port. The same engine without the stage and the bare loop run interleaved
// with it, in steps of the same count. It reports engine+stage-ns/pkt,
// engine-ns/pkt, bare-ns/pkt, stage-in-engine-ns/pkt (the difference of the
// first two), engine+stage-x-bare, and out/in: what left through the null
// ports per packet in. A stage that drops what it is given fails it.
func InEngine(b *testing.B, s EngineSpec) {
	b.Helper()
	if len(s.Frames) == 0 {
		b.Fatal("stagetest.InEngine: no frames")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if s.Rx == "" {
		s.Rx = "st-m1"
	}
	with := newRig(b, s, true)
	without := newRig(b, s, false)
	size := 0
	for _, f := range s.Frames {
		size += len(f)
	}
	size /= len(s.Frames)
	pool, err := packet.NewSlab(packet.SlabConfig{Name: "stagetest-bare", Buffers: 1024})
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	frame := make([]byte, max(size, 14))
	for i := range frame {
		frame[i] = byte(i)
	}
	var bu packet.Burst
	// Interleaved in chunks, so that a machine that slows down for a while
	// slows all three. Each is timed on its own (ns/op is the three's sum).
	const chunk = 64
	var tWith, tWithout, tBare time.Duration
	b.ResetTimer()
	for done := 0; done < b.N; done += chunk {
		k := min(chunk, b.N-done)
		tWith += with.steps(k)
		tWithout += without.steps(k)
		c0 := cputime.Thread()
		for range k {
			bareRound(pool, &bu, frame)
		}
		tBare += cputime.Thread() - c0
	}
	b.StopTimer()
	nWith, nWithout := with.sent(), without.sent()
	if nWith == 0 || nWithout == 0 {
		b.Fatalf("stagetest.InEngine: %d packets through the stage, %d without it", nWith, nWithout)
	}
	// A stage that dropped its packets would be timed doing something else.
	snap := with.e.Snapshot()
	for _, st := range snap.Stages {
		if st.Name == "dut" && len(st.Drops) > 0 {
			b.Fatalf("stagetest.InEngine: the stage dropped packets: %v", st.Drops)
		}
	}
	// What left through the null ports, per packet in: 1 for a stage that
	// forwards what it gets, more for one that makes packets (an encoder).
	var out uint64
	for _, p := range snap.Ports {
		if p.Driver == "null" {
			out += p.TxPackets
		}
	}
	b.ReportMetric(float64(out-with.outBase)/float64(nWith), "out/in")
	es := float64(tWith.Nanoseconds()) / float64(nWith)
	e := float64(tWithout.Nanoseconds()) / float64(nWithout)
	bare := float64(tBare.Nanoseconds()) / float64(b.N*packet.MaxBurst)
	b.ReportMetric(es, "engine+stage-ns/pkt")
	b.ReportMetric(e, "engine-ns/pkt")
	b.ReportMetric(bare, "bare-ns/pkt")
	b.ReportMetric(es-e, "stage-in-engine-ns/pkt")
	b.ReportMetric(es/bare, "engine+stage-x-bare")
	with.close(b)
	without.close(b)
}

type engineRig struct {
	e       *appliance.Engine
	base    uint64 // sent before the timed steps
	outBase uint64 // and transmitted to the null ports
}

// steps runs k loops and returns the thread's CPU time they took.
func (r *engineRig) steps(k int) time.Duration {
	c0 := cputime.Thread()
	for range k {
		r.e.Step()
	}
	return cputime.Thread() - c0
}

// sent is how many packets the replay source made (every one reaches the
// dut pipeline: the mem link's ring is as large as the pool).
func (r *engineRig) sent() uint64 {
	return r.e.Snapshot().Counter("replay", "sent") - r.base
}

func (r *engineRig) close(b testing.TB) {
	r.e.Stop()
	if err := r.e.Close(); err != nil {
		b.Fatal(err)
	}
}

var (
	replayMu     sync.Mutex
	replayFrames = map[string][][]byte{}
	replayOnce   sync.Once
	replaySeq    int
)

func newRig(b testing.TB, s EngineSpec, withStage bool) *engineRig {
	replayOnce.Do(registerReplay)
	replayMu.Lock()
	replaySeq++
	id := fmt.Sprintf("r%d", replaySeq)
	replayFrames[id] = s.Frames
	replayMu.Unlock()
	var c strings.Builder
	c.WriteString("version = 1\n[engine]\npin = false\n[control]\nlisten = \"\"\n")
	c.WriteString("[[pools]]\nname = \"default\"\nbuffers = 4096\n")
	fmt.Fprintf(&c, "[[ports]]\nname = \"st-m0\"\ndriver = \"mem\"\npeer = %q\n", s.Rx)
	fmt.Fprintf(&c, "[[ports]]\nname = %q\ndriver = \"mem\"\npeer = \"st-m0\"\n%s\n", s.Rx, s.PortKeys[s.Rx])
	c.WriteString("[[ports]]\nname = \"st-null\"\ndriver = \"null\"\n")
	for _, p := range s.Ports {
		fmt.Fprintf(&c, "[[ports]]\nname = %q\ndriver = \"null\"\n%s\n", p, s.PortKeys[p])
	}
	c.WriteString("[[pipelines]]\nname = \"source\"\nlcores = [0]\n")
	fmt.Fprintf(&c, "[[pipelines.stages]]\nkind = \"stagetest.replay\"\nname = \"replay\"\nid = %q\n", id)
	c.WriteString("[[pipelines.stages]]\nkind = \"stagetest.out\"\nport = \"st-m0\"\n")
	fmt.Fprintf(&c, "[[pipelines]]\nname = \"dut\"\nlcores = [0]\nrx = [%q]\n", s.Rx)
	if withStage {
		fmt.Fprintf(&c, "[[pipelines.stages]]\nkind = %q\nname = \"dut\"\n%s\n", s.Kind, nested(s.Keys))
	}
	c.WriteString("[[pipelines.stages]]\nkind = \"stagetest.out\"\nport = \"st-null\"\n")
	c.WriteString(s.Sections)
	cfg, err := config.Parse("stagetest-bench.toml", []byte(c.String()))
	if err != nil {
		b.Fatalf("stagetest.InEngine: config: %v", err)
	}
	e, err := appliance.New(cfg, appliance.Options{Manual: true, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatalf("stagetest.InEngine: %v", err)
	}
	if err := e.Start(); err != nil {
		_ = e.Close()
		b.Fatalf("stagetest.InEngine: start: %v", err)
	}
	r := &engineRig{e: e}
	for range 100 {
		e.Step()
	}
	r.base = r.sent()
	for _, p := range e.Snapshot().Ports {
		if p.Driver == "null" {
			r.outBase += p.TxPackets
		}
	}
	return r
}

// nested puts the tables of a stage's keys ([[profiles]] …, as a Harness
// reads them) under the stage's own table in a config file.
func nested(keys string) string {
	lines := strings.Split(keys, "\n")
	for i, l := range lines {
		t := strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(t, "[["):
			lines[i] = "[[pipelines.stages." + strings.TrimPrefix(t, "[[")
		case strings.HasPrefix(t, "["):
			lines[i] = "[pipelines.stages." + strings.TrimPrefix(t, "[")
		}
	}
	return strings.Join(lines, "\n")
}

// replay is the source of InEngine: each loop it fills a burst with copies
// of its frames, in turn, as a port's rx would.
type replay struct {
	frames [][]byte
	pool   packet.Pool
	next   int
	sent   *stats.Counter
}

// out forwards every packet still at Continue to its port: the end of
// InEngine's chain, as a forward stage would be.
type out struct{ port uint16 }

type replayKeys struct {
	ID string `toml:"id"`
}

func portOf(s *plugins.Setup, name string) (uint16, error) {
	pi, ok := s.Ports.Port(name)
	if !ok {
		return 0, fmt.Errorf("no port %q", name)
	}
	return pi.ID, nil
}

func registerReplay() {
	plugins.Register(plugins.Kind{Name: "stagetest.replay", Summary: "a benchmark's source of given frames",
		New: func(s *plugins.Setup) (plugins.Stage, error) {
			var k replayKeys
			if err := s.Config.Decode(&k); err != nil {
				return nil, err
			}
			replayMu.Lock()
			frames := replayFrames[k.ID]
			replayMu.Unlock()
			if len(frames) == 0 {
				return nil, fmt.Errorf("stagetest.replay: no frames for %q", k.ID)
			}
			pool, err := s.Pool("default", 0, 0)
			if err != nil {
				return nil, err
			}
			return &replay{frames: frames, pool: pool, sent: s.Counters.New("sent", "frames replayed")}, nil
		}})
	plugins.Register(plugins.Kind{Name: "stagetest.out", Summary: "a benchmark's last stage: forward to a port",
		New: func(s *plugins.Setup) (plugins.Stage, error) {
			var k struct {
				Port string `toml:"port"`
			}
			if err := s.Config.Decode(&k); err != nil {
				return nil, err
			}
			port, err := portOf(s, k.Port)
			return &out{port: port}, err
		}})
}

func (r *replay) Process(ctx *plugins.Context, b *packet.Burst) {}

func (r *replay) Produce(ctx *plugins.Context, b *packet.Burst) {
	start := b.N
	r.pool.Alloc(b, b.Room())
	for i := start; i < b.N; i++ {
		f := r.frames[r.next]
		r.next++
		if r.next == len(r.frames) {
			r.next = 0
		}
		p := b.H[i].P()
		d, err := p.Append(len(f))
		if err != nil {
			p.Drop(packet.ReasonTooBig)
			continue
		}
		copy(d, f)
		p.RxTime = ctx.Now
	}
	r.sent.Add(uint64(b.N - start))
}

func (o *out) Process(ctx *plugins.Context, b *packet.Burst) {
	for i := 0; i < b.N; i++ {
		if p := b.H[i].P(); p.Verdict() == packet.Continue {
			p.Forward(o.port)
		}
	}
}
