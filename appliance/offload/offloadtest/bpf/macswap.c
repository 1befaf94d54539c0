// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * A test offload: swap the Ethernet addresses and send the frame back out
 * (XDP_TX). With udp_port set, only UDP datagrams to that port; the rest go
 * on (LR_OFFLOAD_NEXT). The tests and benchmarks of the offload mechanism
 * run it; appliance/offload/offloadtest wraps it as stage "test.macswap".
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "lr_offload.h"

/* 0: every frame; otherwise UDP to this port only (host order). */
volatile const __u16 udp_port = 0;

enum { C_SWAPPED, C_SKIPPED, C_COUNT };

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, C_COUNT);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

static __always_inline void count(__u32 i)
{
	__u64 *c = bpf_map_lookup_elem(&counters, &i);
	if (c)
		(*c)++;
}

static __always_inline int wanted(void *data, void *end)
{
	if (!udp_port)
		return 1;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > end)
		return 0;
	__u8 *ip = (void *)(eth + 1);
	__u16 *udp;
	if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		if ((void *)(ip + 40) > end || ip[6] != IPPROTO_UDP)
			return 0;
		udp = (void *)(ip + 40);
	} else if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		if ((void *)(ip + 20) > end || ip[9] != IPPROTO_UDP)
			return 0;
		udp = (void *)(ip + (ip[0] & 0xf) * 4);
	} else {
		return 0;
	}
	if ((void *)(udp + 4) > end)
		return 0;
	return udp[1] == bpf_htons(udp_port);
}

static __always_inline int macswap(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	if (!wanted(data, end)) {
		count(C_SKIPPED);
		return LR_OFFLOAD_NEXT;
	}
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > end)
		return LR_OFFLOAD_NEXT;
	__u8 tmp[ETH_ALEN];
	__builtin_memcpy(tmp, eth->h_dest, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, eth->h_source, ETH_ALEN);
	__builtin_memcpy(eth->h_source, tmp, ETH_ALEN);
	count(C_SWAPPED);
	return XDP_TX;
}

LR_OFFLOAD(macswap)

char _license[] SEC("license") = "Dual BSD/GPL";
