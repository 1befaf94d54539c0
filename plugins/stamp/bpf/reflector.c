//go:build ignore

// SPDX-License-Identifier: GPL-2.0
/* stamp.reflector in XDP: the base test packet (RFC 8762 §4.2.1 → §4.3.1),
 * unauthenticated and without TLVs, over IPv4 (no options) or IPv6 (no
 * extension headers), stateless or stateful, straight back or on the
 * session's SRv6 return path. It writes the same bytes as the Go stage
 * (plugins/stamp/reflector.go) and keeps its safety rules; what it does not
 * handle (authenticated mode, TLVs, extension headers, VLAN tags, IP options,
 * reflected packets) it leaves untouched to the Go stage (LR_OFFLOAD_NEXT).
 *
 * Built twice from this file (plugins/stamp/bpf/gen.go): device-bound
 * (LR_DEVBOUND, for attaching: T2 from the driver's rx timestamp) and plain
 * (for prog.Run). */
#include "lr_xdp.h"

char LICENSE[] SEC("license") = "GPL";

#define RF_MAX_SEGS 8 /* return path segments the program carries, slot included */
#define RF_SRH_MAX (8 + 16 * RF_MAX_SEGS)
#define RF_MAX_BCAST 8

/* Config flags. */
#define RF_SWAP_MAC 1
#define RF_REFLECT_ALL 2 /* unknown SSIDs: reflect statelessly */
#define RF_ADDRS 4       /* the addresses map lists ours */
#define RF_ALLOW 8       /* the allow trie limits sources */
#define RF_LIMIT 16      /* the per-source rate limit */

struct rf_config {
	__u16 port;      /* the reflector's UDP port */
	__u8 hop_limit;  /* of the replies */
	__u8 flags;
	__s8 format;     /* 0 NTP, 1 PTP, -1 the sender's */
	__u8 n_bcast;
	__u16 ee[2];     /* Error Estimates by format */
	__u8 addr_probes; /* the longest run of the addresses' table */
	__s64 utc_off;   /* Unix ns − CLOCK_TAI ns */
	__s64 ptp_off;   /* PTP (TAI) ns − CLOCK_TAI ns */
	__u64 lim_t;     /* rate limit: ns per packet */
	__u64 lim_tau;   /* and the burst's tolerance, (burst − 1) × lim_t */
	__u8 bcast[RF_MAX_BCAST][4]; /* directed broadcasts of the ports' prefixes */
};

/* Session flags. */
#define S_STATEFUL 1
#define S_RUNNING 2
#define S_PINNED 4
#define S_AUTH 8
#define S_SOURCE 16
#define S_EXISTS 32
#define S_GO 64 /* a session the program cannot answer (a longer return path): Go's */

/* A session, in an array indexed by SSID: a lookup the verifier inlines.
 * 64 bytes × 65536 = 4 MiB; return SRHs are in a hash of their own. */
struct rf_session {
	__u8 flags;        /* S_*; 0: no session */
	__s8 format;       /* 0 NTP, 1 PTP, -1 the sender's */
	__u8 srh_len;      /* return SRH with Segment List[0] the sender's slot; 0: none */
	__u8 srh_last_len; /* return SRH ending at ret_last; 0: none */
	__u32 seq;         /* the reflector's own sequence (stateful) */
	__u64 replied;
	__u8 sender[16];   /* pinned sender, IPv4 mapped */
	__u8 source[16];   /* reply source, IPv4 mapped */
	__u8 ret_last[16]; /* the return path's last segment */
};

struct rf_srh {
	__u8 srh[RF_SRH_MAX];
	__u8 srh_last[RF_SRH_MAX];
};

/* Counters: "reflected" and the drop reasons, by the Go names
 * (plugins/stamp/bpf/offload.go lists them in this order). */
