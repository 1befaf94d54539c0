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
//
// Receive copies each frame out of the kernel's ring into a buffer of the port's
// pool and gives the block back as soon as its last frame is copied: the ring is
// the kernel's, and a stage may hold a buffer longer than the kernel can wait.
// A VLAN tag the kernel took out of the frame (TP_STATUS_VLAN_VALID) is put
// back, so the engine sees the frame as it was on the wire.
//
// Rx timestamps: tpacket3_hdr's tp_sec/tp_nsec are CLOCK_REALTIME, not the
// engine's monotonic clock, and converting each one would cost more than it
// tells; RxTime is left for the engine to stamp per burst, and Info reports the
// timestamp source "engine".
package afpacket
