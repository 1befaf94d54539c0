package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// linerateBin is this command, built once for the tests that run it as a user
// would. The command's own tests are package cli's.
var linerateBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "linerate-cmd")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	linerateBin = filepath.Join(dir, "linerate")
	if out, err := exec.Command("go", "build", "-o", linerateBin, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build linerate: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// TestVersion: the binary builds, runs and has every built-in stage kind.
func TestVersion(t *testing.T) {
	out, err := exec.Command(linerateBin, "version").Output()
	if err != nil || !strings.HasPrefix(string(out), "linerate ") {
		t.Fatalf("linerate version: %v %q", err, out)
	}
	out, err = exec.Command(linerateBin, "stages").Output()
	for _, kind := range []string{"forward", "ioam.encap", "stamp.reflector", "rlnc.decoder", "route"} {
		if err != nil || !strings.Contains(string(out), kind+" ") {
			t.Errorf("linerate stages lacks %s: %v\n%s", kind, err, out)
		}
	}
}
