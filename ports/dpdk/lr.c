//go:build dpdk

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_mbuf_dyn.h>

#include <time.h>

#include "lr.h"

_Static_assert(sizeof(struct rte_mbuf) == 128, "the metadata offset assumes a 128-byte rte_mbuf");

#define LR_META(m) ((struct lr_meta *)((char *)(m) + sizeof(struct rte_mbuf)))
#define LR_MBUF(h) ((struct rte_mbuf *)((char *)(h) - sizeof(struct rte_mbuf)))

/* Slow-path counters have one writer, the polling lcore, and are read by Stats. */
#define LR_INC(x) __atomic_store_n(&(x), (x) + 1, __ATOMIC_RELAXED)

/* Pools of ours. A handful at most: one per NUMA socket and size. */

#define LR_MAX_POOLS 64

static struct {
	struct rte_mempool *mp;
	uint16_t id;
} lr_pools[LR_MAX_POOLS];

int lr_pool_register(struct rte_mempool *mp, uint16_t id)
{
	for (int i = 0; i < LR_MAX_POOLS; i++) {
		if (lr_pools[i].mp == NULL) {
			lr_pools[i].id = id;
			__atomic_store_n(&lr_pools[i].mp, mp, __ATOMIC_RELEASE);
			return 0;
		}
	}
	return -ENOSPC;
}

void lr_pool_unregister(struct rte_mempool *mp)
{
	for (int i = 0; i < LR_MAX_POOLS; i++)
		if (lr_pools[i].mp == mp)
			__atomic_store_n(&lr_pools[i].mp, NULL, __ATOMIC_RELEASE);
}

static int lr_pool_id(const struct rte_mempool *mp)
{
	for (int i = 0; i < LR_MAX_POOLS; i++)
		if (__atomic_load_n(&lr_pools[i].mp, __ATOMIC_ACQUIRE) == mp)
			return lr_pools[i].id;
	return -1;
}

struct rte_mempool *lr_pool_create(const char *name, unsigned n, unsigned cache, uint16_t data_room,
				   int socket, int *err)
{
	struct rte_mempool *mp = rte_pktmbuf_pool_create(name, n, cache, LR_PRIV_SIZE, data_room, socket);
	*err = mp == NULL ? rte_errno : 0;
	return mp;
}

static void lr_init_one(struct rte_mempool *mp, void *opaque, void *obj, unsigned idx)
{
	(void)mp;
	(void)idx;
	struct rte_mbuf *m = obj;
	struct lr_meta *p = LR_META(m);
	/* Zero is the free state of the ownership record (packet.StateFree). */
	memset(p, 0, sizeof(*p));
	/* The packet's buffer starts LR_EXTRA bytes before the mbuf's: the end of
	 * the private area is more headroom. */
	p->base = (uintptr_t)m->buf_addr - LR_EXTRA;
	p->backend = (uintptr_t)m;
	p->cap = m->buf_len + LR_EXTRA;
	p->pool = *(uint16_t *)opaque;
	/* What packet.Packet.Init gives a Go pool's buffer: an empty window. */
	lr_meta_reset(p, m->data_off + LR_EXTRA, 0);
}

void lr_pool_init_meta(struct rte_mempool *mp, uint16_t id)
{
	rte_mempool_obj_iter(mp, lr_init_one, &id);
}

/* lr_reset gives a packet a fresh packet's state over the mbuf's own window
 * (lr_meta_reset is packet.Packet's reset, generated). base, backend, cap and
 * pool never change for an mbuf of ours: lr_pool_init_meta wrote them once. */
static inline void lr_reset(struct lr_meta *p, const struct rte_mbuf *m)
{
	lr_meta_reset(p, m->data_off + LR_EXTRA, m->data_len);
}

/* Per-port tx slow-path state: whether the port takes chains, and counters
 * (relaxed atomics: several lcores may transmit on one port). */
static struct {
	uint8_t multiseg;
	uint64_t chained, copied, dropped;
} lr_txports[RTE_MAX_ETHPORTS];

