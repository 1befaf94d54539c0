package cli

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// What linerate doctor reads of the host for DPDK, from files alone (no
// commands: dpdk-devbind.py and pkg-config may be absent where the binary
// runs). root is "/" on the host; tests give a tree of fixtures.

type doctorHugepages struct {
	SizeKB uint64 `json:"size_kb"`
	Total  int    `json:"total"`
	Free   int    `json:"free"`
}

type doctorPCI struct {
	Address string `json:"address"`
	Driver  string `json:"driver"` // "" when bound to none
	Class   string `json:"class,omitempty"`
	Iface   string `json:"interface,omitempty"`
}

type doctorDPDK struct {
	// Driver: this binary has the dpdk driver; else Build says which has.
	Driver bool   `json:"driver"`
	Build  string `json:"build,omitempty"`
	// Version of the DPDK installed, where a file says it; Library is its
	// EAL, "" when none is installed.
	Version        string            `json:"version,omitempty"`
	Library        string            `json:"library,omitempty"`
	Hugepages      []doctorHugepages `json:"hugepages"`
	DefaultHugeKB  uint64            `json:"default_hugepage_kb"`
	Hugetlbfs      []string          `json:"hugetlbfs"`
	IOMMUGroups    int               `json:"iommu_groups"`
	NoIOMMU        bool              `json:"vfio_noiommu"`
	Modules        map[string]bool   `json:"modules"`
	Bound          []doctorPCI       `json:"bound"`
	NetworkDevices []doctorPCI       `json:"network_devices"`
	ReadErrs       []string          `json:"errors,omitempty"`
}

// dpdkUserspace are the kernel drivers a PMD takes a PCI device from.
var dpdkUserspace = []string{"vfio-pci", "uio_pci_generic", "igb_uio"}

var pciAddr = regexp.MustCompile(`^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$`)

// readDPDKHost reads what DPDK needs of the host under root.
func readDPDKHost(root string) doctorDPDK {
	d := doctorDPDK{Modules: map[string]bool{}, Hugepages: []doctorHugepages{}, Hugetlbfs: []string{},
		Bound: []doctorPCI{}, NetworkDevices: []doctorPCI{}}
	p := func(s string) string { return filepath.Join(root, s) }

	dirs, _ := filepath.Glob(p("sys/kernel/mm/hugepages/hugepages-*kB"))
	for _, dir := range dirs {
		kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(filepath.Base(dir), "hugepages-"), "kB"), 10, 64)
		if err != nil {
			continue
		}
		d.Hugepages = append(d.Hugepages, doctorHugepages{SizeKB: kb, Total: readInt(filepath.Join(dir, "nr_hugepages")),
			Free: readInt(filepath.Join(dir, "free_hugepages"))})
	}
	sort.Slice(d.Hugepages, func(i, j int) bool { return d.Hugepages[i].SizeKB < d.Hugepages[j].SizeKB })
	meminfo := readKV(p("proc/meminfo"))
	if v, ok := meminfo["Hugepagesize"]; ok {
		d.DefaultHugeKB, _ = strconv.ParseUint(strings.TrimSuffix(v, " kB"), 10, 64)
	}
	if len(d.Hugepages) == 0 && meminfo["HugePages_Total"] != "" {
		total, _ := strconv.Atoi(meminfo["HugePages_Total"])
		free, _ := strconv.Atoi(meminfo["HugePages_Free"])
		d.Hugepages = append(d.Hugepages, doctorHugepages{SizeKB: d.DefaultHugeKB, Total: total, Free: free})
	}
	if b, err := os.ReadFile(p("proc/self/mounts")); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) >= 3 && f[2] == "hugetlbfs" {
				d.Hugetlbfs = append(d.Hugetlbfs, f[1])
			}
		}
	}

	if ents, err := os.ReadDir(p("sys/kernel/iommu_groups")); err == nil {
		d.IOMMUGroups = len(ents)
	}
	d.NoIOMMU = strings.TrimSpace(readString(p("sys/module/vfio/parameters/enable_unsafe_noiommu_mode"))) == "Y"
	for _, drv := range dpdkUserspace {
		dir := p("sys/bus/pci/drivers/" + drv)
		if _, err := os.Stat(dir); err != nil {
			d.Modules[drv] = false
			continue
		}
		d.Modules[drv] = true
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if pciAddr.MatchString(e.Name()) {
				d.Bound = append(d.Bound, doctorPCI{Address: e.Name(), Driver: drv})
			}
		}
	}
	// Network devices (PCI class 02), as dpdk-devbind.py --status lists them.
	devs, _ := os.ReadDir(p("sys/bus/pci/devices"))
	for _, e := range devs {
		dir := filepath.Join(p("sys/bus/pci/devices"), e.Name())
		class := strings.TrimSpace(readString(filepath.Join(dir, "class")))
		if !strings.HasPrefix(class, "0x02") {
			continue
		}
		dev := doctorPCI{Address: e.Name(), Class: class}
		if l, err := os.Readlink(filepath.Join(dir, "driver")); err == nil {
			dev.Driver = filepath.Base(l)
		}
		dev.Iface = pciIface(dir)
		d.NetworkDevices = append(d.NetworkDevices, dev)
	}
	d.Version, d.Library = dpdkInstalled(root)
	return d
}

