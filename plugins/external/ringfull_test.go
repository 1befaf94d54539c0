package external

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/plugins"
	"github.com/linerate/linerate/plugins/stagetest"
)

// fillRing lends bursts to a plugin that never answers (peer unread):
// the first 1024 fill its ring; the rest find it full. It returns the
// verdicts of those that found it full.
func fillRing(t *testing.T, in *instance, ctx *stagetestCtx, pool *packet.Slab, bursts int) (pass, drop map[string]int) {
	t.Helper()
	pass, drop = map[string]int{}, map[string]int{}
	for i := 0; i < bursts; i++ {
		var bu packet.Burst
		if pool.Alloc(&bu, packet.MaxBurst) != packet.MaxBurst {
			t.Fatal("pool empty")
		}
		for _, hd := range bu.Handles() {
			hd.P().Append(60)
		}
		in.Process(ctx.ctx, &bu)
		for _, hd := range bu.Handles() {
			switch p := hd.P(); p.Verdict() {
			case packet.Continue:
				pass["continue"]++
			case packet.Drop:
				drop[p.Reason.String()]++
			default:
				continue // lent
			}
			stagetest.Free(hd) // what the engine would forward or free
		}
		ctx.env.Flush()
	}
	return pass, drop
}

type stagetestCtx struct {
	ctx *plugins.Context
	env *stagetest.Env
}

// TestRingFullWarnsOnce: the first burst that finds the ring full logs one
// warning, naming the ring's size and the key that sets it; more full
// bursts, on this instance or another of the stage, log nothing more.
func TestRingFullWarnsOnce(t *testing.T) {
	h := stagetest.NewHarness(t, 0)
	pool, err := packet.NewSlab(packet.SlabConfig{Name: "ring-full", Buffers: 2048, Shared: true})
	if err != nil {
		t.Fatal(err)
	}
	in, _ := lendRigOf(t, pool, false)
	var log bytes.Buffer
	in.sv.log = slog.New(slog.NewTextHandler(&log, nil))
	in.stall = 1 << 62 // the plugin is slow, not stalled
	_, drop := fillRing(t, in, &stagetestCtx{&h.Ctx, h.Env}, pool, 20)
	if drop["plugin_ring_full"] != 4*packet.MaxBurst {
		t.Errorf("drops %v, want %d as plugin_ring_full", drop, 4*packet.MaxBurst)
	}
	// Another instance of the stage finds its ring full too.
	other := &instance{sv: in.sv, lent: in.lent, mask: in.mask, stall: in.stall, c: in.c, l: in.l}
	other.head = in.head
	var bu packet.Burst
	pool.Alloc(&bu, 8)
	other.Process(&h.Ctx, &bu)
	pool.Free(&bu)
	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], "level=WARN") || !strings.Contains(lines[0], "ring_size=1024") ||
		!strings.Contains(lines[0], "raise the stage's ring_size") {
		t.Errorf("want one warning naming ring_size=1024 and the key, got:\n%s", log.String())
	}
	in.head = in.done // the peer never read them: give them back
	freeLent(t, in, pool)
	if err := pool.Close(); err != nil {
		t.Error(err)
	}
}

// freeLent frees what in lent to a peer that never answered.
func freeLent(t *testing.T, in *instance, pool *packet.Slab) {
	t.Helper()
	for i := range in.lent {
		if h := in.lent[i]; h != 0 {
			packet.Own(h, packet.OpReturn, packet.NoOwner, 0)
			stagetest.Free(h)
			in.lent[i] = 0
		}
	}
	if n := pool.InUse(); n != 0 {
		t.Errorf("%d buffers in use", n)
	}
}

// TestStalledPlugin: a plugin that hangs (alive, its ring full, no result
// for stall_timeout) no longer has packets dropped as plugin_ring_full:
// with fail = "open" they pass it by, counted as plugin_bypassed; with
// "closed" they drop as plugin_stalled. While it still made progress within
// stall_timeout, a full ring drops as plugin_ring_full in both modes. No
// clock decides: the instance's last progress is set back by hand.
func TestStalledPlugin(t *testing.T) {
	for _, open := range []bool{true, false} {
		h := stagetest.NewHarness(t, 0)
		pool, err := packet.NewSlab(packet.SlabConfig{Name: "stalled", Buffers: 2048, Shared: true})
		if err != nil {
			t.Fatal(err)
		}
		in, _ := lendRigOf(t, pool, false)
		in.failOpen = open
		in.stall = 1 << 62
		ctx := &stagetestCtx{&h.Ctx, h.Env}
		_, drop := fillRing(t, in, ctx, pool, 17) // 16 fill it
		if drop["plugin_ring_full"] != packet.MaxBurst || len(drop) != 1 {
			t.Errorf("open %v, progress within stall_timeout: drops %v", open, drop)
		}
		in.stall = 1
		in.progress.Store(in.progress.Load() - 2) // no progress since
		pass, drop := fillRing(t, in, ctx, pool, 3)
		switch {
		case open && (pass["continue"] != 3*packet.MaxBurst || len(drop) != 0 || in.c.bypassed.Local() != 3*packet.MaxBurst):
			t.Errorf("fail open, stalled: passed %v, dropped %v, bypassed %d", pass, drop, in.c.bypassed.Local())
		case !open && (drop["plugin_stalled"] != 3*packet.MaxBurst || len(pass) != 0 || in.c.bypassed.Local() != 0):
			t.Errorf("fail closed, stalled: passed %v, dropped %v", pass, drop)
		}
		in.head = in.done
		freeLent(t, in, pool)
		if err := pool.Close(); err != nil {
			t.Error(err)
		}
	}
}
