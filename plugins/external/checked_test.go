//go:build lrcheck

package external

import (
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/linerate/linerate/appliance/memif"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/plugins/stagetest"
)

// TestCheckedLent: in a checked build, a buffer the external stage lent to
// its plugin, a packet or a spare buffer for emits, is the plugin's until
// the stage has it back: freeing it, giving it back to its pool, or reading
// or writing its bytes from Go before then aborts, with a report that names
// the buffer, its state (lent) and the line that did it. Taken back with the
// plugin's results, or when the plugin is gone, every buffer is free again.
func TestCheckedLent(t *testing.T) {
	h := stagetest.NewHarness(t, 0)
	const spares = 4
	pool, in, peer := spareRig(t, "checked-lent", 64, spares)
	ctx := &h.Ctx
	var bu, out packet.Burst
	pool.Alloc(&bu, 1)
	p := bu.H[0].P()
	if _, err := p.Append(60); err != nil {
		t.Fatal(err)
	}
	lent := bu.H[0]
	in.Process(ctx, &bu) // lends the packet and the spares
	if in.head != 1 || in.spares() != spares {
		t.Fatalf("lent %d packets and %d spares", in.head, in.spares())
	}
	spare := in.spare[0]

	tests := []struct {
		name   string
		h      packet.Handle
		misuse func() // on one line: the report names it
		want   string
	}{
		{"free of a lent packet", lent, func() { ctx.Env.Free(lent) }, "free of a buffer lent to a plugin"},
		{"free of a lent packet to its pool", lent, func() { pool.FreeOne(lent) }, "release of a buffer lent to a plugin"},
		{"free of a lent spare", spare, func() { ctx.Env.Free(spare) }, "free of a buffer lent to a plugin"},
		{"read of a lent packet", lent, func() { _ = p.Data()[0] }, "access to a buffer lent to a plugin"},
		{"write of a lent packet", lent, func() { lent.P().Data()[1] = 1 }, "access to a buffer lent to a plugin"},
		{"write of a lent spare", spare, func() { _, _ = spare.P().Append(60) }, "access to a buffer lent to a plugin"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			msg := abort(t, tc.misuse)
			fn := runtime.FuncForPC(reflect.ValueOf(tc.misuse).Pointer())
			file, line := fn.FileLine(fn.Entry())
			at := fmt.Sprintf("plugins/external/%s:%d", filepath.Base(file), line)
			for _, want := range []string{tc.want, fmt.Sprintf("buffer %#x", uintptr(tc.h)), "is lent", "; at " + at} {
				if !strings.Contains(msg, want) {
					t.Errorf("report %q lacks %q", msg, want)
				}
			}
		})
	}

	// The plugin answers: the packet comes back, and is the stage's again.
	d := peer.C2S[0].Load(0)
	peer.C2S[0].SetTail(1)
	*peer.S2C[0].D(0) = memif.Desc{Region: d.Region, Offset: d.Offset, Length: d.Length}
	peer.S2C[0].SetTail(1)
	in.Produce(ctx, &out)
	if out.N != 1 || out.H[0] != lent || out.H[0].P().Data()[0] != p.Data()[0] {
		t.Fatalf("%d packets back", out.N)
	}
	stagetest.Free(out.Handles()...)
	// Gone, the plugin leaves its spares to the stage.
	in.freeSpares(ctx)
	h.Env.Flush()
	if n := pool.InUse(); n != 0 {
		t.Errorf("%d buffers in use", n)
	}
}

// TestCheckedReclaim: a lost plugin's packets and spares come back to the
// stage (reclaim, Stop) without a report: the checked build knows a loan
// ends there.
func TestCheckedReclaim(t *testing.T) {
	h := stagetest.NewHarness(t, 0)
	pool, in, _ := spareRig(t, "checked-reclaim", 64, 2)
	ctx := &h.Ctx
	var bu, out packet.Burst
	for _, failOpen := range []bool{false, true} {
		in.failOpen = failOpen
		bu.N = 0
		pool.Alloc(&bu, 4)
		in.Process(ctx, &bu)
		in.orphans = true // what sync sets once the plugin is dead
		out.N = 0
		in.Produce(ctx, &out)
		if in.orphans || in.spares() != 0 || in.head != in.done {
			t.Fatalf("fail open %v: not all reclaimed", failOpen)
		}
		stagetest.Free(out.Handles()...)
		h.Env.Flush()
		if n := pool.InUse(); n != 0 {
			t.Errorf("fail open %v: %d buffers in use", failOpen, n)
		}
	}
}

// abort runs f and returns the report of the ownership rule it broke.
func abort(t *testing.T, f func()) (msg string) {
	t.Helper()
	defer func() {
		r := recover()
		var oe *packet.OwnershipError
		if err, ok := r.(error); ok && errors.As(err, &oe) {
			msg = oe.Error()
			return
		}
		if r != nil {
			panic(r)
		}
		t.Fatal("no abort")
	}()
	f()
	return ""
}
