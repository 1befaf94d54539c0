package cli

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer a test reads while a process writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestSIGHUPReloads: linerate run reads its file again on SIGHUP. A new loss
// on a link applies; a new port is refused, named in the log, and changes
// nothing.
func TestSIGHUPReloads(t *testing.T) {
	cfg := func(loss string, extra string) string {
		return `version = 1
[control]
listen = ""
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
	path := filepath.Join(t.TempDir(), "lab.toml")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(cfg("0", ""))
	cmd := exec.Command(linerateBin, "run", "-c", path, "--live=false", "--wide")
	var out, log syncBuffer
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
