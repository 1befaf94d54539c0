package cli

import (
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/linerate/linerate/appliance/kernel"
	"github.com/linerate/linerate/internal/netns"
	"github.com/linerate/linerate/internal/testenv"
)

// doctorJSON runs cmd (linerate doctor --json, however started) and decodes
// its report.
func doctorJSON(t *testing.T, cmd *exec.Cmd) doctorReport {
	t.Helper()
	var errb strings.Builder
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, errb.String())
	}
	var r doctorReport
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	return r
}

// TestDoctorOutput: doctor prints every section within 100 columns, the
// same with --wide a row to a line, --json one object with every section,
// --help to stdout; -c adds the config's findings, and exits 1 when one
// fails.
func TestDoctorOutput(t *testing.T) {
	out, errs, code := runCLI(t, "doctor")
	if code != 0 {
		t.Fatalf("doctor: exit %d\n%s", code, errs)
	}
	checkWidth(t, "doctor", out)
	if first, _, _ := strings.Cut(out, "\n"); first != "HOST" {
		t.Errorf("doctor's first line is %q, want HOST (the docs test compares it)", first)
	}
	for _, head := range [][]string{{"KERNEL", "FEATURE", "STATE", "FOR"}, {"DPDK"}, {"PROCESS"}, {"CLOCK"},
		{"DRIVER", "HERE", "NEEDS"}} {
		if !hasRow(out, head...) {
			t.Errorf("doctor has no %v line:\n%s", head, out)
		}
	}
	if !hasLine(out, "INTERFACE", "DRIVER", "XDP", "ZEROCOPY", "DEVBOUND", "PHC", "HWSTAMP") {
		t.Errorf("doctor has no interface table:\n%s", out)
	}
	for _, f := range kernel.Features() {
		if !strings.Contains(out, f.String()+" ") {
			t.Errorf("doctor does not name %s", f)
		}
	}
	// --wide: the interface table keeps its notes on lo's row.
	wide, errs, code := runCLI(t, "doctor", "--wide")
	if code != 0 || !hasLine(wide, "lo ", "loopback: no driver") {
		t.Errorf("doctor --wide: exit %d %s; no lo row with its notes:\n%s", code, errs, wide)
	}

	jsonOut, _, code := runCLI(t, "doctor", "--json")
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(jsonOut), &raw); err != nil || code != 0 {
		t.Fatalf("doctor --json: exit %d, %v\n%s", code, err, jsonOut)
	}
	for _, k := range []string{"kernel", "features", "interfaces", "dpdk", "process", "clock"} {
		if raw[k] == nil {
			t.Errorf("doctor --json has no %q", k)
		}
	}
	if raw["config"] != nil {
		t.Errorf("doctor --json without -c has a config")
	}
	r := doctorJSON(t, exec.Command(linerateBin, "doctor", "--json"))
	if r.Kernel.Release == "" || len(r.Features) != len(kernel.Features()) || r.Clock.Source == "" ||
		!slices.ContainsFunc(r.Interfaces, func(i doctorIface) bool { return i.Name == "lo" }) {
		t.Errorf("doctor --json: %+v", r)
	}

	help, errs, code := runCLI(t, "doctor", "--help")
	if code != 0 || !strings.HasPrefix(help, "Usage: linerate doctor") || errs != "" {
		t.Errorf("doctor --help: exit %d, stdout %q, stderr %q", code, help, errs)
	}
	checkWidth(t, "doctor --help", help)

	dir := t.TempDir()
	cfg := func(name, mode string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(`version = 1
[engine]
pin = false
[control]
listen = ""
[[ports]]
name = "m0"
driver = "mem"
[[pipelines]]
name = "p"
rx = ["m0"]
[[pipelines.stages]]
name = "reflector"
kind = "stamp.reflector"
forward = "in"
offload = "`+mode+`"
`), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	auto := cfg("auto.toml", "auto")
	out, errs, code = runCLI(t, "doctor", "-c", auto)
	checkWidth(t, "doctor -c", out)
	if code != 0 || !hasLine(out, `stage "reflector"`, "XDP offload", "fallback", "runs in Go") {
		t.Errorf("doctor -c %s: exit %d %s\n%s", auto, code, errs, out)
	}
	xdp := cfg("xdp.toml", "xdp")
	out, errs, code = runCLI(t, "doctor", "-c", xdp, "--json")
	r = doctorReport{}
	if err := json.Unmarshal([]byte(out), &r); err != nil || code != 1 || r.Config == nil ||
		!strings.Contains(r.Config.Error, `offload = "xdp"`) ||
		!slices.ContainsFunc(r.Config.Findings, func(f doctorFinding) bool {
			return f.Subject == `stage "reflector"` && f.Outcome == "fail"
		}) {
		t.Errorf("doctor -c %s --json: exit %d %v %s\n%s", xdp, code, err, errs, out)
	}
}

