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

// lr_bench_c_gen is the C reference for the generator: mbufs from pool, the
// frame copied into each, tx_burst in bursts of 64 on out, what the port did
// not take freed. It returns packets sent and the thread's CPU time in ns.
uint64_t lr_bench_c_gen(uint16_t out, const char *pool, const uint8_t *frame, uint16_t len, double seconds, uint64_t *cpu_ns)
{
	struct rte_mempool *mp = rte_mempool_lookup(pool);
	if (mp == NULL)
		return 0;
	struct rte_mbuf *pkts[64];
	struct timespec c0, c1;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
	uint64_t end = rte_rdtsc() + (uint64_t)(seconds * (double)rte_get_tsc_hz());
	uint64_t packets = 0;
	for (unsigned iter = 0;; iter++) {
		if ((iter & 1023) == 0 && rte_rdtsc() >= end)
			break;
		if (rte_pktmbuf_alloc_bulk(mp, pkts, 64) != 0)
			continue;
		for (int i = 0; i < 64; i++) {
			memcpy(rte_pktmbuf_mtod(pkts[i], void *), frame, len);
			pkts[i]->data_len = len;
			pkts[i]->pkt_len = len;
		}
		uint16_t sent = rte_eth_tx_burst(out, 0, pkts, 64);
		if (sent < 64)
			rte_pktmbuf_free_bulk(pkts + sent, 64 - sent);
		packets += sent;
	}
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
	*cpu_ns = (uint64_t)(c1.tv_sec - c0.tv_sec) * 1000000000u + (uint64_t)(c1.tv_nsec - c0.tv_nsec);
	return packets;
}
