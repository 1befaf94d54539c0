package cli

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/linerate/linerate/internal/testenv"
)

// reloadLab is a generator, a link with loss and a sink, with the control API
// on listen.
func reloadLab(listen, loss, extra string) string {
	return `version = 1
[control]
listen = ` + listen + `
[[ports]]
name = "m0"
driver = "mem"
` + extra + `
[[pipelines]]
name = "p"
cpus = [0]
[[pipelines.stages]]
kind = "generator"
ip_version = 6
src = "2001:db8::1"
dst = "2001:db8::2"
rate = "20kpps"
[[pipelines.stages]]
kind = "link"
name = "wan"
loss = ` + loss + `
[[pipelines.stages]]
kind = "sink"
name = "sink"
`
}

// TestSIGHUPReloads: linerate run reads its file again on SIGHUP. A new loss
// on a link applies; a new port is refused, named in the log, and changes
// nothing.
func TestSIGHUPReloads(t *testing.T) {
	cfg := func(loss, extra string) string { return reloadLab(`""`, loss, extra) }
	path := filepath.Join(t.TempDir(), "lab.toml")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(cfg("0", ""))
	cmd := exec.Command(linerateBin, "run", "-c", path, "--live=false", "--wide")
	var out, log testenv.Output
	cmd.Stdout, cmd.Stderr = &out, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()
	waitFor := func(what string) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for !strings.Contains(log.String(), what) {
			if time.Now().After(deadline) {
				t.Fatalf("no %q in the log within a minute:\n%s", what, log.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFor("msg=running")
	write(cfg("0", "[[ports]]\nname = \"m9\"\ndriver = \"mem\""))
	_ = cmd.Process.Signal(syscall.SIGHUP)
	waitFor("reload refused; nothing changed")
	if !strings.Contains(log.String(), "ports[1]") {
		t.Errorf("the refusal does not name the key:\n%s", log.String())
	}
	write(cfg("1", ""))
	_ = cmd.Process.Signal(syscall.SIGHUP)
	waitFor("msg=reloaded")
	// Let the lossy link take some packets, then stop.
	time.Sleep(300 * time.Millisecond)
	_ = cmd.Process.Signal(syscall.SIGINT)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("run: %v\n%s\n%s", err, out.String(), log.String())
	}
	if !strings.Contains(out.String(), "link_loss") {
		t.Errorf("no link_loss after the reload to loss = 1:\n%s", out.String())
	}
}

// TestReloadCommand: linerate reload asks a running appliance over the control
// API: --check says what would change and changes nothing, a file that needs a
// restart is refused by key with exit status 1, and a good file applies.
func TestReloadCommand(t *testing.T) {
	dir := t.TempDir()
	sock := "unix:" + filepath.Join(dir, "ctl.sock")
	path := filepath.Join(dir, "lab.toml")
	write := func(loss, extra string) {
		if err := os.WriteFile(path, []byte(reloadLab(strconv.Quote(sock), loss, extra)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("0", "")
	cmd := exec.Command(linerateBin, "run", "-c", path, "--live=false")
	var out, log testenv.Output
	cmd.Stdout, cmd.Stderr = &out, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()
	reload := func(args ...string) (string, string, int) {
		var o, e bytes.Buffer
		code := runReload(append(args, "--control", sock, "--timeout", "30s"), &o, &e)
		return o.String(), e.String(), code
	}
	// The control socket comes up after the engine starts.
	deadline := time.Now().Add(time.Minute)
	for {
		if _, _, code := reload("--check"); code == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the control API did not come up within a minute:\n%s", log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}

	write("1", "")
	if o, e, code := reload("--check"); code != 0 || !strings.HasPrefix(o, "a reload would change 1 stage(s) of "+path+":\n  p/wan\n") {
		t.Errorf("reload --check: exit %d\n%s%s", code, o, e)
	}
	write("1", "[[ports]]\nname = \"m9\"\ndriver = \"mem\"")
	if o, e, code := reload(); code != 1 || !strings.Contains(e, "ports[1]: changes only with a restart") {
		t.Errorf("reload of a new port: exit %d, want 1 and the key named\n%s%s", code, o, e)
	}
	write("1", "")
	if o, e, code := reload("--json"); code != 0 || !strings.Contains(o, `"p/wan"`) {
		t.Errorf("reload --json: exit %d\n%s%s", code, o, e)
	}
	// The link now loses everything: wait for a counted link_loss, then stop.
	deadline = time.Now().Add(time.Minute)
	for {
		var o, e bytes.Buffer
		runStatus([]string{"--control", sock, "--json"}, &o, &e)
		if strings.Contains(o.String(), "link_loss") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no link_loss within a minute of the reload:\n%s", log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = cmd.Process.Signal(syscall.SIGINT)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("run: %v\n%s\n%s", err, out.String(), log.String())
	}
	if !strings.Contains(log.String(), "stages=p/wan") {
		t.Errorf("the log does not say which stages reloaded:\n%s", log.String())
	}
}

// TestExecReload: the systemd unit's ExecReload, run as systemd runs it
// against the appliance, exits non-zero when the reload is refused, naming
// the key — so 'systemctl reload' fails — and 0 when it applies.
func TestExecReload(t *testing.T) {
	unit, err := os.ReadFile("../../packaging/linerate.service")
	if err != nil {
		t.Fatal(err)
	}
	var argv []string
	for l := range strings.Lines(string(unit)) {
		if v, ok := strings.CutPrefix(l, "ExecReload="); ok {
			argv = strings.Fields(v)
		}
	}
	if len(argv) == 0 {
		t.Fatal("the unit has no ExecReload")
	}
	dir := t.TempDir()
	ctl := "unix:" + filepath.Join(dir, "ctl.sock")
	path := filepath.Join(dir, "lab.toml")
	write := func(extra string) {
		if err := os.WriteFile(path, []byte(reloadLab(`"unix:/run/linerate/linerate.sock"`, "0", extra)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("")
	// LINERATE_CONTROL moves the control socket, for run and the clients
	// alike, off the unit's /run/linerate.
	env := append(os.Environ(), "LINERATE_CONTROL="+ctl)
	cmd := exec.Command(linerateBin, "run", "-c", path, "--live=false")
	cmd.Env = env
	var log testenv.Output
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()
	deadline := time.Now().Add(time.Minute)
	for runReload([]string{"--check", "--control", ctl}, io.Discard, io.Discard) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the control API did not come up within a minute:\n%s", log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	execReload := func() (int, string) {
		t.Helper()
		a := slices.Clone(argv)
		for i, s := range a {
			a[i] = strings.NewReplacer("/usr/bin/linerate", linerateBin, "$MAINPID", strconv.Itoa(cmd.Process.Pid)).Replace(s)
		}
		c := exec.Command(a[0], a[1:]...)
		c.Env = env
		out, err := c.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), string(out)
		} else if err != nil {
			t.Fatalf("%s: %v", strings.Join(a, " "), err)
		}
		return 0, string(out)
	}
	write("[[ports]]\nname = \"m9\"\ndriver = \"mem\"")
	if code, out := execReload(); code == 0 || !strings.Contains(out, "ports[1]: changes only with a restart") {
		t.Errorf("ExecReload %q of a refused file: exit %d, want non-zero and the key named\n%s", argv, code, out)
	}
	write("")
	if code, out := execReload(); code != 0 {
		t.Errorf("ExecReload %q of a good file: exit %d\n%s", argv, code, out)
	}
	// The log is whole once run has exited.
	_ = cmd.Process.Signal(syscall.SIGINT)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("run: %v\n%s", err, log.String())
	}
	if n := strings.Count(log.String(), "level=ERROR"); n != 1 {
		t.Errorf("%d ERROR lines in the log, want 1 for the refusal:\n%s", n, log.String())
	}
}
