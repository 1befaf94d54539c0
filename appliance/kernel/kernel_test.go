//go:build linux

package kernel_test

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"

	"github.com/linerate/linerate/appliance/kernel"
	"github.com/linerate/linerate/internal/netns"
	"github.com/linerate/linerate/internal/testenv"
)

// TestProbesAgreeWithTheKernel holds each probe to the kernel's own answer,
// asked another way: iproute2 in a scratch namespace for the tunnels and
// IOAM, a real program that uses the helper for the XDP helpers.
func TestProbesAgreeWithTheKernel(t *testing.T) {
	testenv.RequireRoot(t)
	ns := netns.New(t)
	ipOK := func(args ...string) bool {
		out, err := exec.Command("ip", append([]string{"-n", ns.Name()}, args...)...).CombinedOutput()
		if err != nil {
			t.Logf("ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
		}
		return err == nil
	}
	ns.Do(func() error {
		return os.WriteFile("/proc/sys/net/ipv6/conf/lo/disable_ipv6", []byte("0"), 0)
	})
	for _, tc := range []struct {
		f    kernel.Feature
		peer bool
	}{
		{kernel.Seg6Local, ipOK("-6", "route", "add", "fc00:e::1/128", "encap", "seg6local", "action", "End", "dev", "lo")},
		{kernel.IOAM6, ipOK("ioam", "namespace", "add", "123")},
		{kernel.IOAM6Encap, ipOK("-6", "route", "add", "fc00:e::2/128", "encap", "ioam6", "trace", "prealloc", "type",
			"0x800000", "ns", "123", "size", "4", "dev", "lo")},
	} {
		r := kernel.Probe(tc.f)
		t.Logf("%s: %s %s", tc.f, r.State, r.Detail)
		if r.OK() != tc.peer {
			t.Errorf("%s: probe says %s (%s), iproute2 says %v", tc.f, r.State, r.Detail, tc.peer)
		}
	}
	for f, fn := range kernel.Helpers {
		prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.XDP, License: "GPL", Instructions: asm.Instructions{
			// r1 = ctx for the helpers that take it; the rest ignore it.
			asm.Mov.Imm(asm.R2, 0), asm.Mov.Imm(asm.R3, 0), fn.Call(), asm.LoadImm(asm.R0, 2, asm.DWord), asm.Return()}})
		loaded := err == nil
		if prog != nil {
			prog.Close()
		}
		refused := err != nil && strings.Contains(err.Error(), "cannot use helper") ||
			err != nil && strings.Contains(err.Error(), "invalid func")
		r := kernel.Probe(f)
		t.Logf("%s: %s %s", f, r.State, r.Detail)
		if refused && r.OK() || loaded && !r.OK() {
			t.Errorf("%s: probe says %s, a program that calls it: %v", f, r.State, err)
		}
	}
}

func TestDisableEnv(t *testing.T) {
	t.Setenv(kernel.DisableEnv, "bpf_xdp_adjust_meta, seg6local")
	for _, f := range []kernel.Feature{kernel.XDPAdjustMeta, kernel.Seg6Local} {
		r := kernel.Probe(f)
		if r.State != kernel.Missing || !strings.Contains(r.Detail, kernel.DisableEnv) {
			t.Errorf("%s with %s set: %+v", f, kernel.DisableEnv, r)
		}
		err := r.Err()
		if g, ok := kernel.IsMissing(err); !ok || g != f || !strings.Contains(err.Error(), f.Option()) {
			t.Errorf("%s: error %v does not name the feature and its option", f, err)
		}
	}
	t.Setenv(kernel.DisableEnv, "all")
	for _, f := range kernel.Features() {
		if kernel.Has(f) {
			t.Errorf("%s present with %s=all", f, kernel.DisableEnv)
		}
	}
}

func TestParseNames(t *testing.T) {
	for _, f := range kernel.Features() {
		if g, ok := kernel.Parse(f.String()); !ok || g != f {
			t.Errorf("kernel.Parse(%q) = %v, %v", f.String(), g, ok)
		}
		if f.Option() == "" || f.Use() == "" {
			t.Errorf("%s has no option or use", f)
		}
	}
}
