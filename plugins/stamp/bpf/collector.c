//go:build ignore

// SPDX-License-Identifier: GPL-2.0
/* stamp.collector in XDP: takes the base reflected packets (RFC 8762
 * §4.3.1, unauthenticated, without TLVs) of the sender sessions over IPv4
 * (no options) or IPv6 (no extension headers), stamps T4 as they arrive, and
 * hands the base packet with T4 through a ring (below) to the collector
 * instance that owns the session, which makes the record in Go
 * (plugins/stamp/collector.go: the same records, histograms and metrics).
 * The checks are the Go stage's: the ports replies come to, the session,
 * the session's address and, with check_source, the reflector's. What it
 * does not handle (TLVs, authenticated mode, HMAC TLV sessions, extension
 * headers, VLAN tags, a full ring) goes up to the Go stage untouched
 * (LR_OFFLOAD_USER); test packets and other traffic go on (LR_OFFLOAD_NEXT).
 *
 * Built twice from this file (gen.go): device-bound and plain. */
#include "lr_xdp.h"

char LICENSE[] SEC("license") = "GPL";

#define CO_MAX_INSTANCES 64

struct co_config {
	__s32 port;      /* -1: each session's src_port; 0: any; else this one */
	__u8 check_src;  /* replies must come from the session's reflector */
	__u8 pad[3];
};

/* Session flags. */
#define CS_IPV4 1
#define CS_AUTH 2
#define CS_HMAC_TLV 4 /* the session sends an HMAC TLV: replies need one */
#define CS_EXISTS 8

struct co_session {
	__u8 flags;
	__u8 owner; /* the collector instance that owns it: its ring */
	__u16 src_port;
	__u8 src[16];       /* the session's source: where replies go (IPv4 mapped) */
	__u8 reflector[16]; /* where they come from */
};

/* The rings: one per collector instance, CO_RING_SLOTS records each, in one
 * mappable array (instance i's from i × CO_RING_SLOTS; Go sizes the array
 * for the stage's instances). Any CPU writes an instance's ring, the
 * instance's lcore alone reads it (collector.go: Poll). Not a BPF ring
 * buffer: its reserve and submit take a spin lock and cost a quarter of the
 * program (plugins/stamp/README.md). A writer takes a position with a
 * compare-and-swap on the instance's head, if the reader's tail says the
 * slot is free, writes the record, then the slot's turn: position p's
 * record is in when its slot's turn is p / CO_RING_SLOTS + 1. The reader
 * writes nothing but its tail, once a poll: the slots' cache lines are only
 * read on its core. */
#define CO_RING_SHIFT 12
#define CO_RING_SLOTS (1 << CO_RING_SHIFT)
#define CO_RING_TRIES 4 /* positions other CPUs took first: then it is busy */

/* A record: T4 and the base packet, what the owner makes its record of. */
struct co_slot {
	__u64 turn;
	__u64 t4;  /* CLOCK_TAI ns, or the driver's stamp */
	__u16 ssid;
	__u8 hop;  /* the reply's TTL or hop limit */
	__u8 pad;
	__u8 pay[44];
};

/* An instance's next position and its reader's, a cache line of their
 * own; mappable, the reader writes tail. */
struct co_head {
	__u64 pos;
	__u64 tail;
	__u64 pad[6];
};

enum {
	K_RECORDS,
	K_TO_GO,
	K_SHORT,
	K_UNKNOWN,
	K_WRONG_SOURCE,
	K_RING_FULL,
	K_MAX,
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct co_config);
} stamp_co_config SEC(".maps");

/* Sessions by SSID, in an array: a lookup the verifier inlines (36 bytes ×
 * 65536 = 2.3 MiB). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct co_session);
} stamp_co_sessions SEC(".maps");

/* The sessions' src_ports (port = -1): a bitmap, port p at bit p & 63 of
 * word p >> 6. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u64);
} stamp_co_ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, CO_MAX_INSTANCES);
	__type(key, __u32);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(value, struct co_head);
} stamp_co_heads SEC(".maps");

/* One instance's ring here; Go makes it instances × CO_RING_SLOTS. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, CO_RING_SLOTS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct co_slot);
} stamp_co_slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, K_MAX);
	__type(key, __u32);
	__type(value, __u64);
} stamp_co_counters SEC(".maps");

static __always_inline void kcount(__u32 i)
{
	__u64 *c = bpf_map_lookup_elem(&stamp_co_counters, &i);
	if (c)
		*c += 1;
}

/* Packet and map memory a word at a time (lr_xdp.h): clang's memcpy
 * through a __u8 pointer goes a byte at a time. */
static __always_inline int eq16(const __u8 *a, const __u8 *b)
{
	return *(const lr_w64 *)a == *(const lr_w64 *)b && *(const lr_w64 *)(a + 8) == *(const lr_w64 *)(b + 8);
}

/* take is a free slot of owner's ring, with the turn that says its record
 * is in; NULL when the ring is full (or other CPUs kept taking it). */
static __always_inline struct co_slot *take(__u32 owner, __u64 *in)
{
	struct co_head *h = bpf_map_lookup_elem(&stamp_co_heads, &owner);
	if (!h)
		return 0;
#pragma unroll
	for (int i = 0; i < CO_RING_TRIES; i++) {
		__u64 pos = *(volatile __u64 *)&h->pos;
		__u32 k = owner * CO_RING_SLOTS + (__u32)(pos & (CO_RING_SLOTS - 1));
		struct co_slot *sl = bpf_map_lookup_elem(&stamp_co_slots, &k);
		if (!sl)
			return 0;
		if (pos - *(volatile __u64 *)&h->tail >= CO_RING_SLOTS)
			return 0; /* the reader has not read the slot's last record: full */
		if (__sync_val_compare_and_swap(&h->pos, pos, pos + 1) == pos) {
			*in = (pos >> CO_RING_SHIFT) + 1;
			return sl;
		}
	}
	return 0;
}

