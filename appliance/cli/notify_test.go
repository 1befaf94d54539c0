package cli

import (
	"bytes"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/linerate/linerate/internal/testenv"
)

// TestNotify is systemd's side of Type=notify: a unix datagram socket in
// NOTIFY_SOCKET. linerate run says READY=1 once its control API answers,
// RELOADING=1 and READY=1 around a SIGHUP, and STOPPING=1 on SIGTERM.
func TestNotify(t *testing.T) {
	dir := t.TempDir()
	sockPath := filepath.Join(dir, "notify")
	sock, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sockPath, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	ctl := "unix:" + filepath.Join(dir, "ctl.sock")
	cfg := filepath.Join(dir, "lr.toml")
	if err := os.WriteFile(cfg, []byte(`version = 1
[engine]
pin = false
[[ports]]
name = "null0"
driver = "null"
[[pipelines]]
name = "gen"
stages = [
  { kind = "generator", src = "2001:db8::1", dst = "2001:db8::2", rate = "1kpps" },
  { kind = "forward", port = "null0" },
]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	run := exec.Command(linerateBin, "run", "-c", cfg, "--live=false")
	run.Env = append(os.Environ(), "NOTIFY_SOCKET="+sockPath, "LINERATE_CONTROL="+ctl)
	var logs bytes.Buffer
	run.Stdout, run.Stderr = &logs, &logs
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- run.Wait() }()
	done := false
	defer func() {
		if !done {
			_ = run.Process.Kill()
			<-exited
		}
	}()
	next := func(want string) string {
		t.Helper()
		buf := make([]byte, 4096)
		_ = sock.SetReadDeadline(time.Now().Add(time.Minute))
		n, err := sock.Read(buf)
		if err != nil {
			t.Fatalf("waiting for %s: %v\n%s", want, err, logs.String())
		}
		got := string(buf[:n])
		if !strings.HasPrefix(got, want) {
			t.Fatalf("sd_notify: got %q, want %q first", got, want)
		}
		return got
	}
	ready := next("READY=1")
	if !strings.Contains(ready, "STATUS=running "+cfg) {
		t.Errorf("READY has no STATUS: %q", ready)
	}
	// Ready means the control API answers now, not eventually.
	st := exec.Command(linerateBin, "status", "--control", ctl)
	if out, err := st.CombinedOutput(); err != nil {
		t.Errorf("status right after READY=1: %v\n%s", err, out)
	}
	_ = run.Process.Signal(syscall.SIGHUP)
	next("RELOADING=1")
	next("READY=1")
	_ = run.Process.Signal(syscall.SIGTERM)
	next("STOPPING=1")
	select {
	case err := <-exited:
		done = true
		if err != nil {
			t.Fatalf("exit: %v\n%s", err, logs.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("no exit within a minute of SIGTERM")
	}
}

// Without NOTIFY_SOCKET sdNotify does nothing; with an abstract address it
// reaches the abstract socket.
func TestSdNotifyAbstract(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	if err := sdNotify("READY=1"); err != nil {
		t.Fatal(err)
	}
	name := "linerate-notify-test-" + filepath.Base(t.TempDir())
	sock, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: "\x00" + name, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	t.Setenv("NOTIFY_SOCKET", "@"+name)
	if err := sdNotify("READY=1"); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	_ = sock.SetReadDeadline(time.Now().Add(time.Minute))
	n, err := sock.Read(buf)
	if err != nil || string(buf[:n]) != "READY=1" {
		t.Fatalf("abstract socket got %q, %v", buf[:n], err)
	}
}

// TestNotifyRefusedReload: a reload that is refused, by SIGHUP or through the
// control API, tells systemd: RELOADING=1 with MONOTONIC_USEC (as
// Type=notify-reload wants), then READY=1 with the refusal in STATUS; the
// log has one ERROR line with the reason. A reload that applies puts the
// running STATUS back.
func TestNotifyRefusedReload(t *testing.T) {
	dir := t.TempDir()
	sockPath := filepath.Join(dir, "notify")
	sock, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sockPath, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	ctl := "unix:" + filepath.Join(dir, "ctl.sock")
	cfg := filepath.Join(dir, "lr.toml")
	write := func(extra string) {
		t.Helper()
		if err := os.WriteFile(cfg, []byte(reloadLab(strconv.Quote(ctl), "0", extra)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("")
	run := exec.Command(linerateBin, "run", "-c", cfg, "--live=false")
	run.Env = append(os.Environ(), "NOTIFY_SOCKET="+sockPath)
	var logs testenv.Output
	run.Stdout, run.Stderr = &logs, &logs
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = run.Process.Kill() }()
	next := func(want string) string {
		t.Helper()
		buf := make([]byte, 4096)
		_ = sock.SetReadDeadline(time.Now().Add(time.Minute))
		n, err := sock.Read(buf)
		if err != nil {
			t.Fatalf("waiting for %s: %v\n%s", want, err, logs.String())
		}
		got := string(buf[:n])
		if !strings.HasPrefix(got, want) {
			t.Fatalf("sd_notify: got %q, want %q first", got, want)
		}
		return got
	}
	reloading := func() {
		t.Helper()
		m := next("RELOADING=1")
		_, usec, ok := strings.Cut(m, "\nMONOTONIC_USEC=")
		usec, _, _ = strings.Cut(usec, "\n")
		if v, err := strconv.ParseUint(usec, 10, 64); !ok || err != nil || v == 0 {
			t.Errorf("RELOADING=1 without MONOTONIC_USEC: %q", m)
		}
	}
	next("READY=1")
	write("[[ports]]\nname = \"m9\"\ndriver = \"mem\"")
	_ = run.Process.Signal(syscall.SIGHUP)
	reloading()
	if m := next("READY=1"); !strings.Contains(m, "\nSTATUS=reload refused; nothing changed: ") || !strings.Contains(m, "ports[1]") {
		t.Errorf("READY=1 after a refused reload has no STATUS with the reason: %q", m)
	}
	// The control API's reload says the same.
	if code := runReload([]string{"--control", ctl, "--timeout", "30s"}, io.Discard, io.Discard); code != 1 {
		t.Errorf("linerate reload of a refused file: exit %d, want 1", code)
	}
	reloading()
	if m := next("READY=1"); !strings.Contains(m, "\nSTATUS=reload refused; nothing changed: ") {
		t.Errorf("READY=1 after a refused API reload: %q", m)
	}
	write("")
	_ = run.Process.Signal(syscall.SIGHUP)
	reloading()
	if m := next("READY=1"); !strings.Contains(m, "\nSTATUS=running "+cfg) {
		t.Errorf("READY=1 after a reload that applied: %q", m)
	}
	// The log is whole once run has exited.
	_ = run.Process.Signal(syscall.SIGTERM)
	next("STOPPING=1")
	if err := run.Wait(); err != nil {
		t.Fatalf("exit: %v\n%s", err, logs.String())
	}
	var errs []string
	for l := range strings.Lines(logs.String()) {
		if strings.Contains(l, "level=ERROR") {
			errs = append(errs, l)
		}
	}
	if len(errs) != 2 || !strings.Contains(errs[0], "ports[1]") || !strings.Contains(errs[1], "ports[1]") {
		t.Errorf("want one ERROR line with the reason per refused reload, got:\n%s", strings.Join(errs, ""))
	}
}
