//go:build linux

package afpacket

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/ports/internal/devclock"
)

// Layout of the TPACKET_V3 ring, from <linux/if_packet.h>.
const (
	// struct tpacket_block_desc: version, offset_to_priv, then tpacket_hdr_v1.
	blockStatusOff = 8
	blockNumPkts   = 12
	blockFirstPkt  = 16
	blockHdrLen    = 48
	// TPACKET_ALIGN(sizeof(struct tpacket3_hdr)): a struct sockaddr_ll follows.
	hdr3Len = 48
	// sll_pkttype in the sockaddr_ll after the header.
	sllPkttypeOff = hdr3Len + 10
	// Where the kernel reads a tx frame in its slot: TPACKET3_HDRLEN −
	// sizeof(struct sockaddr_ll), as tpacket_parse_header has it without
	// PACKET_TX_HAS_OFF.
	txDataOffset = hdr3Len
)

// queueCounters are published by a queue's one owner once per burst and read by
// Stats from anywhere.
type queueCounters struct {
	packets, bytes, tooBig, truncated, csumNotReady atomic.Uint64
	kickErrors, wrongFormat                         atomic.Uint64
}

// rxQueue is one rx socket and its mmap'd block ring. Only the lcore that polls
// the queue touches it, except pub.
type rxQueue struct {
	fd        int
	ring      []byte
	blockSize uint32
	blocks    int
	cur       int    // the block being read, or to be read next
	off       uint32 // offset of the next frame in the open block
	left      uint32 // frames not yet read in the open block; 0 = no block open
	spare     packet.Burst
	ts        *timestamps // nil: the engine stamps

	packets, bytes, tooBig, truncated, csumNotReady uint64
	pub                                             queueCounters
	_                                               [64]byte
}

func openRx(ifindex int, o *Options, reserve, fanout, groupID int, ts *timestamps) (q *rxQueue, id int, err error) {
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return nil, 0, fmt.Errorf("socket: %w", err)
	}
	q = &rxQueue{fd: fd, blockSize: uint32(o.BlockSize), blocks: o.Blocks, ts: ts}
	defer func() {
		if err != nil {
			q.close()
			q = nil
		}
	}()
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VERSION, unix.TPACKET_V3); err != nil {
		return nil, 0, fmt.Errorf("PACKET_VERSION TPACKET_V3: %w", err)
	}
	// PACKET_RESERVE leaves headroom in front of each frame in the kernel's ring.
	// This datapath copies every frame into a pool buffer, which has its own
	// headroom (at least packet.MinHeadroom), so the reserve is unused today: it
	// is set to the pool's headroom so that a zero-copy path (handing out ring
	// frames, as AF_XDP does UMEM frames) would find IOAM's room already there.
	// It costs ring space: each frame in a block takes reserve bytes more.
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_RESERVE, reserve); err != nil {
		return nil, 0, fmt.Errorf("PACKET_RESERVE %d: %w", reserve, err)
	}
	if ts != nil {
		if err := ts.enable(fd); err != nil {
			return nil, 0, err
		}
	}
	// What this host sends on the interface (our tx queues included) is not
	// received traffic. Frames are also filtered on sll_pkttype, for kernels
	// before 4.20 and for fanout groups, whose hook has its own flag (below).
	_ = unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1)
	req := unix.TpacketReq3{
		Block_size:     uint32(o.BlockSize),
		Block_nr:       uint32(o.Blocks),
		Frame_size:     uint32(o.FrameSize),
		Frame_nr:       uint32(o.BlockSize / o.FrameSize * o.Blocks),
		Retire_blk_tov: uint32(o.BlockTimeout.Milliseconds()),
	}
	if err := unix.SetsockoptTpacketReq3(fd, unix.SOL_PACKET, unix.PACKET_RX_RING, &req); err != nil {
		return nil, 0, fmt.Errorf("PACKET_RX_RING %d × %d bytes: %w", o.Blocks, o.BlockSize, err)
	}
	q.ring, err = unix.Mmap(fd, 0, o.BlockSize*o.Blocks, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return nil, 0, fmt.Errorf("mmap rx ring: %w", err)
	}
	// Bound only now, with the ring in place, so no frame is queued on the
	// socket's ordinary receive queue, which nothing reads.
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifindex}); err != nil {
		return nil, 0, fmt.Errorf("bind: %w", err)
	}
	if o.Promiscuous {
		mreq := unix.PacketMreq{Ifindex: int32(ifindex), Type: unix.PACKET_MR_PROMISC}
		if err := unix.SetsockoptPacketMreq(fd, unix.SOL_PACKET, unix.PACKET_ADD_MEMBERSHIP, &mreq); err != nil {
			return nil, 0, fmt.Errorf("promiscuous: %w", err)
		}
	}
	if fanout < 0 {
		return q, -1, nil
	}
	// The first socket asks the kernel for a group id no one else uses; the
	// other queues of the port join that group.
	flags := unix.PACKET_FANOUT_FLAG_IGNORE_OUTGOING
	if groupID < 0 {
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_FANOUT, (fanout|flags|unix.PACKET_FANOUT_FLAG_UNIQUEID)<<16); err != nil {
			return nil, 0, fmt.Errorf("PACKET_FANOUT: %w", err)
		}
		v, err := unix.GetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_FANOUT)
		if err != nil {
			return nil, 0, fmt.Errorf("PACKET_FANOUT id: %w", err)
		}
		return q, v & 0xffff, nil
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_FANOUT, groupID|(fanout|flags)<<16); err != nil {
		return nil, 0, fmt.Errorf("PACKET_FANOUT join group %d: %w", groupID, err)
	}
	return q, groupID, nil
}

