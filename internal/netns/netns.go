// Package netns gives tests network namespaces and veth pairs of their own, made
// with iproute2 and removed when the test ends, and runs code inside them.
//
// Tests that use it need root and the ip command; New skips (or, under CI=true,
// fails) without them.
package netns

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/linerate/linerate/internal/testenv"
)

// NS is a network namespace made by a test.
type NS struct {
	name string
}

// New makes a namespace with loopback up and IPv6 off, so that nothing but the
// test's own traffic (no DAD, router or MLD solicitations) crosses its links. It
// is deleted, with every interface in it, when t ends.
func New(t testing.TB) *NS {
	t.Helper()
	testenv.RequireRoot(t)
	testenv.RequireCmd(t, "ip")
	ns := &NS{name: "lr" + randHex(6)}
	if out, err := exec.Command("ip", "netns", "add", ns.name).CombinedOutput(); err != nil {
		testenv.Require(t, fmt.Sprintf("network namespaces (ip netns add: %v: %s)", err, bytes.TrimSpace(out)), false)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", ns.name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", ns.name, err, bytes.TrimSpace(out))
		}
	})
	ns.IP(t, "link", "set", "lo", "up")
	err := ns.Do(func() error {
		for _, k := range []string{"all", "default"} {
			if err := os.WriteFile("/proc/sys/net/ipv6/conf/"+k+"/disable_ipv6", []byte("1"), 0); err != nil && !os.IsNotExist(err) {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("netns %s: disable IPv6: %v", ns.name, err)
	}
	return ns
}

// Name is the namespace's name under /run/netns.
func (ns *NS) Name() string { return ns.name }

// IP runs `ip -n <ns> args…` and fails t if it fails.
func (ns *NS) IP(t testing.TB, args ...string) {
	t.Helper()
	full := append([]string{"-n", ns.name}, args...)
	if out, err := exec.Command("ip", full...).CombinedOutput(); err != nil {
		t.Fatalf("ip %v: %v: %s", full, err, bytes.TrimSpace(out))
	}
}

// Do runs f on an OS thread that has joined the namespace. Sockets f opens stay
// in the namespace after it returns, whichever thread later uses them, so a test
// can open a port inside and poll it from anywhere. Interface lookups by name
// must also happen inside.
//
// The thread is returned to the scheduler only if it could rejoin the original
// namespace; otherwise the goroutine exits locked and the runtime ends the
// thread, so no other goroutine ever runs in the test's namespace by accident.
func (ns *NS) Do(f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("open own netns: %w", err)
			return
		}
		defer unix.Close(orig)
		target, err := unix.Open("/run/netns/"+ns.name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("open netns %s: %w", ns.name, err)
			return
		}
		defer unix.Close(target)
		if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("setns %s: %w", ns.name, err)
			return
		}
		err = f()
		if unix.Setns(orig, unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}

// MAC is the hardware address of the interface ifname in ns.
func (ns *NS) MAC(t testing.TB, ifname string) [6]byte {
	t.Helper()
	var m [6]byte
	if err := ns.Do(func() error {
		ifc, err := net.InterfaceByName(ifname)
		if err != nil {
			return err
		}
		copy(m[:], ifc.HardwareAddr)
		return nil
	}); err != nil {
		t.Fatalf("netns %s: %v", ns.name, err)
	}
	return m
}

// Sysctl sets, in order, each key (a path under /proc/sys/net, such as
// "ipv6/conf/all/forwarding") to its value inside ns.
func (ns *NS) Sysctl(t testing.TB, kv [][2]string) {
	t.Helper()
	if err := ns.Do(func() error {
		for _, x := range kv {
			if err := os.WriteFile("/proc/sys/net/"+x[0], []byte(x[1]), 0); err != nil {
				return fmt.Errorf("sysctl %s: %w", x[0], err)
			}
		}
		return nil
	}); err != nil {
		t.Fatalf("netns %s: %v", ns.name, err)
	}
}

// Veth makes a veth pair, a in ns a and b in ns b (the same namespace or two),
// and brings both ends up. The links go when their namespaces go. The names must
// be at most 15 bytes.
//
// It returns once both ends are ready to carry frames. The end brought up
// first gets its carrier only when its peer comes up, and the kernel then
// attaches its qdisc from the linkwatch worker, later: until that kworker
// runs, which a loaded machine may delay, the end is not operationally up
// and what is sent through its qdisc is dropped without an error.
func Veth(t testing.TB, a *NS, nameA string, b *NS, nameB string) {
	t.Helper()
	if b == a {
		a.IP(t, "link", "add", nameA, "type", "veth", "peer", "name", nameB)
	} else {
		a.IP(t, "link", "add", nameA, "type", "veth", "peer", "name", nameB, "netns", b.name)
	}
	a.IP(t, "link", "set", nameA, "up")
	b.IP(t, "link", "set", nameB, "up")
	a.waitReady(t, nameA)
	b.waitReady(t, nameB)
}

// waitReady waits until ifname is operationally up with a qdisc other than
// noop attached. The deadline only turns a link that never comes up into a
// failure; a ready link returns at once.
func (ns *NS) waitReady(t testing.TB, ifname string) {
	t.Helper()
	var out []byte
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		var err error
		out, err = exec.Command("ip", "-n", ns.name, "-o", "link", "show", "dev", ifname).CombinedOutput()
		if err != nil {
			t.Fatalf("ip -n %s link show %s: %v: %s", ns.name, ifname, err, bytes.TrimSpace(out))
		}
		if bytes.Contains(out, []byte(" state UP ")) && !bytes.Contains(out, []byte(" qdisc noop ")) {
			return
		}
	}
	t.Fatalf("netns %s: %s is not ready after 30 s: %s", ns.name, ifname, bytes.TrimSpace(out))
}

