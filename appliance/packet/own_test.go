//go:build lrcheck

package packet

import (
	"errors"
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
