//go:build linux

package main

import (
	"math"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/linerate/linerate/appliance/kernel"
	"github.com/linerate/linerate/internal/testenv"
)

// TestBenchXDP runs both benchmarks briefly, as make bench-xdp does: the C
// loop builds and forwards, the Go loop forwards, every batch is measured,
// the dispatcher and the empty program forward the host's traffic, and
// both ratios come out as numbers. How large they are is the benchmark's
// to say, not a test's.
func TestBenchXDP(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequireKernel(t, kernel.XSKMap, kernel.Loop) // AF_XDP, the dispatcher's rule walk
	cc := testenv.RequireCmd(t, "cc")
	ref := filepath.Join(t.TempDir(), "xskfwd")
	if out, err := exec.Command(cc, "-O2", "-Wall", "-Wextra", "-Werror", "-o", ref, "cref/xskfwd.c").CombinedOutput(); err != nil {
		t.Fatalf("cc xskfwd.c: %v\n%s", err, out)
	}
	t.Cleanup(cleanup)
	r, err := benchPort(ref, 1, 4, 256, 64)
	if err != nil {
		t.Fatal(err)
	}
	if r <= 0 || math.IsInf(r, 0) || math.IsNaN(r) {
		t.Errorf("port ratio %v", r)
	}
	cleanup()
	r, err = benchDispatcher(2, 8, 256, 64)
	if err != nil {
		t.Fatal(err)
	}
	if r <= 0 || math.IsInf(r, 0) || math.IsNaN(r) {
		t.Errorf("dispatcher ratio %v", r)
	}
}