void lr_tx_setup(uint16_t port, uint64_t tx_offloads)
{
	lr_txports[port].multiseg = (tx_offloads & RTE_ETH_TX_OFFLOAD_MULTI_SEGS) != 0;
	__atomic_store_n(&lr_txports[port].chained, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&lr_txports[port].copied, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&lr_txports[port].dropped, 0, __ATOMIC_RELAXED);
}

void lr_tx_counters(uint16_t port, uint64_t *out)
{
	out[0] = __atomic_load_n(&lr_txports[port].chained, __ATOMIC_RELAXED);
	out[1] = __atomic_load_n(&lr_txports[port].copied, __ATOMIC_RELAXED);
	out[2] = __atomic_load_n(&lr_txports[port].dropped, __ATOMIC_RELAXED);
}

uint64_t lr_tx_offload_multiseg(void) { return RTE_ETH_TX_OFFLOAD_MULTI_SEGS; }

/* lr_tx_window makes mb carry the packet's window for transmit: the metadata is
 * the truth between rx and tx. Only a window that moved since lr_reset (the Go
 * side flags every move) is written, and the check reads only the metadata's
 * first line: on net_null, stores into the mbuf just before the PMD frees it
 * cost a packet about 8 ns (the loop of bench/dpdk ran at 23.6 against 28.8
 * Mpps), and even reading the mbuf back at tx about 3.
 *
 * A window that starts in front of the mbuf's buffer (in LR_EXTRA) cannot be
 * said with data_off. Where the port takes chains, the bytes in front of the
 * buffer go into a header mbuf chained before mb, and no payload moves; else
 * the packet is copied into a fresh mbuf. *made is that new mbuf: the caller
 * frees it if the PMD does not take it (the chain head alone), and after a
 * copy is sent frees mb. NULL means no mbuf could be had, or the packet does
 * not fit one: nothing was changed. */
static struct rte_mbuf *lr_tx_window(uint16_t port, struct rte_mbuf *mb, const struct lr_meta *p,
				     struct rte_mbuf **made)
{
	*made = NULL;
	if (likely(!(p->flags & LR_FLAG_MOVED)))
		return mb;
	if (likely(p->off >= LR_EXTRA)) {
		mb->data_off = (uint16_t)(p->off - LR_EXTRA);
		mb->data_len = (uint16_t)p->length;
		mb->pkt_len = p->length;
		return mb;
	}
	uint32_t front = LR_EXTRA - p->off;
	const char *src = (const char *)p->base + p->off;
	struct rte_mbuf *h = rte_pktmbuf_alloc(mb->pool);
	if (h == NULL)
		return NULL;
	if (lr_txports[port].multiseg && front < p->length && front <= rte_pktmbuf_tailroom(h)) {
		memcpy(rte_pktmbuf_mtod(h, char *), src, front);
		h->data_len = (uint16_t)front;
		h->pkt_len = p->length;
		h->nb_segs = 2;
		h->next = mb;
		mb->data_off = 0;
		mb->data_len = (uint16_t)(p->length - front);
		mb->pkt_len = mb->data_len;
		*made = h;
		return h;
	}
	if (p->length > (uint32_t)h->buf_len) {
		rte_pktmbuf_free(h);
		return NULL;
	}
	if (p->length > rte_pktmbuf_tailroom(h))
		h->data_off = 0;
	memcpy(rte_pktmbuf_mtod(h, char *), src, p->length);
	h->data_len = (uint16_t)p->length;
	h->pkt_len = p->length;
	*made = h;
	return h;
}

/* lr_txb is a burst being built for rte_eth_tx_burst: what to send (m), and,
 * for the packets the slow path made an mbuf for, where they are in m, their
 * own mbuf (orig), the one made (made) and whether that heads a chain or is a
 * copy. The fast path writes one pointer a packet. Whether it is a chain is
 * known before the send: once the PMD has sent a chain it may have freed it,
 * and a freed head's next is NULL, which read after the send made a sent
 * chain look like a copy whose original is to be freed. */
struct lr_txb {
	struct rte_mbuf *m[LR_MAX_BURST];
	struct rte_mbuf *orig[LR_MAX_BURST], *made[LR_MAX_BURST];
	uint16_t at[LR_MAX_BURST];
	uint8_t chain[LR_MAX_BURST];
	uint16_t cnt, dropped, slow;
};

