package packaging

import (
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