enum {
	C_REFLECTED,
	C_TO_GO,
	C_SHORT,
	C_BAD_SOURCE,
	C_GROUP_DEST,
	C_NOT_ALLOWED,
	C_UNKNOWN,
	C_WRONG_SOURCE,
	C_RATE_LIMITED,
	C_REPLY_TOO_BIG,
	C_BAD_PATH,
	C_MAX,
};

/* The allow trie's key: the family first, as the Go stage's netip.Prefix
 * never holds an address of the other family (192.0.2.0/24 takes no IPv6
 * source ::ffff:192.0.2.1, ::ffff:0:0/96 no IPv4 source); then the
 * address, IPv4 mapped. prefixlen counts the family's 8 bits. */
struct lpm_key {
	__u32 prefixlen;
	__u8 family; /* 4 or 6: the packet's IP version */
	__u8 addr[16];
	__u8 pad[3];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct rf_config);
} stamp_rf_config SEC(".maps");

/* Mappable: the Go stage takes a stateful session's sequence numbers from
 * the same counter, with the same atomic add, for the packets it answers. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 65536);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct rf_session);
} stamp_rf_sessions SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u16);
	__type(value, struct rf_srh);
} stamp_rf_srhs SEC(".maps");

/* The reflector's addresses (at most 64), IPv4 mapped, in a table Go fills
 * by linear probing from lim_hash (reflector.go: addrTable): a lookup tries
 * at most addr_probes slots, inlined array lookups where a hash map's
 * helper call cost 25 ns a packet. */
#define RF_ADDR_SLOTS 256
#define RF_ADDR_PROBES 16

struct rf_addr {
	__u64 a[2]; /* as loaded */
	__u64 used;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, RF_ADDR_SLOTS);
	__type(key, __u32);
	__type(value, struct rf_addr);
} stamp_rf_addrs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 256);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct lpm_key);
	__type(value, __u8);
} stamp_rf_allow SEC(".maps");

/* Per-source GCRA buckets in a fixed open-addressed table, as the Go
 * stage's srcLimiter (plugins/stamp/ratelimit.go): the same hash, 4 slots
 * tried, then the stalest evicted; a flood of sources never grows it. An
 * array rather than an LRU hash: its lookups are inlined, where the hash's
 * helper call cost 25 ns a packet. */
#define RF_LIM_SLOTS 4096
#define RF_LIM_PROBE 4

struct rf_lim {
	__u64 addr[2]; /* the source, IPv4 mapped, as loaded */
	__u64 tat;     /* the theoretical arrival time; 0: a free slot */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, RF_LIM_SLOTS);
	__type(key, __u32);
	__type(value, struct rf_lim);
} stamp_rf_limit SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, C_MAX);
	__type(key, __u32);
	__type(value, __u64);
} stamp_rf_counters SEC(".maps");

/* The program's working addresses, per CPU rather than on the stack: the
 * dispatcher the port links this into has the rest of the 512 bytes. */
struct rf_scratch {
	__u8 src[16], dst[16], rsrc[16];
	struct lpm_key k;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct rf_scratch);
} stamp_rf_scratch SEC(".maps");

static __always_inline void count(__u32 i)
{
	__u64 *c = bpf_map_lookup_elem(&stamp_rf_counters, &i);
	if (c)
		*c += 1;
}

static __always_inline int drop(__u32 i)
{
	count(i);
	return XDP_DROP;
}

static __always_inline int to_go(void)
{
	count(C_TO_GO);
	return LR_OFFLOAD_USER;
}

/* The addresses are in map memory (the scratch, a session): compared a word
 * at a time (lr_xdp.h). */
static __always_inline int is_zero16(const __u8 *a)
{
	return (*(const lr_w64 *)a | *(const lr_w64 *)(a + 8)) == 0;
}

static __always_inline int eq16(const __u8 *a, const __u8 *b)
{
	return *(const lr_w64 *)a == *(const lr_w64 *)b && *(const lr_w64 *)(a + 8) == *(const lr_w64 *)(b + 8);
}