static __always_inline int stamp_collect(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u8 *eth = data;
	__u32 zero = 0;
	__u8 *l3 = eth + ETH_HLEN_, *udp;
	__u32 l3len, iplen, v4;
	__u8 hop;

	if ((void *)(eth + ETH_HLEN_) > end)
		return LR_OFFLOAD_NEXT;
	__u16 proto = lr_ld16(eth + 12);
	if (proto == ETH_P_IP_) {
		if ((void *)(l3 + 20 + 8) > end || l3[0] >> 4 != 4 || l3[9] != IPPROTO_UDP_)
			return LR_OFFLOAD_NEXT;
		if ((l3[0] & 15) != 5 || (lr_ld16(l3 + 6) & 0x3fff) != 0)
			return LR_OFFLOAD_NEXT;
		v4 = 1;
		l3len = 20;
		iplen = lr_ld16(l3 + 2);
		hop = l3[8];
	} else if (proto == ETH_P_IPV6_) {
		if ((void *)(l3 + 40 + 8) > end || l3[0] >> 4 != 6 || l3[6] != IPPROTO_UDP_)
			return LR_OFFLOAD_NEXT;
		v4 = 0;
		l3len = 40;
		iplen = 40 + lr_ld16(l3 + 4);
		hop = l3[7];
	} else {
		return LR_OFFLOAD_NEXT;
	}
	udp = l3 + l3len;
	if ((void *)(udp + 8) > end)
		return LR_OFFLOAD_NEXT;
	struct co_config *c = bpf_map_lookup_elem(&stamp_co_config, &zero);
	if (!c)
		return LR_OFFLOAD_NEXT;
	__u16 dport = lr_ld16(udp + 2);
	if (c->port > 0 && dport != (__u16)c->port)
		return LR_OFFLOAD_NEXT;
	if (c->port < 0) {
		__u32 w = dport >> 6;
		__u64 *bits = bpf_map_lookup_elem(&stamp_co_ports, &w);
		if (!bits || !(*bits & (1ULL << (dport & 63))))
			return LR_OFFLOAD_NEXT;
	}
	__u32 total = (__u32)((long)end - (long)data);
	__u32 ulen = lr_ld16(udp + 4);
	if (ETH_HLEN_ + iplen > total || ulen != iplen - l3len) {
		kcount(K_TO_GO);
		return LR_OFFLOAD_USER;
	}
	if (ulen < 8 + 44) {
		kcount(K_SHORT);
		return XDP_DROP;
	}
	if (ulen != 8 + 44) {
		kcount(K_TO_GO);
		return LR_OFFLOAD_USER; /* TLVs, or authenticated mode */
	}
	__u8 *pay = udp + 8;
	if ((void *)(pay + 44) > end)
		return LR_OFFLOAD_NEXT;
	if (*(lr_w64 *)(pay + 16) == 0)
		return LR_OFFLOAD_NEXT; /* a test packet: a reflector's */
	__u16 ssid = lr_ld16(pay + 14);
	__u32 sidx = ssid;
	struct co_session *s = bpf_map_lookup_elem(&stamp_co_sessions, &sidx);
	if (!s || !(s->flags & CS_EXISTS)) {
		/* Not (yet) in the program: the Go stage knows, or drops it. */
		kcount(K_TO_GO);
		return LR_OFFLOAD_USER;
	}
	if ((s->flags & CS_AUTH) || (c->port < 0 && dport != s->src_port)) {
		kcount(K_UNKNOWN);
		return XDP_DROP;
	}
	/* To the session's source? Else a reply to another node's sender. */
	int v4s = (s->flags & CS_IPV4) != 0;
	if (v4s != (int)v4)
		return LR_OFFLOAD_NEXT;
	if (v4) {
		if (*(lr_w32 *)(l3 + 16) != *(lr_w32 *)(s->src + 12))
			return LR_OFFLOAD_NEXT;
	} else if (!eq16(l3 + 24, s->src)) {
		return LR_OFFLOAD_NEXT;
	}
	if (c->check_src) {
		if (v4 ? *(lr_w32 *)(l3 + 12) != *(lr_w32 *)(s->reflector + 12) : !eq16(l3 + 8, s->reflector)) {
			kcount(K_WRONG_SOURCE);
			return XDP_DROP;
		}
	}
	if (s->flags & CS_HMAC_TLV) {
		kcount(K_TO_GO);
		return LR_OFFLOAD_USER; /* the Go stage says why a reply lacks it */
	}
	__u64 t4 = lr_rx_time(ctx), in;
	struct co_slot *ev = take(s->owner, &in);
	if (!ev) {
		kcount(K_RING_FULL);
		return LR_OFFLOAD_USER; /* the Go stage takes it the slow way */
	}
	ev->t4 = t4;
	ev->ssid = ssid;
	ev->hop = hop;
#pragma unroll
	for (int i = 0; i < 40; i += 8)
		*(lr_w64 *)(ev->pay + i) = *(lr_w64 *)(pay + i);
	*(lr_w32 *)(ev->pay + 40) = *(lr_w32 *)(pay + 40);
	/* In, for the owner, after the record: an exchange orders the stores
	 * before it on every JIT (the owner polls; nothing to wake). */
	__sync_lock_test_and_set(&ev->turn, in);
	kcount(K_RECORDS);
	return XDP_DROP; /* consumed: the record is the packet's end */
}

LR_OFFLOAD(stamp_collect)
