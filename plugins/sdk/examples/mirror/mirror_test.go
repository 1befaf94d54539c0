package main

import (
	"bytes"
	"testing"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/plugins"
	"github.com/linerate/linerate/plugins/stagetest"
)

func frame(n int, seq byte) []byte {
	f := make([]byte, n)
	for i := range f {
		f[i] = byte(i) ^ seq
	}
	return f
}

// TestMirrorInProcess runs the mirror with the stage test harness, as any
// in-process stage, in both of its modes: the copies are byte for byte the
// originals, they go to the mirror port (Emit) or down the chain (Produce),
// every original continues, and Process and Produce allocate nothing.
func TestMirrorInProcess(t *testing.T) {
	for _, mode := range []string{"port", "chain"} {
		t.Run(mode, func(t *testing.T) {
			h := stagetest.NewHarness(t, 0)
			h.NewPool("default", 512, 2048)
			h.Ports = stagetest.Ports{{ID: 0, Name: "in"}, {ID: 3, Name: "span"}}
			keys := "every = 2\n"
			if mode == "port" {
				keys += "port = \"span\"\n"
			}
			st := h.Start(h.MustBuild("mirror", keys))
			var want, got [][]byte
			for burst := 0; burst < 4; burst++ {
				b := h.Burst(0)
				for i := 0; i < 40; i++ {
					f := frame(60+burst*40+i, byte(burst))
					if (burst*40+i+1)%2 == 0 {
						want = append(want, f)
					}
					b.Push(h.Pkt(f, 0))
				}
				o := h.Run(b, st)
				if len(o.Continued) != 40 {
					t.Fatalf("burst %d: %d of 40 continued", burst, len(o.Continued))
				}
				stagetest.Free(o.Continued...)
				// The engine gives a Producer an empty burst every loop.
				for _, c := range h.Produce(st).Handles() {
					if mode == "port" {
						t.Fatal("a copy went down the chain in port mode")
					}
					got = append(got, stagetest.TakeData(c))
				}
			}
			if mode == "port" {
				for _, e := range h.Env.TakeEmitted() {
					if e.Port != 3 {
						t.Errorf("a copy emitted to port %d, want 3 (span)", e.Port)
					}
					got = append(got, stagetest.TakeData(e.H))
				}
			} else {
				if len(h.Env.Emitted) != 0 {
					t.Errorf("%d copies emitted to a port, want none", len(h.Env.Emitted))
				}
			}
			if len(got) != len(want) {
				t.Fatalf("%d copies, want %d", len(got), len(want))
			}
			for i := range got {
				if !bytes.Equal(got[i], want[i]) {
					t.Fatalf("copy %d differs from its original", i)
				}
			}
			if n := h.StageCounter("mirror#0", "mirrored"); n != uint64(len(want)) {
				t.Errorf("mirrored %d, want %d", n, len(want))
			}
			// The steady state allocates nothing: copies come from the pool.
			ctx := h.Ctx
			var out packet.Burst
			b := h.Burst(0)
			for i := 0; i < 32; i++ {
				b.Push(h.Pkt(frame(64, 0), 0))
			}
			if a := testing.AllocsPerRun(50, func() {
				st.Process(&ctx, b)
				out.N = 0
				st.(plugins.Producer).Produce(&ctx, &out)
				stagetest.Free(out.Handles()...)
				for _, e := range h.Env.Emitted {
					stagetest.Free(e.H)
				}
				h.Env.Emitted = h.Env.Emitted[:0]
			}); a != 0 {
				t.Errorf("a burst allocates %.1f times", a)
			}
			stagetest.Free(b.Handles()...)
		})
	}
}

// TestMirrorConfig: bad tables are errors that name the table.
func TestMirrorConfig(t *testing.T) {
	h := stagetest.NewHarness(t, 0)
	h.NewPool("default", 16, 2048)
	for keys, want := range map[string]string{
		"port = \"nope\"\n": `port "nope": no such port`,
		"buffers = -1\n":    "buffers -1",
		"evry = 2\n":        "evry",
	} {
		if _, err := h.Build("mirror", keys); err == nil || !bytes.Contains([]byte(err.Error()), []byte(want)) {
			t.Errorf("%q: error %v, want one saying %q", keys, err, want)
		}
	}
}

func init() {
	// In process, the mirror is registered like any stage kind; main serves
	// it as a plugin instead.
	plugins.Register(plugins.Kind{Name: "mirror", Summary: "copy 1 in N packets", New: newMirror})
}
