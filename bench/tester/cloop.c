// The C reference for linerate test's generator on afpacket: the same frame,
// sent as fast as one thread can through a TPACKET_V3 tx ring on the same
// interface, with the settings the afpacket port uses (1 MiB blocks, 2048-byte
// frames, PACKET_QDISC_BYPASS, PACKET_LOSS), 64 frames a kick, as linerate's
// bursts.
#define _GNU_SOURCE
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <errno.h>

static uint64_t now_ns(clockid_t c) {
	struct timespec ts;
	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

// lr_cloop sends frame (len bytes) on ifname for seconds and returns the
// frames the ring took; *cpu_ns is the thread's CPU time. Negative: -errno.
int64_t lr_cloop(const char *ifname, const uint8_t *frame, int len, double seconds, uint64_t *cpu_ns) {
	const int block = 1 << 20, blocks = 8, fsize = 2048, hdr = 48;
	const int per = block / fsize, frames = per * blocks;
	int fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	int v = TPACKET_V3, one = 1;
	struct tpacket_req3 req = {.tp_block_size = block, .tp_block_nr = blocks, .tp_frame_size = fsize, .tp_frame_nr = frames};
	if (setsockopt(fd, SOL_PACKET, PACKET_VERSION, &v, sizeof v) < 0 ||
	    setsockopt(fd, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof one) < 0 ||
	    setsockopt(fd, SOL_PACKET, PACKET_LOSS, &one, sizeof one) < 0 ||
	    setsockopt(fd, SOL_PACKET, PACKET_TX_RING, &req, sizeof req) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	uint8_t *ring = mmap(NULL, (size_t)block * blocks, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
	if (ring == MAP_FAILED) {
		int e = errno;
		close(fd);
		return -e;
	}
	struct sockaddr_ll sa = {.sll_family = AF_PACKET, .sll_protocol = 0, .sll_ifindex = (int)if_nametoindex(ifname)};
	if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
		int e = errno;
		munmap(ring, (size_t)block * blocks);
		close(fd);
		return -e;
	}
	int64_t sent = 0;
	int head = 0;
	uint64_t cpu0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
	uint64_t end = now_ns(CLOCK_MONOTONIC) + (uint64_t)(seconds * 1e9);
	while (now_ns(CLOCK_MONOTONIC) < end) {
		int queued = 0;
		for (int i = 0; i < 64; i++) {
			uint8_t *s = ring + (size_t)(head / per) * block + (size_t)(head % per) * fsize;
			struct tpacket3_hdr *h = (struct tpacket3_hdr *)s;
			uint32_t st = __atomic_load_n(&h->tp_status, __ATOMIC_ACQUIRE);
			if (st & (TP_STATUS_SEND_REQUEST | TP_STATUS_SENDING))
				break;
			memcpy(s + hdr, frame, (size_t)len);
			h->tp_len = h->tp_snaplen = (uint32_t)len;
			h->tp_next_offset = 0;
			__atomic_store_n(&h->tp_status, TP_STATUS_SEND_REQUEST, __ATOMIC_RELEASE);
			if (++head == frames)
				head = 0;
			queued++;
		}
		sent += queued;
		sendto(fd, NULL, 0, MSG_DONTWAIT, NULL, 0);
	}
	*cpu_ns = now_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0;
	munmap(ring, (size_t)block * blocks);
	close(fd);
	return sent;
}