func (q *rxQueue) close() error {
	var err error
	if q.ring != nil {
		err = unix.Munmap(q.ring)
		q.ring = nil
	}
	if q.fd >= 0 {
		if cerr := unix.Close(q.fd); err == nil {
			err = cerr
		}
		q.fd = -1
	}
	return err
}

// blockStatus points at the block_status word of block i, shared with the
// kernel: read with acquire, written with release.
func (q *rxQueue) blockStatus(i int) *uint32 {
	return (*uint32)(unsafe.Pointer(&q.ring[i*int(q.blockSize)+blockStatusOff]))
}

// openBlock opens the current block if the kernel has handed it over.
func (q *rxQueue) openBlock() bool {
	if atomic.LoadUint32(q.blockStatus(q.cur))&unix.TP_STATUS_USER == 0 {
		return false
	}
	blk := q.ring[q.cur*int(q.blockSize):]
	q.left = binary.NativeEndian.Uint32(blk[blockNumPkts:])
	q.off = binary.NativeEndian.Uint32(blk[blockFirstPkt:])
	if q.left == 0 {
		q.release()
	}
	return true
}

// release gives the open block back to the kernel and moves to the next.
func (q *rxQueue) release() {
	atomic.StoreUint32(q.blockStatus(q.cur), unix.TP_STATUS_KERNEL)
	q.left = 0
	if q.cur++; q.cur == q.blocks {
		q.cur = 0
	}
}

// step moves past the frame at q.off.
func (q *rxQueue) step(next uint32) {
	q.off += next
	if q.left--; q.left == 0 {
		q.release()
	}
}

func (q *rxQueue) burst(pool packet.Pool, dataRoom, queue int, b *packet.Burst) int {
	room := b.Room()
	start, got, n := b.N, 0, 0
	var bytes uint64
	// The kernel's stamps: CLOCK_REALTIME, or the PHC's time for the NIC's.
	var off int64
	var hw *devclock.Map
	if q.ts != nil {
		off, hw = q.ts.clk.UnixOffset(), q.ts.hw.Load()
	}
	for n < room {
		if q.left == 0 && !q.openBlock() {
			break
		}
		if q.left == 0 {
			continue // an empty block, given back
		}
		blk := q.ring[q.cur*int(q.blockSize) : (q.cur+1)*int(q.blockSize)]
		if q.off > q.blockSize-hdr3Len-unix.SizeofSockaddrLinklayer {
			// The kernel wrote a frame offset outside its block: trust nothing
			// more in it.
			q.truncated++
			q.release()
			continue
		}
		h := (*unix.Tpacket3Hdr)(unsafe.Pointer(&blk[q.off]))
		next, status, snap, mac := h.Next_offset, h.Status, h.Snaplen, uint32(h.Mac)
		vlan := status&unix.TP_STATUS_VLAN_VALID != 0 && snap >= 12
		size := int(snap)
		if vlan {
			size += 4
		}
		switch {
		case blk[q.off+sllPkttypeOff] == unix.PACKET_OUTGOING:
			q.step(next)
			continue
		case snap < h.Len || uint64(q.off)+uint64(mac)+uint64(snap) > uint64(q.blockSize):
			q.truncated++
			q.step(next)
			continue
		case size > dataRoom:
			q.tooBig++
			q.step(next)
			continue
		}
		if n == got {
			want := room - got
			if want > int(q.left) {
				want = int(q.left)
			}
			k := pool.Alloc(b, want)
			if k == 0 {
				break // the frame stays in the ring until buffers come back
			}
			got += k
		}
		pk := b.H[start+n].P()
		pk.SetWindow(pk.Offset(), size)
		d := pk.Data()
		frame := blk[q.off+mac : q.off+mac+snap]
		if vlan {
			// Put back the tag the kernel moved into the header.
			tpid := h.Hv1.Vlan_tpid
			if status&unix.TP_STATUS_VLAN_TPID_VALID == 0 || tpid == 0 {
				tpid = 0x8100
			}
			copy(d[:12], frame[:12])
			binary.BigEndian.PutUint16(d[12:], tpid)
			binary.BigEndian.PutUint16(d[14:], uint16(h.Hv1.Vlan_tci))
			copy(d[16:], frame[12:])
		} else {
			copy(d, frame)
		}
		pk.InQueue = uint16(queue)
		pk.RxTime = 0 // the engine's, unless the kernel stamped it
		if t := int64(h.Sec)*1e9 + int64(h.Nsec); q.ts != nil && t != 0 {
			if status&unix.TP_STATUS_TS_RAW_HARDWARE != 0 && hw != nil {
				pk.RxTime = hw.Mono(t)
				pk.SetFlag(packet.FlagHWTimestamp)
			} else {
				pk.RxTime = t - off
			}
		}
		if status&unix.TP_STATUS_CSUMNOTREADY != 0 {
			q.csumNotReady++
		}
		bytes += uint64(size)
		n++
		q.step(next)
	}
	if got > n {
		q.spare.N = copy(q.spare.H[:], b.H[start+n:start+got])
		pool.Free(&q.spare)
		b.N = start + n
	}
	if q.ts != nil && n > 0 {
		// A stamp is never later than now: a step of the wall clock since
		// the engine last read its offset would make it so.
		now := q.ts.clk.Now()
		for i := start; i < start+n; i++ {
			if pk := b.H[i].P(); pk.RxTime > now {
				pk.RxTime = now
			}
		}
	}
	q.packets += uint64(n)
	q.bytes += bytes
	q.publish()
	return n
}

