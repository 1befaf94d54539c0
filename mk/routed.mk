# Routed mode's end-to-end test over DPDK net_af_packet vdevs: the same kernel
# hosts and checks as TestKernelHosts (afpacket, in test-go), with the router's
# ports on DPDK. cgo, so without the race detector. Needs root and libdpdk-dev.

.PHONY: test-routed-dpdk

TEST_EXTRA += test-routed-dpdk

test-routed-dpdk:
	CI=$${CI:-true} $(GO) test -tags dpdk $(TESTFLAGS) -run 'KernelHostsDPDK' ./plugins/route/
