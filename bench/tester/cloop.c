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

// fold16 folds a ones'-complement sum into 16 bits.
static inline uint16_t fold16(uint64_t s) {
	s = (s >> 32) + (s & 0xffffffff);
	s = (s >> 16) + (s & 0xffff);
	s = (s >> 16) + (s & 0xffff);
	return (uint16_t)((s >> 16) + (s & 0xffff));
}

// word_sum is the ones'-complement sum of the four big-endian 16-bit words of v.
static inline uint64_t word_sum(uint64_t v) {
	return (v >> 48) + ((v >> 32) & 0xffff) + ((v >> 16) & 0xffff) + (v & 0xffff);
}

// lr_cloop sends frame (len bytes) on ifname for seconds, or until it has sent
// count frames (0: no limit), and returns the frames the ring took; *cpu_ns is
// the thread's CPU time. Negative: -errno. With fields > 0 it writes what the
// generator writes into each frame, as a good C generator would: at fields,
// the flow id (0) and sequence number and the tx timestamp (CLOCK_MONOTONIC,
// read once a kick of up to 64 frames), big-endian, and at csum the UDP
// checksum, updated from the template's sum (sum: the UDP header and payload
// with the fields and checksum zero, plus the pseudo-header) by the fields'
// words, a computed zero sent as 0xFFFF.
int64_t lr_cloop(const char *ifname, const uint8_t *frame, int len, int fields, int csum, uint16_t sum,
		 int64_t count, double seconds, uint64_t *cpu_ns) {
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
	uint64_t seq = 0;
	int head = 0;
	uint64_t cpu0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
	uint64_t end = now_ns(CLOCK_MONOTONIC) + (uint64_t)(seconds * 1e9);
	for (uint64_t now; (now = now_ns(CLOCK_MONOTONIC)) < end && (count == 0 || sent < count);) {
		int queued = 0, kick = 64;
		if (count != 0 && count - sent < kick)
			kick = (int)(count - sent);
		uint64_t base = (uint64_t)sum + word_sum(now), now_be = __builtin_bswap64(now);
		for (int i = 0; i < kick; i++) {
			uint8_t *s = ring + (size_t)(head / per) * block + (size_t)(head % per) * fsize;
			struct tpacket3_hdr *h = (struct tpacket3_hdr *)s;
			uint32_t st = __atomic_load_n(&h->tp_status, __ATOMIC_ACQUIRE);
			if (st & (TP_STATUS_SEND_REQUEST | TP_STATUS_SENDING))
				break;
			uint8_t *d = s + hdr;
			memcpy(d, frame, (size_t)len);
			if (fields > 0) {
				uint64_t v = seq++ & 0xffffffffffffull, v_be = __builtin_bswap64(v);
				memcpy(d + fields, &v_be, 8);
				memcpy(d + fields + 8, &now_be, 8);
				uint16_t c = (uint16_t)~fold16(base + word_sum(v));
				if (c == 0)
					c = 0xffff;
				d[csum] = (uint8_t)(c >> 8);
				d[csum + 1] = (uint8_t)c;
			}
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
