/*
 * The C reference for `make bench-dpdk`: rx → MAC swap → tx between two net_null
 * ports on one core, the loop every DPDK forwarding example runs. The pool has
 * the shape of linerate's (priv_size 128, the same data room, cache and size), so
 * that the Go figures it is compared with differ from it only in the code path.
 *
 *   dpdk-ref [EAL args] -- SECONDS BURST
 *
 * Prints one line: "packets <n> seconds <s> cpu <s>", cpu being the loop
 * thread's CPU time (on a shared machine the thread may not have had the whole
 * core).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rte_bus_vdev.h>
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_ether.h>
#include <rte_mbuf.h>

static int setup(uint16_t port, struct rte_mempool *mp)
{
	struct rte_eth_conf conf;
	memset(&conf, 0, sizeof(conf));
	if (rte_eth_dev_configure(port, 1, 1, &conf) != 0)
		return -1;
	if (rte_eth_rx_queue_setup(port, 0, 1024, rte_eth_dev_socket_id(port), NULL, mp) != 0)
		return -1;
	if (rte_eth_tx_queue_setup(port, 0, 1024, rte_eth_dev_socket_id(port), NULL) != 0)
		return -1;
	return rte_eth_dev_start(port);
}

int main(int argc, char **argv)
{
	int used = rte_eal_init(argc, argv);
	if (used < 0) {
		fprintf(stderr, "dpdk-ref: rte_eal_init failed\n");
		return 1;
	}
	argc -= used;
	argv += used;
	if (argc < 3) {
		fprintf(stderr, "usage: dpdk-ref [EAL args] -- SECONDS BURST\n");
		return 2;
	}
	double seconds = atof(argv[1]);
	unsigned burst = (unsigned)atoi(argv[2]);
	if (burst == 0 || burst > 64) {
		fprintf(stderr, "dpdk-ref: burst %u is outside 1..64\n", burst);
		return 2;
	}
	struct rte_mempool *mp = rte_pktmbuf_pool_create("ref", 8191, 256, 128, 2048 + RTE_PKTMBUF_HEADROOM,
							 rte_socket_id());
	uint16_t in, out;
	if (mp == NULL || rte_vdev_init("net_null0", "") != 0 || rte_vdev_init("net_null1", "") != 0 ||
	    rte_eth_dev_get_port_by_name("net_null0", &in) != 0 ||
	    rte_eth_dev_get_port_by_name("net_null1", &out) != 0 || setup(in, mp) != 0 || setup(out, mp) != 0) {
		fprintf(stderr, "dpdk-ref: setup failed: %s\n", rte_strerror(rte_errno));
		return 1;
	}

	struct rte_mbuf *pkts[64];
	struct timespec cpu0, cpu1;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu0);
	uint64_t hz = rte_get_tsc_hz();
	uint64_t start = rte_rdtsc(), end = start + (uint64_t)(seconds * (double)hz);
	uint64_t packets = 0, now = start;
	for (unsigned iter = 0;; iter++) {
		if ((iter & 1023) == 0 && (now = rte_rdtsc()) >= end)
			break;
		uint16_t n = rte_eth_rx_burst(in, 0, pkts, burst);
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
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu1);
	printf("packets %lu seconds %.6f cpu %.6f\n", (unsigned long)packets, (double)(now - start) / (double)hz,
	       (double)(cpu1.tv_sec - cpu0.tv_sec) + (double)(cpu1.tv_nsec - cpu0.tv_nsec) / 1e9);
	rte_eth_dev_stop(in);
	rte_eth_dev_stop(out);
	rte_eal_cleanup();
	return 0;
}
