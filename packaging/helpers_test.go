package packaging

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// freePort is a TCP (or UDP) port on 127.0.0.1 nothing listens on now.
func freePort(t *testing.T, network string) int {
	t.Helper()
	if network == "udp" {
		c, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.LocalAddr().(*net.UDPAddr).Port
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// syncBuf is a bytes.Buffer a process writes while the test reads it.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// proc is a process the test started; stop ends it (SIGTERM, then SIGKILL
// after a minute) and the test's cleanup stops it if the test did not.
type proc struct {
	// stopSig is what stop sends first: SIGTERM, or os.Kill.
	stopSig os.Signal
	cmd     *exec.Cmd
	out     *syncBuf
	exited  chan error
	once    sync.Once
	err     error
}

func start(t *testing.T, env []string, name string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(name, args...), out: &syncBuf{}, exited: make(chan error, 1)}
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	// A group of its own: stop ends what it forked too (nfacctd's core
	// process outlives the one the test started).
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	go func() { p.exited <- p.cmd.Wait() }()
	t.Cleanup(func() { p.stop() })
	return p
}

// stop ends the process and returns how it exited.
func (p *proc) stop() error {
	p.once.Do(func() {
		sig := syscall.SIGTERM
		if p.stopSig == os.Kill {
			sig = syscall.SIGKILL
		}
		_ = p.cmd.Process.Signal(sig)
		select {
		case p.err = <-p.exited:
		case <-time.After(time.Minute):
			_ = p.cmd.Process.Kill()
			p.err = <-p.exited
		}
		// Whatever it forked and left behind goes with its group.
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	})
	return p.err
}

// running reports whether the process has not exited.
func (p *proc) running() bool {
	if p.cmd.ProcessState != nil {
		return false
	}
	select {
	case err := <-p.exited:
		p.exited <- err
		return false
	default:
		return true
	}
}

// waitFor polls cond until it holds, failing after a generous deadline with
// what the process printed.
func waitFor(t *testing.T, what string, p *proc, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for !cond() {
		if p != nil && !p.running() {
			t.Fatalf("waiting for %s: the process exited:\n%s", what, p.out.String())
		}
		if time.Now().After(deadline) {
			out := ""
			if p != nil {
				out = p.out.String()
			}
			t.Fatalf("no %s within 90 s\n%s", what, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// labConfig is the embedded lab with its metrics endpoint on port.
func labConfig(t *testing.T, dir string, port int) string {
	t.Helper()
	lab, err := exec.Command(linerateBin, "config", "default").Output()
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?m)^# listen = "127\.0\.0\.1:9087"$`)
	if !re.Match(lab) {
		t.Fatal("the lab config has no commented metrics listen")
	}
	cfg := re.ReplaceAll(lab, []byte(`listen = "127.0.0.1:`+strconv.Itoa(port)+`"`))
	path := dir + "/lab.toml"
	if err := os.WriteFile(path, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// docBlock is the fenced block after the line "<!-- doctest: mark -->" in
// docs/operations.md.
func docBlock(t *testing.T, mark string) string {
	t.Helper()
	b, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "<!-- doctest: "+mark+" -->\n")
	if !ok {
		t.Fatalf("docs/operations.md has no block marked %q", mark)
	}
	_, rest, _ = strings.Cut(rest, "\n")
	block, _, _ := strings.Cut(rest, "```")
	return block
}
