// linerate-mirror is an example out-of-process plugin that makes packets: it
// copies one packet in every N, into a buffer linerate lends it, and sends
// the copy to a mirror port (Emit), or, with no port, on down linerate's
// chain beside the original (Produce). Every original continues. It is
// built from plugins/sdk and the stage contract alone, and runs in process
// unchanged (its test does, with plugins/stagetest).
package main

import (
	"github.com/linerate/linerate/plugins"
	"github.com/linerate/linerate/plugins/sdk"
)

func main() {
	sdk.Serve(plugins.Kind{Name: "mirror", Summary: "copy 1 in N packets to a mirror port, or down the chain", New: newMirror})
}