// Dropped is what the kernel counts as dropped on ifname in ns, received and
// sent: for a veth, the frames its peer's backlog had no room for, among
// others.
func (ns *NS) Dropped(t testing.TB, ifname string) uint64 {
	t.Helper()
	out, err := exec.Command("ip", "-n", ns.name, "-s", "-j", "link", "show", "dev", ifname).Output()
	if err != nil {
		t.Fatalf("ip -n %s -s link show %s: %v", ns.name, ifname, err)
	}
	var links []struct {
		Stats struct {
			Rx, Tx struct {
				Dropped uint64 `json:"dropped"`
			}
		} `json:"stats64"`
	}
	if err := json.Unmarshal(out, &links); err != nil || len(links) != 1 {
		t.Fatalf("ip -n %s -s -j link show %s: %v: %s", ns.name, ifname, err, out)
	}
	return links[0].Stats.Rx.Dropped + links[0].Stats.Tx.Dropped
}

func randHex(n int) string {
	b := make([]byte, n/2)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// PassXDP attaches an XDP program that passes every frame to ifname in ns,
// until t ends. A veth receives frames another veth's XDP program sends
// (XDP_TX, a redirect) only with an XDP program of its own, or GRO, on.
func (ns *NS) PassXDP(t testing.TB, ifname string) {
	t.Helper()
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.XDP, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 2 /* XDP_PASS */), asm.Return()}})
	if err != nil {
		t.Fatalf("an XDP_PASS program: %v", err)
	}
	t.Cleanup(func() { prog.Close() })
	var lk link.Link
	if err := ns.Do(func() error {
		ifc, err := net.InterfaceByName(ifname)
		if err != nil {
			return err
		}
		lk, err = link.AttachXDP(link.XDPOptions{Program: prog, Interface: ifc.Index, Flags: link.XDPDriverMode})
		return err
	}); err != nil {
		t.Fatalf("netns %s: XDP_PASS on %s: %v", ns.name, ifname, err)
	}
	t.Cleanup(func() { lk.Close() })
}
