// Package testenv lets tests that need the environment (root, network
// namespaces, tshark, DPDK) skip with a reason on a laptop and fail under CI, so
// CI never goes green on a skipped interop test. A kernel feature is the
// exception (RequireKernel): no package installs it, so a test that needs one
// skips, naming it, under CI too, and make test lists those skips at the end.
package testenv

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/linerate/linerate/appliance/kernel"
)

// InCI reports whether the tests run under CI (CI=true), where a missing
// requirement is a failure, not a skip.
func InCI() bool { return os.Getenv("CI") == "true" }

// Require skips t, naming what is missing, unless ok; under CI it fails instead.
func Require(t testing.TB, what string, ok bool) {
	t.Helper()
	if ok {
		return
	}
	if InCI() {
		t.Fatalf("requires %s (CI=true, so not skipping)", what)
		return
	}
	t.Skipf("requires %s", what)
}

// RequireRoot requires an effective uid of 0.
func RequireRoot(t testing.TB) {
	t.Helper()
	Require(t, "root", os.Geteuid() == 0)
}

// RequireCmd requires the program name on PATH and returns its path.
func RequireCmd(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	Require(t, "the "+name+" command", err == nil)
	return p
}

// SkipsEnv names the file RequireKernel appends its skips to, one line each
// (package, test, feature, option), for the table `make test` prints at the
// end. make sets it to a new file per run: a test that reads it is never
// cached, so every run lists every skip.
const SkipsEnv = "LINERATE_KERNEL_SKIPS"

// RequireKernel skips t when the running kernel lacks one of fs, naming the
// feature and the kernel option that gives it, under CI too: make deps can
// install a package, but nothing can install a kernel option. The skip is
// recorded for the table at the end of make test. A probe that cannot tell
// (no root) is a missing requirement, as Require.
func RequireKernel(t testing.TB, fs ...kernel.Feature) {
	t.Helper()
	for _, f := range fs {
		r := kernel.Probe(f)
		switch r.State {
		case kernel.Present:
			continue
		case kernel.Unknown:
			Require(t, fmt.Sprintf("knowing whether the kernel offers %s (%s)", f, r.Detail), false)
			return
		}
		recordSkip(t, f)
		t.Skipf("the kernel lacks %s (%s): %s", f, f.Option(), r.Detail)
	}
}

func recordSkip(t testing.TB, f kernel.Feature) {
	path := os.Getenv(SkipsEnv)
	if path == "" {
		return
	}
	pkg, _ := os.Getwd()
	if root, err := moduleRoot(pkg); err == nil {
		if rel, err := filepath.Rel(root, pkg); err == nil {
			pkg = "./" + rel
		}
	}
	line := fmt.Sprintf("%s\t%s\t%s\t%s\n", pkg, t.Name(), f, f.Option())
	fd, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Logf("record the skip in %s: %v", path, err)
		return
	}
	defer fd.Close()
	fd.WriteString(line)
}

// moduleRoot is the directory of the go.mod above dir.
func moduleRoot(dir string) (string, error) {
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", os.ErrNotExist
		}
	}
}

// Output collects a process's output (cmd.Stdout, cmd.Stderr) for a test that
// reads it while exec's copying goroutine still writes it: a bytes.Buffer
// alone races.
type Output struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.Write(p)
}

// String is what was written so far.
func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}
