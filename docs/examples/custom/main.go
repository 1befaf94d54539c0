// Command linerate-custom is linerate with one stage more: example.ipversion,
// which lives outside linerate's tree. Build it with
// go build -o linerate-custom ./docs/examples/custom (README.md, "Custom builds").
package main

import (
	"github.com/linerate/linerate/appliance/cli"

	// every built-in stage and driver, and the example's stage
	_ "github.com/linerate/linerate/appliance/all"
	_ "github.com/linerate/linerate/docs/examples/custom/ipversion"
)

func main() { cli.Main() }
