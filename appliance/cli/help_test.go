package cli

import (
	"slices"
	"strings"
	"testing"
)

// helpNode is a command of the tree the help describes.
type helpNode struct {
	path []string // the words after linerate
	help string   // its --help, stdout
	subs []string // the commands its help lists
}

// helpTree walks the help as packaging/mkdocs does for the man page and the
// completion: the top-level help's "Commands:" block, and each command's, to
// any depth. A word whose help is its parent's (route's list, get …) is a
// verb of the parent's, listed, not walked. It fails on a help that is not
// stdout alone with exit 0.
func helpTree(t *testing.T) []helpNode {
	t.Helper()
	var out []helpNode
	var walk func(path []string, parent string)
	walk = func(path []string, parent string) {
		h := checkHelp(t, path)
		n := helpNode{path: path, help: h}
		i := len(out)
		out = append(out, n)
		for _, s := range helpCommands(h) {
			sub := append(slices.Clone(path), s)
			sh := checkHelp(t, sub)
			out[i].subs = append(out[i].subs, s)
			if sh == h || sh == parent || len(sub) > 4 {
				out = append(out, helpNode{path: sub, help: sh})
				continue
			}
			walk(sub, h)
		}
	}
	walk(nil, "")
	return out
}

// checkHelp runs linerate path --help and path -h: help goes to stdout,
// nothing to stderr, and the exit is 0, for every command alike.
func checkHelp(t *testing.T, path []string) string {
	t.Helper()
	var first string
	for _, h := range []string{"--help", "-h"} {
		args := append(slices.Clone(path), h)
		out, errs, code := runCLI(t, args...)
		if code != 0 || out == "" || errs != "" {
			t.Errorf("linerate %s: exit %d, %d bytes on stdout, stderr %q", strings.Join(args, " "), code, len(out), errs)
		}
		if first == "" {
			first = out
		}
	}
	return first
}

// TestHelpRule: one rule for every command and subcommand, to the deepest
// (stamp create sender): --help and -h print the help on stdout, nothing on
// stderr, and exit 0. The walk reaches every command the issue named, and
// each command with subcommands lists them in a "Commands:" block, which is
// what the completion offers (packaging/mkdocs's TestCompletion).
func TestHelpRule(t *testing.T) {
	tree := helpTree(t)
	seen := map[string]bool{}
	for _, n := range tree {
		seen[strings.Join(n.path, " ")] = true
	}
	for _, want := range []string{"", "run", "validate", "doctor", "config", "config default", "config service",
		"status", "reload", "route", "route list", "route get", "route add", "route replace", "route del",
		"neighbor", "neighbor list", "neighbor add", "neighbor del", "stamp", "stamp list", "stamp create",
		"stamp create sender", "stamp create reflector", "stamp start", "stamp stop", "stamp destroy",
		"stamp results", "stamp watch", "ioam", "ioam pot-keys", "plugins", "test", "stages", "version"} {
		if !seen[want] {
			t.Errorf("the help's Commands: blocks do not reach %q", "linerate "+want)
		}
	}
	// The help command and a usage error: help on stdout, the error's usage
	// on stderr with exit 2.
	if out, errs, code := runCLI(t, "help", "stamp", "create"); code != 0 || !strings.Contains(out, "sender") || errs != "" {
		t.Errorf("help stamp create: exit %d %q %q", code, out, errs)
	}
	for _, args := range [][]string{{}, {"config"}, {"config", "frob"}, {"stamp", "create"}, {"version", "x"}} {
		if out, errs, code := runCLI(t, args...); code != 2 || out != "" || !strings.Contains(errs, "Usage") {
			t.Errorf("linerate %v: exit %d, stdout %q, stderr %q: want 2, the usage on stderr", args, code, out, errs)
		}
	}
}
