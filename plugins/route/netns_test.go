package route_test

import (
	"fmt"
	"testing"

	"github.com/linerate/linerate/internal/routedtest"
)

func afpacketPorts(port, iface string) string {
	return fmt.Sprintf("driver = \"afpacket\"\ninterface = %q", iface)
}

// TestKernelHosts runs routed mode end to end on afpacket ports: real Linux
// hosts in network namespaces on either side of a linerate router (see
// internal/routedtest).
func TestKernelHosts(t *testing.T) { routedtest.Run(t, afpacketPorts, "") }

// TestKernelHostsMTU: a port's mtu is its interface's while linerate runs,
// and the hosts' kernels hear Packet Too Big and Fragmentation Needed, or
// reassemble linerate's fragments (routedtest.RunMTU).
func TestKernelHostsMTU(t *testing.T) { routedtest.RunMTU(t, afpacketPorts, "") }
