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

/* The cost of each part (BenchmarkXDPCosts): every program below restores
 * the request, does one thing, and sends it back, so its figure less
 * bench_restore's is that thing's. What repeats a cheap thing N times says
 * so in its name (BenchmarkXDPCosts divides). Results go into the packet so
 * that nothing is left out by the compiler. */

#define COST_N 8

static __always_inline int sent(struct xdp_md *ctx, __u64 v)
{
	__u8 *p = (void *)(long)ctx->data;
	if ((void *)(p + BENCH_LEN) > (void *)(long)ctx->data_end)
		return XDP_ABORTED;
	*(lr_w64 *)(p + BENCH_LEN - 8) = v;
	return XDP_TX;
}

#define COST_CLOCK(name, call)                                     \
	SEC("xdp") int bench_cost_##name(struct xdp_md *ctx)       \
	{                                                          \
		if (restore(ctx))                                  \
			return XDP_ABORTED;                        \
		__u64 v = 0;                                       \
		_Pragma("unroll") for (int i = 0; i < COST_N; i++) \
			v += call();                               \
		return sent(ctx, v);                               \
	}

COST_CLOCK(ktime_ns_x8, bpf_ktime_get_ns)
COST_CLOCK(ktime_tai_x8, bpf_ktime_get_tai_ns)
COST_CLOCK(ktime_boot_x8, bpf_ktime_get_boot_ns)
COST_CLOCK(ktime_coarse_x8, bpf_ktime_get_coarse_ns)
COST_CLOCK(jiffies_x8, bpf_jiffies64)

/* MAC swap with T2 read first and T3 last, as the reflector reads them:
 * the floor of any honest reflector on this machine's clock. */
SEC("xdp")
int bench_macswap_clock2(struct xdp_md *ctx)
{
	if (restore(ctx))
		return XDP_ABORTED;
	__u64 t2 = bpf_ktime_get_tai_ns();
	__u8 *eth = (void *)(long)ctx->data;
	if ((void *)(eth + BENCH_LEN) > (void *)(long)ctx->data_end)
		return XDP_ABORTED;
	__u8 tmp[6];
	__builtin_memcpy(tmp, eth, 6);
	__builtin_memcpy(eth, eth + 6, 6);
	__builtin_memcpy(eth + 6, tmp, 6);
	*(lr_w64 *)(eth + BENCH_LEN - 28) = t2;
	*(lr_w64 *)(eth + BENCH_LEN - 40) = bpf_ktime_get_tai_ns();
	return XDP_TX;
}

/* The map operations the reflector does on its way. */
SEC("xdp")
int bench_cost_array_x8(struct xdp_md *ctx)
{
	if (restore(ctx))
		return XDP_ABORTED;
	__u64 v = 0;
#pragma unroll
	for (__u32 i = 0; i < COST_N; i++) {
		__u32 k = i;
		struct rf_session *s = bpf_map_lookup_elem(&stamp_rf_sessions, &k);
		if (s)
			v += s->flags;
	}
	return sent(ctx, v);
}

SEC("xdp")
int bench_cost_percpu_x8(struct xdp_md *ctx)
{
	if (restore(ctx))
		return XDP_ABORTED;
#pragma unroll
	for (__u32 i = 0; i < COST_N; i++)
		count(C_MAX - 1 - (i & 1));
	return sent(ctx, 0);
}

SEC("xdp")
int bench_cost_atomic_x8(struct xdp_md *ctx)
{
	if (restore(ctx))
		return XDP_ABORTED;
	__u32 k = 1;
	struct rf_session *s = bpf_map_lookup_elem(&stamp_rf_sessions, &k);
	if (!s)
		return XDP_ABORTED;
	__u64 v = 0;
#pragma unroll
	for (__u32 i = 0; i < COST_N; i++)
		v += __sync_fetch_and_add(&s->seq, 1);
	return sent(ctx, v);
}

