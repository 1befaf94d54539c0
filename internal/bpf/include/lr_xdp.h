/* lr_xdp.h: what linerate's XDP programs share (plugins/stamp/bpf,
 * plugins/ioam/bpf): the verdict a composed stage returns, the receive
 * timestamp, the Internet checksum and the wire time formats. */
#ifndef LR_XDP_H
#define LR_XDP_H

#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

/* The slot contract of appliance/offload (include/lr_offload.h there): a
 * stage's body returns an XDP action, final, or LR_OFFLOAD_NEXT (not its
 * packet: on to the next slot, then the port's match rules) or
 * LR_OFFLOAD_USER (its packet, but one it does not handle: up to the Go
 * stage through AF_XDP, untouched). LR_OFFLOAD(fn) makes fn_slot, linked
 * into the port's dispatcher, and fn_xdp, a plain program for prog.Run. */
#include "lr_offload.h"

#define ETH_HLEN_ 14
#define ETH_P_IPV6_ 0x86DD
#define ETH_P_IP_ 0x0800
#define IPPROTO_UDP_ 17
#define IPPROTO_ROUTING_ 43
#define IPPROTO_HOPOPTS_ 0

#ifdef LR_DEVBOUND
/* The rx metadata kfunc (kernel 6.3): needs a device-bound program. */
extern int bpf_xdp_metadata_rx_timestamp(const struct xdp_md *ctx, __u64 *timestamp) __ksym;
#endif

/* lr_rx_time is the frame's receive time in CLOCK_TAI nanoseconds: the
 * driver's hardware stamp where the device-bound variant gets one (0 means
 * none: veth returns 0), else the kernel's clock read now, at XDP ingress. */
static __always_inline __u64 lr_rx_time(struct xdp_md *ctx)
{
#ifdef LR_DEVBOUND
	__u64 ts = 0;
	if (bpf_xdp_metadata_rx_timestamp(ctx, &ts) == 0 && ts != 0)
		return ts;
#endif
	return bpf_ktime_get_tai_ns();
}

/* lr_csum_fold folds a 32-bit one's complement sum to 16 bits. */
static __always_inline __u16 lr_csum_fold(__u32 sum)
{
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (__u16)sum;
}

/* lr_ntp is RFC 5905's 64-bit NTP timestamp of Unix nanoseconds (after 1970), as
 * appliance/clock.NTP. */
static __always_inline __u64 lr_ntp(__u64 unix_ns)
{
	__u64 sec = unix_ns / 1000000000;
	__u64 ns = unix_ns - sec * 1000000000;
	/* ns × 2^32 / 10^9 by a multiply: floor(2^62 / 10^9) = 4611686018,
	 * then >> 30; ns < 2^30 keeps the product in 64 bits. At most one unit
	 * (0.23 ns) below appliance/clock.NTP's division. */
	return (sec + 2208988800ULL) << 32 | (ns * 4611686018ULL) >> 30;
}

/* lr_ptp is truncated PTPv2 of TAI nanoseconds, as appliance/clock.PTP. */
static __always_inline __u64 lr_ptp(__u64 tai_ns)
{
	__u64 sec = tai_ns / 1000000000;
	return sec << 32 | (tai_ns - sec * 1000000000);
}

static __always_inline void lr_put64(__u8 *p, __u64 v)
{
	v = bpf_cpu_to_be64(v);
	__builtin_memcpy(p, &v, 8);
}

static __always_inline void lr_put32(__u8 *p, __u32 v)
{
	v = bpf_htonl(v);
	__builtin_memcpy(p, &v, 4);
}

static __always_inline void lr_put16(__u8 *p, __u16 v)
{
	v = bpf_htons(v);
	__builtin_memcpy(p, &v, 2);
}

static __always_inline __u32 lr_get32(const __u8 *p)
{
	__u32 v;
	__builtin_memcpy(&v, p, 4);
	return bpf_ntohl(v);
}

static __always_inline __u16 lr_get16(const __u8 *p)
{
	__u16 v;
	__builtin_memcpy(&v, p, 2);
	return bpf_ntohs(v);
}

/* Word access to packet and map memory: one load or store of the width.
 * Through a __u8 pointer, __builtin_memcpy compiles to a byte at a time (the
 * BPF target knows nothing of the alignment), six or more instructions for a
 * __u16. A word through lr_w* is one, unaligned where the packet is: the x86
 * and arm64 JITs take that, and the verifier allows it on packets and map
 * values (not on the stack) where the kernel has efficient unaligned access.
 * may_alias: these words overlay bytes written through other types. */
typedef __u16 __attribute__((may_alias)) lr_w16;
typedef __u32 __attribute__((may_alias)) lr_w32;
typedef __u64 __attribute__((may_alias)) lr_w64;

/* lr_ld* and lr_st* read and write big-endian words at p, a word at a time. */
static __always_inline __u16 lr_ld16(const void *p) { return bpf_ntohs(*(const lr_w16 *)p); }
static __always_inline __u32 lr_ld32(const void *p) { return bpf_ntohl(*(const lr_w32 *)p); }
static __always_inline __u64 lr_ld64(const void *p) { return bpf_be64_to_cpu(*(const lr_w64 *)p); }
static __always_inline void lr_st16(void *p, __u16 v) { *(lr_w16 *)p = bpf_htons(v); }
static __always_inline void lr_st32(void *p, __u32 v) { *(lr_w32 *)p = bpf_htonl(v); }
static __always_inline void lr_st64(void *p, __u64 v) { *(lr_w64 *)p = bpf_cpu_to_be64(v); }

/* lr_copy16 copies 16 bytes (an IPv6 address), two words. */
static __always_inline void lr_copy16(void *d, const void *s)
{
	((lr_w64 *)d)[0] = ((const lr_w64 *)s)[0];
	((lr_w64 *)d)[1] = ((const lr_w64 *)s)[1];
}

/* lr_add64 is a one's complement add of 64-bit words, the carry folded in. */
static __always_inline __u64 lr_add64(__u64 a, __u64 b)
{
	a += b;
	return a + (a < b);
}

/* lr_csum_fold64 folds a 64-bit one's complement sum to 16 bits. */
static __always_inline __u16 lr_csum_fold64(__u64 s)
{
	s = (s & 0xffffffff) + (s >> 32);
	s = (s & 0xffffffff) + (s >> 32);
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return (__u16)s;
}

#endif
