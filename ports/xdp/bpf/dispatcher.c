// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * The xdp port's dispatcher: one program per interface. It runs the stages'
 * offloads (its slots, which appliance/offload.Link replaces by the stages'
 * slot functions), then redirects what the
 * port's match rules take to the queue's AF_XDP socket, and passes the rest
 * to the kernel untouched. Built twice from this source: device-bound
 * (-DLR_DEV_BOUND, attached where it reads the NIC's rx timestamp) and plain
 * (attached elsewhere, and for BPF_PROG_TEST_RUN).
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "lr_offload.h"

#define MAX_RULES 64
#define MAX_QUEUES 256
#define MAX_EXT 6  /* IPv6 extension headers walked */
#define MAX_OPTS 8 /* options walked in a Hop-by-Hop or Destination Options header */

/* Rule fields that are set (struct rule.set). */
#define R_NEXT_HEADER (1 << 0)
#define R_UDP_DST (1 << 1)
#define R_UDP_SRC (1 << 2)
#define R_PREFIX (1 << 3)
#define R_HBH (1 << 4)
#define R_SRH (1 << 5)
#define R_IOAM (1 << 6)

/* A match rule: every field it sets must match. Ports in network order. */
struct rule {
	__u8 set;
	__u8 next_header;
	__u8 hbh;  /* wanted presence: 0 or 1 */
	__u8 srh;
	__u8 ioam;
	__u8 prefix_len;
	__u8 family; /* 4 or 6, with R_PREFIX */
	__u8 _pad;
	__u16 udp_dst;
	__u16 udp_src;
	__u32 _pad2;
	__u8 prefix[16];
};

/* The match table's header: rules [active*MAX_RULES, +count) and
 * summaries[active] are in force. A reload writes the other half, then flips
 * active with one store. */
struct control {
	__u32 active;
	__u32 count;
	__u32 take_all;
	__u32 _pad;
};

/* The pass path's summary of the rules in force, computed in user space at
 * each load and reload (ports/xdp/summary.go). Most of the host's own traffic
 * is IPv4, or IPv6 without extension headers, to ports no rule names: it is
 * decided XDP_PASS on its first headers, without the rule walk; IPv6 with
 * extension headers is decided the same way once parsed, by what they hold.
 * A summary only ever says "no rule can take this"; what it cannot rule out
 * meets the rules. Bitmaps: bit n of word n/64. */
struct summary {
	__u32 flags;     /* S_* */
	__u8 udp_any6;   /* bit p: a rule may take IPv6 UDP to any port, presence p */
	__u8 _pad[3];
	__u64 proto4[4]; /* protocols a rule may take in IPv4 */
	/* Next headers a rule may take in IPv6, by the presence p of a Hop-by-Hop
	 * header (bit 0), an SRH (bit 1) and an IOAM option (bit 2); [0] is
	 * IPv6 without extension headers. */
	__u64 proto6[8][4];
	__u64 udp_dst[1024]; /* UDP destination ports a rule may take (unless *_ANY) */
};

#define S_NON_IP (1 << 0)   /* a rule takes frames that are neither IPv4 nor IPv6 */
#define S_UDP_ANY4 (1 << 1) /* a rule may take IPv4 UDP to any port */

/* Per-CPU counters, by index (ports/xdp's dispatcherCounters names them). */
enum {
	C_MATCHED,   /* redirected by a rule */
	C_PASSED,    /* left to the kernel */
	C_USER,      /* sent up by an offload */
	C_NO_SOCKET, /* redirect failed: no socket on the queue; passed */
	C_OFFLOAD_TX,
	C_OFFLOAD_DROP,
	C_OFFLOAD_PASS,
	C_UNPARSED, /* too short or truncated headers: left to the kernel */
	C_PASSED_EARLY, /* left to the kernel on the summary: C_PASSED does not count these */
	C_NO_ROOM, /* taken, but no room for the stamp in the headroom: left to the kernel */
	C_COUNT
};

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, MAX_QUEUES);
	__type(key, __u32);
	__type(value, __u32);
} xsks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2 * MAX_RULES);
	__type(key, __u32);
	__type(value, struct rule);
} rules SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct control);
} control SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct summary);
} summaries SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, C_COUNT);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