/* A hash map's lookup (the reflector's addresses and rate limit were in
 * such maps) of a 16-byte key, the request's source. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u8[16]);
	__type(value, __u8);
} bench_hash SEC(".maps");

SEC("xdp")
int bench_cost_hash_x8(struct xdp_md *ctx)
{
	if (restore(ctx))
		return XDP_ABORTED;
	__u64 v = 0;
	__u8 *p = (void *)(long)ctx->data;
	if ((void *)(p + BENCH_LEN) > (void *)(long)ctx->data_end)
		return XDP_ABORTED;
#pragma unroll
	for (__u32 i = 0; i < COST_N; i++)
		v += bpf_map_lookup_elem(&bench_hash, p + 22) != 0;
	return sent(ctx, v);
}

/* The allow trie's lookup (an LPM trie, empty here: the least it costs). */
SEC("xdp")
int bench_cost_lpm_x8(struct xdp_md *ctx)
{
	if (restore(ctx))
		return XDP_ABORTED;
	__u32 zero = 0;
	struct rf_scratch *x = bpf_map_lookup_elem(&stamp_rf_scratch, &zero);
	__u8 *p = (void *)(long)ctx->data;
	if (!x || (void *)(p + BENCH_LEN) > (void *)(long)ctx->data_end)
		return XDP_ABORTED;
	x->k.prefixlen = 8 + 128;
	x->k.family = 6;
	lr_copy16(x->k.addr, p + 22);
	__u64 v = 0;
#pragma unroll
	for (__u32 i = 0; i < COST_N; i++)
		v += bpf_map_lookup_elem(&stamp_rf_allow, &x->k) != 0;
	return sent(ctx, v);
}

/* The UDP checksum of the 52-byte reply (8 + the base packet) with the
 * pseudo-header's addresses: byte at a time (__builtin_memcpy through a __u8
 * pointer, what clang writes for lr_get16 on a packet), word at a time, and
 * RFC 1624's update of the request's checksum for the fields the reply
 * changes. */
static __always_inline __u16 byte_get16(const __u8 *p)
{
	__u16 v;
	__builtin_memcpy(&v, p, 2);
	return bpf_ntohs(v);
}

SEC("xdp")
int bench_cost_csum_bytes(struct xdp_md *ctx)
{
	if (restore(ctx))
		return XDP_ABORTED;
	__u8 *p = (void *)(long)ctx->data;
	if ((void *)(p + BENCH_LEN) > (void *)(long)ctx->data_end)
		return XDP_ABORTED;
	__u32 sum = IPPROTO_UDP_ + 52;
#pragma unroll
	for (int i = 22; i < 54; i += 2)
		sum += byte_get16(p + i);
#pragma unroll
	for (int i = 54; i < 106; i += 2)
		sum += byte_get16(p + i);
	return sent(ctx, (__u16)~lr_csum_fold(sum));
}

SEC("xdp")
int bench_cost_csum_words(struct xdp_md *ctx)
{
	if (restore(ctx))
		return XDP_ABORTED;
	__u8 *p = (void *)(long)ctx->data;
	if ((void *)(p + BENCH_LEN) > (void *)(long)ctx->data_end)
		return XDP_ABORTED;
	__u64 sum = bpf_htons(IPPROTO_UDP_ + 52);
#pragma unroll
	for (int i = 22; i < 102; i += 8)
		sum = lr_add64(sum, *(lr_w64 *)(p + i));
	sum = lr_add64(sum, *(lr_w32 *)(p + 102));
	return sent(ctx, (__u16)~lr_csum_fold64(sum));
}

SEC("xdp")
int bench_cost_csum_incr(struct xdp_md *ctx)
{
	if (restore(ctx))
		return XDP_ABORTED;
	__u8 *p = (void *)(long)ctx->data;
	if ((void *)(p + BENCH_LEN) > (void *)(long)ctx->data_end)
		return XDP_ABORTED;
	/* What a reply changes of the request's UDP words: the sequence, the
	 * error estimate and the four stamped words (T2, T3 and the copies);
	 * the addresses and ports only trade places. */
	__u64 sum = (__u16)~*(lr_w16 *)(p + 60);
#pragma unroll
	for (int i = 62; i < 102; i += 8)
		sum = lr_add64(sum, ~*(lr_w64 *)(p + i) & 0xffffffffffffffffULL);
#pragma unroll
	for (int i = 62; i < 102; i += 8)
		*(lr_w64 *)(p + i) = *(lr_w64 *)(p + i) ^ 0x5a5a;
#pragma unroll
	for (int i = 62; i < 102; i += 8)
		sum = lr_add64(sum, *(lr_w64 *)(p + i));
	return sent(ctx, (__u16)~lr_csum_fold64(sum));
}

