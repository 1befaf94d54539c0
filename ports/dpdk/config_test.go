//go:build dpdk

package dpdk

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/linerate/linerate/appliance"
	"github.com/linerate/linerate/appliance/cpuset"
)

func TestArgs(t *testing.T) {
	no := false
	for _, c := range []struct {
		name   string
		cfg    EAL
		lcores []int
		want   []string // in order, as a subsequence
		absent []string
	}{
		{"defaults", EAL{}, nil, []string{"-l", "--log-level", "warning"}, []string{"--no-huge", "-m"}},
		{"lab", EAL{Huge: &no, InMemory: true, Memory: 512 << 20, FilePrefix: "lr"}, nil,
			[]string{"-m", "512", "--no-huge", "--no-shconf", "--file-prefix", "lr"}, []string{"--in-memory"}},
		{"own lcores", EAL{Lcores: "3-4"}, []int{1}, []string{"-l", "3-4"}, nil},
		{"lcores in eal_args", EAL{EALArgs: []string{"--lcores=5"}}, nil, []string{"--lcores=5"}, []string{"-l"}},
		{"eal_args last", EAL{EALArgs: []string{"--no-pci", "--vdev=net_null0"}, Drivers: []string{"/x.so"}}, nil,
			[]string{"-d", "/x.so", "--no-pci", "--vdev=net_null0"}, nil},
		{"no-huge in eal_args", EAL{EALArgs: []string{"--no-huge", "--in-memory"}}, nil, []string{"--no-huge", "--no-shconf"},
			[]string{"--in-memory"}},
	} {
		got := c.cfg.Args(c.lcores)
		i := 0
		for _, a := range got {
			if i < len(c.want) && a == c.want[i] {
				i++
			}
		}
		if i != len(c.want) {
			t.Errorf("%s: args %q lack %q in order", c.name, got, c.want)
		}
		for _, a := range c.absent {
			if slices.Contains(got, a) {
				t.Errorf("%s: args %q hold %q", c.name, got, a)
			}
		}
	}
	// The main lcore goes on a CPU the engine does not use, when there is one.
	cpus := cpuset.Allowed()
	if len(cpus) > 1 {
		if got := mainCPU(cpus[:1]); got == cpus[0] {
			t.Errorf("main lcore on %d, the engine's lcore", got)
		}
	}
}