/* Decide on the summary first (set at load; 0 walks the rules for every
 * packet: the reference the tests hold the summary to). */
volatile const __u32 use_summary = 1;
/* Slots in use, set at load: the calls beyond are dead code to the verifier. */
volatile const __u32 nslots = 0;
/* How the rx stamp (struct lr_xdp_meta) goes up with a frame, set at load:
 * a constant, so the verifier never walks the other variant's helper call,
 * which a kernel may refuse (some refuse bpf_xdp_adjust_meta to XDP). */
#define VIA_NONE 0 /* no stamp: the engine's clock */
#define VIA_META 1 /* in the XDP metadata area, in front of the data */
#define VIA_HEAD 2 /* in the headroom, as the frame's first bytes: the port strips them */
volatile const __u32 stamp_via = VIA_META;
/* Ask the NIC for its rx stamp (device-bound only): set at load when the
 * port follows the NIC's PTP hardware clock, which turns them into the
 * engine's time. */
volatile const __u32 hw_stamp = 0;

/* The offload slots: each returns LR_OFFLOAD_NEXT until Link replaces it by
 * a stage's slot function. Global and noinline: a function of its own in the
 * object, which the verifier checks on its own. */
#define SLOT(i)                                                   \
	__attribute__((noinline)) int lr_slot##i(struct xdp_md *ctx) \
	{                                                         \
		volatile int r = LR_OFFLOAD_NEXT;                 \
		if (!ctx)                                         \
			return XDP_ABORTED;                       \
		return r;                                         \
	}
SLOT(0)
SLOT(1)
SLOT(2)
SLOT(3)
SLOT(4)
SLOT(5)
SLOT(6)
SLOT(7)
#define NSLOTS 8

static __always_inline void count(__u32 i)
{
	__u64 *c = bpf_map_lookup_elem(&counters, &i);
	if (c)
		(*c)++;
}

/* What the parse found. */
struct layers {
	__u8 family;
	__u8 proto; /* upper-layer protocol after the extension headers */
	__u8 hbh, srh, ioam;
	__u8 udp; /* ports are valid */
	__u16 sport, dport;
	__u8 dst[16];
};

#define IOAM_OPT 0x31 /* RFC 9486 */

/* opts_ioam walks a Hop-by-Hop or Destination Options header at off, of
 * length len bytes, for an IOAM option. */
static __always_inline int opts_ioam(void *data, void *end, __u32 off, __u32 len)
{
	__u32 o = off + 2;
	for (int i = 0; i < MAX_OPTS; i++) {
		if (o >= off + len)
			return 0;
		__u8 *t = data + o;
		if ((void *)(t + 2) > end)
			return 0;
		if (t[0] == IOAM_OPT)
			return 1;
		if (t[0] == 0) { /* Pad1 */
			o += 1;
			continue;
		}
		o += 2 + t[1];
	}
	return 0;
}

static __always_inline int parse(struct xdp_md *ctx, struct layers *l)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > end)
		return -1;
	__u16 type = eth->h_proto;
	__u32 off = sizeof(*eth);
