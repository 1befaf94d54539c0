package external

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/linerate/linerate/internal/testenv"
)

// TestResolvePlugin: symlinks (relative, absolute, through ..) are followed
// and every directory on the way is checked; a sticky directory others may
// write (as /tmp) passes only an entry of root's.
func TestResolvePlugin(t *testing.T) {
	testenv.RequireRoot(t)
	base := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Chmod(base, 0o755))
	must(os.MkdirAll(filepath.Join(base, "a", "b"), 0o755))
	must(os.WriteFile(filepath.Join(base, "a", "b", "bin"), []byte("x"), 0o755))
	must(os.Symlink("b/bin", filepath.Join(base, "a", "rel")))
	must(os.Symlink("../b/bin", filepath.Join(base, "a", "b", "up")))
	must(os.Symlink(filepath.Join(base, "a", "rel"), filepath.Join(base, "abs")))
	sticky := filepath.Join(base, "tmp")
	must(os.Mkdir(sticky, 0o777))
	must(os.Chmod(sticky, os.ModeSticky|0o777))
	must(os.Mkdir(filepath.Join(sticky, "root"), 0o755))
	must(os.WriteFile(filepath.Join(sticky, "root", "bin"), []byte("x"), 0o755))
	must(os.Mkdir(filepath.Join(sticky, "user"), 0o755))
	must(os.Chown(filepath.Join(sticky, "user"), 65534, -1))
	must(os.WriteFile(filepath.Join(sticky, "user", "bin"), []byte("x"), 0o755))
	open := filepath.Join(base, "open")
	must(os.Mkdir(open, 0o777))
	must(os.Chmod(open, 0o777))
	must(os.WriteFile(filepath.Join(open, "bin"), []byte("x"), 0o755))
	real := filepath.Join(base, "a", "b", "bin")
	for _, c := range []struct{ path, want, err string }{
		{real, real, ""},
		{filepath.Join(base, "a", "rel"), real, ""},
		{filepath.Join(base, "a", "b", "up"), real, ""},
		{filepath.Join(base, "abs"), real, ""},
		{filepath.Join(sticky, "root", "bin"), filepath.Join(sticky, "root", "bin"), ""},
		{filepath.Join(sticky, "user", "bin"), "", "which others may write, must be root's (it is uid 65534)"},
		{filepath.Join(open, "bin"), "", open + " must be root's and writable only by it, or sticky"},
		{"relative/bin", "", "absolute"},
	} {
		got, err := resolvePlugin(c.path)
		if got != c.want || (c.err == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: %q, %v; want %q, %q", c.path, got, err, c.want, c.err)
		}
	}
}
