package external_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/linerate/linerate/appliance"
	"github.com/linerate/linerate/internal/enginetest"
	"github.com/linerate/linerate/internal/testenv"
	"github.com/linerate/linerate/plugins/external"
)

// buildTestPlugin builds the test plugin testdata/name into a directory of
// the test's own.
func buildTestPlugin(t *testing.T, name string) string {
	t.Helper()
	goBin := testenv.RequireCmd(t, "go")
	bin := filepath.Join(trustedTree(t), name)
	if out, err := exec.Command(goBin, "build", "-o", bin, "./testdata/"+name).CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", name, err, out)
	}
	return bin
}

// alive reports whether pid runs: a zombie holds no descriptor or memory.
func alive(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

// holdsMemfd reports whether pid has a descriptor of a pool's memfd.
func holdsMemfd(pid int) bool {
	dir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && strings.HasPrefix(l, "/memfd:linerate-pool") {
			return true
		}
	}
	return false
}

func pluginCounter(stage, name string) uint64 {
	for _, st := range external.Statuses() {
		if st.Stage == stage {
			return st.Counters[name]
		}
	}
	return 0
}

// TestEscapeeKilled: a plugin starts a process in a session of its own
// (setsid) that holds the shared pool's memfd. The plugin's kill ends it
// too, before the plugin is restarted and before anything it was lent is
// reclaimed (checked at once, no waiting), and so does the engine's stop;
// every buffer comes back.
func TestEscapeeKilled(t *testing.T) {
	testenv.RequireRoot(t)
	bin := buildTestPlugin(t, "escapee")
	e := enginetest.Start(t, pluginConfig(bin, "escapee", "", 0, "20kpps", `fail = "closed"`+"\n"+`restart_after = "50ms"`), appliance.Options{})
	waitFor(t, "the escapee started", time.Minute, func() bool { return pluginCounter("escapee", "escapee_pid") > 0 })
	first := int(pluginCounter("escapee", "escapee_pid"))
	if !alive(first) || !holdsMemfd(first) {
		t.Fatalf("the escapee %d: alive %v, holds a pool's memfd %v", first, alive(first), holdsMemfd(first))
	}
	killPlugin(t, e, bin, "escapee", "returned", 1000)
	if alive(first) {
		t.Errorf("the escapee %d of the killed plugin outlived its kill and restart", first)
	}
	waitFor(t, "the restarted plugin's escapee", time.Minute, func() bool {
		p := int(pluginCounter("escapee", "escapee_pid"))
		return p > 0 && p != first
	})
	second := int(pluginCounter("escapee", "escapee_pid"))
	if !alive(second) {
		t.Fatalf("the second escapee %d is not running", second)
	}
	e.Stop()
	if alive(second) {
		t.Errorf("the escapee %d outlived the engine's stop", second)
	}
	if n := enginetest.Counter(e.Snapshot(), "escapee", "reclaimed"); n == 0 {
		t.Log("nothing was lent at the kill") // not an error: the point is the order
	}
	for name, used := range e.InUse() {
		if used != 0 {
			t.Errorf("pool %q has %d buffers in use", name, used)
		}
	}
}

// TestUncontainedRefused: where linerate can make no cgroup for a plugin,
// the plugin does not run, and the error names the key that accepts the
// risk; with containment = "none" it runs.
func TestUncontainedRefused(t *testing.T) {
	bin := buildSampler(t)
	defer external.SetCgroupParent("/proc/no-cgroup-here")()
	_, err := newEngine(t, config(bin, 0, "1kpps", ""))
	if err == nil || !strings.Contains(err.Error(), `containment = "none"`) || !strings.Contains(err.Error(), "Delegate=yes") {
		t.Fatalf("err = %v, want the refusal naming containment = \"none\"", err)
	}
	if pluginPID(t, bin) != 0 {
		t.Error("a plugin process is left")
	}
	if _, err := newEngine(t, config(bin, 0, "1kpps", `containment = "none"`)); err != nil {
		t.Errorf("containment = \"none\": %v", err)
	}
	_, err = newEngine(t, config(bin, 0, "1kpps", `containment = "pid"`))
	if err == nil || !strings.Contains(err.Error(), `containment "pid"`) {
		t.Errorf("containment = \"pid\": %v", err)
	}
}

func pluginStatus(stage string) external.Status {
	for _, st := range external.Statuses() {
		if st.Stage == stage {
			return st
		}
	}
	return external.Status{}
}
