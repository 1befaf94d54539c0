package tester

// DUTHelp is what `linerate test --dut-help` prints.
const DUTHelp = `How to set up common devices under test (DUT) for linerate test.

The tester sends each stream from its tx port and receives it on its rx port.
The DUT forwards between the two. In each recipe below, the tester's ports
are veths tga and tgb in namespace tg, and the DUT's are dua and dub.
On real NICs, use the interface names instead.

Common to all: two veth pairs.

  ip netns add tg; ip netns add dut
  ip link add tga netns tg type veth peer name dua netns dut
  ip link add tgb netns tg type veth peer name dub netns dut
  for i in tga tgb; do ip -n tg link set $i up; done
  for i in dua dub; do ip -n dut link set $i up; done

1. A Linux router (a namespace that forwards IPv4)

  ip -n dut addr add 198.18.0.1/24 dev dua
  ip -n dut addr add 198.18.1.1/24 dev dub
  ip netns exec dut sysctl -w net.ipv4.ip_forward=1
  ip -n dut neigh add 198.18.1.2 lladdr MAC-OF-TGB dev dub nud permanent

  The stream goes from 198.18.0.2 to 198.18.1.2, with dst_mac the MAC of
  dua. The static neighbour keeps ARP out of the measurement.

2. dpdk-testpmd (Debian package dpdk-dev), io forwarding between two
   net_af_packet vdevs:

  ip netns exec dut dpdk-testpmd --no-huge --no-pci -m 512 \
    --vdev=net_af_packet0,iface=dua --vdev=net_af_packet1,iface=dub \
    -- --forward-mode=io --auto-start --stats-period 1

  testpmd forwards port 0 to port 1 and back, with no addresses involved.

3. Another linerate: a config that forwards dua to dub, with its control API
   on, so that the tester reads its counters after each trial:

  [control]
  listen = "unix:/run/linerate/dut.sock"
  [[ports]]
  name = "a"
  driver = "afpacket"
  interface = "dua"
  [[ports]]
  name = "b"
  driver = "afpacket"
  interface = "dub"
  [[pipelines]]
  name = "fwd"
  rx = ["a"]
  [[pipelines.stages]]
  kind = "forward"
  port = "b"

  In the test profile: [test.dut] control = "unix:/run/linerate/dut.sock".
  A DUT stage that consumes packets by design (a STAMP collector) is named
  in consumed = ["collector"]; what it took counts as delivered.

docs/test.md has the profiles for each and how to read the report.
`
