//go:build dpdk

package dpdk

import (
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/linerate/linerate/internal/netns"
)

// TestMoreVdevs: net_tap and net_memif open as ports like any ethdev (a tap
// interface appears in the namespace that made it; a memif server listens on
// its socket) and close cleanly, taking their interfaces with them.
func TestMoreVdevs(t *testing.T) {
	requireEAL(t)
	ns := netns.New(t)
	tap := vdev("net_tap")
	var p *Port
	err := ns.Do(func() (err error) {
		p, err = Open(Options{Name: "tap", Device: tap + ",iface=lrtap0"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	in := p.Info()
	if !strings.HasPrefix(in.Driver, "dpdk/net_tap") || in.MAC == ([6]byte{}) {
		t.Errorf("tap info %+v", in)
	}
	var seen bool
	if err := ns.Do(func() error {
		ifc, err := net.InterfaceByName("lrtap0")
		seen = err == nil && ifc.HardwareAddr != nil
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !seen {
		t.Error("no lrtap0 interface in the namespace")
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	_ = ns.Do(func() error {
		if _, err := net.InterfaceByName("lrtap0"); err == nil {
			t.Error("lrtap0 is still there after Close")
		}
		return nil
	})

	sock := filepath.Join(t.TempDir(), "memif.sock")
	m, err := Open(Options{Name: "memif", Device: fmt.Sprintf("%s,role=server,socket=%s", vdev("net_memif"), sock)})
	if err != nil {
		t.Fatal(err)
	}
	if in := m.Info(); !strings.HasPrefix(in.Driver, "dpdk/net_memif") || in.LinkUp {
		t.Errorf("memif info %+v (no peer: the link must be down)", in)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
}
