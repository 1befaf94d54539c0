package external_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/linerate/linerate/appliance"
	"github.com/linerate/linerate/internal/enginetest"
	"github.com/linerate/linerate/internal/testenv"
	"github.com/linerate/linerate/plugins/external"
)

// unitCaps is the packaged unit's CapabilityBoundingSet, as setpriv's
// --bounding-set takes it: -all,+net_raw,…
func unitCaps(t *testing.T) string {
	t.Helper()
	unit, err := os.ReadFile("../../packaging/linerate.service")
	if err != nil {
		t.Fatal(err)
	}
	set := "-all"
	for _, l := range strings.Split(string(unit), "\n") {
		if v, ok := strings.CutPrefix(l, "CapabilityBoundingSet="); ok {
			for _, c := range strings.Fields(v) {
				set += ",+" + strings.ToLower(strings.TrimPrefix(c, "CAP_"))
			}
		}
	}
	return set
}

// TestUnderUnitCapabilities runs a plugin, as the default unprivileged user,
// from a linerate that is root with the packaged unit's capabilities and no
// others (no CAP_DAC_OVERRIDE: root's files only as their owner), in a
// cgroup of its own as the unit's Delegate=yes gives it: the plugin's user,
// its sockets' directory, its cgroup all work, and its packets come back.
func TestUnderUnitCapabilities(t *testing.T) {
	if os.Getenv("LINERATE_UNIT_CAPS_PLUGIN") != "" {
		unitCapsChild(t, os.Getenv("LINERATE_UNIT_CAPS_PLUGIN"))
		return
	}
	testenv.RequireRoot(t)
	setpriv := testenv.RequireCmd(t, "setpriv")
	bin := buildSampler(t)
	// linerate's own cgroup, root's and 0755, as systemd delegates one.
	parent, err := external.CgroupParent()
	if err != nil {
		t.Fatal(err)
	}
	own := filepath.Join(parent, "linerate-unit-test."+strings.ReplaceAll(t.Name(), "/", "_")+"."+strconv.Itoa(os.Getpid()))
	if err := os.Mkdir(own, 0o755); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(own)
	fd, err := unix.Open(own, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	cmd := exec.Command(setpriv, "--bounding-set="+unitCaps(t), "--inh-caps=-all", "--",
		os.Args[0], "-test.run=^TestUnderUnitCapabilities$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "LINERATE_UNIT_CAPS_PLUGIN="+bin)
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestUnderUnitCapabilities") {
		t.Fatalf("under the unit's capabilities (%s): %v\n%s", unitCaps(t), err, out)
	}
}

// unitCapsChild is the test in the process setpriv started.
func unitCapsChild(t *testing.T, bin string) {
	st := procStatus(t, os.Getpid())
	t.Logf("CapEff %s CapBnd %s", st["CapEff"], st["CapBnd"])
	defer external.SetDefaultUser("nobody")()
	e := enginetest.Start(t, config(bin, 0, "10kpps", `# user = default`), appliance.Options{})
	counter := func(name string) uint64 { return enginetest.Counter(e.Snapshot(), "sampler", name) }
	waitFor(t, "results from the plugin", time.Minute, func() bool { return counter("returned") > 100 })
	e.Stop()
	for name, used := range e.InUse() {
		if used != 0 {
			t.Errorf("pool %q has %d buffers in use", name, used)
		}
	}
}