/* The payload writes of a reply, byte at a time and word at a time. */
SEC("xdp")
int bench_cost_writes_bytes(struct xdp_md *ctx)
{
	if (restore(ctx))
		return XDP_ABORTED;
	__u8 *p = (void *)(long)ctx->data;
	if ((void *)(p + BENCH_LEN) > (void *)(long)ctx->data_end)
		return XDP_ABORTED;
	__u8 *pay = p + 62;
	__u64 t = 0x0123456789abcdefULL;
	__u32 s;
	__builtin_memcpy(&s, pay, 4);
	__builtin_memcpy(pay + 24, &s, 4);
	__builtin_memcpy(pay + 28, pay + 4, 8);
	__builtin_memcpy(pay + 16, &t, 8);
	__builtin_memcpy(pay + 4, &t, 8);
	__builtin_memset(pay + 38, 0, 6);
	return XDP_TX;
}

SEC("xdp")
int bench_cost_writes_words(struct xdp_md *ctx)
{
	if (restore(ctx))
		return XDP_ABORTED;
	__u8 *p = (void *)(long)ctx->data;
	if ((void *)(p + BENCH_LEN) > (void *)(long)ctx->data_end)
		return XDP_ABORTED;
	__u8 *pay = p + 62;
	__u64 t = 0x0123456789abcdefULL;
	*(lr_w32 *)(pay + 24) = *(lr_w32 *)pay;
	*(lr_w64 *)(pay + 28) = *(lr_w64 *)(pay + 4);
	*(lr_w64 *)(pay + 16) = t;
	*(lr_w64 *)(pay + 4) = t;
	*(lr_w32 *)(pay + 38) = 0;
	*(lr_w16 *)(pay + 42) = 0;
	return XDP_TX;
}

/* A MAC swap that does not restore: swapping twice gives the request back,
 * so it needs none. What prog.Run costs around the smallest XDP_TX program. */
SEC("xdp")
int bench_macswap_bare(struct xdp_md *ctx)
{
	__u8 *eth = (void *)(long)ctx->data;
	if ((void *)(eth + 14) > (void *)(long)ctx->data_end)
		return XDP_ABORTED;
	__u8 tmp[6];
	__builtin_memcpy(tmp, eth, 6);
	__builtin_memcpy(eth, eth + 6, 6);
	__builtin_memcpy(eth + 6, tmp, 6);
	return XDP_TX;
}

/* A 64-bit division by 10^9, as lr_ntp and lr_ptp did per timestamp. */
SEC("xdp")
int bench_cost_div_x8(struct xdp_md *ctx)
{
	if (restore(ctx))
		return XDP_ABORTED;
	__u8 *p = (void *)(long)ctx->data;
	if ((void *)(p + BENCH_LEN) > (void *)(long)ctx->data_end)
		return XDP_ABORTED;
	__u64 v = *(lr_w64 *)(p + 66), s = 0;
#pragma unroll
	for (int i = 0; i < COST_N; i++) {
		s += v / 1000000000;
		v += s;
	}
	return sent(ctx, s);
}

/* The collector's ring buffer: a record reserved and submitted without a
 * wakeup (the Go benchmark drains the ring between runs). */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} bench_ring SEC(".maps");

SEC("xdp")
int bench_cost_ringbuf(struct xdp_md *ctx)
{
	if (restore(ctx))
		return XDP_ABORTED;
	__u64 *r = bpf_ringbuf_reserve(&bench_ring, 64, 0);
	if (!r)
		return XDP_ABORTED;
	r[0] = 1;
	bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
	return sent(ctx, 0);
}
