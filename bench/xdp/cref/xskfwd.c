// xskfwd: the C reference for make bench-xdp. One AF_XDP socket on raw
// system calls (no libbpf, no libxdp): frames the XDP program redirects to it
// are sent back out of the same interface with their Ethernet addresses
// swapped, as linerate's xdp port does in bench/xdp's Go loop.
//
//   xskfwd IFNAME QUEUE XSKMAP_FD
//
// The XSKMAP and the program that redirects to it are the caller's (bench/xdp
// loads them with cilium/ebpf and passes the map's fd). The socket binds in
// copy mode with need_wakeup. It prints "ready" once its socket is in the
// map. Then, for each line "go K" on stdin, it forwards K frames (or what
// comes until 200 ms pass without one), polling, and prints "done N
// cpu_ns C": frames forwarded and its thread's CPU time from the first frame
// to the last. It ends at EOF.
#define _GNU_SOURCE
#include <errno.h>
#include <linux/bpf.h>
#include <linux/if_xdp.h>
#include <net/if.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef SOL_XDP
#define SOL_XDP 283
#endif
#ifndef AF_XDP
#define AF_XDP 44
#endif

enum { FRAME = 2048, RING = 2048, NFRAMES = 2 * RING, BATCH = 64 };

struct ring {
	uint32_t *prod, *cons, *flags;
	void *descs;
	uint32_t mask;
};

