package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
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
