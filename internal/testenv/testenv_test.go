package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/linerate/linerate/appliance/kernel"
)

// fakeTB records what Require does without stopping the real test.
type fakeTB struct {
	testing.TB
	skipped, failed bool
	msg             string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Skipf(format string, args ...any) {
	f.skipped = true
	f.msg = format
}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failed = true
	f.msg = format
}

func TestRequire(t *testing.T) {
	for _, tc := range []struct {
		ci, ok        bool
		skip, failure bool
	}{
		{ci: false, ok: true},
		{ci: true, ok: true},
		{ci: false, ok: false, skip: true},
		{ci: true, ok: false, failure: true},
	} {
		if tc.ci {
			t.Setenv("CI", "true")
		} else {
			t.Setenv("CI", "")
		}
		f := &fakeTB{TB: t}
		Require(f, "a thing", tc.ok)
		if f.skipped != tc.skip || f.failed != tc.failure {
			t.Errorf("ci=%v ok=%v: skipped=%v failed=%v, want %v %v", tc.ci, tc.ok, f.skipped, f.failed, tc.skip, tc.failure)
		}
	}
}

func TestRequireCmd(t *testing.T) {
	t.Setenv("CI", "")
	f := &fakeTB{TB: t}
	p := RequireCmd(f, "sh")
	if _, err := exec.LookPath("sh"); err == nil && (f.skipped || p == "") {
		t.Errorf("sh is on PATH but RequireCmd skipped")
	}
	f = &fakeTB{TB: t}
	RequireCmd(f, "no-such-command-linerate")
	if !f.skipped {
		t.Errorf("missing command did not skip")
	}
}

func TestRequireRoot(t *testing.T) {
	t.Setenv("CI", "")
	f := &fakeTB{TB: t}
	RequireRoot(f)
	if f.skipped != (os.Geteuid() != 0) {
		t.Errorf("RequireRoot skipped=%v with euid %d", f.skipped, os.Geteuid())
	}
}

// TestRequireKernel: a missing kernel feature skips under CI too, naming the
// feature and its option, and lands in the skip file.
func TestRequireKernel(t *testing.T) {
	t.Setenv("CI", "true")
	t.Setenv(kernel.DisableEnv, "seg6local")
	path := filepath.Join(t.TempDir(), "skips")
	t.Setenv(SkipsEnv, path)
	f := &fakeTB{TB: t}
	RequireKernel(f, kernel.Seg6Local)
	if !f.skipped || f.failed || !strings.Contains(f.msg, "lacks") {
		t.Fatalf("skipped=%v failed=%v msg=%q", f.skipped, f.failed, f.msg)
	}
	b, err := os.ReadFile(path)
	if err != nil || !strings.Contains(string(b), "./internal/testenv\t"+t.Name()+"\tseg6local\tCONFIG_IPV6_SEG6_LWTUNNEL\n") {
		t.Errorf("skip file: %q, %v", b, err)
	}
}
