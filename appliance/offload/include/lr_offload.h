/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * lr_offload.h: the contract between an xdp port's dispatcher and the
 * in-kernel offload of a stage (appliance/offload, docs/xdp-offload.md).
 *
 * The dispatcher calls its slots in the chain's order: global functions
 * int lr_slot<i>(struct xdp_md *ctx) that appliance/offload.Link replaces by
 * the stages' slot functions, into one program the port attaches. A slot
 * returns one of the XDP actions, final, or one of:
 *
 *   LR_OFFLOAD_NEXT  not mine, or done with it: on to the next slot, then the
 *                    port's match rules (to the AF_XDP socket, or the kernel);
 *   LR_OFFLOAD_USER  up to the Go stages through the queue's AF_XDP socket,
 *                    whatever the match rules say (a packet the program does
 *                    not handle: an authenticated STAMP session, a TLV).
 *
 * Each offload source gives two programs from one body,
 * static __always_inline int fn(struct xdp_md *ctx): LR_OFFLOAD(fn) defines
 *
 *   SEC("xdp") int fn_slot(struct xdp_md *ctx)   the slot function, linked into
 *                    the dispatcher; it returns the slot codes above;
 *   SEC("xdp") int fn_xdp(struct xdp_md *ctx)    the plain program, for
 *                    BPF_PROG_TEST_RUN (prog.Run) on golden inputs, where NEXT
 *                    and USER read as XDP_PASS.
 *
 * A slot's maps stay its own: Link renames them apart, and every port's
 * dispatcher shares one set (sessions, counters, a ring buffer). Its
 * constants (volatile const) are set in Go on the spec before the stage asks.
 *
 * The dispatcher is built twice: device-bound, attached, which reads the
 * NIC's rx timestamp with bpf_xdp_metadata_rx_timestamp; plain, for prog.Run.
 * Slot code is the same in both and needs no kfunc: the dispatcher passes what
 * it read in struct lr_xdp_meta, in front of the packet, to what goes up to
 * AF_XDP. A slot that needs the time reads a kernel clock itself
 * (bpf_ktime_get_tai_ns for STAMP).
 */
#ifndef LR_OFFLOAD_H
#define LR_OFFLOAD_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define LR_OFFLOAD_NEXT 16
#define LR_OFFLOAD_USER 17

/* Where lr_xdp_meta.rx_ns comes from. */
#define LR_RX_NONE 0 /* no stamp: the engine stamps the packet when it polls */
#define LR_RX_KTIME 1 /* bpf_ktime_get_ns() in the dispatcher: CLOCK_MONOTONIC */
#define LR_RX_HW 2 /* the NIC's, from bpf_xdp_metadata_rx_timestamp: its PHC's time */

/* The XDP metadata area (bpf_xdp_adjust_meta), right in front of the data. */
struct lr_xdp_meta {
	__u64 rx_ns;
	__u32 source; /* LR_RX_* */
	__u32 magic;  /* LR_META_MAGIC: the dispatcher wrote it */
};

#define LR_META_MAGIC 0x6c724d31 /* "lrM1" */

/* lr_rx_meta is the dispatcher's rx stamp of ctx's packet, or NULL. */
static __always_inline struct lr_xdp_meta *lr_rx_meta(struct xdp_md *ctx)
{
	struct lr_xdp_meta *m = (void *)(long)ctx->data_meta;
	if ((void *)(m + 1) > (void *)(long)ctx->data)
		return 0;
	if (m->magic != LR_META_MAGIC)
		return 0;
	return m;
}

#define LR_OFFLOAD(fn)                                                         \
	SEC("xdp") int fn##_slot(struct xdp_md *ctx) { return fn(ctx); } \
	SEC("xdp") int fn##_xdp(struct xdp_md *ctx)                                \
	{                                                                          \
		int r = fn(ctx);                                                   \
		return r == LR_OFFLOAD_NEXT || r == LR_OFFLOAD_USER ? XDP_PASS : r; \
	}

#endif