func (q *rxQueue) publish() {
	q.pub.packets.Store(q.packets)
	q.pub.bytes.Store(q.bytes)
	q.pub.tooBig.Store(q.tooBig)
	q.pub.truncated.Store(q.truncated)
	q.pub.csumNotReady.Store(q.csumNotReady)
}

// txQueue is one tx socket and its frame ring. Only the lcore that owns the
// queue touches it, except pub.
type txQueue struct {
	fd        int
	ring      []byte
	blockSize int
	frameSize int
	perBlock  int
	frames    int
	head      int
	maxData   int  // longest untagged frame the kernel sends
	maxSlot   int  // longest 802.1Q-tagged frame; never more than a ring slot holds
	pending   bool // frames were requested and the last kick did not take them
	scratch   packet.Burst

	packets, bytes, tooBig, kickErrors, wrongFormat uint64
	pub                                             queueCounters
	_                                               [64]byte
}

func openTx(ifindex, mtu int, o *Options) (q *txQueue, err error) {
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("socket: %w", err)
	}
	q = &txQueue{fd: fd, blockSize: o.BlockSize, frameSize: o.FrameSize, perBlock: o.BlockSize / o.FrameSize}
	q.frames = q.perBlock * o.Blocks
	// The kernel refuses (with PACKET_LOSS, skips without a word) a frame longer
	// than the MTU plus the Ethernet header, or plus a tag more when the frame
	// is 802.1Q-tagged (packet_extra_vlan_len_allowed); refuse it here, where
	// it can be counted.
	q.maxData = mtu + 14
	q.maxSlot = mtu + 14 + 4
	if s := o.FrameSize - txDataOffset; !o.NoTxRing && s < q.maxSlot {
		q.maxSlot = s
	}
	defer func() {
		if err != nil {
			q.close()
			q = nil
		}
	}()
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VERSION, unix.TPACKET_V3); err != nil {
		return nil, fmt.Errorf("PACKET_VERSION TPACKET_V3: %w", err)
	}
	if o.QdiscBypass {
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_QDISC_BYPASS, 1); err != nil {
			return nil, fmt.Errorf("PACKET_QDISC_BYPASS: %w", err)
		}
	}
	if !o.NoTxRing {
		// A malformed frame is skipped rather than stopping the ring.
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_LOSS, 1); err != nil {
			return nil, fmt.Errorf("PACKET_LOSS: %w", err)
		}
		// TPACKET_V3 transmits from fixed-size frames, as V2 does (kernel 4.11,
		// packet_mmap.rst): the block timeout and private area must be zero.
		req := unix.TpacketReq3{Block_size: uint32(o.BlockSize), Block_nr: uint32(o.Blocks),
			Frame_size: uint32(o.FrameSize), Frame_nr: uint32(q.frames)}
		if err := unix.SetsockoptTpacketReq3(fd, unix.SOL_PACKET, unix.PACKET_TX_RING, &req); err != nil {
			return nil, fmt.Errorf("PACKET_TX_RING %d × %d bytes: %w", o.Blocks, o.BlockSize, err)
		}
		q.ring, err = unix.Mmap(fd, 0, o.BlockSize*o.Blocks, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
		if err != nil {
			return nil, fmt.Errorf("mmap tx ring: %w", err)
		}
	}
	// Protocol 0: the socket sends through the interface and receives nothing.
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: 0, Ifindex: ifindex}); err != nil {
		return nil, fmt.Errorf("bind: %w", err)
	}
	return q, nil
}

