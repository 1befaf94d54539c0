//go:build dpdk

#include <rte_launch.h>

#include "_cgo_export.h"

static int trampoline(void *arg)
{
	(void)arg;
	return benchRemoteLoop();
}

// lr_bench_launch runs benchRemoteLoop on the worker lcore and waits for it.
int lr_bench_launch(unsigned lcore)
{
	int rc = rte_eal_remote_launch(trampoline, NULL, lcore);
	if (rc != 0)
		return rc;
	return rte_eal_wait_lcore(lcore);
}

#include <string.h>
#include <time.h>

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_ether.h>
#include <rte_mbuf.h>

// lr_bench_c_loop is cref/ref.c's loop inside this process, on linerate's own
// ports and pools: what (a) would cost without Go. It returns packets sent and
// the calling thread's CPU time in ns.
uint64_t lr_bench_c_loop(uint16_t in, uint16_t out, double seconds, uint64_t *cpu_ns)
{
	struct rte_mbuf *pkts[64];
	struct timespec c0, c1;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
	uint64_t end = rte_rdtsc() + (uint64_t)(seconds * (double)rte_get_tsc_hz());
	uint64_t packets = 0;
	for (unsigned iter = 0;; iter++) {
		if ((iter & 1023) == 0 && rte_rdtsc() >= end)
			break;
		uint16_t n = rte_eth_rx_burst(in, 0, pkts, 64);
		for (uint16_t i = 0; i < n; i++) {
			struct rte_ether_hdr *eth = rte_pktmbuf_mtod(pkts[i], struct rte_ether_hdr *);
			struct rte_ether_addr tmp = eth->dst_addr;
			eth->dst_addr = eth->src_addr;
			eth->src_addr = tmp;
		}
		uint16_t sent = rte_eth_tx_burst(out, 0, pkts, n);
		if (sent < n)
			rte_pktmbuf_free_bulk(pkts + sent, n - sent);
		packets += sent;
	}
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
	*cpu_ns = (uint64_t)(c1.tv_sec - c0.tv_sec) * 1000000000u + (uint64_t)(c1.tv_nsec - c0.tv_nsec);
	return packets;
}

#include <rte_mempool.h>

#include "lr.h"

// lr_bench_c_sync is (a) without Go: the same loop through linerate's own C
// layer (lr_rx_burst, lr_tx_burst, lr_free from ports/dpdk, linked into this
// binary), swapping MACs through the packet metadata as the Go loop does.
uint64_t lr_bench_c_sync(uint16_t in, uint16_t out, const char *pool, double seconds, uint64_t *cpu_ns)
{
	struct lr_rxq q;
	memset(&q, 0, sizeof(q));
	q.port = in;
	q.mp = rte_mempool_lookup(pool);
	if (q.mp == NULL)
		return 0;
	uintptr_t h[LR_MAX_BURST];
	struct timespec c0, c1;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
	uint64_t end = rte_rdtsc() + (uint64_t)(seconds * (double)rte_get_tsc_hz());
	uint64_t packets = 0;
	for (unsigned iter = 0;; iter++) {
		if ((iter & 1023) == 0 && rte_rdtsc() >= end)
			break;
		uint16_t n = lr_rx_burst((uintptr_t)&q, h, LR_MAX_BURST);
		for (uint16_t i = 0; i < n; i++) {
			const struct lr_meta *p = (const struct lr_meta *)h[i];
			struct rte_ether_hdr *eth = (struct rte_ether_hdr *)(p->base + p->off);
			struct rte_ether_addr tmp = eth->dst_addr;
			eth->dst_addr = eth->src_addr;
			eth->src_addr = tmp;
		}
		uint16_t sent = lr_tx_burst(out, 0, h, n);
		if (sent < n)
			lr_free(h + sent, n - sent);
		packets += sent;
	}
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
	*cpu_ns = (uint64_t)(c1.tv_sec - c0.tv_sec) * 1000000000u + (uint64_t)(c1.tv_nsec - c0.tv_nsec);
	return packets;
}

#include <rte_byteorder.h>
#include <rte_memcpy.h>

// fold16 folds a ones'-complement sum into 16 bits.
static inline uint16_t fold16(uint64_t s)
{
	s = (s >> 32) + (s & 0xffffffff);
	s = (s >> 16) + (s & 0xffff);
	s = (s >> 16) + (s & 0xffff);
	return (uint16_t)((s >> 16) + (s & 0xffff));
}

