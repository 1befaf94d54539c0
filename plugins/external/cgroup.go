package external

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// A plugin generation runs in a cgroup v2 leaf of its own, made under
// linerate's own cgroup: cgroup.kill ends every process in it, those that
// left the plugin's process group or session too (setsid), and cgroup.events
// says when the last one is gone. Only then may buffers the plugin could
// write be reused.

// killTimeout bounds the wait for a killed cgroup to empty; a process that
// outlives it (stuck in the kernel) keeps what was lent lent.
var killTimeout = 10 * time.Second

var leafSeq atomic.Uint64

// cgroupLeaf is one plugin generation's cgroup.
type cgroupLeaf struct {
	dir string
}

// cgroupParent is the directory of linerate's own cgroup in the cgroup2
// mount: from /proc/self/cgroup's 0:: line and /proc/self/mountinfo, never
// assumed to be /sys/fs/cgroup (a hybrid host mounts it elsewhere).
var cgroupParent = ownCgroupDir

func ownCgroupDir() (string, error) {
	cg, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	return cgroupDir(cg, mi)
}

// cgroupDir is where own (the 0:: line of cg) lies in the first cgroup2 mount
// of mountinfo that holds it.
func cgroupDir(cg, mountinfo []byte) (string, error) {
	own := ""
	for _, l := range strings.Split(string(cg), "\n") {
		if p, ok := strings.CutPrefix(l, "0::"); ok {
			own = p
		}
	}
	if own == "" || !strings.HasPrefix(own, "/") {
		return "", errors.New("no cgroup v2 in /proc/self/cgroup (no 0:: line)")
	}
	sc := bufio.NewScanner(bytes.NewReader(mountinfo))
	for sc.Scan() {
		// id parent maj:min root mountpoint opts [optional…] - fstype source superopts
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 1 || g[0] != "cgroup2" {
			continue
		}
		root, point := unescapeMount(f[3]), unescapeMount(f[4])
		rel, ok := strings.CutPrefix(own, root)
		if root == "/" {
			rel, ok = own, true
		}
		if !ok || rel != "" && !strings.HasPrefix(rel, "/") {
			continue
		}
		return filepath.Join(point, rel), nil
	}
	return "", fmt.Errorf("no cgroup2 mount holds linerate's cgroup %s", own)
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// newLeaf makes a fresh cgroup for a plugin generation of stage under
// linerate's own. A leaf with no controllers may sit beside linerate's own
// process (the "no internal processes" rule binds only domain controllers).
func newLeaf(stage string) (*cgroupLeaf, error) {
	parent, err := cgroupParent()
	if err != nil {
		return nil, err
	}
	name := fmt.Sprintf("linerate-plugin.%d.%s.%d", os.Getpid(), cgroupName(stage), leafSeq.Add(1))
	dir := filepath.Join(parent, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("mkdir %s: %w", dir, errors.Unwrap(err))
	}
	if _, err := os.Stat(filepath.Join(dir, "cgroup.kill")); err != nil {
		_ = os.Remove(dir)
		return nil, fmt.Errorf("%s has no cgroup.kill (Linux 5.14 on)", dir)
	}
	return &cgroupLeaf{dir: dir}, nil
}

// cgroupName keeps a stage's name to what a cgroup's name may hold.
func cgroupName(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == '\n' || r == ' ' || r == '.' {
			return '_'
		}
		return r
	}, s)
}

// open is the leaf's directory for clone3's CLONE_INTO_CGROUP: the plugin
// starts in it, with no moment outside.
func (c *cgroupLeaf) open() (int, error) {
	return unix.Open(c.dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
}

// kill ends every process in the leaf and waits until cgroup.events says
// it is empty, at most timeout.
func (c *cgroupLeaf) kill(timeout time.Duration) error {
	if err := os.WriteFile(filepath.Join(c.dir, "cgroup.kill"), []byte("1"), 0); err != nil {
		return fmt.Errorf("cgroup.kill: %w", err)
	}
	return c.waitEmpty(timeout)
}

// waitEmpty waits for "populated 0" in cgroup.events, woken by inotify when
// the file changes, and polling every 100ms besides.
func (c *cgroupLeaf) waitEmpty(timeout time.Duration) error {
	events := filepath.Join(c.dir, "cgroup.events")
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return fmt.Errorf("inotify: %w", err)
	}
	defer unix.Close(fd)
	if _, err := unix.InotifyAddWatch(fd, events, unix.IN_MODIFY); err != nil {
		return fmt.Errorf("inotify %s: %w", events, err)
	}
	deadline := time.Now().Add(timeout)
	buf := make([]byte, 4096)
	for {
		b, err := os.ReadFile(events)
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte("populated 0")) {
			return nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			procs, _ := os.ReadFile(filepath.Join(c.dir, "cgroup.procs"))
			return fmt.Errorf("cgroup %s still holds processes %s %v after cgroup.kill: what the plugin was lent stays lent",
				c.dir, strings.Fields(string(procs)), timeout)
		}
		ms := int(min(left, 100*time.Millisecond) / time.Millisecond)
		_, _ = unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, max(ms, 1))
		for {
			if n, _ := unix.Read(fd, buf); n <= 0 {
				break
			}
		}
	}
}

// remove removes the (empty) leaf, and any cgroup a plugin running as root
// made inside it, deepest first.
func (c *cgroupLeaf) remove() error { return rmCgroup(c.dir) }

func rmCgroup(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if e.IsDir() {
			if err := rmCgroup(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	return os.Remove(dir)
}

// holds reports whether pid is in the leaf or a cgroup below it.
func (c *cgroupLeaf) holds(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cgroup"))
	if err != nil {
		return false
	}
	name := "/" + filepath.Base(c.dir)
	for _, l := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(l, "0::"); ok {
			return strings.HasSuffix(p, name) || strings.Contains(p, name+"/")
		}
	}
	return false
}

// populated reports whether any process is in the leaf or below it.
func (c *cgroupLeaf) populated() bool {
	b, err := os.ReadFile(filepath.Join(c.dir, "cgroup.events"))
	return err != nil || !bytes.Contains(b, []byte("populated 0"))
}