#pragma unroll
	for (int i = 0; i < 2; i++) { /* 802.1Q / 802.1ad tags */
		if (type != bpf_htons(ETH_P_8021Q) && type != bpf_htons(ETH_P_8021AD))
			break;
		__u16 *tag = data + off;
		if ((void *)(tag + 2) > end)
			return -1;
		type = tag[1];
		off += 4;
	}
	if (type == bpf_htons(ETH_P_IPV6)) {
		__u8 *ip6 = data + off;
		if ((void *)(ip6 + 40) > end)
			return -1;
		l->family = 6;
		__builtin_memcpy(l->dst, ip6 + 24, 16);
		__u8 nh = ip6[6];
		off += 40;
		for (int i = 0; i < MAX_EXT; i++) {
			if (nh != 0 && nh != 43 && nh != 60)
				break; /* the fragment header and upper layers end the walk */
			__u8 *x = data + off;
			if ((void *)(x + 8) > end)
				return -1;
			__u32 xl = ((__u32)x[1] + 1) * 8;
			if (nh == 0)
				l->hbh = 1;
			if (nh == 43 && x[2] == 4)
				l->srh = 1;
			if ((nh == 0 || nh == 60) && !l->ioam)
				l->ioam = opts_ioam(data, end, off, xl);
			nh = x[0];
			off += xl;
		}
		l->proto = nh;
	} else if (type == bpf_htons(ETH_P_IP)) {
		__u8 *ip4 = data + off;
		if ((void *)(ip4 + 20) > end)
			return -1;
		l->family = 4;
		__builtin_memcpy(l->dst, ip4 + 16, 4);
		l->proto = ip4[9];
		if (ip4[6] & 0x3f || ip4[7]) /* a fragment: no ports */
			return 0;
		off += (ip4[0] & 0xf) * 4;
	} else {
		return 0;
	}
	if (l->proto == IPPROTO_UDP) {
		__u16 *u = data + off;
		if ((void *)(u + 4) > end)
			return 0;
		l->sport = u[0];
		l->dport = u[1];
		l->udp = 1;
	}
	return 0;
}

static __always_inline int prefix_match(const struct rule *r, const struct layers *l)
{
	if (r->family != l->family)
		return 0;
	__u32 bits = r->prefix_len;
	__u8 diff = 0;
#pragma unroll
	for (int i = 0; i < 16; i++) {
		__u8 mask = bits >= 8 ? 0xff : bits ? (__u8)(0xff << (8 - bits)) : 0;
		diff |= (l->dst[i] ^ r->prefix[i]) & mask;
		bits = bits >= 8 ? bits - 8 : 0;
	}
	return diff == 0;
}

static __always_inline int rule_match(const struct rule *r, const struct layers *l)
{
	if (r->set & R_NEXT_HEADER && r->next_header != l->proto)
		return 0;
	if (r->set & (R_UDP_DST | R_UDP_SRC) && !l->udp)
		return 0;
	if (r->set & R_UDP_DST && r->udp_dst != l->dport)
		return 0;
	if (r->set & R_UDP_SRC && r->udp_src != l->sport)
		return 0;
	if (r->set & R_HBH && r->hbh != l->hbh)
		return 0;
	if (r->set & R_SRH && r->srh != l->srh)
		return 0;
	if (r->set & R_IOAM && r->ioam != l->ioam)
		return 0;
	if (r->set & R_PREFIX && !prefix_match(r, l))
		return 0;
	return 1;
}

struct match_ctx {
	struct layers *l;
	__u32 base, count;
	int hit;
};

static long match_one(__u32 i, struct match_ctx *m)
{
	if (i >= m->count)
		return 1;
	__u32 k = m->base + i;
	struct rule *r = bpf_map_lookup_elem(&rules, &k);
	if (!r)
		return 1;
	if (rule_match(r, m->l)) {
		m->hit = 1;
		return 1;
	}
	return 0;
}

static __always_inline int bit(const __u64 *words, __u32 n)
{
	return (words[(n >> 6) & 1023] >> (n & 63)) & 1;
}

/* ruled_out reports whether no rule of s can take the packet, from its first
 * headers alone; 0 where it cannot tell (extension headers, a fragment,
 * anything truncated), and the rules decide. It reads the offsets exactly as
 * parse does, so both see the same ports. */
static __always_inline int ruled_out(struct xdp_md *ctx, const struct summary *s)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > end)
		return 0;
	__u16 type = eth->h_proto;
	__u32 off = sizeof(*eth);