// word_sum is the ones'-complement sum of the four big-endian 16-bit words of v.
static inline uint64_t word_sum(uint64_t v) { return (v >> 48) + ((v >> 32) & 0xffff) + ((v >> 16) & 0xffff) + (v & 0xffff); }

// The modes of lr_bench_c_gen.
#define LR_GEN_FIELDS 1   // write the generator fields and the UDP checksum
#define LR_GEN_ONE_PASS 2 // rte_mempool_get_bulk, and each mbuf reset in the fill loop

// lr_bench_c_gen is the C reference for the generator, as a good C generator
// (MoonGen's or TRex's field engine) would write it: 64 mbufs from pool
// (rte_pktmbuf_alloc_bulk), the template frame copied into each with
// rte_memcpy, and, with LR_GEN_FIELDS, per packet the flow id and sequence
// number, the tx timestamp and the UDP checksum, at offsets fields (16 bytes,
// big-endian: flow << 48 | seq, then CLOCK_MONOTONIC ns) and csum; then one
// rte_eth_tx_burst. The clock is read once per burst, as all its packets go
// out in one tx_burst. The checksum is updated from the template's sum (sum:
// UDP header and payload with the fields and the checksum zero, plus the
// pseudo-header) by the fields' words, RFC 1624 style, not recomputed; a
// computed zero is sent as 0xFFFF (RFC 768). Without LR_GEN_FIELDS every
// packet is the template as it is. LR_GEN_ONE_PASS takes the mbufs with
// rte_mempool_get_bulk and resets each where it fills it: one pass over the
// burst's mbufs instead of two (alloc_bulk's reset, then the fill), which on
// the development machine sent twice as many packets. It stops after count
// packets (0: no limit) or seconds, and returns packets sent and the thread's
// CPU time in ns.
uint64_t lr_bench_c_gen(uint16_t out, const char *pool, const uint8_t *frame, uint16_t len, int mode,
			uint16_t fields, uint16_t csum, uint16_t sum, uint16_t flow, uint64_t count, double seconds,
			uint64_t *cpu_ns)
{
	struct rte_mempool *mp = rte_mempool_lookup(pool);
	if (mp == NULL)
		return 0;
	struct rte_mbuf *pkts[64];
	struct timespec c0, c1, ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
	uint64_t end = rte_rdtsc() + (uint64_t)(seconds * (double)rte_get_tsc_hz());
	uint64_t packets = 0, seq = 0;
	for (unsigned iter = 0; count == 0 || packets < count; iter++) {
		if ((iter & 1023) == 0 && rte_rdtsc() >= end)
			break;
		unsigned n = 64;
		if (count != 0 && count - packets < n)
			n = (unsigned)(count - packets);
		if (mode & LR_GEN_ONE_PASS) {
			if (rte_mempool_get_bulk(mp, (void **)pkts, n) != 0)
				continue;
		} else if (rte_pktmbuf_alloc_bulk(mp, pkts, n) != 0)
			continue;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		uint64_t now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
		uint64_t base = (uint64_t)sum + word_sum(now);
		uint64_t now_be = rte_cpu_to_be_64(now);
		for (unsigned i = 0; i < n; i++) {
			if (mode & LR_GEN_ONE_PASS)
				rte_pktmbuf_reset(pkts[i]);
			uint8_t *d = rte_pktmbuf_mtod(pkts[i], uint8_t *);
			rte_memcpy(d, frame, len);
			pkts[i]->data_len = len;
			pkts[i]->pkt_len = len;
			if (!(mode & LR_GEN_FIELDS))
				continue;
			uint64_t v = (uint64_t)flow << 48 | (seq++ & 0xffffffffffffull);
			uint64_t v_be = rte_cpu_to_be_64(v);
			memcpy(d + fields, &v_be, 8);
			memcpy(d + fields + 8, &now_be, 8);
			uint16_t c = (uint16_t)~fold16(base + word_sum(v));
			if (c == 0)
				c = 0xffff;
			uint16_t c_be = rte_cpu_to_be_16(c);
			memcpy(d + csum, &c_be, 2);
		}
		uint16_t sent = rte_eth_tx_burst(out, 0, pkts, (uint16_t)n);
		if (sent < n)
			rte_pktmbuf_free_bulk(pkts + sent, n - sent);
		packets += sent;
	}
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
	*cpu_ns = (uint64_t)(c1.tv_sec - c0.tv_sec) * 1000000000u + (uint64_t)(c1.tv_nsec - c0.tv_nsec);
	return packets;
}
