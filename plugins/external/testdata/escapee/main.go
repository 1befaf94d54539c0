// escapee is a test plugin (TestEscapeeKilled): on its first packet it
// starts a process in a session of its own (setsid), as a daemonising helper
// would, that holds every memfd the plugin has (linerate's shared pools), and
// counts that process's pid as escapee_pid. Every packet continues.
package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/appliance/stats"
	"github.com/linerate/linerate/plugins"
	"github.com/linerate/linerate/plugins/sdk"
)

type stage struct {
	once sync.Once
	pid  *stats.Counter
}

func (s *stage) Process(ctx *plugins.Context, b *packet.Burst) {
	s.once.Do(s.escape)
}

// escape starts sleep in a new session with the plugin's memfds.
func (s *stage) escape() {
	var files []*os.File
	ents, _ := os.ReadDir("/proc/self/fd")
	for _, e := range ents {
		link, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err != nil || !strings.HasPrefix(link, "/memfd:linerate-pool") {
			continue
		}
		n, _ := strconv.Atoi(e.Name())
		if fd, err := syscall.Dup(n); err == nil {
			files = append(files, os.NewFile(uintptr(fd), link))
		}
	}
	if len(files) == 0 {
		return
	}
	cmd := exec.Command("sleep", "3600")
	cmd.ExtraFiles = files
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return
	}
	s.pid.Add(uint64(cmd.Process.Pid))
	for _, f := range files {
		f.Close()
	}
	go cmd.Wait()
}

func main() {
	sdk.Serve(plugins.Kind{Name: "escapee", Summary: "start a process in a session of its own that holds the pools' memfds",
		New: func(s *plugins.Setup) (plugins.Stage, error) {
			return &stage{pid: s.Counters.New("escapee_pid", "the escaped process's pid")}, nil
		}})
}
