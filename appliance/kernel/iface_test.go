//go:build linux

package kernel_test

import (
	"errors"
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/linerate/linerate/appliance/kernel"
	"github.com/linerate/linerate/internal/netns"
)

// TestInterfaceProbesForDoctor holds what linerate doctor says of each
// interface to what the kernel does when asked for it: in a namespace of
// its own with a veth pair and loopback, native XDP (xdp-features' basic)
// is there exactly where an XDP program attaches in driver mode, and a
// device-bound program loads and attaches there exactly where DevBoundOn
// says so. The driver is veth's, it has no PTP hardware clock, and the
// kernel-wide DevBound probe agrees with the interfaces'.
func TestInterfaceProbesForDoctor(t *testing.T) {
	ns := netns.New(t)
	netns.Veth(t, ns, "dva", ns, "dvb")
	plain := func(dev int) (*ebpf.Program, error) {
		flags := uint32(0)
		if dev != 0 {
			flags = unix.BPF_F_XDP_DEV_BOUND_ONLY
		}
		return ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.XDP, License: "GPL", Flags: flags, Ifindex: uint32(dev),
			Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 2), asm.Return()}})
	}
	// attach reports whether a program attaches to ifindex in driver mode.
	attach := func(prog *ebpf.Program, ifindex int) error {
		l, err := link.AttachXDP(link.XDPOptions{Program: prog, Interface: ifindex, Flags: link.XDPDriverMode})
		if err == nil {
			l.Close()
		}
		return err
	}
	devBound := false
	err := ns.Do(func() error {
		ifs, err := net.Interfaces()
		if err != nil {
			return err
		}
		if len(ifs) != 3 {
			t.Errorf("the namespace has %d interfaces, want lo and the veth pair", len(ifs))
		}
		prog, err := plain(0)
		if err != nil {
			return err
		}
		defer prog.Close()
		for _, ifc := range ifs {
			x, err := kernel.XDPFeatures(ifc.Index)
			if errors.Is(err, kernel.ErrNoNetdevFamily) {
				t.Logf("%s: %v", ifc.Name, err)
				continue
			}
			if err != nil {
				t.Errorf("%s: XDPFeatures: %v", ifc.Name, err)
				continue
			}
			native := slices.Contains(x.Act.Names(), "basic")
			aerr := attach(prog, ifc.Index)
			t.Logf("%s: xdp-features %v, rx metadata %v; driver-mode attach: %v", ifc.Name, x.Act.Names(),
				x.RxMeta.Names(), aerr)
			if native != (aerr == nil) {
				t.Errorf("%s: xdp-features say native XDP %v, an attach in driver mode: %v", ifc.Name, native, aerr)
			}
			if ifc.Name == "lo" && native {
				t.Errorf("lo: xdp-features say native XDP")
			}
			if ifc.Name != "lo" && !native {
				t.Errorf("%s: veth without native XDP", ifc.Name)
			}

			db := kernel.DevBoundOn(ifc.Index)
			if db.Feature != kernel.DevBound {
				t.Errorf("%s: DevBoundOn names %s", ifc.Name, db.Feature)
			}
			// It loads where the driver has XDP; it attaches where native.
			dp, derr := plain(ifc.Index)
			if derr == nil && native {
				derr = attach(dp, ifc.Index)
			}
			if dp != nil {
				dp.Close()
			}
			t.Logf("%s: DevBoundOn %s %s; a device-bound program: %v", ifc.Name, db.State, db.Detail, derr)
			if db.OK() != (derr == nil) {
				t.Errorf("%s: DevBoundOn says %s (%s), a device-bound program: %v", ifc.Name, db.State, db.Detail, derr)
			}
			devBound = devBound || db.OK()

			st, err := kernel.ReadStamping(ifc.Name)
			if err != nil {
				t.Errorf("%s: ReadStamping: %v", ifc.Name, err)
			} else if st.PHC >= 0 || st.RxAll() == nil {
				t.Errorf("%s: a PHC (%d) or hardware rx stamps on a virtual device: %+v", ifc.Name, st.PHC, st)
			}
			if ifc.Name == "lo" {
				continue
			}
			d, err := kernel.Driver(ifc.Name)
			if err != nil || d.Driver != "veth" {
				t.Errorf("%s: Driver %+v, %v; want veth", ifc.Name, d, err)
			}
		}
		if _, err := kernel.Driver("lo"); err == nil {
			t.Errorf("lo: a driver, where ethtool -i says operation not supported")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if r := kernel.Probe(kernel.DevBound); devBound && !r.OK() {
		t.Errorf("a veth takes a device-bound program, yet the kernel probe says %s (%s)", r.State, r.Detail)
	}
}

// TestProgramNeedsForDoctor: the helpers a program calls are the features
// it needs, each once, in order; other helpers are not probed.
func TestProgramNeedsForDoctor(t *testing.T) {
	insns := asm.Instructions{
		asm.FnLoop.Call(), asm.FnKtimeGetTaiNs.Call(), asm.FnMapLookupElem.Call(), asm.FnLoop.Call(),
		asm.Mov.Imm(asm.R0, 2), asm.Return(),
	}
	got := kernel.ProgramNeeds(insns)
	want := []kernel.Feature{kernel.KtimeGetTAINs, kernel.Loop}
	if !slices.Equal(got, want) {
		t.Errorf("ProgramNeeds = %v, want %v", got, want)
	}
}

// TestCapsForDoctor: CapEff of this process decodes to names, and the
// names of the capabilities linerate needs are the kernel's.
func TestCapsForDoctor(t *testing.T) {
	c, err := kernel.EffectiveCaps()
	if err != nil {
		t.Fatal(err)
	}
	for cp, name := range map[kernel.Cap]string{kernel.CapNetAdmin: "CAP_NET_ADMIN", kernel.CapNetRaw: "CAP_NET_RAW",
		kernel.CapBPF: "CAP_BPF", kernel.CapSysAdmin: "CAP_SYS_ADMIN", kernel.CapIPCLock: "CAP_IPC_LOCK",
		kernel.CapSysNice: "CAP_SYS_NICE", kernel.CapPerfmon: "CAP_PERFMON"} {
		if cp.String() != name {
			t.Errorf("capability %d is %s, want %s", uint(cp), cp, name)
		}
	}
	var names []string
	for _, cp := range c.List() {
		names = append(names, cp.String())
	}
	t.Logf("CapEff: %s", strings.Join(names, " "))
	if kernel.Caps(1<<kernel.CapSysAdmin).BPF() != true || kernel.Caps(1<<kernel.CapNetAdmin).BPF() {
		t.Error("BPF() is not CAP_BPF or CAP_SYS_ADMIN")
	}
}