func TestCheckEAL(t *testing.T) {
	for _, c := range []EAL{{PoolSize: 10}, {PoolCache: 1000}, {DataRoom: 10}, {DataRoom: 70000}, {EALArgs: []string{""}}} {
		if err := c.withDefaults().check(); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	if err := (&EAL{}).withDefaults().check(); err != nil {
		t.Error(err)
	}
}

// fakeHost builds a sysfs with one PCI device bound to drv (none when ""), the
// given hugepages and isolated CPUs.
func fakeHost(t *testing.T, addr, drv string, hugepages string, isolated string) {
	t.Helper()
	root := t.TempDir()
	mk := func(p, content string) {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mk("kernel/mm/hugepages/hugepages-2048kB/nr_hugepages", hugepages+"\n")
	mk("devices/system/cpu/isolated", isolated+"\n")
	if addr != "" {
		dev := filepath.Join(root, "bus/pci/devices", addr)
		mk(filepath.Join("bus/pci/devices", addr, "vendor"), "0x8086\n")
		if drv != "" {
			if err := os.MkdirAll(filepath.Join(root, "bus/pci/drivers", drv), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Join("../../../bus/pci/drivers", drv), filepath.Join(dev, "driver")); err != nil {
				t.Fatal(err)
			}
		}
	}
	oldSys := sysRoot
	sysRoot = root
	t.Cleanup(func() { sysRoot = oldSys })
}

func TestHostWarnings(t *testing.T) {
	no := false
	for _, c := range []struct {
		name                      string
		addr, drv, huge, isolated string
		cfg                       EAL
		device                    string
		lcores                    []int
		want                      []string
	}{
		{"ready NIC", "0000:03:00.0", "vfio-pci", "1024", "2-3", EAL{}, "0000:03:00.0", []int{2, 3}, nil},
		{"Mellanox stays on its driver", "0000:03:00.0", "mlx5_core", "512", "2", EAL{}, "03:00.0", []int{2}, nil},
		{"kernel driver", "0000:03:00.0", "ixgbe", "1024", "2", EAL{}, "0000:03:00.0", []int{2}, []string{"kernel driver ixgbe"}},
		{"unbound", "0000:03:00.0", "", "1024", "2", EAL{}, "0000:03:00.0", []int{2}, []string{"bound to no driver"}},
		{"uio", "0000:03:00.0", "igb_uio", "1024", "2", EAL{}, "0000:03:00.0", []int{2}, []string{"bound to igb_uio"}},
		{"absent", "", "", "1024", "2", EAL{}, "0000:04:00.0", []int{2}, []string{"no PCI device 0000:04:00.0"}},
		{"no hugepages", "0000:03:00.0", "vfio-pci", "0", "2", EAL{}, "0000:03:00.0", []int{2}, []string{"no hugepages"}},
		{"not isolated", "0000:03:00.0", "vfio-pci", "64", "", EAL{}, "0000:03:00.0", []int{1, 2}, []string{"CPUs 1,2 are not isolated"}},
		{"lab without hugepages", "", "", "0", "", EAL{Huge: &no}, "net_null0", []int{1}, nil},
		{"vdev on a hugepage EAL", "", "", "0", "", EAL{}, "net_ring0", []int{1}, []string{"no hugepages"}},
	} {
		fakeHost(t, c.addr, c.drv, c.huge, c.isolated)
		got := hostWarnings(c.cfg, c.device, c.lcores)
		if len(got) != len(c.want) {
			t.Errorf("%s: warnings %q, want %d", c.name, got, len(c.want))
			continue
		}
		for i, w := range c.want {
			if !strings.Contains(got[i], w) {
				t.Errorf("%s: warning %q lacks %q", c.name, got[i], w)
			}
		}
	}
}

// TestValidateWarns: `linerate validate` (a dry-run engine) reports the host
// warnings of a DPDK config once each, and strict decoding names the file and
// line of a misspelt [dpdk] or port key.
func TestValidateWarns(t *testing.T) {
	fakeHost(t, "0000:03:00.0", "ixgbe", "0", "")
	cfg := `version = 1
[control]
listen = ""
[dpdk]
pool_size = 8191
[[ports]]
name = "wan"
driver = "dpdk"
device = "0000:03:00.0"
[[ports]]
name = "lan"
driver = "dpdk"
device = "0000:03:00.0,rx_desc=..."
[[pipelines]]
name = "p"
rx = ["wan"]
[[pipelines.stages]]
kind = "forward"
port = "lan"
`
	e := buildEngine(t, cfg, appliance.Options{DryRun: true})
	w := e.Warnings()
	_ = e.Close()
	joined := strings.Join(w, "\n")
	for _, want := range []string{"no hugepages", "kernel driver ixgbe", "not isolated"} {
		if n := strings.Count(joined, want); n != 1 {
			t.Errorf("warning %q appears %d times in:\n%s", want, n, joined)
		}
	}
	for _, c := range []struct{ toml, want string }{
		{strings.Replace(cfg, "pool_size = 8191", "pool_sise = 8191", 1), "dpdk-test.toml:5: dpdk.pool_sise"},
		{strings.Replace(cfg, `device = "0000:03:00.0"`, "devise = \"x\"", 1), "dpdk-test.toml:9"},
		{strings.Replace(cfg, "pool_size = 8191", "pool_size = 3", 1), "pool_size 3"},
	} {
		if _, err := newEngine(c.toml, appliance.Options{DryRun: true}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("error %v lacks %q", err, c.want)
		}
	}
}