/* lr_txb_add adds packet p to the burst. A packet whose slow path finds no
 * mbuf is dropped (counted), but only in front of the burst, so that what a
 * call takes stays a prefix of what it was given: elsewhere lr_txb_add
 * returns 0, and the burst stops before p. */
static inline int lr_txb_add(uint16_t port, struct lr_txb *b, const struct lr_meta *p)
{
	struct rte_mbuf *mb = LR_MBUF(p);
	struct rte_mbuf *made;
	struct rte_mbuf *t = lr_tx_window(port, mb, p, &made);
	if (unlikely(t == NULL)) {
		if (b->cnt > 0)
			return 0;
		__atomic_fetch_add(&lr_txports[port].dropped, 1, __ATOMIC_RELAXED);
		rte_pktmbuf_free(mb);
		b->dropped++;
		return 1;
	}
	if (unlikely(made != NULL)) {
		b->at[b->slow] = b->cnt;
		b->orig[b->slow] = mb;
		b->chain[b->slow] = made->next == mb;
		b->made[b->slow++] = made;
	}
	b->m[b->cnt++] = t;
	return 1;
}

/* lr_txb_send transmits the burst and settles the slow path: a copy sent
 * frees its original; a chain head or copy not sent is freed (the packet stays
 * the caller's, its metadata unchanged). It returns the packets sent. */
static uint16_t lr_txb_send(uint16_t port, uint16_t queue, struct lr_txb *b)
{
	uint16_t sent = rte_eth_tx_burst(port, queue, b->m, b->cnt);
	for (uint16_t k = 0; k < b->slow; k++) {
		struct rte_mbuf *made = b->made[k], *orig = b->orig[k];
		int chain = b->chain[k];
		if (b->at[k] < sent) {
			if (chain) {
				__atomic_fetch_add(&lr_txports[port].chained, 1, __ATOMIC_RELAXED);
			} else {
				__atomic_fetch_add(&lr_txports[port].copied, 1, __ATOMIC_RELAXED);
				rte_pktmbuf_free(orig);
			}
		} else {
			if (chain) {
				made->next = NULL;
				made->nb_segs = 1;
			}
			rte_pktmbuf_free(made);
		}
	}
	return sent;
}

/* copy_into makes a one-segment copy of m in a fresh mbuf of mp, carrying the rx
 * offload results along, and frees m. A packet longer than the data room goes
 * in with less headroom. NULL when mp is empty or m does not fit the buffer. */
static struct rte_mbuf *copy_into(struct rte_mempool *mp, struct rte_mbuf *m)
{
	struct rte_mbuf *c = rte_pktmbuf_alloc(mp);
	if (c == NULL || m->pkt_len > c->buf_len) {
		if (c != NULL)
			rte_pktmbuf_free(c);
		rte_pktmbuf_free(m);
		return NULL;
	}
	if (m->pkt_len > rte_pktmbuf_tailroom(c))
		c->data_off = (uint16_t)(c->buf_len - m->pkt_len);
	char *dst = rte_pktmbuf_mtod(c, char *);
	const void *src = rte_pktmbuf_read(m, 0, m->pkt_len, dst);
	if (src != dst)
		memcpy(dst, src, m->pkt_len);
	c->data_len = c->pkt_len = m->pkt_len;
	c->ol_flags = m->ol_flags;
	c->hash = m->hash;
	c->port = m->port;
	memcpy(c->dynfield1, m->dynfield1, sizeof(c->dynfield1));
	rte_pktmbuf_free(m);
	return c;
}

/* linearize turns a chain into one segment: in place when the first buffer has
 * the room, else into a fresh mbuf. NULL (m freed) when neither fits. */
