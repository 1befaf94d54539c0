package rlnc

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/gf"
	"github.com/linerate/linerate/internal/cputime"
	"github.com/linerate/linerate/plugins"
)

// BenchmarkScale is the per-packet cost of the decoder and the recoder
// against the number of generations open at once: G sessions (tunnels),
// each with one generation in flight, their packets interleaved round-robin,
// one packet per session in turn. Each session starts at its own point in
// its generation, so generations finish and open evenly, and every packet
// sent is needed (a session moves to its next generation at full rank).
//
// Each iteration runs a batch of 256 packets through the stage holding G
// generations, then a batch through a second instance of the stage with one
// session (the baseline), both timed alike:
//
//	ns/pkt  the stage at G open generations
//	x-1gen  its ns/pkt over the one-generation stage's in the same run
//	        (goal ≤ 1.5 at 10k)
//
// K = 16, N = 1400. The decoder's output is checked: every generation's
// originals, in order; the recoder's count: one packet per innovative one.
func BenchmarkScale(b *testing.B) {
	const k, n = 16, benchN
	r := rand.New(rand.NewPCG(5, 16))
	tm := scaleTemplates(b, r, 8, k, n)
	for _, kind := range []string{"decoder", "recoder"} {
		for _, g := range []int{1, 100, 1000, 10000} {
			b.Run(fmt.Sprintf("%s/generations=%d", kind, g), func(b *testing.B) {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				h := newHarness(b)
				big := newScaleRun(h, kind, "big", g, k, tm)
				one := newScaleRun(h, kind, "one", 1, k, tm)
				big.warm()
				one.warm()
				for b.Loop() {
					big.step()
					one.step()
				}
				per := big.cpu.Seconds() * 1e9 / float64(big.pkts)
				base := one.cpu.Seconds() * 1e9 / float64(one.pkts)
				b.ReportMetric(per, "ns/pkt")
				b.ReportMetric(per/base, "x-1gen")
			})
		}
	}
}

// scaleTemplate is a generation's coded packets: K + 4 dense combinations,
// with how many of them reach full rank from the first, and which of those
// are innovative.
type scaleTemplate struct {
	frames [][]byte // originals
	coded  [][]byte
	need   int
	innov  []bool
}

func scaleTemplates(b *testing.B, r *rand.Rand, t, k, n int) []scaleTemplate {
	var out []scaleTemplate
	for _, gg := range benchGenerations(r, t, k, n, k+4, 0) {
		st := scaleTemplate{frames: gg.frames, coded: gg.coded}
		e, _ := gf.NewEchelon(k, 0)
		for _, f := range gg.coded {
			innov, _ := e.Insert(Header(f[54:]).Vector(), nil)
			st.innov = append(st.innov, innov)
			st.need++
			if e.Full() {
				break
			}
		}
		if !e.Full() {
			b.Fatal("a template generation does not reach full rank")
		}
		out = append(out, st)
	}
	return out
}

// scaleRun drives one stage with g sessions of one open generation each.
type scaleRun struct {
	h     *harness
	st    plugins.Stage
	dec   bool
	k     int
	tm    []scaleTemplate
	lanes []scaleLane
	at    int // next lane
	bt    batch
	cpu   time.Duration
	pkts  int

	frames []scaleOut // per packet of the batch: its lane's state then
	want   []int      // decoder: templates of the generations the batch completes
	innov  int        // recoder: innovative packets in the batch
}

type scaleLane struct {
	src   [16]byte
	gen   uint16
	idx   int // next packet of the generation
	delay int // warm-up rounds before the lane starts
	done  int // generations completed
}

type scaleOut struct {
	lane int32
	gen  uint16
	idx  int16
}

// scaleBatch is the packets of one timed run: few enough that the input
// buffers stay in L2 (as an engine's bursts do), enough that the two reads
// of the thread's CPU clock around it (about 1.4 µs each here) stay small.
const scaleBatch = 4 * packet.MaxBurst

func newScaleRun(h *harness, kind, name string, g, k int, tm []scaleTemplate) *scaleRun {
	// Blocks of up to 1472 bytes: a slot is 1728 bytes, and every session
	// may hold a whole generation.
	stride := (1472 + MaxK + 63) &^ 63
	mem := (g*k + 64) * stride
	keys := fmt.Sprintf("max_block = 1472\nmemory = %d\nmax_sessions = %d\nmax_generations = %d\n"+
		"pool_buffers = 4096\nqueue = 4096\n", mem, g, g+64)
	if kind == "recoder" {
		keys += fmt.Sprintf("coded = %d\n", k)
	}
	s := &scaleRun{h: h, st: h.MustBuildNamed("rlnc."+kind, name+"-"+kind, keys), dec: kind == "decoder", k: k, tm: tm}
	base := testSrc.As16()
	for j := range g {
		l := scaleLane{src: base, delay: j % tm[0].need}
		binary.BigEndian.PutUint32(l.src[12:], uint32(j))
		s.lanes = append(s.lanes, l)
	}
	return s
}

