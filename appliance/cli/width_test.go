package cli

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestOutputFits runs the embedded lab with the binary and every command that
// prints tables against it: each line of their output, the run summary with
// its STAMP report included, fits 100 columns; with --wide each row of a
// table is one line. route and neighbor are TestRouteOutputFits's; plugins
// with a plugin running is TestPluginsCommand's.
func TestOutputFits(t *testing.T) {
	dir := t.TempDir()
	env := append(os.Environ(), "LINERATE_CONTROL=unix:"+filepath.Join(dir, "ctl.sock"))
	run := exec.Command(linerateBin, "run", "--live=false", "--log-level", "warn")
	run.Env = env
	var summary, logs bytes.Buffer
	run.Stdout, run.Stderr = &summary, &logs
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- run.Wait() }()
	defer func() {
		if run.ProcessState == nil {
			_ = run.Process.Kill()
			<-exited
		}
	}()
	cli := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(linerateBin, args...)
		cmd.Env = env
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("linerate %s: %v\n%s", strings.Join(args, " "), err, errb.String())
		}
		return out.String()
	}
	// The lab answers once its control socket is up.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		cmd := exec.Command(linerateBin, "status")
		cmd.Env = env
		if cmd.Run() == nil {
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("the lab exited: %v\n%s", err, logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the lab did not answer within a minute:\n%s", logs.String())
		}
	}
	for _, args := range [][]string{{"status"}, {"status", "--stats"}, {"stamp", "list"}, {"stages"}, {"plugins"}} {
		checkWidth(t, strings.Join(args, " "), cli(args...))
	}
	// The session's records, once it has some.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		out := cli("stamp", "results", "1", "--records", "--max", "20")
		checkWidth(t, "stamp results", out)
		if strings.Contains(out, "SSID") || time.Now().After(deadline) {
			break
		}
	}
	// --wide: a stage's counters on its row.
	if wide := cli("status", "--stats", "--wide"); !hasLine(wide, "ioam-encap", "profile_lab=", "export_dropped=") {
		t.Errorf("status --stats --wide has no line with all of ioam-encap's counters:\n%s", wide)
	}
	_ = run.Process.Signal(syscall.SIGINT)
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("the lab exited with %v:\n%s", err, logs.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("the lab did not stop on SIGINT")
	}
	out := summary.String()
	for _, want := range []string{"STAMP session 1", "linerate ran for", "DROP REASON", "lab: ", "HISTOGRAM",
		"Expected drops", "  link_loss: the loss a link stage emulates"} {
		if !strings.Contains(out, want) {
			t.Errorf("the run summary has no %q:\n%s", want, out)
		}
	}
	checkWidth(t, "the lab's run summary", out)
}

// hasLine reports whether a line of out has every one of parts.
func hasLine(out string, parts ...string) bool {
	for _, l := range strings.Split(out, "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(l, p)
		}
		if all {
			return true
		}
	}
	return false
}

// TestRouteOutputFits: route and neighbor on a routed engine with full-length
// IPv6 addresses fit 100 columns.
func TestRouteOutputFits(t *testing.T) {
	c := "--control=" + routedEngine(t)
	for _, args := range [][]string{
		{"add", "2001:db8:2:ffff:ffff:ffff:ffff:ff00/120", "via", "2001:db8:2::ffff:ffff:ffff:fff0"},
		{"add", "2001:db8:3::/48", "via", "2001:db8:2::2"},
	} {
		if code, out, errs := cli(routeCmd, append(args, c)...); code != 0 {
			t.Fatalf("route %v: %d %s %s", args, code, out, errs)
		}
	}
	if code, out, errs := cli(neighborCmd, c, "add", "2001:db8:2::ffff:ffff:ffff:fff1", "lladdr", "02:00:00:00:02:09", "dev", "r1"); code != 0 {
		t.Fatalf("neighbor add: %d %s %s", code, out, errs)
	}
	for _, cmd := range []struct {
		name string
		run  func([]string, *bytes.Buffer, *bytes.Buffer) int
	}{{"route", routeCmd}, {"neighbor", neighborCmd}} {
		code, out, errs := cli(cmd.run, c)
		if code != 0 {
			t.Fatalf("%s: %d %s", cmd.name, code, errs)
		}
		checkWidth(t, cmd.name, out)
		if !strings.Contains(out, "2001:db8:2:0:ffff:ffff:ffff:ff") {
			t.Errorf("%s lost the long address:\n%s", cmd.name, out)
		}
	}
}

// Commands and how their output is held to 100 columns: tableCommands are
// run by TestOutputFits, TestRouteOutputFits, (test) TestTestCommand or
// (doctor) TestDoctorOutput and TestDoctorUnprivileged; plainCommands print no
// table (a line, a config file, JSON, key files).
var (
	tableCommands = map[string]bool{"run": true, "status": true, "stamp": true, "stages": true, "route": true, "neighbor": true, "plugins": true, "test": true,
		"doctor": true}
	plainCommands = map[string]string{
		"reload":   "a line, then one line a changed stage or port",
		"validate": "one line: ok, or the errors with file:line",
		"config":   "a config file: the lab or the service's inert one",
		"ioam":     "pot-keys writes key files and names them",
		"version":  "one line",
	}
)

// TestEveryCommandChecked: every command the binary lists is one whose
// output a width test runs, or one that prints no table; a command added
// later fails here until it is one or the other. Every command's and
// subcommand's --help, to the deepest (helpTree: stamp create sender), fits
// 100 columns.
func TestEveryCommandChecked(t *testing.T) {
	tree := helpTree(t)
	if len(tree[0].subs) < 8 {
		t.Fatalf("linerate help lists %d commands:\n%s", len(tree[0].subs), tree[0].help)
	}
	for _, c := range tree[0].subs {
		if !tableCommands[c] && plainCommands[c] == "" {
			t.Errorf("command %q: add it to TestOutputFits (it prints a table) or to plainCommands", c)
		}
	}
	for _, n := range tree {
		checkWidth(t, strings.Join(append([]string{"linerate"}, n.path...), " ")+" --help", n.help)
	}
}

// helpCommands lists the first words of a help text's "Commands:" block.
func helpCommands(text string) []string {
	var out []string
	in := false
	for _, l := range strings.Split(text, "\n") {
		switch {
		case strings.HasPrefix(l, "Commands:"):
			in = true
		case in && strings.TrimSpace(l) == "":
			in = false
		case in && strings.HasPrefix(l, "  ") && !strings.HasPrefix(l, "   "):
			if f := strings.Fields(l); len(f) > 0 && !slices.Contains(out, f[0]) {
				out = append(out, f[0])
			}
		}
	}
	return out
}