static __always_inline int bcast4(const struct rf_config *c, const __u8 *a)
{
	__u32 x = *(const lr_w32 *)a;
#pragma unroll
	for (int i = 0; i < RF_MAX_BCAST; i++) {
		if (i >= c->n_bcast)
			break;
		if (*(const lr_w32 *)c->bcast[i] == x)
			return 1;
	}
	return 0;
}

/* refuse is reflector.refuse: a source no reply may go to, or a destination
 * that is not one host. 0: neither. */
static __always_inline int refuse(const struct rf_config *c, const __u8 *eth, const __u8 *src,
				  const __u8 *dst, int v4)
{
	if (eth[6] & 1)
		return C_BAD_SOURCE;
	if (eth[0] & 1)
		return C_GROUP_DEST;
	if (v4) {
		const __u8 *s = src + 12, *d = dst + 12;
		if (s[0] == 0 || s[0] == 127 || s[0] >= 224 || bcast4(c, s))
			return C_BAD_SOURCE;
		if (d[0] >= 224 || bcast4(c, d))
			return C_GROUP_DEST;
		return 0;
	}
	if (dst[0] == 0xff)
		return C_GROUP_DEST;
	if (src[0] == 0xff || is_zero16(src))
		return C_BAD_SOURCE;
	{
		__u64 hi = *(const lr_w64 *)src, lo = *(const lr_w64 *)(src + 8);
		if (hi == 0 && lo == bpf_cpu_to_be64(1))
			return C_BAD_SOURCE; /* ::1 */
		/* IPv4 mapped: the IPv4 rules. */
		if (hi == 0 && (__u32)lo == bpf_htonl(0x0000ffff)) {
			__u8 s = src[12];
			if (s == 0 || s == 127 || s >= 224)
				return C_BAD_SOURCE;
		}
	}
	return 0;
}

/* lim_hash is ratelimit.go's limHash. */
static __always_inline __u64 lim_hash(__u64 a0, __u64 a1)
{
	__u64 x = a0 * 0x9E3779B97F4A7C15ULL ^ a1;
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	return x ^ (x >> 33);
}

/* allow_rate is the per-source limit, GCRA: the same buckets as the Go
 * stage's srcLimiter (a burst of rate_burst, then rate_limit a second), over
 * all CPUs. Two CPUs that meet a source in the same slot at once may start
 * its bucket over, as a flood of other sources may: a few packets more. */
static __always_inline int allow_rate(const struct rf_config *c, const __u8 *src, __u64 now)
{
	__u64 a0 = *(const lr_w64 *)src, a1 = *(const lr_w64 *)(src + 8);
	__u64 h = lim_hash(a0, a1);
	struct rf_lim *victim = 0;
	__u64 stalest = ~0ULL;
#pragma unroll
	for (int i = 0; i < RF_LIM_PROBE; i++) {
		__u32 k = (__u32)(h + i) & (RF_LIM_SLOTS - 1);
		struct rf_lim *e = bpf_map_lookup_elem(&stamp_rf_limit, &k);
		if (!e)
			return 1;
		__u64 old = *(volatile __u64 *)&e->tat;
		if (old && e->addr[0] == a0 && e->addr[1] == a1) {
			__u64 t = old;
			if ((__s64)(t - now) < 0)
				t = now;
			if (t - now > c->lim_tau)
				return 0;
			/* Another CPU took a token of this source meanwhile:
			 * this packet is refused rather than both taking one
			 * for free. */
			return __sync_val_compare_and_swap(&e->tat, old, t + c->lim_t) == old;
		}
		if (old < stalest) { /* a free slot first, else the stalest */
			stalest = old;
			victim = e;
		}
	}
	if (victim) { /* a new source starts with a full bucket */
		*(volatile __u64 *)&victim->tat = 0; /* free while it changes hands */
		victim->addr[0] = a0;
		victim->addr[1] = a1;
		__sync_lock_test_and_set(&victim->tat, now + c->lim_t);
	}
	return 1;
}

