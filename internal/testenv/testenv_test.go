package testenv

import (
	"os"
	"os/exec"
	"testing"
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
