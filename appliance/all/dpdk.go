//go:build dpdk

package all

import _ "github.com/linerate/linerate/ports/dpdk" // the DPDK datapath, in builds with -tags dpdk
