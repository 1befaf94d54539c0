//go:build dpdk

// The C half of ports/dpdk: everything that touches an mbuf per packet, so that a
// burst costs one cgo call. Handles are the addresses of the packet metadata,
// which lives in the mbuf private area right after struct rte_mbuf.

#ifndef LINERATE_DPDK_LR_H
#define LINERATE_DPDK_LR_H

#include <stdint.h>

#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

// struct lr_meta (packet.Packet), its constants and the functions on it, with
// LR_META_SIZE (packet.MetaSize): the mbuf private area starts with one. For an
// mbuf, base is buf_addr − LR_EXTRA, backend the mbuf, cap buf_len + LR_EXTRA,
// off data_off + LR_EXTRA and length data_len (one segment: pkt_len too).
#include "lr_meta.h"

#define LR_MAX_BURST 64

// LR_EXTRA is headroom linerate adds in front of DPDK's own (RTE_PKTMBUF_HEADROOM,
// 128 bytes, fixed when DPDK is built): the rest of the mbuf private area, which
// lies right before the buffer. A packet's window may start there; tx then
// chains a header mbuf for the bytes in front of the buffer where the port takes
// chains, and copies the packet otherwise (lr_tx_window).
#define LR_EXTRA 192
#define LR_PRIV_SIZE (LR_META_SIZE + LR_EXTRA)

// lr_tsconv maps a device clock reading to the engine's monotonic nanoseconds:
// mono = mono0 + (dev - dev0) * mul / 2^32.
struct lr_tsconv {
	uint64_t dev0;
	int64_t mono0;
	uint64_t mul;
};

// lr_rxq is one rx queue's state, in C memory so that Go passes only its address.
struct lr_rxq {
	uint16_t port;
	uint16_t queue;
	uint16_t pool_id;
	uint16_t ts_on;
	struct rte_mempool *mp;
	int ts_off;
	uint64_t ts_flag;
	struct lr_tsconv conv[2];
	uint32_t conv_idx; // which conv the lcore reads; flipped by the control side
	// Set once before the first burst when the engine lets the driver stamp:
	// in_port, in_queue and rx_time (CLOCK_MONOTONIC, the engine's clock) are
	// then written in the pass rx makes anyway.
	uint16_t engine_port;
	uint16_t stamp;

	// Written by the polling lcore only (relaxed atomic stores), read by Stats.
	uint64_t linearized;
	uint64_t multiseg_dropped;
	uint64_t foreign_copied;
	uint64_t foreign_dropped;
};

// Pools whose mbufs carry linerate metadata, so that rx can tell a foreign mbuf
// (one a PMD took from a pool of its own) from one of ours.
int lr_pool_register(struct rte_mempool *mp, uint16_t id);
void lr_pool_unregister(struct rte_mempool *mp);

// lr_pool_create makes an mbuf pool with priv_size = LR_PRIV_SIZE and writes the
// fixed metadata (base, backend, cap, pool) into every mbuf. On failure it
// returns NULL and *err is rte_errno.
struct rte_mempool *lr_pool_create(const char *name, unsigned n, unsigned cache, uint16_t data_room,
				   int socket, int *err);
void lr_pool_init_meta(struct rte_mempool *mp, uint16_t id);

// Bursts. out and h point at handles in Go memory (packet.Burst.H, often on a
// goroutine's stack; they hold no Go pointers, so cgo does not check them), as
// does foreign: they cross as pointers, so the runtime adjusts them if the
// stack moves before the call, and C must not keep them past the call (the Go
// side declares these functions noescape and nocallback). q is a struct lr_rxq
// in C memory, which crosses as an integer: cgo would check a pointer to a
// struct that holds pointers on every call.
uint16_t lr_rx_burst(uintptr_t q, uintptr_t *out, uint16_t n);
uint16_t lr_tx_burst(uint16_t port, uint16_t queue, const uintptr_t *h, uint16_t n);
// lr_tx_handles transmits up to n handles straight from the engine's tx buffer,
// stamping tx_time; it stops before the first packet that is not an mbuf of
// ours and sets *foreign.
uint16_t lr_tx_handles(uint16_t port, uint16_t queue, const uintptr_t *h, uint16_t n, int64_t now, uint8_t *foreign);
// lr_tx_setup records the tx offloads port was configured with (whether it
// takes multi-segment mbufs); lr_tx_counters reads its tx slow-path counters:
// chained, copied, dropped.
void lr_tx_setup(uint16_t port, uint64_t tx_offloads);
void lr_tx_counters(uint16_t port, uint64_t *out);
uint64_t lr_tx_offload_multiseg(void);
unsigned lr_alloc(struct rte_mempool *mp, uintptr_t *out, unsigned n, uint16_t len);
void lr_free(const uintptr_t *h, unsigned n);

// Device setup, wrapped so Go never touches structs with bitfields or unions.
struct lr_devinfo {
	char driver[64];
	uint64_t rx_capa;
	uint64_t tx_capa;
	uint64_t rss_capa;
	uint32_t if_index;
	int32_t socket;
	uint16_t max_rxq;
	uint16_t max_txq;
	uint16_t min_mtu;
	uint16_t max_mtu;
	uint16_t rx_desc_max;
	uint16_t tx_desc_max;
};
int lr_dev_info(uint16_t port, struct lr_devinfo *out);
uint64_t lr_rss_hf(int ip, int udp, int tcp, int sctp);
uint64_t lr_rx_offload_timestamp(void);
int lr_port_configure(uint16_t port, uint16_t nrx, uint16_t ntx, uint64_t rss_hf, uint64_t rx_offloads,
		      uint64_t tx_offloads);
int lr_link(uint16_t port, uint32_t *speed_mbps);

// Control-side helpers that must read rte_errno on the thread that set it.
int lr_eal_init(int argc, char **argv);
int lr_thread_register(void);
int lr_errno(void);
void lr_rxq_counters(const struct lr_rxq *q, uint64_t *out);
void lr_rxq_set_conv(struct lr_rxq *q, uint64_t dev0, int64_t mono0, uint64_t mul);
int lr_read_clock(uint16_t port, uint64_t *clk);
unsigned lr_mempool_avail(const struct rte_mempool *mp);


// Test support (testsupport.go): send raw mbufs that linerate's own tx path never
// makes, so the rx slow paths can be driven through a net_ring.
int lr_test_tx_chain(uint16_t port, uint16_t queue, struct rte_mempool *mp, const uint8_t *data,
		     const uint16_t *seg_lens, uint16_t nsegs);
// lr_test_pool_handles writes the handle of every mbuf of mp, up to n of them,
// into out and returns how many mp has.
unsigned lr_test_pool_handles(struct rte_mempool *mp, uintptr_t *out, unsigned n);

#endif
