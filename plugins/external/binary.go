package external

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// The plugin's binary is checked at every launch, not only the first, and
// what is checked is what runs: the file is opened once, that descriptor is
// checked (fstat) and hashed, and the child executes it as /proc/self/fd/N.
// No one but root (or linerate's own user) can change any directory on the
// way to it, so no one else can swap it between the check and the exec.

// trustedUID: root, or the user linerate runs as.
func trustedUID(uid uint32) bool { return uid == 0 || uid == uint32(os.Geteuid()) }

// pluginFD is the descriptor number the binary has in the child (ExtraFiles
// start at 3), and the path the child executes.
const (
	pluginFD   = 3
	pluginExec = "/proc/self/fd/3"
)

// openPlugin resolves path, checks every component from /, opens the file
// and checks it again through the descriptor, and hashes it when sum is
// given. The caller runs that descriptor.
func openPlugin(path string, sum []byte) (*os.File, error) {
	real, err := resolvePlugin(path)
	if err != nil {
		return nil, fmt.Errorf("plugin %q: %w", path, err)
	}
	f, err := os.OpenFile(real, os.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fmt.Errorf("plugin %q: %w", path, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		f.Close()
		return nil, fmt.Errorf("plugin %q: %w", path, err)
	}
	if err := trustedFile(real, &st); err != nil {
		f.Close()
		return nil, fmt.Errorf("plugin %q: %w", path, err)
	}
	if sum != nil {
		h := sha256.New()
		if _, err := io.Copy(h, f); err != nil {
			f.Close()
			return nil, fmt.Errorf("plugin %q: %w", path, err)
		}
		if got := h.Sum(nil); !bytes.Equal(got, sum) {
			f.Close()
			return nil, fmt.Errorf("plugin %q: its checksum is %x, not the sha256 the config gives (%x)", path, got, sum)
		}
	}
	return f, nil
}

// resolvePlugin follows path one component at a time from /, symlinks
// included, and checks each directory it passes: owned by a trusted user
// and writable by no one else, or sticky (as /tmp), whose entry on the way
// must then be a trusted user's (only its owner may rename or remove it).
// It returns the path with no symlink left.
func resolvePlugin(path string) (string, error) {
	if !filepath.IsAbs(path) {
		return "", errors.New("give an absolute path")
	}
	cur := "/"
	var st unix.Stat_t
	if err := unix.Lstat(cur, &st); err != nil {
		return "", err
	}
	if err := trustedDir(cur, &st); err != nil {
		return "", err
	}
	curMode := st.Mode
	todo := strings.Split(path, "/")
	links := 0
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur)
			if err := unix.Lstat(cur, &st); err != nil {
				return "", err
			}
			curMode = st.Mode
			continue
		}
		next := filepath.Join(cur, c)
		if err := unix.Lstat(next, &st); err != nil {
			return "", err
		}
		if curMode&0o022 != 0 && !trustedUID(st.Uid) {
			return "", fmt.Errorf("%s, in %s which others may write, must be root's (it is uid %d)", next, cur, st.Uid)
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
			if links++; links > 40 {
				return "", unix.ELOOP
			}
			target, err := os.Readlink(next)
			if err != nil {
				return "", err
			}
			if filepath.IsAbs(target) {
				cur = "/"
				if err := unix.Lstat(cur, &st); err != nil {
					return "", err
				}
				curMode = st.Mode
			}
			todo = append(strings.Split(target, "/"), todo...)
		case unix.S_IFDIR:
			if err := trustedDir(next, &st); err != nil {
				return "", err
			}
			cur, curMode = next, st.Mode
		default:
			for _, rest := range todo {
				if rest != "" && rest != "." {
					return "", fmt.Errorf("%s: %w", next, unix.ENOTDIR)
				}
			}
			cur = next
		}
	}
	return cur, nil
}

func trustedDir(p string, st *unix.Stat_t) error {
	if !trustedUID(st.Uid) || st.Mode&0o022 != 0 && st.Mode&unix.S_ISVTX == 0 {
		return fmt.Errorf("%s must be root's and writable only by it, or sticky (it is uid %d, mode %o)", p, st.Uid, st.Mode&0o7777)
	}
	return nil
}

func trustedFile(p string, st *unix.Stat_t) error {
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("%s is not a regular file", p)
	}
	if !trustedUID(st.Uid) || st.Mode&0o022 != 0 {
		return fmt.Errorf("%s must be root's and writable only by it (it is uid %d, mode %o)", p, st.Uid, st.Mode&0o7777)
	}
	return nil
}