/* ours says whether dst is one of the reflector's addresses. */
static __always_inline int ours(const struct rf_config *c, const __u8 *dst)
{
	__u64 a0 = *(const lr_w64 *)dst, a1 = *(const lr_w64 *)(dst + 8);
	__u64 h = lim_hash(a0, a1);
#pragma unroll
	for (int i = 0; i < RF_ADDR_PROBES; i++) {
		if (i >= c->addr_probes)
			break;
		__u32 k = (__u32)(h + i) & (RF_ADDR_SLOTS - 1);
		struct rf_addr *e = bpf_map_lookup_elem(&stamp_rf_addrs, &k);
		if (!e || !e->used)
			return 0;
		if (e->a[0] == a0 && e->a[1] == a1)
			return 1;
	}
	return 0;
}

static __always_inline __u64 wire_time(const struct rf_config *c, __u64 tai, int format)
{
	if (format == 1)
		return lr_ptp(tai + (__u64)c->ptp_off);
	return lr_ntp(tai + (__u64)c->utc_off);
}

/* The request as the program reads it: fixed offsets once the frame is
 * known to be untagged and the L3 header of its base size. */
#define UDP_LEN (8 + 44)

/* Every access to the packet and the maps below is a word at a time
 * (lr_ld*, lr_st*, lr_w*: lr_xdp.h), and the reply's checksums are summed
 * from 64-bit words: a byte at a time, they cost as much as a clock read
 * (plugins/stamp/README.md has the parts' costs). */