func (s *scaleRun) template(l *scaleLane) *scaleTemplate { return &s.tm[int(l.gen)%len(s.tm)] }

// next picks the batch's next packet: the next lane's, round-robin.
func (s *scaleRun) next() (scaleOut, bool) {
	j := s.at
	s.at = (s.at + 1) % len(s.lanes)
	l := &s.lanes[j]
	if l.delay > 0 {
		l.delay--
		return scaleOut{}, false
	}
	o := scaleOut{lane: int32(j), gen: l.gen, idx: int16(l.idx)}
	t := s.template(l)
	if t.innov[l.idx] {
		s.innov++
	}
	if l.idx++; l.idx == t.need {
		s.want = append(s.want, int(l.gen)%len(s.tm))
		l.idx = 0
		l.gen++
		l.done++
	}
	return o, true
}

// load fills the batch's bursts with the next scaleBatch packets.
func (s *scaleRun) load() {
	s.frames, s.want, s.innov = s.frames[:0], s.want[:0], 0
	for len(s.frames) < scaleBatch {
		if o, ok := s.next(); ok {
			s.frames = append(s.frames, o)
		}
	}
	bt := &s.bt
	bt.in = bt.in[:0]
	for i, o := range s.frames {
		if i%packet.MaxBurst == 0 {
			bt.in = append(bt.in, packet.Burst{})
		}
		l := &s.lanes[o.lane]
		f := s.tm[int(o.gen)%len(s.tm)].coded[o.idx]
		hd, ok := s.h.pool.AllocOne()
		if !ok {
			s.h.T.Fatal("bench pool empty")
		}
		d, _ := hd.P().Append(len(f))
		copy(d, f)
		packet.IPv6(d[14:]).SetSrc(l.src)
		Header(d[54:]).SetGenerationID(o.gen)
		hd.P().InPort = 0
		bt.in[len(bt.in)-1].Push(hd)
	}
}

// warm runs untimed batches until every lane has completed two
// generations: the store is in its steady state, and every page the stage
// will use (arena, Echelons, packet buffers) has been touched, so that no
// page fault lands in the timed part.
func (s *scaleRun) warm() {
	for i := 0; i < len(s.lanes); {
		s.step()
		for i < len(s.lanes) && s.lanes[i].done >= 2 {
			i++
		}
	}
	s.cpu, s.pkts = 0, 0
}

// step runs one batch and checks what the stage made. Only Process and
// Produce are timed, on the thread's CPU clock: time spent descheduled is
// not the stage's.
func (s *scaleRun) step() {
	s.load()
	bt, pr := &s.bt, s.st.(plugins.Producer)
	bt.nout = 0
	t0 := cputime.Thread()
	for i := range bt.in {
		s.st.Process(&s.h.Ctx, &bt.in[i])
	}
	for {
		if bt.nout == len(bt.out) {
			bt.out = append(bt.out, packet.Burst{})
		}
		o := &bt.out[bt.nout]
		o.N = 0
		pr.Produce(&s.h.Ctx, o)
		if o.N == 0 {
			break
		}
		bt.nout++
	}
	s.cpu += cputime.Thread() - t0
	for i := range bt.in {
		b := &bt.in[i]
		for j := 0; j < b.N; j++ {
			if v := b.H[j].P().Verdict(); v == packet.Drop || v == packet.Continue {
				packet.FreeOne(b.H[j])
			}
		}
	}
	s.h.Env.Flush()
	s.pkts += len(s.frames)
	made := s.bt.made()
	if s.dec {
		if made != len(s.want)*s.k {
			s.h.T.Fatalf("decoder: %d packets delivered for %d generations of %d", made, len(s.want), s.k)
		}
		got := 0
		for i := 0; i < s.bt.nout; i++ {
			o := &s.bt.out[i]
			for j := 0; j < o.N; j++ {
				want := s.tm[s.want[got/s.k]].frames[got%s.k]
				if !bytes.Equal(o.H[j].P().Data()[54:], want[54:]) {
					s.h.T.Fatalf("decoder: packet %d of the batch decoded wrong", got)
				}
				got++
			}
		}
	} else if made != s.innov {
		s.h.T.Fatalf("recoder: %d packets made for %d innovative ones", made, s.innov)
	}
	s.bt.free()
}