static struct rte_mbuf *linearize(struct lr_rxq *q, struct rte_mbuf *m)
{
	uint32_t len = m->pkt_len;
	if ((uint32_t)m->data_off + len <= m->buf_len) {
		char *dst = rte_pktmbuf_mtod(m, char *) + m->data_len;
		for (struct rte_mbuf *s = m->next; s != NULL; s = s->next) {
			memcpy(dst, rte_pktmbuf_mtod(s, char *), s->data_len);
			dst += s->data_len;
		}
		struct rte_mbuf *rest = m->next;
		m->next = NULL;
		m->nb_segs = 1;
		m->data_len = (uint16_t)len;
		rte_pktmbuf_free(rest);
		LR_INC(q->linearized);
		return m;
	}
	struct rte_mbuf *c = copy_into(q->mp, m);
	if (c == NULL) {
		LR_INC(q->multiseg_dropped);
		return NULL;
	}
	LR_INC(q->linearized);
	return c;
}

uint16_t lr_rx_burst(uintptr_t qp, uintptr_t *out, uint16_t n)
{
	struct lr_rxq *q = (struct lr_rxq *)qp;
	struct rte_mbuf **m = (struct rte_mbuf **)out;
	uint16_t got = rte_eth_rx_burst(q->port, q->queue, m, n);
	if (got == 0)
		return 0;
	const struct lr_tsconv *conv = NULL;
	if (q->ts_on)
		conv = &q->conv[__atomic_load_n(&q->conv_idx, __ATOMIC_ACQUIRE) & 1];
	int64_t now = 0;
	if (q->stamp) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		now = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
	}
	uint16_t k = 0;
	for (uint16_t i = 0; i < got; i++) {
		struct rte_mbuf *mb = m[i];
		if (unlikely(mb->pool != q->mp)) {
			/* Another pool of ours (another socket) carries its metadata;
			 * a PMD's own pool does not: copy into ours. */
			if (rte_pktmbuf_priv_size(mb->pool) < LR_PRIV_SIZE || lr_pool_id(mb->pool) < 0) {
				mb = copy_into(q->mp, mb);
				if (mb == NULL) {
					LR_INC(q->foreign_dropped);
					continue;
				}
				LR_INC(q->foreign_copied);
			}
		}
		if (unlikely(mb->nb_segs > 1)) {
			mb = linearize(q, mb);
			if (mb == NULL)
				continue;
		}
		struct lr_meta *p = LR_META(mb);
		lr_reset(p, mb);
		if (q->stamp) {
			p->in_port = q->engine_port;
			p->in_queue = q->queue;
			p->rx_time = now;
		}
		if (mb->ol_flags & RTE_MBUF_F_RX_RSS_HASH)
			p->hash = mb->hash.rss;
		if (conv != NULL && (mb->ol_flags & q->ts_flag)) {
			uint64_t ts = *RTE_MBUF_DYNFIELD(mb, q->ts_off, uint64_t *);
			__int128 d = (__int128)(int64_t)(ts - conv->dev0) * (__int128)conv->mul;
			p->rx_time = conv->mono0 + (int64_t)(d >> 32);
			p->flags = LR_FLAG_HW_TIMESTAMP;
		}
		out[k++] = (uintptr_t)p;
	}
	return k;
}

uint16_t lr_tx_handles(uint16_t port, uint16_t queue, const uintptr_t *h, uint16_t n, int64_t now, uint8_t *foreign)
{
	struct lr_txb b;
	b.cnt = b.dropped = 0;
	b.slow = 0;
	if (n > LR_MAX_BURST)
		n = LR_MAX_BURST;
	for (uint16_t k = 0; k < n; k++) {
		struct lr_meta *p = (struct lr_meta *)h[k];
		/* A buffer of ours carries its mbuf in backend; anything else (a Go
		 * slab packet) stops the burst for the engine to copy. */
		if (unlikely(p->backend != (uintptr_t)LR_MBUF(p))) {
			*foreign = 1;
			break;
		}
		/* No tx_time store: once the PMD has the mbuf nothing reads it, and
		 * a store into the metadata here costs about 6 ns a packet on
		 * net_null, as stores into the mbuf do (see lr_tx_window). */
		if (unlikely(p->flags & LR_FLAG_TX_DELAY))
			lr_meta_write_tx_delay(p, now);
		if (!lr_txb_add(port, &b, p))
			break;
	}
	uint16_t sent = lr_txb_send(port, queue, &b);
	if (sent < b.cnt)
		*foreign = 0; /* the ring filled first: the engine retries */
	return b.dropped + sent;
}

