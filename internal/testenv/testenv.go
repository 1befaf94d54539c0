// Package testenv lets tests that need the environment (root, network
// namespaces, tshark, DPDK) skip with a reason on a laptop and fail under CI, so
// CI never goes green on a skipped interop test.
package testenv

import (
	"os"
	"os/exec"
	"testing"
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
