// linerate-sampler is an example out-of-process plugin: it marks one packet in
// every N and exports those to a pcap file. linerate runs it as an external
// stage (plugins/external); it is built from plugins/sdk and the stage
// contract alone, like any plugin of yours would be.
package main

import (
	"github.com/linerate/linerate/plugins"
	"github.com/linerate/linerate/plugins/sdk"
)

func main() {
	sdk.Serve(plugins.Kind{Name: "sampler", Summary: "mark 1 in N packets and export them to a pcap file", New: newSampler})
}