uint16_t lr_tx_burst(uint16_t port, uint16_t queue, const uintptr_t *h, uint16_t n)
{
	struct lr_txb b;
	b.cnt = b.dropped = 0;
	b.slow = 0;
	if (n > LR_MAX_BURST)
		n = LR_MAX_BURST;
	for (uint16_t i = 0; i < n && lr_txb_add(port, &b, (const struct lr_meta *)h[i]); i++) {
	}
	return b.dropped + lr_txb_send(port, queue, &b);
}

/* lr_alloc takes n mbufs (or what is left, one by one) and gives each a fresh
 * mbuf's and a fresh packet's state in one pass: rte_pktmbuf_alloc_bulk's
 * reset loop and then a second loop over the metadata touched every mbuf
 * twice, and cost the generator on net_null about 4 ns a packet. Each mbuf
 * and packet holds len bytes (the caller checked they fit): written here, in
 * the pass that resets the mbuf, the lengths need no write at tx, where a
 * store into the mbuf costs several ns a packet. */
unsigned lr_alloc(struct rte_mempool *mp, uintptr_t *out, unsigned n, uint16_t len)
{
	struct rte_mbuf **m = (struct rte_mbuf **)out;
	unsigned got = n;
	if (unlikely(rte_mempool_get_bulk(mp, (void **)m, n) != 0)) {
		/* Bulk gets are all or nothing: take what is left one by one. */
		for (got = 0; got < n; got++)
			if (rte_mempool_get(mp, (void **)&m[got]) != 0)
				break;
	}
	for (unsigned i = 0; i < got; i++) {
		struct rte_mbuf *mb = m[i];
		rte_pktmbuf_reset(mb);
		mb->data_len = len;
		mb->pkt_len = len;
		struct lr_meta *p = LR_META(mb);
		lr_meta_reset(p, mb->data_off + LR_EXTRA, len);
		out[i] = (uintptr_t)p;
	}
	return got;
}

void lr_free(const uintptr_t *h, unsigned n)
{
	struct rte_mbuf *m[LR_MAX_BURST];
	while (n > 0) {
		unsigned k = n < LR_MAX_BURST ? n : LR_MAX_BURST;
		for (unsigned i = 0; i < k; i++)
			m[i] = LR_MBUF(h[i]);
		rte_pktmbuf_free_bulk(m, k);
		h += k;
		n -= k;
	}
}

int lr_eal_init(int argc, char **argv)
{
	int rc = rte_eal_init(argc, argv);
	return rc < 0 ? -rte_errno : rc;
}

int lr_thread_register(void)
{
	return rte_thread_register() == 0 ? 0 : rte_errno;
}

int lr_errno(void) { return rte_errno; }

void lr_rxq_counters(const struct lr_rxq *q, uint64_t *out)
{
	out[0] = __atomic_load_n(&q->linearized, __ATOMIC_RELAXED);
	out[1] = __atomic_load_n(&q->multiseg_dropped, __ATOMIC_RELAXED);
	out[2] = __atomic_load_n(&q->foreign_copied, __ATOMIC_RELAXED);
	out[3] = __atomic_load_n(&q->foreign_dropped, __ATOMIC_RELAXED);
}

void lr_rxq_set_conv(struct lr_rxq *q, uint64_t dev0, int64_t mono0, uint64_t mul)
{
	uint32_t next = (__atomic_load_n(&q->conv_idx, __ATOMIC_RELAXED) + 1) & 1;
	q->conv[next].dev0 = dev0;
	q->conv[next].mono0 = mono0;
	q->conv[next].mul = mul;
	__atomic_store_n(&q->conv_idx, next, __ATOMIC_RELEASE);
}

int lr_read_clock(uint16_t port, uint64_t *clk) { return rte_eth_read_clock(port, clk); }

unsigned lr_mempool_avail(const struct rte_mempool *mp) { return rte_mempool_avail_count(mp); }

