//go:build dpdk

package main

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestDPDKNullExample runs docs/examples/dpdk-null.toml with a binary built with
// -tags dpdk, as docs/dpdk.md tells a user to: validate accepts it, and run
// forwards between the two net_null ports, prints its rate and exits cleanly
// (EAL cleanup included).
func TestDPDKNullExample(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "linerate-dpdk")
	if out, err := exec.Command("go", "build", "-tags", "dpdk", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build with -tags dpdk: %v\n%s", err, out)
	}
	example := filepath.Join("..", "..", "..", "docs", "examples", "dpdk-null.toml")
	run := func(args ...string) (string, string) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		if err := cmd.Run(); err != nil {
			t.Fatalf("linerate %v: %v\nstdout:\n%s\nstderr:\n%s", args, err, o.String(), e.String())
		}
		return o.String(), e.String()
	}
	if out, _ := run("validate", "-c", example); !strings.Contains(out, ": ok") {
		t.Errorf("validate: %q", out)
	}
	out, _ := run("run", "-c", example, "--duration", "2s", "--live=false")
	m := regexp.MustCompile(`(?m)^\s*null1\s+dpdk\s+0\s+0\s+(\d+)\s+(\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no tx row for null1 in:\n%s", out)
	}
	// How many depends on how much CPU a busy machine left it: only that it
	// forwarded at all is the example's promise.
	if n, _ := strconv.ParseUint(m[1], 10, 64); n == 0 {
		t.Errorf("null1 transmitted nothing in 2s")
	}
	rate := regexp.MustCompile(`rate: ([0-9.]+) Mpps`).FindStringSubmatch(out)
	if rate == nil {
		t.Fatalf("no rate line in:\n%s", out)
	}
	if r, _ := strconv.ParseFloat(rate[1], 64); r <= 0 {
		t.Errorf("rate %v Mpps", r)
	}
}

// TestDPDKTester runs linerate test on the DPDK datapath with
// docs/examples/test/dpdk-ring.toml: a net_ring vdev whose tx ring is its rx
// ring. Each trial's engine opens the port again in the one EAL; the search
// finds the loopback's NDR at the maximum load, and latency has samples.
func TestDPDKTester(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "linerate-dpdk")
	if out, err := exec.Command("go", "build", "-tags", "dpdk", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build with -tags dpdk: %v\n%s", err, out)
	}
	profile := filepath.Join("..", "..", "..", "docs", "examples", "test", "dpdk-ring.toml")
	cmd := exec.Command(bin, "test", "-c", profile, "--live=false")
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Run(); err != nil {
		t.Fatalf("linerate test: %v\nstdout:\n%s\nstderr:\n%s", err, o.String(), e.String())
	}
	out := o.String()
	for _, size := range []string{"64", "1518"} {
		// FRAME SEARCH GOAL LOWER …: LOWER, the NDR, in pps ("20.00k").
		m := regexp.MustCompile(`(?m)^` + size + `\s+mlrsearch\s+NDR\s+([0-9.]+)k\s`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("no NDR row for %s bytes in:\n%s", size, out)
		}
		// A loopback loses nothing; a tester preempted on a busy machine
		// may fall short of its load, which counts as lost.
		if v, _ := strconv.ParseFloat(m[1], 64); v < 16 {
			t.Errorf("%s bytes: NDR %v kpps through a loopback, want about 20", size, v)
		}
		// FRAME LOAD STREAM PACKETS …
		if !regexp.MustCompile(`(?m)^` + size + `\s+50% PDR\s+\S+\s+[1-9]`).MatchString(out) {
			t.Errorf("%s bytes: no latency samples at 50%% of the PDR in:\n%s", size, out)
		}
	}
}