static uint64_t now_ns(clockid_t c) {
	struct timespec ts;
	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void die(const char *what) {
	fprintf(stderr, "xskfwd: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void map_ring(int fd, const struct xdp_ring_offset *off, off_t pgoff, size_t elem, struct ring *r) {
	size_t len = off->desc + RING * elem;
	char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, pgoff);
	if (m == MAP_FAILED)
		die("mmap ring");
	r->prod = (uint32_t *)(m + off->producer);
	r->cons = (uint32_t *)(m + off->consumer);
	r->flags = (uint32_t *)(m + off->flags);
	r->descs = m + off->desc;
	r->mask = RING - 1;
}

// The free frames: those in neither a ring nor the kernel's hands.
static uint64_t freelist[NFRAMES];
static uint32_t nfree;

int main(int argc, char **argv) {
	if (argc != 4) {
		fprintf(stderr, "usage: xskfwd IFNAME QUEUE XSKMAP_FD\n");
		return 2;
	}
	unsigned ifindex = if_nametoindex(argv[1]);
	if (ifindex == 0)
		die(argv[1]);
	uint32_t queue = (uint32_t)atoi(argv[2]);
	int mapfd = atoi(argv[3]);

	char *umem = mmap(NULL, (size_t)NFRAMES * FRAME, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (umem == MAP_FAILED)
		die("mmap umem");
	int fd = socket(AF_XDP, SOCK_RAW | SOCK_CLOEXEC, 0);
	if (fd < 0)
		die("socket(AF_XDP)");
	struct xdp_umem_reg reg = {.addr = (uint64_t)(uintptr_t)umem, .len = (uint64_t)NFRAMES * FRAME, .chunk_size = FRAME};
	if (setsockopt(fd, SOL_XDP, XDP_UMEM_REG, &reg, sizeof reg))
		die("XDP_UMEM_REG");
	int n = RING;
	if (setsockopt(fd, SOL_XDP, XDP_UMEM_FILL_RING, &n, sizeof n) || setsockopt(fd, SOL_XDP, XDP_UMEM_COMPLETION_RING, &n, sizeof n) ||
	    setsockopt(fd, SOL_XDP, XDP_RX_RING, &n, sizeof n) || setsockopt(fd, SOL_XDP, XDP_TX_RING, &n, sizeof n))
		die("ring sizes");
	struct xdp_mmap_offsets off;
	socklen_t olen = sizeof off;
	if (getsockopt(fd, SOL_XDP, XDP_MMAP_OFFSETS, &off, &olen))
		die("XDP_MMAP_OFFSETS");
	struct ring fill, comp, rx, tx;
	map_ring(fd, &off.fr, XDP_UMEM_PGOFF_FILL_RING, sizeof(uint64_t), &fill);
	map_ring(fd, &off.cr, XDP_UMEM_PGOFF_COMPLETION_RING, sizeof(uint64_t), &comp);
	map_ring(fd, &off.rx, XDP_PGOFF_RX_RING, sizeof(struct xdp_desc), &rx);
	map_ring(fd, &off.tx, XDP_PGOFF_TX_RING, sizeof(struct xdp_desc), &tx);

	// Half the frames to the fill ring, half free for later.
	uint64_t *fdesc = fill.descs;
	for (uint32_t i = 0; i < RING; i++)
		fdesc[i] = (uint64_t)i * FRAME;
	__atomic_store_n(fill.prod, RING, __ATOMIC_RELEASE);
	for (uint32_t i = RING; i < NFRAMES; i++)
		freelist[nfree++] = (uint64_t)i * FRAME;

	struct sockaddr_xdp sa = {.sxdp_family = AF_XDP, .sxdp_ifindex = ifindex, .sxdp_queue_id = queue,
				  .sxdp_flags = XDP_COPY | XDP_USE_NEED_WAKEUP};
	// A socket just closed on the queue may hold it a little longer (EBUSY).
	for (int tries = 0; bind(fd, (struct sockaddr *)&sa, sizeof sa); tries++) {
		if (errno != EBUSY || tries == 200)
			die("bind");
		usleep(10000);
	}
	uint32_t key = queue;
	uint32_t val = (uint32_t)fd;
	union bpf_attr attr;
	memset(&attr, 0, sizeof attr);
	attr.map_fd = (uint32_t)mapfd;
	attr.key = (uint64_t)(uintptr_t)&key;
	attr.value = (uint64_t)(uintptr_t)&val;
	attr.flags = BPF_ANY;
	if (syscall(__NR_bpf, BPF_MAP_UPDATE_ELEM, &attr, sizeof attr))
		die("XSKMAP update");
	printf("ready\n");
	fflush(stdout);

	uint64_t *cdesc = comp.descs;
	struct xdp_desc *rdesc = rx.descs, *tdesc = tx.descs;
	char line[64];
	while (fgets(line, sizeof line, stdin)) {
		unsigned long long want = 0;
		if (sscanf(line, "go %llu", &want) != 1)
			continue;
		uint64_t packets = 0, c0 = 0, c1, idle = 0;
		while (packets < want) {
			// Completions: frames sent, back to the fill ring (or the free list).
			uint32_t ccons = *comp.cons;
			uint32_t cn = __atomic_load_n(comp.prod, __ATOMIC_ACQUIRE) - ccons;
			for (uint32_t i = 0; i < cn; i++)
				freelist[nfree++] = cdesc[(ccons + i) & comp.mask];
			if (cn)
				__atomic_store_n(comp.cons, ccons + cn, __ATOMIC_RELEASE);
			uint32_t fprod = *fill.prod;
			uint32_t room = RING - (fprod - __atomic_load_n(fill.cons, __ATOMIC_ACQUIRE));
			uint32_t fn = room < nfree ? room : nfree;
			for (uint32_t i = 0; i < fn; i++)
				fdesc[(fprod + i) & fill.mask] = freelist[--nfree];
			if (fn)
				__atomic_store_n(fill.prod, fprod + fn, __ATOMIC_RELEASE);

			// Received frames, MACs swapped, onto the tx ring.
			uint32_t rcons = *rx.cons;
			uint32_t rn = __atomic_load_n(rx.prod, __ATOMIC_ACQUIRE) - rcons;
			if (rn == 0) {
				if (__atomic_load_n(fill.flags, __ATOMIC_RELAXED) & XDP_RING_NEED_WAKEUP)
					recvfrom(fd, NULL, 0, MSG_DONTWAIT, NULL, NULL);
				uint64_t t = now_ns(CLOCK_MONOTONIC);
				if (idle == 0)
					idle = t;
				else if (t - idle > 200000000ull)
					break;
				continue;
			}
			idle = 0;
			if (c0 == 0)
				c0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
			uint32_t tprod = *tx.prod;
			uint32_t troom = RING - (tprod - __atomic_load_n(tx.cons, __ATOMIC_ACQUIRE));
			uint32_t k = rn < BATCH ? rn : BATCH;
			k = k < troom ? k : troom;
			for (uint32_t i = 0; i < k; i++) {
				struct xdp_desc d = rdesc[(rcons + i) & rx.mask];
				unsigned char *p = (unsigned char *)umem + d.addr, tmp[6];
				memcpy(tmp, p, 6);
				memcpy(p, p + 6, 6);
				memcpy(p + 6, tmp, 6);
				tdesc[(tprod + i) & tx.mask] = d;
			}
			__atomic_store_n(rx.cons, rcons + k, __ATOMIC_RELEASE);
			__atomic_store_n(tx.prod, tprod + k, __ATOMIC_RELEASE);
			// Copy mode sends in sendto, 32 frames a call: kick until the
			// ring is drained or the kernel takes no more.
			for (int tries = 0; __atomic_load_n(tx.cons, __ATOMIC_ACQUIRE) != tprod + k && tries < (int)(k / 32) + 4; tries++)
				if (sendto(fd, NULL, 0, MSG_DONTWAIT, NULL, 0) < 0 && errno != EAGAIN && errno != EBUSY && errno != ENOBUFS)
					break;
			packets += k;
		}
		c1 = now_ns(CLOCK_THREAD_CPUTIME_ID);
		printf("done %llu cpu_ns %llu\n", (unsigned long long)packets, (unsigned long long)(c0 ? c1 - c0 : 0));
		fflush(stdout);
	}
	return 0;
}