#pragma unroll
	for (int i = 0; i < 2; i++) {
		if (type != bpf_htons(ETH_P_8021Q) && type != bpf_htons(ETH_P_8021AD))
			break;
		__u16 *tag = data + off;
		if ((void *)(tag + 2) > end)
			return 0;
		type = tag[1];
		off += 4;
	}
	__u8 proto, frag = 0;
	__u32 udp_any;
	const __u64 *protos;
	if (type == bpf_htons(ETH_P_IPV6)) {
		__u8 *ip6 = data + off;
		if ((void *)(ip6 + 40) > end)
			return 0;
		proto = ip6[6];
		if (proto == 0 || proto == 43 || proto == 60)
			return 0; /* extension headers: the rules decide */
		off += 40;
		protos = s->proto6[0];
		udp_any = s->udp_any6 & 1;
	} else if (type == bpf_htons(ETH_P_IP)) {
		__u8 *ip4 = data + off;
		if ((void *)(ip4 + 20) > end)
			return 0;
		proto = ip4[9];
		frag = ip4[6] & 0x3f || ip4[7];
		off += (ip4[0] & 0xf) * 4;
		protos = s->proto4;
		udp_any = s->flags & S_UDP_ANY4;
	} else {
		return !(s->flags & S_NON_IP);
	}
	if (!bit(protos, proto))
		return 1;
	if (proto != IPPROTO_UDP || udp_any || frag)
		return 0;
	__u16 *u = data + off;
	if ((void *)(u + 4) > end)
		return 0;
	return !bit(s->udp_dst, bpf_ntohs(u[1]));
}

/* ruled_out_parsed is ruled_out for a packet parse has walked: IPv6 with
 * extension headers too, by what they hold. */
static __always_inline int ruled_out_parsed(const struct layers *l, const struct summary *s)
{
	const __u64 *protos;
	__u32 udp_any;
	if (l->family == 4) {
		protos = s->proto4;
		udp_any = s->flags & S_UDP_ANY4;
	} else if (l->family == 6) {
		__u32 p = (l->hbh | l->srh << 1 | l->ioam << 2) & 7;
		protos = s->proto6[p];
		udp_any = (s->udp_any6 >> p) & 1;
	} else {
		return !(s->flags & S_NON_IP);
	}
	if (!bit(protos, l->proto))
		return 1;
	if (l->proto != IPPROTO_UDP || udp_any)
		return 0;
	if (!l->udp)
		return 1; /* no ports (a fragment, cut short): every rule that may take it names one */
	return !bit(s->udp_dst, bpf_ntohs(l->dport));
}

#ifdef LR_DEV_BOUND
extern int bpf_xdp_metadata_rx_timestamp(const struct xdp_md *ctx, __u64 *timestamp) __ksym;
#endif

#define META_LEN ((int)sizeof(struct lr_xdp_meta))

static __always_inline void put_stamp(struct lr_xdp_meta *m, __u64 ts, __u32 src)
{
	m->rx_ns = ts;
	m->source = src;
	m->magic = LR_META_MAGIC;
}

/* up sends the packet to the queue's AF_XDP socket, stamped as stamp_via
 * says. In the headroom variant every frame the socket gets starts with the
 * stamp (the port cannot tell one by its bytes): one that cannot carry it is
 * left to the kernel, and a frame left to the kernel gets its bytes back. */
