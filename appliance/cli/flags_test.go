package cli

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestParseFlags: flags are read wherever they stand; "--" ends them unless it
// is a flag's value.
func TestParseFlags(t *testing.T) {
	for _, c := range []struct {
		args       []string
		rest       []string
		ctl, stage string
		json       bool
	}{
		{[]string{"get", "2001:db8::1", "--control", "unix:/x"}, []string{"get", "2001:db8::1"}, "unix:/x", "", false},
		{[]string{"--control=unix:/x", "get", "2001:db8::1"}, []string{"get", "2001:db8::1"}, "unix:/x", "", false},
		{[]string{"add", "--json", "::/0", "via", "fe80::1", "-control", "unix:/y"}, []string{"add", "::/0", "via", "fe80::1"}, "unix:/y", "", true},
		{[]string{"a", "--", "--json", "b"}, []string{"a", "--json", "b"}, "", "", false},
		{[]string{"--stage", "--", "x", "--json"}, []string{"x"}, "", "--", true},
		{[]string{"-", "--json"}, []string{"-"}, "", "", true},
		{nil, nil, "", "", false},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		ctl := fs.String("control", "", "")
		stage := fs.String("stage", "", "")
		asJSON := fs.Bool("json", false, "")
		rest, err := parseFlags(fs, c.args)
		if err != nil || !slices.Equal(rest, c.rest) || *ctl != c.ctl || *stage != c.stage || *asJSON != c.json {
			t.Errorf("%q: rest %q control %q stage %q json %v, %v", c.args, rest, *ctl, *stage, *asJSON, err)
		}
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(&strings.Builder{})
	if _, err := parseFlags(fs, []string{"get", "x", "--bogus"}); err == nil {
		t.Error("an unknown flag after the arguments was accepted")
	}
}

// TestCommandsTakeFlagsAnywhere runs the binary: each command reads its flags
// after its arguments as well as before.
func TestCommandsTakeFlagsAnywhere(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "ok.toml")
	if err := os.WriteFile(cfg, []byte(`version = 1
[engine]
pin = false
[control]
listen = ""
[[ports]]
name = "m0"
driver = "mem"
[[pipelines]]
name = "p"
rx = ["m0"]
[[pipelines.stages]]
kind = "sink"
`), 0o644); err != nil {
		t.Fatal(err)
	}
	nowhere := "unix:" + filepath.Join(t.TempDir(), "none.sock")
	for _, c := range []struct {
		args []string
		code int
		want string // in stdout or stderr
	}{
		{[]string{"validate", cfg}, 0, "ok"},
		{[]string{"validate", "-c", cfg, "extra"}, 2, "Usage: linerate validate"},
		{[]string{"run", cfg}, 2, `unexpected argument "` + cfg + `"`},
		{[]string{"run", "-c", cfg, "--live=false", "--duration", "10ms", "--log-level", "warn"}, 0, ""},
		{[]string{"status", "--timeout", "100ms", "--control", nowhere}, 1, "cannot reach"},
		{[]string{"route", "get", "2001:db8::1", "--control", nowhere, "--timeout=100ms"}, 1, "cannot reach"},
		{[]string{"neighbor", "list", "dev", "eth0", "--timeout=100ms", "--control", nowhere}, 1, "cannot reach"},
		{[]string{"stamp", "list", "--control", nowhere, "--timeout=100ms"}, 1, "cannot reach"},
		{[]string{"stamp", "--control", nowhere, "--timeout=100ms", "stop", "--reflector", "3"}, 1, "cannot reach"},
		{[]string{"route", "get", "2001:db8::1", "--frob"}, 2, "flag provided but not defined: -frob"},
		{[]string{"doctor", "--wide", "-c", cfg}, 0, "0 fail"},
		{[]string{"doctor", "-c", cfg, "extra"}, 2, `unexpected argument "extra"`},
	} {
		out, errs, code := runCLI(t, c.args...)
		if code != c.code || !strings.Contains(out+errs, c.want) {
			t.Errorf("linerate %s: exit %d\n%s%s", strings.Join(c.args, " "), code, out, errs)
		}
	}
}
