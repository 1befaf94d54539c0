//go:build ignore

// SPDX-License-Identifier: GPL-2.0
/* Benchmark programs for the reflector (plugins/stamp/bench_xdp_test.go).
 * prog.Run's repeat runs a program again on the frame the last run left,
 * and a reflected packet is no test packet: each run here first restores the
 * request from a map (bench_restore alone measures that), then reflects it
 * (bench_reflect), or swaps its MACs and sends it back (bench_macswap, the
 * baseline: what any XDP_TX program does at least). */
#include "reflector.c"

#define BENCH_LEN 106 /* Ethernet, IPv6, UDP, the base test packet */

struct bench_frame {
	__u8 data[BENCH_LEN];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct bench_frame);
} bench_frame SEC(".maps");

static __always_inline int restore(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u32 zero = 0;
	struct bench_frame *f = bpf_map_lookup_elem(&bench_frame, &zero);
	if (!f || data + BENCH_LEN > end)
		return -1;
	__builtin_memcpy(data, f->data, BENCH_LEN);
	return 0;
}

SEC("xdp")
int bench_restore(struct xdp_md *ctx)
{
	return restore(ctx) ? XDP_ABORTED : XDP_TX;
}

SEC("xdp")
int bench_reflect(struct xdp_md *ctx)
{
	if (restore(ctx))
		return XDP_ABORTED;
	int r = stamp_reflector(ctx);
	return r == LR_OFFLOAD_NEXT || r == LR_OFFLOAD_USER ? XDP_PASS : r;
}

SEC("xdp")
int bench_macswap(struct xdp_md *ctx)
{
	if (restore(ctx))
		return XDP_ABORTED;
	__u8 *eth = (void *)(long)ctx->data;
	if ((void *)(eth + 14) > (void *)(long)ctx->data_end)
		return XDP_ABORTED;
	__u8 tmp[6];
	__builtin_memcpy(tmp, eth, 6);
	__builtin_memcpy(eth, eth + 6, 6);
	__builtin_memcpy(eth + 6, tmp, 6);
	return XDP_TX;
}
