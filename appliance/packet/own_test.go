//go:build lrcheck

package packet

import (
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

// ownPanic runs f and returns the ownership error it panicked with, or nil.
func ownPanic(t *testing.T, f func()) (oe *OwnershipError) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			err, ok := r.(error)
			if !ok || !errors.As(err, &oe) {
				panic(r)
			}
		}
	}()
	f()
	return nil
}

func TestOwnershipChecked(t *testing.T) {
	s := newTestSlab(t, 8)
	const me, other = 1, 2
	tests := []struct {
		name string
		do   func(h Handle)
		want string // in the message; "" = no violation
	}{
		{"lifecycle", func(h Handle) {
			Own(h, OpClaim, me, -1)
			Own(h, OpHold, NoOwner, 3)
			Own(h, OpClaim, me, 3)
			Own(h, OpTx, me, -1)
			Own(h, OpClaim, other, -1) // received on the other side of a mem link
			OwnTo(h, OpHandoff, other, me, 1)
			Own(h, OpClaim, me, -1)
			Own(h, OpFree, me, 2)
		}, ""},
		{"double free", func(h Handle) {
			Own(h, OpClaim, me, -1)
			Own(h, OpFree, me, 2)
			Own(h, OpFree, me, 4)
		}, "double free: buffer"},
		{"free by another lcore", func(h Handle) {
			Own(h, OpClaim, me, -1)
			Own(h, OpFree, other, 0)
		}, "free of a buffer owned by lcore 1"},
		{"claim from a ring towards another lcore", func(h Handle) {
			Own(h, OpClaim, me, -1)
			OwnTo(h, OpHandoff, me, other, 0)
			Own(h, OpClaim, me, -1)
		}, "claim of a buffer owned by lcore 2"},
		{"freed and left in the burst", func(h Handle) {
			Own(h, OpClaim, me, -1)
			Own(h, OpFree, me, 3)
			Own(h, OpVerdict, me, 3)
		}, "a stage freed a packet and left it in the burst"},
		{"tx of a freeing buffer", func(h Handle) {
			Own(h, OpClaim, me, -1)
			Own(h, OpFree, me, 3)
			Own(h, OpTx, me, -1)
		}, "tx of a freeing buffer"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, ok := s.AllocOne()
			if !ok {
				t.Fatal("pool empty")
			}
			oe := ownPanic(t, func() { tc.do(h) })
			switch {
			case tc.want == "" && oe != nil:
				t.Fatalf("unexpected violation: %v", oe)
			case tc.want != "" && oe == nil:
				t.Fatalf("no violation, want %q", tc.want)
			case oe != nil && !strings.Contains(oe.Error(), tc.want):
				t.Fatalf("got %q, want %q in it", oe.Error(), tc.want)
			case oe != nil && (oe.Handle != h || oe.PoolName != s.Name()):
				t.Fatalf("error names buffer %#x of %q, want %#x of %q", uintptr(oe.Handle), oe.PoolName, uintptr(h), s.Name())
			}
			if st, _ := OwnerOf(h); st != StateFree {
				s.FreeOne(h)
			}
		})
	}
}

