package route_test

import (
	"fmt"
	"testing"

	"github.com/linerate/linerate/internal/routedtest"
)

// TestKernelHosts runs routed mode end to end on afpacket ports: real Linux
// hosts in network namespaces on either side of a linerate router (see
// internal/routedtest).
func TestKernelHosts(t *testing.T) {
	routedtest.Run(t, func(port, iface string) string {
		return fmt.Sprintf("driver = \"afpacket\"\ninterface = %q", iface)
	}, "")
}
