package netns

import (
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
)

func TestNamespaceAndVeth(t *testing.T) {
	var name string
	hostV6, _ := os.ReadFile("/proc/sys/net/ipv6/conf/default/disable_ipv6")
	t.Run("inside", func(t *testing.T) {
		a, b := New(t), New(t)
		name = a.Name()
		Veth(t, a, "lrva", b, "lrvb")
		Veth(t, a, "lrv1", a, "lrv2")
		err := a.Do(func() error {
			for _, n := range []string{"lrva", "lrv1", "lrv2"} {
				ifc, err := net.InterfaceByName(n)
				if err != nil {
					return err
				}
				if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagRunning == 0 {
					t.Errorf("%s is not up and running: %v", n, ifc.Flags)
				}
			}
			if _, err := net.InterfaceByName("lrvb"); err == nil {
				t.Error("lrvb is in the wrong namespace")
			}
			v, err := os.ReadFile("/proc/sys/net/ipv6/conf/default/disable_ipv6")
			if err == nil && strings.TrimSpace(string(v)) != "1" {
				t.Errorf("IPv6 is on in the namespace: %q", v)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if d := a.Dropped(t, "lrva") + b.Dropped(t, "lrvb"); d != 0 {
			t.Errorf("%d frames dropped on a new pair", d)
		}
		if err := b.Do(func() error { _, err := net.InterfaceByName("lrvb"); return err }); err != nil {
			t.Errorf("lrvb not in its namespace: %v", err)
		}
		if _, err := net.InterfaceByName("lrva"); err == nil {
			t.Error("lrva is visible from the test's own namespace")
		}
		out, err := exec.Command("ip", "netns", "exec", a.Name(), "cat", "/proc/sys/net/ipv6/conf/all/disable_ipv6").Output()
		if err != nil || strings.TrimSpace(string(out)) != "1" {
			t.Errorf("ip netns exec sees disable_ipv6 %q (%v)", out, err)
		}
	})
	if name == "" {
		return // skipped
	}
	if _, err := os.Stat("/run/netns/" + name); !os.IsNotExist(err) {
		t.Errorf("namespace %s outlived its test: %v", name, err)
	}
	if v, _ := os.ReadFile("/proc/sys/net/ipv6/conf/default/disable_ipv6"); string(v) != string(hostV6) {
		t.Errorf("the host's disable_ipv6 changed from %q to %q", hostV6, v)
	}
}

func TestDoError(t *testing.T) {
	ns := New(t)
	want := os.ErrDeadlineExceeded
	if err := ns.Do(func() error { return want }); err != want {
		t.Errorf("Do returned %v, want f's error", err)
	}
	gone := &NS{name: "lr-no-such-ns"}
	if err := gone.Do(func() error { t.Error("f ran"); return nil }); err == nil {
		t.Error("Do in a missing namespace succeeded")
	}
}

// MAC reads an interface's address inside the namespace; Sysctl writes there
// and nowhere else.
func TestMACAndSysctl(t *testing.T) {
	ns := New(t)
	Veth(t, ns, "lrvm", ns, "lrvn")
	ns.IP(t, "link", "set", "lrvm", "address", "02:00:00:00:0a:0b")
	if got := ns.MAC(t, "lrvm"); got != [6]byte{2, 0, 0, 0, 0x0a, 0x0b} {
		t.Errorf("MAC %x", got)
	}
	host, _ := os.ReadFile("/proc/sys/net/ipv6/conf/all/forwarding")
	ns.Sysctl(t, [][2]string{{"ipv6/conf/all/disable_ipv6", "0"}, {"ipv6/conf/all/forwarding", "1"}})
	out, err := exec.Command("ip", "netns", "exec", ns.Name(), "cat", "/proc/sys/net/ipv6/conf/all/forwarding").Output()
	if err != nil || strings.TrimSpace(string(out)) != "1" {
		t.Errorf("forwarding in the namespace %q (%v), want 1", out, err)
	}
	if v, _ := os.ReadFile("/proc/sys/net/ipv6/conf/all/forwarding"); string(v) != string(host) {
		t.Errorf("the host's forwarding changed from %q to %q", host, v)
	}
}