func TestPoolChecks(t *testing.T) {
	s := newTestSlab(t, 4)
	h, _ := s.AllocOne()
	p := h.P()
	d, _ := p.Append(100)
	copy(d, "data")
	stale := p.Data()
	s.FreeOne(h)
	if stale[0] != PoisonByte || stale[99] != PoisonByte {
		t.Errorf("freed data reads %q…, want it poisoned with %#x", stale[:4], PoisonByte)
	}
	oe := ownPanic(t, func() { s.FreeOne(h) })
	if oe == nil || !strings.Contains(oe.Error(), "double free") {
		t.Errorf("second free: %v, want a double free", oe)
	}
	if oe := ownPanic(t, func() { _ = h.P().Len() }); oe == nil || oe.Op != OpUse {
		t.Errorf("P of a free buffer: %v, want a use after free", oe)
	}
	// A buffer given back to a pool that does not own it.
	other, err := NewSlab(SlabConfig{Name: "other", Buffers: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	q, _ := other.AllocOne()
	func() {
		defer func() {
			if r := recover(); r == nil || !strings.Contains(r.(error).Error(), "freed into pool") {
				t.Errorf("foreign free: %v", r)
			}
		}()
		s.FreeOne(q)
	}()
	other.FreeOne(q)
}

// TestOutsideOwnersChecked: the owners outside Go. A buffer lent to a plugin
// comes back only through OpReturn: freeing it, releasing it to its pool,
// claiming it or touching its bytes before aborts. A frame the kernel has
// (OpFill) comes back only through OpRx, its bytes the kernel's until then;
// rx of a frame free in its pool, or one taken already, aborts. Each report
// names the buffer, its state and the line that broke the rule.
func TestOutsideOwnersChecked(t *testing.T) {
	s := newTestSlab(t, 8)
	const me = 1
	lend := func(h Handle) {
		Own(h, OpClaim, me, -1)
		Own(h, OpLend, NoOwner, 2)
	}
	fill := func(h Handle) { Own(h, OpFill, NoOwner, -1) }
	tests := []struct {
		name   string
		setup  func(h Handle)
		misuse func(h Handle) // on one line: the report names it
		want   string
	}{
		{"free of a lent buffer", lend, func(h Handle) { Own(h, OpFree, me, 2) }, "free of a buffer lent to a plugin"},
		{"release of a lent buffer", lend, func(h Handle) { s.FreeOne(h) }, "release of a buffer lent to a plugin"},
		{"claim of a lent buffer", lend, func(h Handle) { Own(h, OpClaim, me, 2) }, "claim of a buffer lent to a plugin"},
		{"read of a lent buffer", lend, func(h Handle) { _ = h.P().Data()[0] }, "access to a buffer lent to a plugin"},
		{"write of a lent buffer", lend, func(h Handle) { h.P().DataTail()[1] = 9 }, "access to a buffer lent to a plugin"},
		{"read of a frame in the kernel's rings", fill, func(h Handle) { _ = h.P().Data()[0] }, "access to a buffer the kernel has"},
		{"write of a frame in the kernel's rings", fill, func(h Handle) { _, _ = h.P().Append(4) }, "access to a buffer the kernel has"},
		{"rx of a free frame", s.FreeOne, func(h Handle) { Own(h, OpRx, NoOwner, -1) }, "rx of a free buffer"},
		{"rx of a frame taken already", func(h Handle) {
			fill(h)
			Own(h, OpRx, NoOwner, -1)
		}, func(h Handle) { Own(h, OpRx, NoOwner, -1) }, "rx of a lcore buffer"},
		{"rx of a frame never given to the kernel", func(Handle) {}, func(h Handle) { Own(h, OpRx, NoOwner, -1) }, "rx of a lcore buffer"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, ok := s.AllocOne()
			if !ok {
				t.Fatal("pool empty")
			}
			if _, err := h.P().Append(64); err != nil {
				t.Fatal(err)
			}
			tc.setup(h)
			oe := ownPanic(t, func() { tc.misuse(h) })
			if oe == nil {
				t.Fatalf("no violation, want %q", tc.want)
			}
			fn := runtime.FuncForPC(reflect.ValueOf(tc.misuse).Pointer())
			file, line := fn.FileLine(fn.Entry())
			at := fmt.Sprintf("appliance/packet/%s:%d", filepath.Base(file), line)
			msg := oe.Error()
			if !strings.Contains(msg, tc.want) || !strings.Contains(msg, fmt.Sprintf("buffer %#x", uintptr(h))) ||
				!strings.Contains(msg, "is "+oe.State.String()) || oe.At != at || !strings.HasSuffix(msg, "; at "+at) {
				t.Errorf("got %q (at %q), want %q, the buffer, its state and at %s", msg, oe.At, tc.want, at)
			}
			switch st, _ := OwnerOf(h); st {
			case StateFree:
			case StateLent:
				Own(h, OpReturn, NoOwner, 2)
				s.FreeOne(h)
			default:
				s.FreeOne(h)
			}
		})
	}
}

// TestOutsideOwnersLifecycle: what the external stage and the xdp port do
// passes: a packet lent and returned, a spare buffer lent and returned with
// an emit, a frame filled and taken from the rx ring, and the metadata of a
// lent or kernel buffer, which stays linerate's.
func TestOutsideOwnersLifecycle(t *testing.T) {
	s := newTestSlab(t, 8)
	const me = 1
	steps := map[string]func(h Handle){
		"lent packet": func(h Handle) {
			Own(h, OpClaim, me, -1)
			p := h.P()
			_ = p.Data()
			Own(h, OpLend, NoOwner, 2)
			p.Consume()
			_ = h.P().Verdict() // the engine reads a consumed packet's verdict
			Own(h, OpReturn, NoOwner, 2)
			p.SetWindow(p.Offset(), 10)
			_ = p.Data()[9]
			Own(h, OpClaim, me, 2) // Produce's burst, or Emit
			Own(h, OpFree, me, 3)
		},
		"spare buffer": func(h Handle) {
			Own(h, OpLend, NoOwner, 2)
			Own(h, OpReturn, NoOwner, 2)
			Own(h, OpClaim, me, 2)
			Own(h, OpTx, me, -1)
		},
		"reclaimed from a dead plugin": func(h Handle) {
			Own(h, OpClaim, me, -1)
			Own(h, OpLend, NoOwner, 2)
			Own(h, OpReturn, NoOwner, 2)
			Own(h, OpFree, me, 2)
		},
		"xdp frame": func(h Handle) {
			Own(h, OpFill, NoOwner, -1)
			_ = h.P().Backend()
			Own(h, OpRx, NoOwner, -1)
			_ = h.P().Data()
			Own(h, OpClaim, me, -1)
		},
		"xdp frame at close": func(h Handle) { Own(h, OpFill, NoOwner, -1) },
	}
	for name, do := range steps {
		h, ok := s.AllocOne()
		if !ok {
			t.Fatal("pool empty")
		}
		if oe := ownPanic(t, func() { do(h) }); oe != nil {
			t.Errorf("%s: %v", name, oe)
		}
		if st, _ := OwnerOf(h); st != StateFree {
			s.FreeOne(h)
		}
	}
}
