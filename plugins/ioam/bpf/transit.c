//go:build ignore

// SPDX-License-Identifier: GPL-2.0
/* ioam.transit in XDP: fills this node's data into the pre-allocated trace
 * of the layout linerate and the Linux kernel insert (a Hop-by-Hop header
 * right after the IPv6 header holding a 2-byte PadN, one pre-allocated trace
 * option and padding), with the same ids and formats as the Go stage
 * (plugins/ioam/transit.go, its fast path). Fields not known at XDP ingress
 * are written as unavailable, all ones (RFC 9197 §4.4.2): transit delay,
 * queue depth, buffer occupancy; docs/ioam.md lists them. Other layouts
 * (incremental traces, POT, DEX, several options, VLAN tags) go up to the Go
 * stage untouched (LR_OFFLOAD_USER); packets without a Hop-by-Hop header go
 * on (LR_OFFLOAD_NEXT). A trace this node is done with (filled, full, of a
 * namespace it does not know) goes to the kernel, which routes it
 * (XDP_PASS): the Go stage must not see it again.
 *
 * Built twice from this file (plugins/ioam/bpf/gen.go): device-bound
 * (LR_DEVBOUND, for attaching: the timestamp from the driver's rx stamp)
 * and plain (for prog.Run). */
#include "lr_xdp.h"

char LICENSE[] SEC("license") = "GPL";

#define MAX_TRACE_DATA 244
#define MAX_SCHEMA 128
#define U32_NA 0xffffffffU
#define IPPROTO_DSTOPTS_ 60

/* Timestamp formats (plugins/ioam TimestampFormat). */
#define TS_PTP 0
#define TS_NTP 1
#define TS_POSIX 2

struct tr_config {
	__u8 loopback; /* the stage sends looped-back copies: L traces go up */
	__u8 pad[3];
	__u16 eg_short; /* the configured egress port's ids */
	__u16 pad2;
	__u32 eg_wide;
	__u32 pad3;
	__s64 utc_off; /* Unix ns − CLOCK_TAI ns */
	__s64 tai_off; /* TAI ns − CLOCK_TAI ns (PTP timestamps) */
};

struct tr_namespace {
	__u32 node_id; /* 24 bits */
	__u32 data;
	__u64 node_id_wide; /* 56 bits */
	__u64 data_wide;
	__u8 ts_format;
	__u8 has_schema;
	__u8 schema_words;
	__u8 pad;
	__u32 schema_id;
	__u8 schema[MAX_SCHEMA];
};

struct if_ids {
	__u16 short_id;
	__u16 pad;
	__u32 wide;
};

enum {
	C_FILLED,
	C_OVERFLOW,
	C_UNKNOWN_NS,
	C_NO_IOAM,
	C_TO_GO,
	C_MAX,
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tr_config);
} ioam_tr_config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __u16);
	__type(value, struct tr_namespace);
} ioam_tr_namespaces SEC(".maps");

/* Interface ids by ingress ifindex. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, struct if_ids);
} ioam_tr_ifids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, C_MAX);
	__type(key, __u32);
	__type(value, __u64);
} ioam_tr_counters SEC(".maps");

static __always_inline void count(__u32 i)
{
	__u64 *c = bpf_map_lookup_elem(&ioam_tr_counters, &i);
	if (c)
		*c += 1;
}

static __always_inline __u32 node_len(__u32 tt)
{
	/* one word: bits 0-7, 11, 12-21; two words: bits 8-10 */
	__u32 shortm = tt & (0xFF0000 | 0x001000 | 0x000FFC);
	__u32 widem = tt & 0x00E000;
	return __builtin_popcount(shortm) + 2 * __builtin_popcount(widem);
}

/* The node's time in format f: seconds and the fraction's field. */
static __always_inline void node_time(const struct tr_config *c, __u64 tai, __u8 f, __u32 *sec, __u32 *frac)
{
	__u64 unix_ns = tai + (__u64)c->utc_off;
	if (f == TS_NTP) {
		__u64 ntp = lr_ntp(unix_ns);
		*sec = ntp >> 32;
		*frac = (__u32)ntp;
	} else if (f == TS_POSIX) {
		*sec = unix_ns / 1000000000;
		*frac = unix_ns % 1000000000 / 1000;
	} else {
		__u64 t = tai + (__u64)c->tai_off;
		*sec = t / 1000000000;
		*frac = t % 1000000000;
	}
}

static __always_inline int to_go(void)
{
	count(C_TO_GO);
	return LR_OFFLOAD_USER;
}

#define PUT32(v)                                  \
	do {                                      \
		if ((void *)(w + 4) > end)        \
			return XDP_ABORTED;       \
		lr_put32(w, (v));                 \
		w += 4;                           \
	} while (0)

