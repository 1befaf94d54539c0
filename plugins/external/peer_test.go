package external

import (
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/linerate/linerate/appliance/memif"
	"github.com/linerate/linerate/internal/testenv"
)

// TestDialRefusesImpostor: a link's memif socket served by a process that is
// not the plugin's user (SO_PEERCRED) is refused before anything is shared.
func TestDialRefusesImpostor(t *testing.T) {
	testenv.RequireRoot(t)
	sv := &supervisor{cfg: stageConfig{RingSize: 1024}, name: "impostor", dir: t.TempDir(), peerUID: 65534}
	ln, err := memif.Listen(sv.socket())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(memif.ServerConfig{MaxC2S: 1, MaxS2C: 1, PollC2S: true}); err == nil {
			c.Close()
		}
	}()
	l, err := sv.dial(0, 1, false)
	if err == nil {
		l.close()
		t.Fatal("a link to a socket of uid 0's, for a plugin of uid 65534")
	}
	if !errors.Is(err, memif.ErrNotAllowed) {
		t.Errorf("err = %v, want memif.ErrNotAllowed", err)
	}
}

// TestCheckPeer: go-plugin's connection is the plugin's user's, in the
// plugin's cgroup, or refused.
func TestCheckPeer(t *testing.T) {
	testenv.RequireRoot(t)
	path := filepath.Join(t.TempDir(), "s")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := checkPeer(c, 0, nil); err != nil {
		t.Errorf("root's socket for a root plugin: %v", err)
	}
	if err := checkPeer(c, 65534, nil); err == nil || !strings.Contains(err.Error(), "not the plugin's uid 65534") {
		t.Errorf("root's socket for uid 65534: %v", err)
	}
	cg, err := newLeaf("peer")
	if err != nil {
		t.Fatal(err)
	}
	defer cg.remove()
	if err := checkPeer(c, 0, cg); err == nil || !strings.Contains(err.Error(), "outside the plugin's cgroup") {
		t.Errorf("a socket served from outside the cgroup: %v", err)
	}
}
