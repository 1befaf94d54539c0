package packaging

import (
	"compress/gzip"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/linerate/linerate/internal/testenv"
)

// unpacked is the packages `make deb` made, each unpacked once: the package
// name → its root.
func unpacked(t *testing.T) map[string]string {
	t.Helper()
	dpkgDeb := testenv.RequireCmd(t, "dpkg-deb")
	deb := buildDeb(t)
	debs := []string{deb}
	if exec.Command("pkg-config", "--exists", "libdpdk").Run() == nil {
		dd, _ := filepath.Glob("../bin/linerate-dpdk_*_amd64.deb")
		if len(dd) != 1 {
			t.Fatalf("make deb made %v, not one linerate-dpdk package", dd)
		}
		debs = append(debs, dd[0])
	} else if testenv.InCI() {
		t.Error("no libdpdk (make deps installs it): the linerate-dpdk package is not checked")
	}
	roots := map[string]string{}
	for _, d := range debs {
		name, _, _ := strings.Cut(filepath.Base(d), "_")
		root := t.TempDir()
		if out, err := exec.Command(dpkgDeb, "-x", d, root).CombinedOutput(); err != nil {
			t.Fatalf("dpkg-deb -x %s: %v\n%s", d, err, out)
		}
		roots[name] = root
	}
	return roots
}

// TestHardening: each packaged binary is built as Debian hardens its
// packages, as hardening-check and lintian read them: a position-
// independent executable (ELF type DYN, FLAGS_1 PIE), read-only relocations
// (a GNU_RELRO segment) bound at start (BIND_NOW), a non-executable stack;
// and the DPDK build's C, which uses libc's fortified functions where it
// can, calls their _chk variants.
func TestHardening(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the package: not in -short")
	}
	readelf := testenv.RequireCmd(t, "readelf")
	for name, root := range unpacked(t) {
		bin := filepath.Join(root, "usr/bin", name)
		hdr, err := exec.Command(readelf, "-hlWd", "--dyn-syms", bin).Output()
		if err != nil {
			t.Fatalf("readelf %s: %v", bin, err)
		}
		s := string(hdr)
		for _, c := range []struct{ what, re string }{
			{"PIE (ELF type DYN)", `Type:\s+DYN `},
			{"PIE (FLAGS_1)", `\(FLAGS_1\)\s+Flags:.*\bPIE\b`},
			{"RELRO (a GNU_RELRO segment)", `\bGNU_RELRO\b`},
			{"BIND_NOW", `\((FLAGS|FLAGS_1)\)\s+Flags:.*\b(BIND_NOW|NOW)\b`},
			{"a non-executable stack", `GNU_STACK\s+(\S+\s+){5}RW\s`},
		} {
			if !regexp.MustCompile(c.re).MatchString(s) {
				t.Errorf("%s: no %s", name, c.what)
			}
		}
		if name == "linerate-dpdk" && !regexp.MustCompile(`\b__\w+_chk\b`).MatchString(s) {
			t.Errorf("%s: calls no fortified function (__*_chk): built without _FORTIFY_SOURCE?", name)
		}
	}
}

// TestDependsFromLinkedLibraries: each package's Depends names, for every
// shared library its binary links (NEEDED), the package that ships that
// library (dpkg -S), with a version, as dpkg-shlibdeps writes it; and no
// library package the binary does not link.
func TestDependsFromLinkedLibraries(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the package: not in -short")
	}
	readelf := testenv.RequireCmd(t, "readelf")
	dpkg := testenv.RequireCmd(t, "dpkg")
	dpkgDeb := testenv.RequireCmd(t, "dpkg-deb")
	roots := unpacked(t)
	for name, root := range roots {
		bin := filepath.Join(root, "usr/bin", name)
		dyn, err := exec.Command(readelf, "-dW", bin).Output()
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, m := range regexp.MustCompile(`\(NEEDED\)\s+Shared library: \[(.+)\]`).FindAllStringSubmatch(string(dyn), -1) {
			// The package that ships the library, as the linker finds it
			// (dpkg knows it by the path it unpacked, /lib or /usr/lib).
			path := ldPath(t, m[1])
			real, _ := filepath.EvalSymlinks(path)
			out, _ := exec.Command(dpkg, "-S", path, real).Output() // exit 1 if one is not known
			p, _, ok := strings.Cut(string(out), ":")
			if !ok {
				t.Fatalf("%s: no package has %s (%s)", name, m[1], path)
			}
			want = append(want, p)
		}
		if len(want) == 0 {
			t.Fatalf("%s links no shared library", name)
		}
		sort.Strings(want)
		want = slices.Compact(want)
		debs, _ := filepath.Glob("../bin/" + name + "_*_amd64.deb")
		dep, err := exec.Command(dpkgDeb, "-f", debs[0], "Depends").Output()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{} // package → its version constraint
		for _, d := range strings.Split(strings.TrimSpace(string(dep)), ",") {
			d = strings.TrimSpace(d)
			p, v, _ := strings.Cut(d, " ")
			got[p] = v
		}
		for _, p := range want {
			if v, ok := got[p]; !ok || !strings.HasPrefix(v, "(>= ") {
				t.Errorf("%s links a library of %s: Depends has no %s (>= …): %s", name, p, p, dep)
			}
		}
		for p := range got {
			if strings.HasPrefix(p, "lib") && !slices.Contains(want, p) {
				t.Errorf("%s: Depends names %s, whose libraries the binary does not link: %s", name, p, dep)
			}
		}
	}
}

// TestChangelogVersion: the changelog a package ships starts with the
// package's own version.
func TestChangelogVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the package: not in -short")
	}
	dpkgDeb := testenv.RequireCmd(t, "dpkg-deb")
	roots := unpacked(t)
	for name, root := range roots {
		debs, _ := filepath.Glob("../bin/" + name + "_*_amd64.deb")
		v, err := exec.Command(dpkgDeb, "-f", debs[0], "Version").Output()
		if err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(filepath.Join(root, "usr/share/doc", name, "changelog.Debian.gz"))
		if err != nil {
			t.Fatal(err)
		}
		z, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(z)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		top, _, _ := strings.Cut(string(b), "\n")
		if want := "linerate (" + strings.TrimSpace(string(v)) + ") "; !strings.HasPrefix(top, want) {
			t.Errorf("%s %s: its changelog starts %q", name, strings.TrimSpace(string(v)), top)
		}
	}
}

var ldCache struct {
	sync.Once
	out []byte
	err error
}

// ldPath is where the dynamic linker finds library lib (ldconfig -p).
func ldPath(t *testing.T, lib string) string {
	t.Helper()
	ldCache.Do(func() { ldCache.out, ldCache.err = exec.Command("ldconfig", "-p").Output() })
	if ldCache.err != nil {
		t.Fatalf("ldconfig -p: %v", ldCache.err)
	}
	for _, l := range strings.Split(string(ldCache.out), "\n") {
		f := strings.Fields(l)
		if len(f) >= 4 && f[0] == lib && strings.Contains(l, "x86-64") {
			return f[len(f)-1]
		}
	}
	t.Fatalf("ldconfig -p knows no %s", lib)
	return ""
}
