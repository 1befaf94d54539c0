package external

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/linerate/linerate/internal/testenv"
)

// TestCgroupDir: linerate's cgroup is found in the cgroup2 mount wherever it
// is mounted (a hybrid host's /sys/fs/cgroup/unified), and relative to the
// mount's root (a container's cgroup namespace).
func TestCgroupDir(t *testing.T) {
	hybrid := `30 22 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
31 30 0:28 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`
	for _, c := range []struct{ cg, mi, want string }{
		{"4:memory:/x\n0::/\n", hybrid, "/sys/fs/cgroup/unified"},
		{"0::/system.slice/linerate.service\n", hybrid, "/sys/fs/cgroup/unified/system.slice/linerate.service"},
		{"0::/system.slice/linerate.service\n", "25 1 0:22 / /sys/fs/cgroup rw shared:4 - cgroup2 cgroup2 rw,nsdelegate\n",
			"/sys/fs/cgroup/system.slice/linerate.service"},
		{"0::/box/app\n", "25 1 0:22 /box /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n", "/sys/fs/cgroup/app"},
		{"0::/boxer\n", "25 1 0:22 /box /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n", ""},
		{"0::/\n", `25 1 0:22 / /mnt/cg\040two rw - cgroup2 cgroup2 rw` + "\n", "/mnt/cg two"},
		{"1:name=systemd:/\n", hybrid, ""},
	} {
		got, err := cgroupDir([]byte(c.cg), []byte(c.mi))
		if got != c.want || (err != nil) != (c.want == "") {
			t.Errorf("%q in\n%s: %q, %v; want %q", c.cg, c.mi, got, err, c.want)
		}
	}
}

// startInLeaf starts sh in cg, which starts sleep in a session of its own
// and prints its pid.
func startInLeaf(t *testing.T, cg *cgroupLeaf) int {
	t.Helper()
	fd, err := cg.open()
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	cmd := exec.Command("sh", "-c", "setsid sleep 600 </dev/null >/dev/null 2>&1 & echo $!; exec sleep 600")
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go cmd.Wait()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

func running(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

// TestCgroupKillWaits: kill returns once the cgroup is empty, the setsid'd
// grandchild gone too (checked at once); a cgroup that does not empty in
// time is an error naming its processes, not a hang.
func TestCgroupKillWaits(t *testing.T) {
	testenv.RequireRoot(t)
	cg, err := newLeaf("test")
	if err != nil {
		t.Fatal(err)
	}
	defer cg.remove()
	pid := startInLeaf(t, cg)
	if !running(pid) || !cg.populated() {
		t.Fatalf("grandchild %d running %v, cgroup populated %v", pid, running(pid), cg.populated())
	}
	err = cg.waitEmpty(50 * time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), strconv.Itoa(pid)) || !strings.Contains(err.Error(), "stays lent") {
		t.Errorf("waitEmpty on a live cgroup: %v", err)
	}
	if err := cg.kill(time.Minute); err != nil {
		t.Fatal(err)
	}
	if running(pid) || cg.populated() {
		t.Errorf("after kill: grandchild %d running %v, cgroup populated %v", pid, running(pid), cg.populated())
	}
	if err := cg.remove(); err != nil {
		t.Errorf("remove: %v", err)
	}
}
