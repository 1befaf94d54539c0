// Package dpdk is the DPDK datapath: linerate's own thin cgo layer over DPDK
// 22.11 (Debian's libdpdk, found with pkg-config). It is built only with
// `-tags dpdk`; without the tag the package only tells a config that names the
// driver, or a [dpdk] table, which build has it, so the default build needs no
// system package.
//
// Any ethdev can be a port: a PCI device bound to vfio-pci, or a vdev string
// (net_null, net_ring, net_pcap, net_af_packet, net_af_xdp, net_tap, net_memif).
// docs/dpdk.md explains how to run on a real NIC and in a lab with vdevs.
//
// # Memory and zero copy
//
// There is one mbuf pool per NUMA socket (and size), created with a 320-byte
// private area: a packet's metadata (packet.Packet, packet.MetaSize bytes) at its
// start, so a packet.Handle is the mbuf address plus sizeof(struct rte_mbuf) and
// Packet.Backend is the mbuf, and 192 bytes of extra headroom at its end, right
// in front of the mbuf's buffer. C sees the metadata as struct lr_meta, which
// go generate writes into lr_meta.h from packet.Packet, with the functions C
// runs on it (reset, the transit delay at tx); Start refuses a header of
// another packet.MetaVersion or layout. The pools are registered as packet.Pools;
// packets that stages emit towards a DPDK port come from them (Port.Pool).
//
// At rx the C side reads data_off, data_len and the RSS hash into the metadata;
// at tx it writes a window that moved (packet.FlagMoved) back into data_off,
// data_len and pkt_len. Each burst is one cgo call; handles are integers (C
// addresses), so the Go array of them that C gets a pointer to holds no Go
// pointers for cgo to check. Frees go back in bulk (rte_pktmbuf_free_bulk). A
// multi-segment rx mbuf is linearised on a slow path (counted as
// rx_linearized) or, when it does not fit one buffer, dropped
// (rx_multiseg_dropped).
//
// Headroom: DPDK's is 128 bytes, fixed when DPDK is built; with the private
// area's 192 a packet has 320, as in linerate's own pools, so IOAM's largest
// insertions move only the head. A window that starts in front of the mbuf's
// buffer cannot be said with data_off: at tx those bytes go into a header mbuf
// chained in front (tx_chained) where the port offers multi-segment transmit,
// and the packet is copied into a fresh mbuf (tx_copied) where it does not.
// packet.Packet.InsertGap moves the tail into the tailroom when the head does
// not fit; when neither fits, packet.Burst.InsertGap copies into a fresh mbuf of
// the same pool (counted in the pool's Copies).
//
// # EAL and lcores
//
// The EAL starts once per process, on a locked OS thread that stays the EAL's
// main lcore. A second engine in the same process reuses it; Cleanup
// (rte_eal_cleanup) ends it when the process is done. Engine lcores become EAL
// threads with rte_thread_register on the engine's own pinned threads (see
// lcore.go for why not remote launch), so mempool caches work per lcore.
//
// # Config
//
// The [dpdk] table (EAL and pools):
//
//	eal_args    = ["--no-pci"]     # passed to rte_eal_init after the keys below
//	lcores      = ""               # EAL -l; default: one CPU for the main lcore, off the engine's lcores
//	memory      = "1GiB"           # -m; default: EAL's own (all hugepages, or 64 MiB with huge = false)
//	huge        = true             # false: --no-huge (labs and tests)
//	in_memory   = false            # --in-memory (with huge = false: --no-shconf, its DPDK 22.11 equivalent)
//	file_prefix = "linerate"       # --file-prefix
//	log_level   = "warning"        # --log-level
//	drivers     = []               # -d: PMD libraries or directories to load
//	pool_size   = 16383            # mbufs per NUMA socket pool
//	pool_cache  = 256              # per-lcore mempool cache
//	data_room   = 2048             # bytes after the 128-byte headroom
//
// Driver "dpdk" keys (in a [[ports]] table; rx_queues, tx_queues and mtu are the
// common port keys; a set mtu goes to the device, and a kernel interface under
// the PMD gets its own MTU back at Close):
//
//	device       = "0000:03:00.0"  # or a vdev: "net_null0", "net_pcap0,rx_pcap=in.pcap,tx_pcap=out.pcap"
//	rx_desc      = 1024            # descriptors per rx queue
//	tx_desc      = 1024            # descriptors per tx queue
//	promiscuous  = true
//	rss          = ["ip", "udp", "tcp"]  # hash types spreading rx_queues > 1 (also "sctp")
//	rx_timestamp = "auto"          # auto | hardware | engine
//
// # Stats
//
// Port stats come from rte_eth_stats (drops: imissed + rx_nombuf + the slow-path
// drops above; errors: ierrors, oerrors) and every xstat by name in Extra,
// together with rx_linearized, rx_multiseg_dropped, rx_foreign_copied and
// rx_foreign_dropped. Info.TimestampSource is "hardware" when the PMD offers
// RTE_ETH_RX_OFFLOAD_TIMESTAMP and its clock can be read (rte_eth_read_clock, to
// map device ticks onto the engine clock, ports/internal/devclock), "engine"
// otherwise: the engine clock read once per burst in the C rx pass.
// Info.TimestampDetail says how far from the wire each can be.
package dpdk
