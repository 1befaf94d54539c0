package rlnc

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/gf"
	"github.com/linerate/linerate/plugins"
)

// TestManyGenerations: with more generations open than warmGens, so that each
// burst is warmed before it is taken, the decoder still delivers every
// generation's originals in order and the recoder makes one packet per
// innovative arrival, with no drop and no allocation. Sessions send their
// packets round-robin, each from its own point in its generation; some
// packets repeat an earlier one (not innovative).
func TestManyGenerations(t *testing.T) {
	const k, n, sessions = 4, 64, 3 * warmGens
	r := rand.New(rand.NewPCG(11, 11))
	type gen struct {
		frames [][]byte
		coded  [][]byte
		innov  []bool
	}
	var tm []gen
	for range 4 {
		var g gen
		blocks := make([][]byte, k)
		for i := range k {
			pl := make([]byte, n-LenPrefix-8)
			for j := range pl {
				pl[j] = byte(r.Uint32())
			}
			f := udpFrame(testSrc, testDst, 1, 2, pl)
			g.frames = append(g.frames, f)
			blocks[i] = make([]byte, n)
			binary.BigEndian.PutUint16(blocks[i], uint16(len(f)-54))
			copy(blocks[i][LenPrefix:], f[54:])
		}
		e, _ := gf.NewEchelon(k, 0)
		for !e.Full() {
			vec := make([]byte, k)
			for i := range vec {
				vec[i] = byte(r.Uint32())
			}
			if len(g.coded) == 2 {
				copy(vec, Header(g.coded[0][54:]).Vector()) // a repeat
			}
			blk := make([]byte, n)
			gf.MulMulti([][]byte{blk}, blocks, vec)
			innov, _ := e.Insert(vec, nil)
			g.innov = append(g.innov, innov)
			f := Fields{NextHeader: 17, SessionID: 1, K: k, Version: 1, BlockLen: n, Vector: vec}
			g.coded = append(g.coded, codedFrame(testSrc, testDst, f, blk))
		}
		tm = append(tm, g)
	}
	for _, kind := range []string{"decoder", "recoder"} {
		t.Run(kind, func(t *testing.T) {
			h := newHarness(t)
			keys := fmt.Sprintf("memory = \"4MiB\"\nmax_block = 256\nmax_sessions = %d\npool_buffers = 2048\n", sessions)
			if kind == "recoder" {
				keys += fmt.Sprintf("coded = %d\n", k)
			}
			st := h.MustBuildNamed("rlnc."+kind, kind, keys)
			type lane struct {
				src   [16]byte
				gen   uint16
				idx   int
				delay int // rounds before the lane starts
			}
			lanes := make([]lane, sessions)
			for j := range lanes {
				lanes[j].src = testSrc.As16()
				binary.BigEndian.PutUint32(lanes[j].src[12:], uint32(j))
				lanes[j].delay = j % len(tm[0].coded)
			}
			at := 0
			var in, out packet.Burst
			want := make([]int, 0, packet.MaxBurst) // templates of the generations a burst completes
			step := func() {
				want = want[:0]
				innov := 0
				in.N = 0
				for in.N < packet.MaxBurst {
					l := &lanes[at]
					at = (at + 1) % len(lanes)
					if l.delay > 0 {
						l.delay--
						continue
					}
					g := &tm[int(l.gen)%len(tm)]
					f := g.coded[l.idx]
					hd, _ := h.pool.AllocOne()
					d, _ := hd.P().Append(len(f))
					copy(d, f)
					packet.IPv6(d[14:]).SetSrc(l.src)
					Header(d[54:]).SetGenerationID(l.gen)
					in.Push(hd)
					if g.innov[l.idx] {
						innov++
					}
					if l.idx++; l.idx == len(g.coded) {
						want = append(want, int(l.gen)%len(tm))
						l.idx = 0
						l.gen++
					}
				}
				st.Process(&h.Ctx, &in)
				drops := 0
				for i := 0; i < in.N; i++ {
					if v := in.H[i].P().Verdict(); v == packet.Drop || v == packet.Continue {
						if v == packet.Continue {
							t.Errorf("packet %d of the burst passed", i)
						}
						drops++
						packet.FreeOne(in.H[i])
					}
				}
				if drops != in.N-innov {
					t.Fatalf("%d packets dropped, %d not innovative", drops, in.N-innov)
				}
				h.Env.Flush()
				got := 0
				for {
					out.N = 0
					st.(plugins.Producer).Produce(&h.Ctx, &out)
					if out.N == 0 {
						break
					}
					for i := 0; i < out.N; i++ {
						if kind == "decoder" {
							if got/k >= len(want) {
								t.Fatalf("more than %d generations delivered", len(want))
							}
							w := tm[want[got/k]].frames[got%k]
							if !bytes.Equal(out.H[i].P().Data()[54:], w[54:]) {
								t.Fatalf("delivered packet %d differs from the original", got)
							}
						}
						got++
					}
					packet.Free(&out)
				}
				if kind == "decoder" && got != len(want)*k {
					t.Fatalf("%d packets delivered for %d generations", got, len(want))
				}
				if kind == "recoder" && got != innov {
					t.Fatalf("%d packets recoded for %d innovative ones", got, innov)
				}
			}
			for range 3 * sessions * len(tm[0].coded) / packet.MaxBurst {
				step()
			}
			if g := storeOf(st).liveGens(); g < warmGens {
				t.Fatalf("%d generations held, below warmGens (%d): warm never ran", g, warmGens)
			}
			if a := testing.AllocsPerRun(20, step); a != 0 {
				t.Errorf("%.1f allocations per burst", a)
			}
			st.(plugins.Stopper).Stop(&h.Ctx)
		})
	}
}
