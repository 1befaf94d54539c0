// Command linerate is the linerate appliance with every built-in stage and port
// driver (and DPDK's in builds with -tags dpdk). The command itself is package
// cli; a custom build is this file with other imports (docs/examples/custom).
package main

import (
	"github.com/linerate/linerate/appliance/cli"

	_ "github.com/linerate/linerate/appliance/all" // every built-in stage and port driver
)

func main() { cli.Main() }
