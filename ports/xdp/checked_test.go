//go:build linux && lrcheck

package xdp

import (
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/linerate/linerate/appliance/packet"
)

// testRing is a ring in the test's memory: the test plays the kernel.
func testRing(size, entry uint32) *ring {
	idx := new([3]uint32)
	descs := make([]uint64, size*entry/8)
	return &ring{prod: &idx[0], cons: &idx[1], flags: &idx[2], descs: unsafe.Pointer(&descs[0]),
		mask: size - 1, size: size}
}

// testPort is a port of one queue over a UMEM of its own, with rings the
// test writes as the kernel would, and no socket.
func testPort(t *testing.T) *Port {
	t.Helper()
	u, err := newUmem(t.Name(), 64, 2048)
	if err != nil {
		t.Fatal(err)
	}
	s := &xsk{fd: -1, fill: testRing(32, 8), comp: testRing(32, 8), rx: testRing(32, 16), tx: testRing(32, 16)}
	p := &Port{name: "x0", u: u, q: []*queue{{s: s}}}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
	return p
}

// received has the kernel put frame h on the rx ring, with n bytes.
func received(q *queue, u *umem, h packet.Handle, n int) {
	r := q.s.rx
	*r.desc(*r.prod) = unix.XDPDesc{Addr: u.frameOf(h) + packet.MetaSize + packet.MinHeadroom, Len: uint32(n)}
	*r.prod++
}

// TestCheckedFillRing: in a checked build, a frame the port gave the kernel
// through the fill ring is the kernel's until the port takes it from the rx
// ring: reading or writing its bytes from Go before then aborts, with a
// report that names the frame, its state and the line that did it.
func TestCheckedFillRing(t *testing.T) {
	p := testPort(t)
	q := p.q[0]
	p.fill(q)
	if q.fillLen != 32 {
		t.Fatalf("%d frames filled", q.fillLen)
	}
	filled := p.u.handleAt(*q.s.fill.addr(0))
	for _, tc := range []struct {
		name   string
		misuse func() // on one line: the report names it
	}{
		{"read", func() { _ = filled.P().Data() }},
		{"write", func() { _, _ = filled.P().Append(60) }},
	} {
		msg := abort(t, tc.misuse)
		fn := runtime.FuncForPC(reflect.ValueOf(tc.misuse).Pointer())
		file, line := fn.FileLine(fn.Entry())
		at := fmt.Sprintf("ports/xdp/%s:%d", filepath.Base(file), line)
		for _, want := range []string{"access to a buffer the kernel has", fmt.Sprintf("buffer %#x", uintptr(filled)),
			"is kernel", "; at " + at} {
			if !strings.Contains(msg, want) {
				t.Errorf("%s: report %q lacks %q", tc.name, msg, want)
			}
		}
	}

	// The kernel hands back a frame it had: the port's, its bytes Go's.
	var b packet.Burst
	received(q, p.u, filled, 60)
	if n := p.RxBurst(0, &b); n != 1 || b.H[0] != filled || b.H[0].P().Len() != 60 {
		t.Fatalf("received %d", n)
	}
	_ = filled.P().Data()[59]
	p.u.FreeOne(filled)
}

// TestCheckedRxRing: in a checked build, the rx ring may name only a frame
// the port gave the kernel: one free in its UMEM, or one taken already,
// aborts, with a report that names the frame, its state and the line.
func TestCheckedRxRing(t *testing.T) {
	p := testPort(t)
	q := p.q[0]
	p.fill(q)
	var b packet.Burst
	filled := p.u.handleAt(*q.s.fill.addr(0))
	received(q, p.u, filled, 60)
	if n := p.RxBurst(0, &b); n != 1 || b.H[0] != filled {
		t.Fatalf("received %d", n)
	}
	free := p.u.free[len(p.u.free)-1]
	for _, tc := range []struct {
		name  string
		h     packet.Handle
		state string
	}{{"free", free, "free"}, {"taken", filled, "lcore"}} {
		received(q, p.u, tc.h, 60)
		msg := abort(t, func() { p.RxBurst(0, &b) })
		*q.s.rx.prod = *q.s.rx.cons
		for _, want := range []string{"rx of a " + tc.state + " buffer", fmt.Sprintf("buffer %#x", uintptr(tc.h)),
			"is " + tc.state, "; at ports/xdp/xdp.go:"} {
			if !strings.Contains(msg, want) {
				t.Errorf("%s: report %q lacks %q", tc.name, msg, want)
			}
		}
	}
	p.u.FreeOne(filled)
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
