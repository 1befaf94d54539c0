// Package testpmd runs DPDK's dpdk-testpmd with a net_memif port in io
// forward mode, as a memif peer for tests: what it receives on the port it
// sends back unchanged.
package testpmd

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/linerate/linerate/internal/testenv"
)

// PMD is a running dpdk-testpmd.
type PMD struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	prefix string
	mu     sync.Mutex
	out    bytes.Buffer
}

func (p *PMD) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Write(b)
}

// Output is what testpmd printed so far.
func (p *PMD) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// Start runs testpmd with one net_memif port of role ("server" or "client")
// on socket: a path, or "@name" for an abstract socket. It is stopped and its
// run directory removed when the test ends.
//
// net_memif needs DPDK's multi-process support, so this EAL keeps its shared
// config (no --no-shconf) under a file prefix of its own.
func Start(t testing.TB, role, socket string) *PMD {
	t.Helper()
	testenv.RequireRoot(t)
	bin := testenv.RequireCmd(t, "dpdk-testpmd")
	prefix := fmt.Sprintf("lrtest%d_%d", os.Getpid(), time.Now().UnixNano()%1_000_000_000)
	vdev := "net_memif0,role=" + role
	if name, ok := strings.CutPrefix(socket, "@"); ok {
		vdev += ",socket=" + name
	} else {
		vdev += ",socket=" + socket + ",socket-abstract=no"
	}
	p := &PMD{prefix: prefix}
	// Line-buffered: testpmd's "Press enter to exit" must reach us while it runs.
	stdbuf := testenv.RequireCmd(t, "stdbuf")
	p.cmd = exec.Command(stdbuf, "-oL", "-eL", bin, "--no-huge", "-m", "512", "--no-pci", "--file-prefix", prefix,
		"--vdev="+vdev, "--log-level=pmd.net.memif:debug", "--",
		"--port-topology=loop", "--forward-mode=io", "--total-num-mbufs=4096")
	p.cmd.Stdout, p.cmd.Stderr = p, p
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.stop(t) })
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(p.Output(), "Press enter to exit") {
		if p.cmd.ProcessState != nil || time.Now().After(deadline) {
			t.Fatalf("testpmd did not start:\n%s", p.Output())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return p
}

// stop asks testpmd to exit (enter on its stdin), kills it if it does not,
// and removes its run directory.
func (p *PMD) stop(t testing.TB) {
	_, _ = p.stdin.Write([]byte("\n"))
	p.stdin.Close()
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
		t.Errorf("testpmd did not exit; killed:\n%s", p.Output())
	}
	for _, dir := range []string{"/var/run/dpdk", "/run/dpdk"} {
		_ = os.RemoveAll(filepath.Join(dir, p.prefix))
	}
	if t.Failed() {
		t.Logf("testpmd output:\n%s", p.Output())
	}
}
