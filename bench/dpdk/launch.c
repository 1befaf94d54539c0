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
