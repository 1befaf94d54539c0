//go:build dpdk

package dpdk

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Where the host checks read; tests point them at fixtures.
var (
	sysRoot  = "/sys"
	procRoot = "/proc"
)

// userspaceDrivers are the kernel drivers under which a PMD can own a PCI device.
// Mellanox NICs stay on their kernel driver (bifurcated) and need none of them.
var (
	userspaceDrivers  = []string{"vfio-pci", "uio_pci_generic", "igb_uio"}
	bifurcatedDrivers = []string{"mlx4_core", "mlx5_core"}
)

// hostWarnings are what `linerate validate` says about running this port on this
// host: no hugepages for an EAL that wants them, and for a real NIC a device not
// bound to vfio-pci and lcore CPUs the kernel does not keep free.
func hostWarnings(e EAL, device string, lcores []int) []string {
	var w []string
	if e.huge() && hugepagesTotal() == 0 {
		w = append(w, "dpdk: no hugepages are reserved (HugePages_Total is 0), so the EAL cannot start; "+
			"reserve some (docs/dpdk.md) or, for a lab with vdevs, set huge = false in [dpdk]")
	}
	if !IsPCI(device) {
		return w
	}
	addr, _, _ := strings.Cut(device, ",")
	if strings.Count(addr, ":") == 1 { // BB:DD.F: domain 0
		addr = "0000:" + addr
	}
	dev := filepath.Join(sysRoot, "bus/pci/devices", strings.ToLower(addr))
	if _, err := os.Stat(dev); err != nil {
		w = append(w, fmt.Sprintf("dpdk: there is no PCI device %s on this host", addr))
	} else {
		link, err := os.Readlink(filepath.Join(dev, "driver"))
		drv := filepath.Base(link)
		switch {
		case err != nil:
			w = append(w, fmt.Sprintf("dpdk: PCI device %s is bound to no driver; bind it to vfio-pci "+
				"(dpdk-devbind.py --bind=vfio-pci %s)", addr, addr))
		case slices.Contains(bifurcatedDrivers, drv):
		case drv == "vfio-pci":
		case slices.Contains(userspaceDrivers, drv):
			w = append(w, fmt.Sprintf("dpdk: PCI device %s is bound to %s; vfio-pci is the safe choice "+
				"(IOMMU protection, no out-of-tree module)", addr, drv))
		default:
			w = append(w, fmt.Sprintf("dpdk: PCI device %s is bound to the kernel driver %s, not vfio-pci; "+
				"DPDK cannot drive it (dpdk-devbind.py --bind=vfio-pci %s)", addr, drv, addr))
		}
	}
	iso := isolatedCPUs()
	var loose []string
	for _, c := range lcores {
		if !slices.Contains(iso, c) {
			loose = append(loose, strconv.Itoa(c))
		}
	}
	if len(loose) > 0 {
		w = append(w, fmt.Sprintf("dpdk: lcore CPUs %s are not isolated (isolcpus=, nohz_full=): the kernel "+
			"schedules other work on them and polling loses packets", strings.Join(loose, ",")))
	}
	return w
}

// hugepagesTotal is the number of hugepages of every size the kernel holds.
func hugepagesTotal() int {
	total := 0
	dirs, _ := filepath.Glob(filepath.Join(sysRoot, "kernel/mm/hugepages/hugepages-*"))
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "nr_hugepages"))
		if err != nil {
			continue
		}
		n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		total += n
	}
	if len(dirs) > 0 {
		return total
	}
	f, err := os.Open(filepath.Join(procRoot, "meminfo"))
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "HugePages_Total:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}

// isolatedCPUs reads the kernel's isolated CPU list ("2-5,8").
func isolatedCPUs() []int {
	b, err := os.ReadFile(filepath.Join(sysRoot, "devices/system/cpu/isolated"))
	if err != nil {
		return nil
	}
	return parseCPUList(strings.TrimSpace(string(b)))
}

func parseCPUList(s string) []int {
	var out []int
	for _, part := range strings.Split(s, ",") {
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			continue
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil {
				continue
			}
		}
		for c := a; c <= b && c-a < 4096; c++ {
			out = append(out, c)
		}
	}
	return out
}