// TestValidatePointsAtDoctor: validate says so when this host gives the
// config less than it asks, naming doctor -c, whether the config passes
// (a fallback) or not (a failure); offline it says nothing of the host.
func TestValidatePointsAtDoctor(t *testing.T) {
	dir := t.TempDir()
	write := func(name, mode string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(`version = 1
[[ports]]
name = "m0"
driver = "mem"
[[pipelines]]
name = "p"
rx = ["m0"]
[[pipelines.stages]]
kind = "stamp.reflector"
forward = "in"
offload = "`+mode+`"
`), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	for _, c := range []struct {
		mode, want string
		code       int
	}{{"auto", "1 fall back", 0}, {"xdp", "1 fail", 1}, {"off", "", 0}} {
		path := write(c.mode+".toml", c.mode)
		out, errs, code := runCLI(t, "validate", "-c", path)
		pointer := "linerate doctor -c " + path
		if code != c.code || c.want != "" && (!strings.Contains(errs, c.want) || !strings.Contains(errs, pointer)) ||
			c.want == "" && strings.Contains(errs, "doctor") {
			t.Errorf("validate offload = %q: exit %d\nstdout %s\nstderr %s", c.mode, code, out, errs)
		}
		if _, errs, _ := runCLI(t, "validate", "--offline", "-c", path); strings.Contains(errs, "doctor") {
			t.Errorf("validate --offline offload = %q points at doctor: %s", c.mode, errs)
		}
	}
}

// TestDoctorAgreesWithTheKernel runs doctor in a namespace of its own with a
// veth pair and holds each answer to what the kernel does when asked: an
// XDP program attaches in driver mode exactly where doctor says native (not
// on dqb, which has fewer rx queues than its peer has tx queues), a
// device-bound one loads exactly where it says dev_bound yes (and attaches
// where native), the driver is veth with the queues the pair was made with;
// and its kernel features are kernel.Probe's here.
func TestDoctorAgreesWithTheKernel(t *testing.T) {
	ns := netns.New(t)
	ns.IP(t, "link", "add", "dqa", "numtxqueues", "3", "numrxqueues", "2", "type", "veth", "peer", "name", "dqb",
		"numtxqueues", "2", "numrxqueues", "2")
	ns.IP(t, "link", "set", "dqa", "up")
	ns.IP(t, "link", "set", "dqb", "up")
	r := doctorJSON(t, exec.Command("ip", "netns", "exec", ns.Name(), linerateBin, "doctor", "--json"))

	for _, f := range r.Features {
		k, ok := kernel.Parse(f.Name)
		if !ok {
			t.Errorf("doctor names a feature %q the kernel package does not know", f.Name)
			continue
		}
		if p := kernel.Probe(k); p.State.String() != f.State {
			t.Errorf("%s: doctor says %s (%s), kernel.Probe %s (%s)", f.Name, f.State, f.Detail, p.State, p.Detail)
		}
	}

	names := map[string]doctorIface{}
	for _, i := range r.Interfaces {
		names[i.Name] = i
	}
	if len(names) != 3 || names["lo"].Name == "" || names["dqa"].Name == "" || names["dqb"].Name == "" {
		t.Fatalf("doctor in the namespace lists %v, want lo, dqa and dqb", r.Interfaces)
	}
	if a := names["dqa"]; a.Driver != "veth" || a.RxQueues != 2 || a.TxQueues != 3 || a.MTU != 1500 || a.PHC != "" ||
		a.HWRxStamps.State != "no" {
		t.Errorf("dqa: %+v; want veth, 2 rx and 3 tx queues, mtu 1500, no PHC nor hardware stamps", a)
	}
	prog := func(ifindex int) (*ebpf.Program, error) {
		flags := uint32(0)
		if ifindex != 0 {
			flags = unix.BPF_F_XDP_DEV_BOUND_ONLY
		}
		return ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.XDP, License: "GPL", Flags: flags, Ifindex: uint32(ifindex),
			Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 2), asm.Return()}})
	}
	attach := func(p *ebpf.Program, err error, ifindex int) error {
		if err != nil {
			return err
		}
		defer p.Close()
		l, err := link.AttachXDP(link.XDPOptions{Program: p, Interface: ifindex, Flags: link.XDPDriverMode})
		if err == nil {
			l.Close()
		}
		return err
	}
	err := ns.Do(func() error {
		for name, d := range names {
			ifc, err := net.InterfaceByName(name)
			if err != nil {
				return err
			}
			if ifc.Index != d.Index {
				t.Errorf("%s: doctor says index %d, the namespace %d", name, d.Index, ifc.Index)
			}
			p, perr := prog(0)
			native := attach(p, perr, ifc.Index)
			t.Logf("%s: doctor: xdp %s %v, dev_bound %s; driver-mode attach: %v", name, d.XDP, d.XDPFeatures,
				d.DevBound.State, native)
			if d.XDP != "unknown" && (d.XDP == "native") != (native == nil) {
				t.Errorf("%s: doctor says XDP %s, a driver-mode attach: %v", name, d.XDP, native)
			}
			// A device-bound program loads where the driver has XDP at
			// all; it attaches where XDP is native.
			p, dev := prog(ifc.Index)
			if dev == nil && d.XDP == "native" {
				dev = attach(p, nil, ifc.Index)
			} else if dev == nil {
				p.Close()
			}
			if (d.DevBound.State == "yes") != (dev == nil) {
				t.Errorf("%s: doctor says dev_bound %s (%s), a device-bound program: %v", name, d.DevBound.State,
					d.DevBound.Detail, dev)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestDoctorUnprivileged runs doctor as nobody, whom setuid leaves no
// capabilities: it still prints everything it can see, and each answer it
// cannot have says what it needs.
func TestDoctorUnprivileged(t *testing.T) {
	testenv.RequireRoot(t)
	// nobody must reach the binary: a directory of its own, not the
	// test's (mode 0700).
	dir, err := os.MkdirTemp("", "linerate-doctor")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin := filepath.Join(dir, "linerate")
	b, err := os.ReadFile(linerateBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	nobody := func(args ...string) *exec.Cmd {
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		return cmd
	}
	r := doctorJSON(t, nobody("doctor", "--json"))
	if r.Process.UID != 65534 || len(r.Process.Caps) != 0 || !slices.Contains(r.Process.Lacks, "CAP_BPF") {
		t.Errorf("doctor as nobody: process %+v", r.Process)
	}
	for _, f := range r.Features {
		k, _ := kernel.Parse(f.Name)
		needs := k.Needs()
		switch {
		case slices.Contains(needs, kernel.CapBPF):
			if f.State != "unknown" || f.Detail != "needs root (CAP_BPF, CAP_NET_ADMIN)" {
				t.Errorf("%s as nobody: %s %q; want unknown: needs root (CAP_BPF, CAP_NET_ADMIN)", f.Name, f.State, f.Detail)
			}
		case len(needs) > 0:
			if f.State != "unknown" || !strings.HasPrefix(f.Detail, "needs root (") {
				t.Errorf("%s as nobody: %s %q; want unknown, needing root", f.Name, f.State, f.Detail)
			}
		case f.State == "unknown":
			t.Errorf("%s needs no privileges, yet is unknown to nobody: %s", f.Name, f.Detail)
		}
	}
	for _, i := range r.Interfaces {
		if i.DevBound.State != "unknown" || !strings.HasPrefix(i.DevBound.Detail, "needs root (CAP_BPF") {
			t.Errorf("%s as nobody: dev_bound %+v, want unknown: needs root", i.Name, i.DevBound)
		}
		want := "generic" // xdp-features need no privileges; before Linux 6.3 nobody has them
		if _, err := kernel.XDPFeatures(1); errors.Is(err, kernel.ErrNoNetdevFamily) {
			want = "unknown"
		}
		if i.Name == "lo" && (i.XDP != want || i.Link != "up") {
			t.Errorf("lo as nobody: %+v; want XDP %s, link up", i, want)
		}
	}
	cmd := nobody("doctor")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("doctor as nobody: %v", err)
	}
	checkWidth(t, "doctor as nobody", string(out))
	if !hasLine(string(out), "bpf_loop", "unknown") || !strings.Contains(string(out), "needs root (CAP_BPF") ||
		!hasLine(string(out), "xdp", "lacks NET_ADMIN, BPF") {
		t.Errorf("doctor as nobody does not say what it could not see:\n%s", out)
	}
}

// TestDoctorDPDKHost reads a host of fixtures: hugepages of two sizes, an
// IOMMU, vfio-pci loaded with a NIC bound to it and another on its kernel
// driver, and DPDK's EAL with dpkg's word on its version.
func TestDoctorDPDKHost(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{
		"sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages":      "512\n",
		"sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages":    "500\n",
		"sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages":   "2\n",
		"sys/kernel/mm/hugepages/hugepages-1048576kB/free_hugepages": "2\n",
		"proc/meminfo":                                  "MemTotal: 1 kB\nHugePages_Total:     512\nHugepagesize:       2048 kB\n",
		"proc/self/mounts":                              "hugetlbfs /dev/hugepages hugetlbfs rw,relatime,pagesize=2M 0 0\n",
		"sys/kernel/iommu_groups/0/type":                "DMA\n",
		"sys/kernel/iommu_groups/1/type":                "DMA\n",
		"sys/bus/pci/drivers/vfio-pci/new_id":           "",
		"sys/bus/pci/devices/0000:03:00.0/class":        "0x020000\n",
		"sys/bus/pci/devices/0000:04:00.0/class":        "0x020000\n",
		"sys/bus/pci/devices/0000:04:00.0/net/eth1/x":   "",
		"sys/bus/pci/devices/0000:05:00.0/class":        "0x010802\n", // a disk: not listed
		"usr/lib/x86_64-linux-gnu/librte_eal.so.24.0":   "",
		"usr/lib/x86_64-linux-gnu/pkgconfig/libdpdk.pc": "Version: 23.11.0\n",
		"var/lib/dpkg/status": "Package: librte-eal23\nVersion: 22.11.1-1\n\nPackage: librte-eal24\nStatus: install ok installed\n" +
			"Version: 23.11.2-1\n",
	}
	for name, body := range files {
		path := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	link := func(target, name string) {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	link("../../../../devices/pci0000:00/0000:03:00.0", "sys/bus/pci/drivers/vfio-pci/0000:03:00.0")
	link("../../../bus/pci/drivers/vfio-pci", "sys/bus/pci/devices/0000:03:00.0/driver")
	link("../../../bus/pci/drivers/ixgbe", "sys/bus/pci/devices/0000:04:00.0/driver")
	link("librte_eal.so.24.0", "usr/lib/x86_64-linux-gnu/librte_eal.so.24")

	d := readDPDKHost(root)
	want := []doctorHugepages{{2048, 512, 500}, {1 << 20, 2, 2}}
	if !slices.Equal(d.Hugepages, want) || d.DefaultHugeKB != 2048 || !slices.Equal(d.Hugetlbfs, []string{"/dev/hugepages"}) {
		t.Errorf("hugepages %+v (default %d kB), hugetlbfs %v", d.Hugepages, d.DefaultHugeKB, d.Hugetlbfs)
	}
	if d.IOMMUGroups != 2 || !d.Modules["vfio-pci"] || d.Modules["uio_pci_generic"] {
		t.Errorf("iommu groups %d, modules %v", d.IOMMUGroups, d.Modules)
	}
	if !slices.Equal(d.Bound, []doctorPCI{{Address: "0000:03:00.0", Driver: "vfio-pci"}}) {
		t.Errorf("bound %+v", d.Bound)
	}
	if !slices.Equal(d.NetworkDevices, []doctorPCI{{"0000:03:00.0", "vfio-pci", "0x020000", ""},
		{"0000:04:00.0", "ixgbe", "0x020000", "eth1"}}) {
		t.Errorf("network devices %+v", d.NetworkDevices)
	}
	if d.Version != "23.11.2-1" || d.Library != "/usr/lib/x86_64-linux-gnu/librte_eal.so.24.0" {
		t.Errorf("DPDK %q in %q, want dpkg's 23.11.2-1 for librte-eal24", d.Version, d.Library)
	}
	if err := os.Remove(filepath.Join(root, "var/lib/dpkg/status")); err != nil {
		t.Fatal(err)
	}
	if v, _ := dpdkInstalled(root); v != "23.11.0" {
		t.Errorf("without dpkg: DPDK %q, want libdpdk.pc's 23.11.0", v)
	}
	if v, lib := dpdkInstalled(t.TempDir()); v != "" || lib != "" {
		t.Errorf("no DPDK installed: %q %q", v, lib)
	}
}
