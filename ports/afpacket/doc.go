// Package afpacket is the Linux AF_PACKET datapath: TPACKET_V3 memory-mapped
// rings on any interface, one socket per rx queue (joined by PACKET_FANOUT) and
// one per tx queue.
//
// Driver "afpacket" keys:
//
//	interface     = "eth1"   # required
//	block_size    = 1048576  # bytes per ring block; a multiple of the page size
//	blocks        = 8        # blocks per ring (each rx and each tx queue has one ring)
//	frame_size    = 0        # tx ring slot; 0 = fit the interface MTU, at least 2048
//	block_timeout = "1ms"    # the kernel hands over a partly filled rx block after this
//	fanout        = "hash"   # with rx_queues > 1: hash | lb | cpu | rollover | rnd | qm
//	promiscuous   = true
//	qdisc_bypass  = true     # transmit straight to the driver, past the qdisc
//	tx_ring       = true     # false: one write(2) per packet instead of a tx ring
//	rx_timestamp  = "auto"   # auto | hardware | kernel | engine
//
// Receive copies each frame out of the kernel's ring into a buffer of the port's
// pool and gives the block back as soon as its last frame is copied: the ring is
// the kernel's, and a stage may hold a buffer longer than the kernel can wait.
// A VLAN tag the kernel took out of the frame (TP_STATUS_VLAN_VALID) is put
// back, so the engine sees the frame as it was on the wire.
//
// Rx dropped counts, besides frames too big or truncated, the kernel's
// tp_drops: frames the ring had no room for. The kernel resets
// PACKET_STATISTICS on each read, so Stats sums what each read returns;
// the engine reads it a last time at stop, before the sockets close.
//
// Rx timestamps: each frame's RxTime is the kernel's stamp of it, the
// ring's tp_sec/tp_nsec, on the engine's clock: CLOCK_REALTIME less the
// clock's Unix offset, read once per burst. SO_TIMESTAMPING asks for the
// software stamp taken as the frame enters the stack (rather than when the
// ring is written), and, where the NIC stamps every frame (ethtool -T:
// raw hardware receive, a PHC, HWTSTAMP_FILTER_ALL), for the NIC's own:
// PACKET_TIMESTAMP, SIOCSHWTSTAMP, and the PHC mapped onto the engine clock
// every 100 ms (ports/internal/devclock). The engine's own stamp, taken when
// the lcore polls, lags the kernel's by up to block_timeout: about a
// millisecond. Info says which (kernel, hardware or engine) and how far from
// the wire each can be.
package afpacket
