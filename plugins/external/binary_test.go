package external_test

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/linerate/linerate/appliance"
	"github.com/linerate/linerate/internal/enginetest"
	"github.com/linerate/linerate/internal/testenv"
)

// nobodyUID owns what a user other than root could change.
const nobodyUID = 65534

// trustedTree is a directory the test owns that any user may traverse (as a
// plugin running unprivileged must): root's, 0755, its parent too.
func trustedTree(t *testing.T) string {
	t.Helper()
	base := t.TempDir()
	for _, d := range []string{base, filepath.Dir(base)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return base
}

func mkdir(t *testing.T, dir string, uid int) string {
	t.Helper()
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, uid, -1); err != nil {
		t.Fatal(err)
	}
	return dir
}

// install copies the binary src to dst, owned by uid, mode 0755.
func install(t *testing.T, src, dst string, uid int) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dst, uid, -1); err != nil {
		t.Fatal(err)
	}
}

// TestSymlinkIntoUserDirRefused: a plugin path that is a symlink, in root's
// directory, to a root-owned binary in a directory another user owns is
// refused: that user could swap the binary.
func TestSymlinkIntoUserDirRefused(t *testing.T) {
	testenv.RequireRoot(t)
	bin := buildSampler(t)
	base := trustedTree(t)
	u := mkdir(t, filepath.Join(base, "user"), nobodyUID)
	install(t, bin, filepath.Join(u, "plugin"), 0)
	link := filepath.Join(base, "plugin")
	if err := os.Symlink(filepath.Join(u, "plugin"), link); err != nil {
		t.Fatal(err)
	}
	_, err := newEngine(t, config(link, 0, "1kpps", ""))
	if err == nil || !strings.Contains(err.Error(), u+" must be root's") {
		t.Fatalf("err = %v, want %s refused", err, u)
	}
}

// TestUserGrandparentRefused: a root-owned binary in a root-owned directory
// whose parent another user owns is refused: that user could rename the
// directory away and put one of theirs in its place.
func TestUserGrandparentRefused(t *testing.T) {
	testenv.RequireRoot(t)
	bin := buildSampler(t)
	base := trustedTree(t)
	u := mkdir(t, filepath.Join(base, "user"), nobodyUID)
	d := mkdir(t, filepath.Join(u, "plugins"), 0)
	install(t, bin, filepath.Join(d, "plugin"), 0)
	_, err := newEngine(t, config(filepath.Join(d, "plugin"), 0, "1kpps", ""))
	if err == nil || !strings.Contains(err.Error(), u+" must be root's") {
		t.Fatalf("err = %v, want %s refused", err, u)
	}
}

// TestSwapCaughtAtRestart: the binary is checked at every launch. Swapped
// for a file another user owns while the plugin runs, it is refused when
// the plugin restarts, and the status says why; put back, it runs again.
func TestSwapCaughtAtRestart(t *testing.T) {
	testenv.RequireRoot(t)
	bin := buildSampler(t)
	d := mkdir(t, filepath.Join(trustedTree(t), "plugins"), 0)
	path := filepath.Join(d, "plugin")
	install(t, bin, path, 0)
	e := enginetest.Start(t, config(path, 0, "10kpps", `restart_after = "50ms"`), appliance.Options{})
	counter := func(name string) uint64 { return enginetest.Counter(e.Snapshot(), "sampler", name) }
	waitFor(t, "results from the plugin", time.Minute, func() bool { return counter("returned") > 100 })
	pid := pluginPID(t, path)
	if pid == 0 {
		t.Fatal("no plugin process")
	}
	install(t, bin, path+".new", nobodyUID)
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var why string
	waitFor(t, "the restart refused or done", time.Minute, func() bool {
		why = pluginStatus("sampler").Err
		return why != "" || counter("plugin_restarts") > 0
	})
	if !strings.Contains(why, "uid 65534") {
		t.Fatalf("restarts %d, last error %q: want the swapped binary refused", counter("plugin_restarts"), why)
	}
	install(t, bin, path+".new", 0)
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the restart with root's binary", time.Minute, func() bool { return counter("plugin_restarts") > 0 })
	e.Stop()
	for name, used := range e.InUse() {
		if used != 0 {
			t.Errorf("pool %q has %d buffers in use", name, used)
		}
	}
}

// TestScriptPlugin: a #! script runs as a plugin through its descriptor
// too (the interpreter reads /proc/self/fd/3, open in the child).
func TestScriptPlugin(t *testing.T) {
	testenv.RequireRoot(t)
	bin := buildSampler(t)
	script := filepath.Join(trustedTree(t), "plugin.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nexec "+bin+" \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := newEngine(t, config(script, 0, "1kpps", "")); err != nil {
		t.Fatalf("a script plugin: %v", err)
	}
}