static __always_inline int stamp_reflector(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u8 *eth = data;
	__u64 t2 = 0;
	__u32 zero = 0;
	int v4;

	if ((void *)(eth + ETH_HLEN_) > end)
		return LR_OFFLOAD_NEXT;
	__u16 proto = lr_ld16(eth + 12);
	struct rf_scratch *x = bpf_map_lookup_elem(&stamp_rf_scratch, &zero);
	if (!x)
		return LR_OFFLOAD_NEXT;
	__u8 *src = x->src, *dst = x->dst;
	__u8 *l3 = eth + ETH_HLEN_;
	__u8 *udp;
	__u32 l3len, iplen, total;

	if (proto == ETH_P_IP_) {
		v4 = 1;
		if ((void *)(l3 + 20 + 8) > end)
			return LR_OFFLOAD_NEXT;
		if (l3[0] >> 4 != 4 || l3[9] != IPPROTO_UDP_)
			return LR_OFFLOAD_NEXT;
		if ((l3[0] & 15) != 5 || (lr_ld16(l3 + 6) & 0x3fff) != 0)
			return LR_OFFLOAD_NEXT; /* options or a fragment: the Go stage, if it is STAMP */
		l3len = 20;
		iplen = lr_ld16(l3 + 2);
		/* IPv4 mapped: ::ffff:a.b.c.d */
		*(lr_w64 *)src = 0;
		*(lr_w64 *)dst = 0;
		*(lr_w32 *)(src + 8) = bpf_htonl(0xffff);
		*(lr_w32 *)(dst + 8) = bpf_htonl(0xffff);
		*(lr_w32 *)(src + 12) = *(lr_w32 *)(l3 + 12);
		*(lr_w32 *)(dst + 12) = *(lr_w32 *)(l3 + 16);
	} else if (proto == ETH_P_IPV6_) {
		v4 = 0;
		if ((void *)(l3 + 40 + 8) > end)
			return LR_OFFLOAD_NEXT;
		if (l3[0] >> 4 != 6)
			return LR_OFFLOAD_NEXT;
		if (l3[6] != IPPROTO_UDP_)
			return LR_OFFLOAD_NEXT; /* extension headers: the Go stage, if it is STAMP */
		l3len = 40;
		iplen = 40 + lr_ld16(l3 + 4);
		lr_copy16(src, l3 + 8);
		lr_copy16(dst, l3 + 24);
	} else {
		return LR_OFFLOAD_NEXT;
	}
	udp = l3 + l3len;
	struct rf_config *c = bpf_map_lookup_elem(&stamp_rf_config, &zero);
	if (!c || c->port == 0)
		return LR_OFFLOAD_NEXT;
	if (lr_ld16(udp + 2) != c->port)
		return LR_OFFLOAD_NEXT;
	if (c->flags & RF_ADDRS) {
		if (!ours(c, dst))
			return LR_OFFLOAD_NEXT;
	}
	total = (__u32)((long)end - (long)data);
	if (ETH_HLEN_ + iplen > total || iplen < l3len + 8)
		return to_go();
	__u32 ulen = lr_ld16(udp + 4);
	if (ulen != iplen - l3len)
		return to_go(); /* the Go stage's parser decides */
	if (ulen < UDP_LEN)
		return drop(C_SHORT);
	if (ulen != UDP_LEN)
		return to_go(); /* TLVs, or authenticated mode */
	__u8 *pay = udp + 8;
	if ((void *)(pay + 44) > end)
		return LR_OFFLOAD_NEXT;
	__u16 ssid = lr_ld16(pay + 14);
	/* SSID 0 in a base-sized packet: the unauthenticated session 0. A
	 * Receive Timestamp: a reflected packet, never answered here. */
	if (*(lr_w64 *)(pay + 16) != 0)
		return to_go();
	/* T2: a base test packet for this reflector, before the checks (the
	 * allow trie and the rate limit are map work; the Go stage's T2 is
	 * the receive time). */
	t2 = lr_rx_time(ctx);
	int r = refuse(c, eth, src, dst, v4);
	if (r)
		return drop(r);
	if (c->flags & RF_ALLOW) {
		x->k.prefixlen = 8 + 128;
		x->k.family = v4 ? 4 : 6;
		lr_copy16(x->k.addr, src);
		if (!bpf_map_lookup_elem(&stamp_rf_allow, &x->k))
			return drop(C_NOT_ALLOWED);
	}
	__u32 sidx = ssid;
	struct rf_session *s = bpf_map_lookup_elem(&stamp_rf_sessions, &sidx);
	if (s && !(s->flags & S_EXISTS))
		s = 0;
	/* A session the program does not have, or has stopped, may be one the
	 * control API just made or started: the Go stage decides (changes
	 * reach the program within 100 ms). */
	if (!s) {
		if (!(c->flags & RF_REFLECT_ALL))
			return to_go();
	} else {
		if (s->flags & S_GO)
			return to_go();
		if (s->flags & S_AUTH)
			return drop(C_UNKNOWN);
		if (!(s->flags & S_RUNNING))
			return to_go();
		if ((s->flags & S_PINNED) && !eq16(s->sender, src))
			return drop(C_WRONG_SOURCE);
	}
	if ((c->flags & RF_LIMIT) && !allow_rate(c, src, t2))
		return drop(C_RATE_LIMITED);

	/* What the reply copies, read before anything moves, in registers:
	 * the sender's sequence, timestamp and error estimate as they are on
	 * the wire, the MACs, the hop limit and traffic class. */
	__u32 sseq_w = *(lr_w32 *)pay;
	__u64 sts_w = *(lr_w64 *)(pay + 4);
	__u16 serr_w = *(lr_w16 *)(pay + 12);
	__u16 serr = bpf_ntohs(serr_w);
	__u32 dmac0 = *(lr_w32 *)eth, smac1 = *(lr_w32 *)(eth + 8);
	__u16 dmac1 = *(lr_w16 *)(eth + 4), smac0 = *(lr_w16 *)(eth + 6);
	__u8 ttl, tc;
	if (v4) {
		ttl = l3[8];
		tc = l3[1];
	} else {
		ttl = l3[7];
		tc = (__u8)(lr_ld16(l3) >> 4);
	}
	__u16 sport_w = *(lr_w16 *)udp;
	int format = c->format;
	if (s && s->format >= 0)
		format = s->format;
	if (format < 0)
		format = (serr & 0x4000) ? 1 : 0;
	format &= 1;
	/* The session's counts move before the return path is checked, as in
	 * the Go stage: a reply that cannot go still took its sequence. */
	__u32 rseq_w = sseq_w;
	if (s && (s->flags & S_STATEFUL))
		rseq_w = bpf_htonl(__sync_fetch_and_add(&s->seq, 1));

	/* The return path: the session's, with the sender in Segment List[0],
	 * or the one that already ends at the sender (none for a single
	 * segment). */
	__u32 srh_len = 0;
	int slot0 = 0;
	const __u8 *srh = 0;
	if (s && s->srh_len) {
		struct rf_srh *sr = bpf_map_lookup_elem(&stamp_rf_srhs, &ssid);
		if (!sr)
			return drop(C_BAD_PATH);
		if (eq16(s->ret_last, src)) {
			srh = sr->srh_last;
			srh_len = s->srh_last_len;
		} else {
			srh = sr->srh;
			srh_len = s->srh_len;
			slot0 = 1;
		}
	}
	if (v4 && srh_len)
		return drop(C_BAD_PATH);
	/* Never larger than the request, unless the session pins its sender. */
	if (srh_len && !(s->flags & S_PINNED))
		return drop(C_REPLY_TOO_BIG);
	if (srh_len > RF_SRH_MAX || (srh_len & 7))
		return drop(C_BAD_PATH);
	__u8 *rsrc = x->rsrc;
	if (s && (s->flags & S_SOURCE))
		lr_copy16(rsrc, s->source);
	else
		lr_copy16(rsrc, dst);

	/* Trailing bytes after the IP packet (Ethernet padding) go. */
	if (total > ETH_HLEN_ + iplen) {
		if (bpf_xdp_adjust_tail(ctx, -(int)(total - ETH_HLEN_ - iplen)))
			return drop(C_BAD_PATH);
	}
	if (srh_len) {
		if (bpf_xdp_adjust_head(ctx, -(int)srh_len))
			return drop(C_REPLY_TOO_BIG);
	}
	data = (void *)(long)ctx->data;
	end = (void *)(long)ctx->data_end;
	eth = data;
	l3 = eth + ETH_HLEN_;
	if ((void *)(l3 + 40) > end)
		return XDP_ABORTED;
	udp = l3 + l3len + srh_len;
	if ((void *)(udp + UDP_LEN) > end)
		return XDP_ABORTED;
	pay = udp + 8;

	/* Ethernet. */
	if (c->flags & RF_SWAP_MAC) {
		*(lr_w16 *)eth = smac0;
		*(lr_w32 *)(eth + 2) = smac1;
		*(lr_w32 *)(eth + 6) = dmac0;
		*(lr_w16 *)(eth + 10) = dmac1;
	} else if (srh_len) {
		*(lr_w32 *)eth = dmac0;
		*(lr_w16 *)(eth + 4) = dmac1;
		*(lr_w16 *)(eth + 6) = smac0;
		*(lr_w32 *)(eth + 8) = smac1;
	}
	lr_st16(eth + 12, v4 ? ETH_P_IP_ : ETH_P_IPV6_);

	/* The payload becomes a reflected packet (RFC 8762 §4.3): MBZ zeroed. */
	*(lr_w32 *)pay = rseq_w;
	lr_st16(pay + 12, c->ee[format]);
	lr_st64(pay + 16, wire_time(c, t2, format));
	*(lr_w32 *)(pay + 24) = sseq_w;
	*(lr_w64 *)(pay + 28) = sts_w;
	*(lr_w16 *)(pay + 36) = serr_w;
	*(lr_w16 *)(pay + 38) = 0;
	*(lr_w32 *)(pay + 40) = ttl; /* the sender's TTL, then three MBZ octets */

	tc &= ~3; /* the received DSCP, not its ECN marks */
	__u64 sum = 0; /* the UDP checksum's, of words as they are on the wire */
	if (v4) {
		*(lr_w32 *)l3 = bpf_htonl(0x45 << 24 | (__u32)tc << 16 | (20 + UDP_LEN));
		*(lr_w32 *)(l3 + 4) = bpf_htonl(0x4000);
		*(lr_w32 *)(l3 + 8) = bpf_htonl((__u32)c->hop_limit << 24 | IPPROTO_UDP_ << 16);
		*(lr_w32 *)(l3 + 12) = *(lr_w32 *)(rsrc + 12);
		*(lr_w32 *)(l3 + 16) = *(lr_w32 *)(src + 12);
		__u64 h = lr_add64(lr_add64(*(lr_w64 *)l3, *(lr_w64 *)(l3 + 8)), *(lr_w32 *)(l3 + 16));
		*(lr_w16 *)(l3 + 10) = (__u16)~lr_csum_fold64(h);
		sum = *(lr_w64 *)(l3 + 12);
	} else {
		*(lr_w32 *)l3 = bpf_htonl(6 << 28 | (__u32)tc << 20);
		lr_st16(l3 + 4, srh_len + UDP_LEN);
		l3[7] = c->hop_limit;
		lr_copy16(l3 + 8, rsrc);
		if (!srh_len) {
			l3[6] = IPPROTO_UDP_;
			lr_copy16(l3 + 24, src);
		} else {
			__u8 *x = l3 + 40;
			l3[6] = IPPROTO_ROUTING_;
			/* copy the session's SRH, 8 bytes at a time */
			for (int i = 0; i < RF_SRH_MAX; i += 8) {
				if (i >= srh_len)
					break;
				if ((void *)(x + i + 8) > end)
					return XDP_ABORTED;
				*(lr_w64 *)(x + i) = *(const lr_w64 *)(srh + i);
			}
			if ((void *)(x + 24) > end)
				return XDP_ABORTED;
			if (slot0)
				lr_copy16(x + 8, src);
			/* The first hop: Segment List[Segments Left]. */
			__u32 sl = srh[3];
			if (sl >= RF_MAX_SEGS || 8 + 16 * sl + 16 > srh_len)
				return XDP_ABORTED;
			__u8 *hop = x + 8 + 16 * sl;
			if ((void *)(hop + 16) > end)
				return XDP_ABORTED;
			lr_copy16(l3 + 24, hop);
		}
		/* The pseudo-header's destination is the final one: the sender. */
		sum = lr_add64(lr_add64(*(lr_w64 *)rsrc, *(lr_w64 *)(rsrc + 8)),
			       lr_add64(*(lr_w64 *)src, *(lr_w64 *)(src + 8)));
	}
	/* UDP: ports swapped, the checksum over the reply. */
	*(lr_w16 *)udp = bpf_htons(c->port);
	*(lr_w16 *)(udp + 2) = sport_w;
	*(lr_w16 *)(udp + 6) = 0;
	/* The pseudo-header's protocol and length, then the reply but T3, a
	 * word at a time: offsets from udp are even, so each word's 16-bit
	 * lanes are the checksum's. */
	sum = lr_add64(sum, bpf_htons(IPPROTO_UDP_ + UDP_LEN));
	sum = lr_add64(sum, *(lr_w64 *)udp);
	sum = lr_add64(sum, *(lr_w32 *)(udp + 8));
#pragma unroll
	for (int i = 20; i < UDP_LEN; i += 8)
		sum = lr_add64(sum, *(lr_w64 *)(udp + i));
	/* T3: the reply is complete but for T3 and the checksum. */
	__u64 t3 = bpf_cpu_to_be64(wire_time(c, bpf_ktime_get_tai_ns(), format));
	*(lr_w64 *)(pay + 4) = t3;
	__u16 cs = ~lr_csum_fold64(lr_add64(sum, t3));
	if (cs == 0)
		cs = 0xffff;
	*(lr_w16 *)(udp + 6) = cs;
	if (s)
		__sync_fetch_and_add(&s->replied, 1);
	count(C_REFLECTED);
	return XDP_TX; /* back out of the port it came in on: forward = "in" */
}

LR_OFFLOAD(stamp_reflector)
