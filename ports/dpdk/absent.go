//go:build !dpdk

package dpdk

// Without the dpdk tag, the package says which build has the driver.

import (
	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/ports"
)

// Build says which build has the dpdk driver.
const Build = "the dpdk driver is in the DPDK build: install the linerate-dpdk package and run linerate-dpdk"

func init() {
	config.RegisterSection(config.Section{Name: "dpdk", Absent: Build})
	ports.RegisterAbsent("dpdk", Build)
}
