package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
)

// TestCompletion builds linerate, writes its completion and man page, and
// completes an empty word after every command the help tree has, as bash
// does on TAB: a command with subcommands offers each of them (after
// linerate stamp create: sender and reflector), and every command offers
// its flags. The man page has a section for each command of its own.
func TestCompletion(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "linerate")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/linerate/linerate/appliance/cmd/linerate").CombinedOutput(); err != nil {
		t.Fatalf("build linerate: %v\n%s", err, out)
	}
	if err := run(bin, dir); err != nil {
		t.Fatal(err)
	}
	tree, err := walk(bin, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	complete := func(words ...string) []string {
		t.Helper()
		script := `source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _linerate; printf '%s\n' "${COMPREPLY[@]}"`
		out, err := exec.Command("bash", append([]string{"-c", script, "bash", filepath.Join(dir, "linerate.bash"), "linerate"}, words...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("complete %v: %v\n%s", words, err, out)
		}
		return strings.Fields(string(out))
	}
	man, err := os.ReadFile(filepath.Join(dir, "linerate.1"))
	if err != nil {
		t.Fatal(err)
	}
	withSubs := 0
	for _, n := range tree {
		got := complete(append(slices.Clone(n.path), "")...)
		for _, w := range append(slices.Clone(n.subs), n.flags...) {
			if !slices.Contains(got, w) {
				t.Errorf("linerate %s <TAB> offers %v: no %s", strings.Join(n.path, " "), got, w)
			}
		}
		if len(n.subs) > 0 {
			withSubs++
		}
		if len(n.path) > 0 && !n.verb && !strings.Contains(string(man), ".SS "+strings.Join(n.path, " ")+"\n") {
			t.Errorf("the man page has no section for %s", strings.Join(n.path, " "))
		}
	}
	// The commands the help lists subcommands for, the deepest included.
	for _, p := range []string{"", "config", "route", "neighbor", "stamp", "stamp create", "ioam"} {
		if !slices.ContainsFunc(tree, func(n *node) bool { return strings.Join(n.path, " ") == p && len(n.subs) > 0 }) {
			t.Errorf("linerate %s: no subcommands in the tree", p)
		}
	}
	if got := complete("stamp", "create", ""); !slices.Equal(got, []string{"reflector", "sender"}) && !slices.Equal(got, []string{"sender", "reflector"}) {
		t.Errorf("linerate stamp create <TAB>: %v, want sender and reflector", got)
	}
	if got := complete("route", "--control", "unix:/x", "ad"); !slices.Equal(got, []string{"add"}) {
		t.Errorf("linerate route --control unix:/x ad<TAB>: %v, want add", got)
	}
	t.Logf("%d commands, %d with subcommands", len(tree), withSubs)
}

// internalEnv are the LINERATE_* variables the code reads that are no
// user's to set, and why: the man page leaves them out.
var internalEnv = map[string]string{
	"LINERATE_PLUGIN":       "go-plugin's handshake cookie: linerate sets it for the plugins it starts",
	"LINERATE_KERNEL_SKIPS": "make test's file of kernel skips (internal/testenv)",
}

var manBuild struct {
	sync.Once
	man string
	err error
}

// manPage builds linerate once and returns the man page mkdocs writes.
func manPage(t *testing.T) string {
	t.Helper()
	manBuild.Do(func() {
		dir, err := os.MkdirTemp("", "mkdocs")
		if err != nil {
			manBuild.err = err
			return
		}
		defer os.RemoveAll(dir)
		bin := filepath.Join(dir, "linerate")
		if out, err := exec.Command("go", "build", "-o", bin, "github.com/linerate/linerate/appliance/cmd/linerate").CombinedOutput(); err != nil {
			manBuild.err = fmt.Errorf("build linerate: %v\n%s", err, out)
			return
		}
		if manBuild.err = run(bin, dir); manBuild.err != nil {
			return
		}
		b, err := os.ReadFile(filepath.Join(dir, "linerate.1"))
		manBuild.man, manBuild.err = string(b), err
	})
	if manBuild.err != nil {
		t.Fatal(manBuild.err)
	}
	return manBuild.man
}

// manSection is the text of section name of the man page man.
func manSection(t *testing.T, man, name string) string {
	t.Helper()
	_, rest, ok := strings.Cut(man, "\n.SH "+name+"\n")
	if !ok {
		t.Fatalf("the man page has no %s section", name)
	}
	sec, _, _ := strings.Cut(rest, "\n.SH ")
	return sec
}

// TestManEnvironment: every LINERATE_* variable the code (not its tests)
// names is in the man page's ENVIRONMENT section, or is internal.
func TestManEnvironment(t *testing.T) {
	env := manSection(t, manPage(t), "ENVIRONMENT")
	files, err := exec.Command("git", "-C", "../..", "ls-files", "*.go").Output()
	if err != nil {
		t.Skipf("git ls-files: %v", err)
	}
	re := regexp.MustCompile(`"(LINERATE_[A-Z0-9_]+)"`)
	found := map[string]string{}
	for _, f := range strings.Fields(string(files)) {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(filepath.Join("../..", f))
		if err != nil {
			continue // gone from the work tree
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			found[m[1]] = f
		}
	}
	if found["LINERATE_CONTROL"] == "" {
		t.Fatalf("no LINERATE_CONTROL in the code: the walk is broken (%v)", found)
	}
	for v, f := range found {
		in := strings.Contains(env, "\n.B "+v+"\n")
		if _, internal := internalEnv[v]; !in && !internal {
			t.Errorf("%s (%s) is neither in the man page's ENVIRONMENT nor internal", v, f)
		} else if in && internal {
			t.Errorf("%s is in the man page and internal", v)
		}
	}
}

// TestManExitStatus: every exit status a command returns (a literal
// `return N` or `code = N` in appliance/cli) is in the man page's EXIT
// STATUS section, and the section names no other.
func TestManExitStatus(t *testing.T) {
	sec := manSection(t, manPage(t), "EXIT STATUS")
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile(`\n\.B (\d+)\n`).FindAllStringSubmatch("\n"+sec, -1) {
		documented[m[1]] = true
	}
	files, _ := filepath.Glob("../../appliance/cli/*.go")
	re := regexp.MustCompile(`(?m)(?:^\s*return|\bcode\s*:?=)\s+(\d+)\s*$`)
	used := map[string]string{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			used[m[1]] = filepath.Base(f)
		}
	}
	if len(used) < 3 {
		t.Fatalf("exit statuses in appliance/cli: %v: the walk is broken", used)
	}
	for c, f := range used {
		if !documented[c] {
			t.Errorf("exit status %s (%s) is not in the man page's EXIT STATUS", c, f)
		}
	}
	for c := range documented {
		if used[c] == "" {
			t.Errorf("the man page's EXIT STATUS names %s, which no command returns", c)
		}
	}
}
