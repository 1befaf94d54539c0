//go:build dpdk

package route_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/linerate/linerate/internal/routedtest"
)

var vdevSeq atomic.Int32

// TestKernelHostsDPDK is TestKernelHosts with the router's ports on DPDK
// net_af_packet vdevs (go test -tags dpdk). The engine starts the EAL from the
// [dpdk] table, without hugepages.
func TestKernelHostsDPDK(t *testing.T) { routedtest.Run(t, dpdkPorts, dpdkSection) }

// TestKernelHostsMTUDPDK is TestKernelHostsMTU on net_af_packet vdevs: the
// PMD sets r2's MTU on its interface, and Close puts the interface's back.
func TestKernelHostsMTUDPDK(t *testing.T) { routedtest.RunMTU(t, dpdkPorts, dpdkSection) }

func dpdkPorts(port, iface string) string {
	return fmt.Sprintf("driver = \"dpdk\"\ndevice = \"net_af_packet%d,iface=%s\"", 300+vdevSeq.Add(1), iface)
}

const dpdkSection = `[dpdk]
huge = false
in_memory = true
memory = "1GiB"
pool_size = 8191
eal_args = ["--no-pci", "--no-telemetry"]
`
