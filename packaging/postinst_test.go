package packaging

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/linerate/linerate/internal/testenv"
)

// TestPostinstCreatesPluginUser runs the postinst's configure twice in a
// mount namespace whose /etc is a copy: the plugins' user and group exist
// after it (a system user, no login shell), and a second run (an upgrade)
// changes nothing. The host's /etc is not touched.
func TestPostinstCreatesPluginUser(t *testing.T) {
	testenv.RequireRoot(t)
	unshare := testenv.RequireCmd(t, "unshare")
	testenv.RequireCmd(t, "adduser")
	postinst, err := filepath.Abs("postinst")
	if err != nil {
		t.Fatal(err)
	}
	etc := filepath.Join(t.TempDir(), "etc")
	if out, err := exec.Command("cp", "-a", "/etc", etc).CombinedOutput(); err != nil {
		t.Fatalf("cp /etc: %v\n%s", err, out)
	}
	script := `set -e
mount --bind "$1" /etc
sh "$2" configure
getent passwd linerate-plugin
getent group linerate-plugin
cp /etc/passwd "$1.before"
sh "$2" configure 0.1.0
cmp /etc/passwd "$1.before"
`
	cmd := exec.Command(unshare, "--mount", "--propagation", "private", "sh", "-c", script, "sh", etc, postinst)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("postinst in a namespace: %v\n%s", err, out)
	}
	var pw, gr string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "linerate-plugin:x:") && strings.Count(l, ":") == 6 {
			pw = l
		} else if strings.HasPrefix(l, "linerate-plugin:x:") {
			gr = l
		}
	}
	f := strings.Split(pw, ":")
	if uid, _ := strconv.Atoi(f[min(2, len(f)-1)]); len(f) != 7 || uid == 0 || uid >= 1000 || f[5] != "/nonexistent" ||
		!strings.HasSuffix(f[6], "nologin") || gr == "" {
		t.Errorf("passwd %q, group %q\n%s", pw, gr, out)
	}
}

// TestMaintainerScriptsSystemd runs the maintainer scripts as dpkg would, in
// a mount namespace whose /etc, /var/lib/systemd and unit directory are
// copies (the host's are not touched), and checks what deb-systemd-helper
// leaves after each step, as dh_installsystemd's snippets do: a first
// install enables the unit and tracks it; an upgrade keeps it enabled, and
// keeps it disabled when the admin disabled it; a removal masks it; a purge
// removes every symlink and every state file it made.
func TestMaintainerScriptsSystemd(t *testing.T) {
	testenv.RequireRoot(t)
	unshare := testenv.RequireCmd(t, "unshare")
	testenv.RequireCmd(t, "adduser")
	testenv.RequireCmd(t, "deb-systemd-helper")
	dir := t.TempDir()
	for _, s := range []string{"postinst", "prerm", "postrm"} {
		copyFile(t, s, filepath.Join(dir, s))
	}
	etc, state, units := filepath.Join(dir, "etc"), filepath.Join(dir, "state"), filepath.Join(dir, "units")
	if out, err := exec.Command("cp", "-a", "/etc", etc).CombinedOutput(); err != nil {
		t.Fatalf("cp /etc: %v\n%s", err, out)
	}
	// The host's own traces of a linerate unit, if an earlier install left
	// any, are not this test's.
	if out, err := exec.Command("sh", "-c", `find "$1/systemd" -name 'linerate*' -exec rm -rf {} +`, "sh", etc).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, d := range []string{state, units} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	copyFile(t, "linerate.service", filepath.Join(units, "linerate.service"))
	if err := os.Chmod(filepath.Join(units, "linerate.service"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Each step prints "== step" and the linerate files under /etc/systemd
	// and /var/lib/systemd after it, as "path" or "path -> target".
	script := `set -e
mount --bind "$1" /etc
mount --bind "$2" /var/lib/systemd
mount --bind "$3" /lib/systemd/system
cd "$4"
# As dpkg runs them: deb-systemd-helper refuses to run otherwise.
export DPKG_MAINTSCRIPT_PACKAGE=linerate
run() { DPKG_MAINTSCRIPT_NAME=$1 sh "$@"; }
show() {
	echo "== $1"
	find /etc/systemd /var/lib/systemd -name 'linerate*' | sort | while read -r f; do
		if [ -L "$f" ]; then echo "$f -> $(readlink "$f")"; else echo "$f"; fi
	done
}
run postinst configure; show install
run prerm upgrade 0.1.0-1; run postinst configure 0.1.0-1; show upgrade
rm /etc/systemd/system/multi-user.target.wants/linerate.service
run prerm upgrade 0.1.0-1; run postinst configure 0.1.0-1; show upgrade-disabled
run prerm remove; run postrm remove; show remove
run postrm purge; show purge
run postinst configure; show reinstall
run prerm remove; run postrm remove; run postrm purge; show purge-again
`
	out, err := exec.Command(unshare, "--mount", "--propagation", "private", "sh", "-c", script, "sh", etc, state, units, dir).CombinedOutput()
	if err != nil {
		t.Fatalf("maintainer scripts in a namespace: %v\n%s", err, out)
	}
	steps := map[string][]string{}
	step := ""
	for _, l := range strings.Split(string(out), "\n") {
		if s, ok := strings.CutPrefix(l, "== "); ok {
			step = s
			steps[step] = []string{}
		} else if strings.HasPrefix(l, "/") && step != "" {
			// (the scripts' messages on stderr are not files)
			steps[step] = append(steps[step], l)
		}
	}
	const (
		wants = "/etc/systemd/system/multi-user.target.wants/linerate.service -> /lib/systemd/system/linerate.service"
		mask  = "/etc/systemd/system/linerate.service -> /dev/null"
	)
	has := func(step, line string) bool {
		for _, l := range steps[step] {
			if l == line {
				return true
			}
		}
		return false
	}
	tracked := func(step string) bool {
		for _, l := range steps[step] {
			if strings.HasPrefix(l, "/var/lib/systemd/deb-systemd-helper-enabled/") {
				return true
			}
		}
		return false
	}
	for _, c := range []struct {
		step string
		ok   bool
		what string
	}{
		{"install", has("install", wants), "a first install enables the unit"},
		{"install", tracked("install"), "a first install tracks the unit's state"},
		{"upgrade", has("upgrade", wants), "an upgrade keeps the unit enabled"},
		{"upgrade-disabled", !has("upgrade-disabled", wants), "an upgrade keeps a disabled unit disabled"},
		{"remove", has("remove", mask), "a removal masks the unit"},
		{"purge", len(steps["purge"]) == 0, "a purge leaves no symlink and no state"},
		{"reinstall", has("reinstall", wants), "an install after a purge enables the unit again"},
		{"purge-again", len(steps["purge-again"]) == 0, "a second purge leaves nothing either"},
	} {
		if _, ran := steps[c.step]; !ran || !c.ok {
			t.Errorf("%s: after %s: %v", c.what, c.step, steps[c.step])
		}
	}
	if t.Failed() {
		t.Logf("the scripts' run:\n%s", out)
	}
}
