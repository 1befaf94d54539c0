//go:build dpdk

package dpdk

import (
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/linerate/linerate/appliance/cpuset"
	"github.com/linerate/linerate/internal/testenv"
)

// One EAL per test binary, as ARCHITECTURE.md asks: no hugepages, no shared
// files, no PCI scan. Tests add and remove their own vdevs.
var ealErr error

// testCPUs are the CPUs the EAL may use: two when the machine has them, so that a
// registered engine lcore and the main lcore need not share one.
func testArgs() []string {
	cpus := cpuset.Allowed()
	list := strconv.Itoa(cpus[0])
	return []string{"--no-huge", "--in-memory", "--no-pci", "-l", list, "-m", "1024", "--no-telemetry",
		"--log-level", "warning"}
}

func TestMain(m *testing.M) {
	ealErr = Start(testArgs(), EAL{PoolSize: 8191, PoolCache: 256})
	if ealErr != nil {
		fmt.Fprintf(os.Stderr, "dpdk tests: %v\n", ealErr)
	}
	code := m.Run()
	Cleanup()
	os.Exit(code)
}

// requireEAL skips (fails under CI=true) when the EAL could not start here.
func requireEAL(t testing.TB) {
	t.Helper()
	testenv.Require(t, fmt.Sprintf("a DPDK EAL (%v)", ealErr), ealErr == nil)
}