static __always_inline int ioam_transit(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u8 *eth = data;
	__u32 zero = 0;

	if ((void *)(eth + ETH_HLEN_) > end) {
		count(C_NO_IOAM);
		return LR_OFFLOAD_NEXT;
	}
	__u16 et = lr_get16(eth + 12);
	if (et == 0x8100 || et == 0x88a8)
		return to_go(); /* VLAN tags: the Go stage reads them */
	__u8 *ip = eth + ETH_HLEN_;
	if (et != ETH_P_IPV6_ || (void *)(ip + 40) > end || ip[0] >> 4 != 6 || ip[6] != IPPROTO_HOPOPTS_) {
		count(C_NO_IOAM);
		return LR_OFFLOAD_NEXT;
	}
	if ((void *)(ip + 40 + 16) > end)
		return to_go();
	__u8 *h = ip + 40;
	__u32 hl = ((__u32)h[1] + 1) << 3;
	__u32 total = (__u32)((long)end - (long)data);
	__u32 pend = ETH_HLEN_ + 40 + lr_get16(ip + 4);
	if (ETH_HLEN_ + 40 + hl > pend || pend > total)
		return to_go();
	/* Next header, PadN of 2, option type 0x31, its length, reserved,
	 * IOAM type 0 (pre-allocated trace). */
	if (h[0] == IPPROTO_DSTOPTS_ || h[2] != 1 || h[3] != 0 || h[4] != 0x31 || h[7] != 0)
		return to_go();
	__u32 opt_end = 6 + (__u32)h[5];
	if (opt_end > hl || h[5] < 2 + 8)
		return to_go();
	__u32 rest = hl - opt_end;
	if (rest == 1) {
		__u8 *p = h + opt_end;
		if ((void *)(p + 1) > end || *p != 0)
			return to_go();
	} else if (rest > 1) {
		__u8 *p = h + (opt_end & 0x7ff);
		if ((void *)(p + 2) > end || p[0] != 1 || (__u32)p[1] != rest - 2)
			return to_go();
	}
	__u8 *tr = h + 8; /* the trace header */
	__u32 dlen = opt_end - 16;
	__u32 tt = (__u32)tr[4] << 16 | (__u32)tr[5] << 8 | tr[6];
	__u32 nl = node_len(tt);
	if (dlen > MAX_TRACE_DATA || (__u32)(tr[2] >> 3) != nl || (__u32)(tr[3] & 0x7f) * 4 > dlen)
		return to_go();

	struct tr_config *c = bpf_map_lookup_elem(&ioam_tr_config, &zero);
	if (!c)
		return to_go();
	if ((tr[2] & 0x02) && c->loopback)
		return to_go(); /* a looped-back copy to send: Go */
	__u16 nsid = lr_get16(tr);
	struct tr_namespace *ns = bpf_map_lookup_elem(&ioam_tr_namespaces, &nsid);
	if (!ns) {
		count(C_UNKNOWN_NS);
		return XDP_PASS;
	}
	__u32 words = nl;
	if (tt & 0x000002)
		words += ns->has_schema ? 1 + ns->schema_words : 1;
	/* No plan (data larger than any trace), a trace already overflowed or
	 * one without room: the O flag, as RFC 9197 §4.4 says. */
	if (words * 4 > MAX_TRACE_DATA) {
		tr[2] |= 0x04;
		count(C_OVERFLOW);
		return XDP_PASS;
	}
	if (tr[2] & 0x04) {
		count(C_OVERFLOW);
		return XDP_PASS;
	}
	__u32 rem = tr[3] & 0x7f;
	if (rem == 0 || rem < words) {
		tr[2] |= 0x04;
		count(C_OVERFLOW);
		return XDP_PASS;
	}
	tr[3] -= (__u8)words;
	rem = (tr[3] & 0x7f);
	__u8 *w = tr + 8 + rem * 4;
	__u8 hop = ip[7];

	__u32 sec = U32_NA, frac = U32_NA;
	if (tt & 0x300000)
		node_time(c, lr_rx_time(ctx), ns->ts_format, &sec, &frac);
	struct if_ids in = {.short_id = 0xffff, .wide = U32_NA};
	{
		__u32 ifx = ctx->ingress_ifindex;
		struct if_ids *ids = bpf_map_lookup_elem(&ioam_tr_ifids, &ifx);
		if (ids)
			in = *ids;
	}
	if (tt & 0x800000)
		PUT32((__u32)hop << 24 | (ns->node_id & 0xffffff));
	if (tt & 0x400000)
		PUT32((__u32)in.short_id << 16 | c->eg_short);
	if (tt & 0x200000)
		PUT32(sec);
	if (tt & 0x100000)
		PUT32(frac);
	if (tt & 0x080000)
		PUT32(U32_NA); /* transit delay: the kernel forwards after XDP */
	if (tt & 0x040000)
		PUT32(ns->data);
	if (tt & 0x020000)
		PUT32(U32_NA); /* queue depth: not known at ingress */
	if (tt & 0x010000)
		PUT32(U32_NA); /* checksum complement: none over IPv6 options */
	if (tt & 0x008000) {
		PUT32((__u32)hop << 24 | (__u32)(ns->node_id_wide >> 32) & 0xffffff);
		PUT32((__u32)ns->node_id_wide);
	}
	if (tt & 0x004000) {
		PUT32(in.wide);
		PUT32(c->eg_wide);
	}
	if (tt & 0x002000) {
		PUT32(ns->data_wide >> 32);
		PUT32((__u32)ns->data_wide);
	}
	if (tt & 0x001000)
		PUT32(U32_NA); /* buffer occupancy: not known at ingress */
	for (int b = 0; b < 10; b++) {
		if (tt & (0x000800 >> b))
			PUT32(U32_NA); /* undefined bits 12-21 */
	}
	if (tt & 0x000002) {
		if (!ns->has_schema) {
			PUT32(0x00ffffff);
		} else {
			PUT32((__u32)ns->schema_words << 24 | (ns->schema_id & 0xffffff));
			for (int i = 0; i < MAX_SCHEMA / 4; i++) {
				if (i >= ns->schema_words)
					break;
				if ((void *)(w + 4) > end)
					return XDP_ABORTED;
				__builtin_memcpy(w, ns->schema + i * 4, 4);
				w += 4;
			}
		}
	}
	count(C_FILLED);
	return XDP_PASS;
}

LR_OFFLOAD(ioam_transit)