func (q *txQueue) close() error {
	var err error
	if q.ring != nil {
		err = unix.Munmap(q.ring)
		q.ring = nil
	}
	if q.fd >= 0 {
		if cerr := unix.Close(q.fd); err == nil {
			err = cerr
		}
		q.fd = -1
	}
	return err
}

// slot returns frame i of the tx ring.
func (q *txQueue) slot(i int) []byte {
	off := i/q.perBlock*q.blockSize + i%q.perBlock*q.frameSize
	return q.ring[off : off+q.frameSize]
}

func (q *txQueue) burst(b *packet.Burst) int {
	var n int
	if q.ring == nil {
		n = q.burstWrite(b)
	} else {
		n = q.burstRing(b)
	}
	// The contract leaves b as it is; the taken handles are freed from a copy.
	q.scratch.N = copy(q.scratch.H[:], b.H[:n])
	packet.Free(&q.scratch)
	q.publish()
	return n
}

func (q *txQueue) burstRing(b *packet.Burst) int {
	n, queued := 0, 0
	for n < b.N {
		s := q.slot(q.head)
		h := (*unix.Tpacket3Hdr)(unsafe.Pointer(&s[0]))
		st := atomic.LoadUint32(&h.Status)
		if st&(unix.TP_STATUS_SEND_REQUEST|unix.TP_STATUS_SENDING) != 0 {
			break // full: the rest stays with the caller
		}
		if st == unix.TP_STATUS_WRONG_FORMAT {
			q.wrongFormat++
		}
		pk := b.P(n)
		n++
		d := pk.Data()
		if q.tooBigFor(d) {
			q.tooBig++
			continue
		}
		l := len(d)
		copy(s[txDataOffset:], d)
		h.Len, h.Snaplen, h.Next_offset = uint32(l), uint32(l), 0
		// The release store orders the frame's bytes before the status the
		// kernel reads.
		atomic.StoreUint32(&h.Status, unix.TP_STATUS_SEND_REQUEST)
		if q.head++; q.head == q.frames {
			q.head = 0
		}
		queued++
		q.packets++
		q.bytes += uint64(l)
	}
	if queued > 0 || q.pending || n < b.N {
		q.kick()
	}
	return n
}

// kick asks the kernel to send every requested frame, without waiting.
func (q *txQueue) kick() {
	err := unix.Sendto(q.fd, nil, unix.MSG_DONTWAIT, nil)
	switch err {
	case nil:
		q.pending = false
	case unix.EAGAIN, unix.EINTR:
		q.pending = true
	case unix.ENOBUFS:
		// With qdisc_bypass a busy driver queue drops the frame in hand; the
		// rest is still requested.
		q.pending = true
		q.kickErrors++
	default:
		q.kickErrors++
	}
}

// burstWrite is the path without a tx ring: one write per packet.
func (q *txQueue) burstWrite(b *packet.Burst) int {
	n := 0
	for n < b.N {
		d := b.P(n).Data()
		if q.tooBigFor(d) {
			q.tooBig++
			n++
			continue
		}
		_, err := unix.Write(q.fd, d)
		if err == unix.EAGAIN || err == unix.ENOBUFS || err == unix.EINTR {
			break
		}
		n++
		if err != nil {
			q.kickErrors++
			continue
		}
		q.packets++
		q.bytes += uint64(len(d))
	}
	return n
}

func (q *txQueue) tooBigFor(d []byte) bool {
	if len(d) <= q.maxData {
		return len(d) > q.maxSlot
	}
	return len(d) > q.maxSlot || d[12] != 0x81 || d[13] != 0x00
}

func (q *txQueue) publish() {
	q.pub.packets.Store(q.packets)
	q.pub.bytes.Store(q.bytes)
	q.pub.tooBig.Store(q.tooBig)
	q.pub.kickErrors.Store(q.kickErrors)
	q.pub.wrongFormat.Store(q.wrongFormat)
}