static __always_inline int up(struct xdp_md *ctx)
{
	__u64 ts = 0;
	__u32 src = LR_RX_KTIME;
	int moved = 0;
	if (stamp_via != VIA_NONE) {
#ifdef LR_DEV_BOUND
		/* Drivers without a stamp say so, or (veth) give 0. */
		if (hw_stamp && bpf_xdp_metadata_rx_timestamp(ctx, &ts) == 0 && ts != 0)
			src = LR_RX_HW;
		else
			ts = 0;
#endif
		if (!ts)
			ts = bpf_ktime_get_ns();
	}
	if (stamp_via == VIA_META) {
		if (bpf_xdp_adjust_meta(ctx, -META_LEN) == 0) {
			struct lr_xdp_meta *m = (void *)(long)ctx->data_meta;
			if ((void *)(m + 1) <= (void *)(long)ctx->data)
				put_stamp(m, ts, src);
		}
	} else if (stamp_via == VIA_HEAD) {
		/* The way back (adjust_head +META_LEN) keeps ETH_HLEN bytes: a
		 * shorter frame could not get its bytes back. */
		if ((void *)(long)ctx->data + ETH_HLEN > (void *)(long)ctx->data_end ||
		    bpf_xdp_adjust_head(ctx, -META_LEN) != 0) {
			count(C_NO_ROOM);
			return XDP_PASS;
		}
		struct lr_xdp_meta *m = (void *)(long)ctx->data;
		if ((void *)(m + 1) > (void *)(long)ctx->data_end) {
			bpf_xdp_adjust_head(ctx, META_LEN); /* for the verifier: it had ETH_HLEN */
			count(C_NO_ROOM);
			return XDP_PASS;
		}
		put_stamp(m, ts, src);
		moved = 1;
	}
	int r = bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
	if (r != XDP_REDIRECT) {
		count(C_NO_SOCKET);
		if (moved)
			bpf_xdp_adjust_head(ctx, META_LEN); /* the kernel gets what came in */
	}
	return r;
}

/* slot runs slot i when it is in use; its verdict, or -1 to go on. */
#define RUN_SLOT(i)                                                     \
	if (nslots > i) {                                               \
		int r = lr_slot##i(ctx);                                \
		switch (r) {                                            \
		case LR_OFFLOAD_NEXT:                                   \
			break;                                          \
		case LR_OFFLOAD_USER:                                   \
			count(C_USER);                                  \
			return up(ctx);                                 \
		case XDP_TX:                                            \
			count(C_OFFLOAD_TX);                            \
			return XDP_TX;                                  \
		case XDP_PASS:                                          \
			count(C_OFFLOAD_PASS);                          \
			return XDP_PASS;                                \
		default:                                                \
			count(C_OFFLOAD_DROP);                          \
			return XDP_DROP;                                \
		}                                                       \
	}

SEC("xdp")
int lr_dispatch(struct xdp_md *ctx)
{
	RUN_SLOT(0)
	RUN_SLOT(1)
	RUN_SLOT(2)
	RUN_SLOT(3)
	RUN_SLOT(4)
	RUN_SLOT(5)
	RUN_SLOT(6)
	RUN_SLOT(7)

	__u32 zero = 0;
	struct control *c = bpf_map_lookup_elem(&control, &zero);
	if (!c)
		return XDP_PASS;
	if (c->take_all) {
		count(C_MATCHED);
		return up(ctx);
	}
	__u32 k = c->active & 1;
	struct summary *s = use_summary ? bpf_map_lookup_elem(&summaries, &k) : 0;
	if (s && ruled_out(ctx, s)) {
		count(C_PASSED_EARLY);
		return XDP_PASS;
	}
	struct layers l = {};
	if (parse(ctx, &l) < 0) {
		count(C_UNPARSED);
		count(C_PASSED);
		return XDP_PASS;
	}
	if (s && ruled_out_parsed(&l, s)) {
		count(C_PASSED_EARLY);
		return XDP_PASS;
	}
	struct match_ctx m = {.l = &l, .base = (c->active & 1) * MAX_RULES, .count = c->count};
	if (m.count > MAX_RULES)
		m.count = MAX_RULES;
	bpf_loop(MAX_RULES, match_one, &m, 0);
	if (!m.hit) {
		count(C_PASSED);
		return XDP_PASS;
	}
	count(C_MATCHED);
	return up(ctx);
}

char _license[] SEC("license") = "Dual BSD/GPL";