// pciIface names the kernel interface of a PCI device: its net/ directory,
// or its virtio child's.
func pciIface(dir string) string {
	for _, pat := range []string{"net/*", "virtio*/net/*"} {
		if m, _ := filepath.Glob(filepath.Join(dir, pat)); len(m) > 0 {
			return filepath.Base(m[0])
		}
	}
	return ""
}

// dpdkInstalled finds DPDK's EAL library and says its version: the
// package's (dpkg's status file), else libdpdk.pc's beside it, else the
// library's ABI.
func dpdkInstalled(root string) (version, lib string) {
	var libs []string
	for _, pat := range []string{"usr/lib/*/librte_eal.so.*", "usr/lib64/librte_eal.so.*", "usr/lib/librte_eal.so.*",
		"usr/local/lib/librte_eal.so.*", "usr/local/lib/*/librte_eal.so.*", "usr/local/lib64/librte_eal.so.*"} {
		m, _ := filepath.Glob(filepath.Join(root, pat))
		libs = append(libs, m...)
	}
	if len(libs) == 0 {
		return "", ""
	}
	// The longest name is the real file (librte_eal.so.23.0); the others
	// link to it.
	slices.SortFunc(libs, func(a, b string) int { return len(b) - len(a) })
	lib = libs[0]
	abi, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(lib), "librte_eal.so."), ".")
	rel, _ := filepath.Rel(root, lib)
	lib = "/" + rel
	if v := dpkgVersion(filepath.Join(root, "var/lib/dpkg/status"), "librte-eal"+abi); v != "" {
		return v, lib
	}
	kv := readKV(filepath.Join(filepath.Dir(filepath.Join(root, rel)), "pkgconfig", "libdpdk.pc"))
	if v := kv["Version"]; v != "" {
		return v, lib
	}
	return "ABI " + abi, lib
}

// dpkgVersion is the installed version of pkg in dpkg's status file.
func dpkgVersion(status, pkg string) string {
	f, err := os.Open(status)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	in := false
	for sc.Scan() {
		l := sc.Text()
		switch {
		case l == "":
			in = false
		case strings.HasPrefix(l, "Package: "):
			in = strings.TrimPrefix(l, "Package: ") == pkg
		case in && strings.HasPrefix(l, "Version: "):
			return strings.TrimPrefix(l, "Version: ")
		}
	}
	return ""
}

// readKV reads "Key: value" lines (/proc/meminfo, a .pc file).
func readKV(path string) map[string]string {
	out := map[string]string{}
	b, err := os.ReadFile(path)
	if err != nil {
		return out
	}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok {
			out[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return out
}

func readString(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

func readInt(path string) int {
	n, _ := strconv.Atoi(strings.TrimSpace(readString(path)))
	return n
}

// memlock is RLIMIT_MEMLOCK's soft limit; -1 for unlimited.
func memlock() (int64, error) {
	var r unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &r); err != nil {
		return 0, err
	}
	if r.Cur == unix.RLIM_INFINITY {
		return -1, nil
	}
	return int64(r.Cur), nil
}

// uname is the kernel's release, version and machine.
func uname() (release, version, machine string) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "unknown", "", ""
	}
	return unix.ByteSliceToString(u.Release[:]), unix.ByteSliceToString(u.Version[:]), unix.ByteSliceToString(u.Machine[:])
}

// clocksource is the kernel's clock source and the others it could use.
func clocksource() (current string, available []string) {
	dir := "/sys/devices/system/clocksource/clocksource0/"
	current = strings.TrimSpace(readString(dir + "current_clocksource"))
	available = strings.Fields(readString(dir + "available_clocksource"))
	return current, available
}

// bytesIEC prints a size in KiB, MiB or GiB.
func bytesIEC(n uint64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}