int lr_dev_info(uint16_t port, struct lr_devinfo *out)
{
	struct rte_eth_dev_info di;
	int rc = rte_eth_dev_info_get(port, &di);
	if (rc != 0)
		return rc;
	memset(out, 0, sizeof(*out));
	if (di.driver_name != NULL)
		snprintf(out->driver, sizeof(out->driver), "%s", di.driver_name);
	out->rx_capa = di.rx_offload_capa;
	out->tx_capa = di.tx_offload_capa;
	out->rss_capa = di.flow_type_rss_offloads;
	out->if_index = di.if_index;
	out->socket = rte_eth_dev_socket_id(port);
	out->max_rxq = di.max_rx_queues;
	out->max_txq = di.max_tx_queues;
	out->min_mtu = di.min_mtu;
	out->max_mtu = di.max_mtu;
	out->rx_desc_max = di.rx_desc_lim.nb_max;
	out->tx_desc_max = di.tx_desc_lim.nb_max;
	return 0;
}

uint64_t lr_rss_hf(int ip, int udp, int tcp, int sctp)
{
	return (ip ? RTE_ETH_RSS_IP : 0) | (udp ? RTE_ETH_RSS_UDP : 0) | (tcp ? RTE_ETH_RSS_TCP : 0) |
	       (sctp ? RTE_ETH_RSS_SCTP : 0);
}

uint64_t lr_rx_offload_timestamp(void) { return RTE_ETH_RX_OFFLOAD_TIMESTAMP; }

int lr_port_configure(uint16_t port, uint16_t nrx, uint16_t ntx, uint64_t rss_hf, uint64_t rx_offloads,
		      uint64_t tx_offloads)
{
	struct rte_eth_conf conf;
	memset(&conf, 0, sizeof(conf));
	if (rss_hf != 0) {
		conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
		conf.rx_adv_conf.rss_conf.rss_hf = rss_hf;
	}
	conf.rxmode.offloads = rx_offloads;
	conf.txmode.offloads = tx_offloads;
	return rte_eth_dev_configure(port, nrx, ntx, &conf);
}

int lr_link(uint16_t port, uint32_t *speed_mbps)
{
	struct rte_eth_link l;
	int rc = rte_eth_link_get_nowait(port, &l);
	if (rc != 0)
		return rc;
	*speed_mbps = l.link_speed;
	return l.link_status == RTE_ETH_LINK_UP;
}

int lr_test_tx_chain(uint16_t port, uint16_t queue, struct rte_mempool *mp, const uint8_t *data,
		     const uint16_t *seg_lens, uint16_t nsegs)
{
	struct rte_mbuf *head = NULL;
	for (uint16_t i = 0; i < nsegs; i++) {
		struct rte_mbuf *m = rte_pktmbuf_alloc(mp);
		if (m == NULL) {
			rte_pktmbuf_free(head);
			return -ENOMEM;
		}
		char *d = rte_pktmbuf_append(m, seg_lens[i]);
		if (d == NULL) {
			rte_pktmbuf_free(m);
			rte_pktmbuf_free(head);
			return -ENOSPC;
		}
		memcpy(d, data, seg_lens[i]);
		data += seg_lens[i];
		if (head == NULL)
			head = m;
		else if (rte_pktmbuf_chain(head, m) != 0) {
			rte_pktmbuf_free(m);
			rte_pktmbuf_free(head);
			return -EOVERFLOW;
		}
	}
	if (rte_eth_tx_burst(port, queue, &head, 1) != 1) {
		rte_pktmbuf_free(head);
		return -EAGAIN;
	}
	return 0;
}

struct lr_handles {
	uintptr_t *out;
	unsigned n, got;
};

static void lr_handle_of(struct rte_mempool *mp, void *opaque, void *obj, unsigned idx)
{
	(void)mp;
	(void)idx;
	struct lr_handles *h = opaque;
	if (h->got < h->n)
		h->out[h->got] = (uintptr_t)LR_META(obj);
	h->got++;
}

unsigned lr_test_pool_handles(struct rte_mempool *mp, uintptr_t *out, unsigned n)
{
	struct lr_handles h = {out, n, 0};
	rte_mempool_obj_iter(mp, lr_handle_of, &h);
	return h.got;
}
