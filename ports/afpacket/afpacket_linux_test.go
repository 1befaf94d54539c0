//go:build linux

package afpacket

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"golang.org/x/sys/unix"

	"github.com/linerate/linerate/appliance/clock"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/internal/netns"
	"github.com/linerate/linerate/internal/porttest"
	"github.com/linerate/linerate/ports"
)

// link is a veth pair, lra and lrb, in a namespace of the test's own.
type link struct{ ns *netns.NS }

func newLink(t *testing.T, mtu int) *link {
	t.Helper()
	ns := netns.New(t)
	netns.Veth(t, ns, "lra", ns, "lrb")
	if mtu != 0 {
		for _, n := range []string{"lra", "lrb"} {
			ns.IP(t, "link", "set", n, "mtu", fmt.Sprint(mtu))
		}
	}
	return &link{ns}
}

func (l *link) open(t *testing.T, o Options) *Port {
	t.Helper()
	var p *Port
	if err := l.ns.Do(func() (err error) { p, err = New(o); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
	return p
}

// rawSock is a plain AF_PACKET socket without rings on the other end of the
// link: the test's independent sender and receiver.
type rawSock struct{ fd int }

// rawRcvBuf is the raw socket's receive buffer: room for every frame a test
// sends before it reads (at most 32 frames of up to ~17 KiB each in memory).
const rawRcvBuf = 8 << 20

// wait bounds every wait for frames, counters or link state. A wait returns
// as soon as what it waits for is there; the bound only turns a frame that
// never comes into a failure. It is long because a loaded machine can defer
// the kernel's receive work (veth softirqs run in ksoftirqd, competing with
// everything else) for far longer than it takes on an idle one.
const wait = 10 * time.Second

// drops reads the raw socket's PACKET_STATISTICS: frames the kernel could
// not queue on it.
func (r *rawSock) drops(t *testing.T) uint32 {
	t.Helper()
	st, err := unix.GetsockoptTpacketStats(r.fd, unix.SOL_PACKET, unix.PACKET_STATISTICS)
	if err != nil {
		t.Fatal(err)
	}
	return st.Drops
}

func (l *link) raw(t *testing.T, ifname string) *rawSock {
	t.Helper()
	r := &rawSock{fd: -1}
	err := l.ns.Do(func() error {
		ifc, err := net.InterfaceByName(ifname)
		if err != nil {
			return err
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
		if err != nil {
			return err
		}
		r.fd = fd
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_AUXDATA, 1); err != nil {
			return err
		}
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1); err != nil {
			return err
		}
		// The tests send a burst before they read: the default receive
		// buffer (~208 KiB) is about what TestTx's jumbo frames take.
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, rawRcvBuf); err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifc.Index})
	})
	if r.fd >= 0 {
		t.Cleanup(func() { unix.Close(r.fd) })
	}
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *rawSock) send(t *testing.T, frame []byte) {
	t.Helper()
	for tries := 0; ; tries++ {
		_, err := unix.Write(r.fd, frame)
		if err == nil {
			return
		}
		if (err != unix.EAGAIN && err != unix.ENOBUFS) || tries > 1000 {
			t.Fatalf("send %d bytes: %v", len(frame), err)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// recv reads frames until it has want of them or wait passes, putting back
// the VLAN tag the kernel took out, as libpcap does with PACKET_AUXDATA.
func (r *rawSock) recv(t *testing.T, want int, wait time.Duration) [][]byte {
	t.Helper()
	buf := make([]byte, 1<<16)
	oob := make([]byte, 256)
	var out [][]byte
	deadline := time.Now().Add(wait)
	for len(out) < want && time.Now().Before(deadline) {
		n, oobn, _, _, err := unix.Recvmsg(r.fd, buf, oob, 0)
		if err == unix.EAGAIN {
			time.Sleep(100 * time.Microsecond)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		f := append([]byte(nil), buf[:n]...)
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			if m.Header.Level != unix.SOL_PACKET || m.Header.Type != unix.PACKET_AUXDATA || len(m.Data) < 20 {
				continue
			}
			status := binary.NativeEndian.Uint32(m.Data)
			tci, tpid := binary.NativeEndian.Uint16(m.Data[16:]), binary.NativeEndian.Uint16(m.Data[18:])
			if status&unix.TP_STATUS_VLAN_VALID != 0 {
				if status&unix.TP_STATUS_VLAN_TPID_VALID == 0 {
					tpid = 0x8100
				}
				tag := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, tpid), tci)
				f = append(f[:12:12], append(tag, f[12:]...)...)
			}
		}
		if isOurs(f) {
			out = append(out, f)
		}
	}
	return out
}

var (
	srcMAC = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x01}
	dstMAC = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x02}
	marker = []byte("LRSQ")
)

func isOurs(f []byte) bool { return len(f) >= 12 && bytes.Equal(f[6:12], srcMAC) }

// seqOf finds the sequence number every test frame carries after its marker.
func seqOf(f []byte) int {
	i := bytes.Index(f, marker)
	if i < 0 || i+8 > len(f) {
		return -1
	}
	return int(binary.BigEndian.Uint32(f[i+4:]))
}

// Frame kinds.
const (
	plain = iota
	vlan
	qinq
	udp4
)

// mkFrame builds a frame of exactly size bytes (at least the headers plus 8).
func mkFrame(kind, seq, size int) []byte {
	f := append([]byte(nil), dstMAC...)
	f = append(f, srcMAC...)
	switch kind {
	case vlan:
		f = append(f, 0x81, 0x00, 0xa0, 100, 0x88, 0xb5) // PCP 5, VID 100
	case qinq:
		f = append(f, 0x88, 0xa8, 0x00, 200, 0x81, 0x00, 0x01, 0x2c, 0x88, 0xb5) // S-VID 200, C-VID 300
	case udp4:
		buf := gopacket.NewSerializeBuffer()
		ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP,
			SrcIP: net.IP{192, 0, 2, byte(seq)}, DstIP: net.IP{198, 51, 100, 1}}
		u := &layers.UDP{SrcPort: layers.UDPPort(1024 + seq), DstPort: 862}
		_ = u.SetNetworkLayerForChecksum(ip)
		payload := make([]byte, size-14-20-8)
		copy(payload, marker)
		binary.BigEndian.PutUint32(payload[4:], uint32(seq))
		err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
			&layers.Ethernet{SrcMAC: srcMAC, DstMAC: dstMAC, EthernetType: layers.EthernetTypeIPv4}, ip, u, gopacket.Payload(payload))
		if err != nil {
			panic(err)
		}
		return append([]byte(nil), buf.Bytes()...)
	default:
		f = append(f, 0x88, 0xb5) // IEEE local experimental EtherType
	}
	f = append(f, marker...)
	f = binary.BigEndian.AppendUint32(f, uint32(seq))
	for len(f) < size {
		f = append(f, byte(len(f)*31+seq))
	}
	return f
}

// testFrames covers small, full-size, jumbo and tagged frames.
func testFrames(jumbo bool) [][]byte {
	var fs [][]byte
	type spec struct{ kind, size int }
	specs := []spec{{plain, 22}, {plain, 60}, {vlan, 64}, {qinq, 128}, {plain, 1514}, {vlan, 1518}, {udp4, 1000}}
	if jumbo {
		// The kernel lets a frame past the MTU by a tag's length only for 802.1Q.
		specs = append(specs, spec{plain, 9014}, spec{vlan, 9018}, spec{qinq, 9014})
	}
	for round := 0; round < 3; round++ {
		for _, s := range specs {
			fs = append(fs, mkFrame(s.kind, len(fs), s.size))
		}
	}
	return fs
}

// pollRx polls the queues until want frames came or wait passed; it
// copies each frame out and frees every buffer.
func pollRx(t *testing.T, p *Port, want int, wait time.Duration) (frames [][][]byte) {
	t.Helper()
	frames = make([][][]byte, len(p.rx))
	var b packet.Burst
	total := 0
	deadline := time.Now().Add(wait)
	for total < want && time.Now().Before(deadline) {
		got := 0
		for q := range p.rx {
			b.Reset()
			n := p.RxBurst(q, &b)
			for i := 0; i < n; i++ {
				pk := b.P(i)
				if pk.InQueue != uint16(q) {
					t.Errorf("InQueue %d on queue %d", pk.InQueue, q)
				}
				if pk.RxTime != 0 {
					t.Errorf("RxTime %d: the engine stamps it", pk.RxTime)
				}
				if pk.Headroom() < packet.MinHeadroom {
					t.Errorf("headroom %d", pk.Headroom())
				}
				if f := pk.Data(); isOurs(f) {
					frames[q] = append(frames[q], append([]byte(nil), f...))
					total++
				}
			}
			packet.Free(&b)
			got += n
		}
		if got == 0 {
			time.Sleep(200 * time.Microsecond)
		}
	}
	return frames
}

func sameFrames(t *testing.T, got, want [][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d frames, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Errorf("frame %d (%d bytes, seq %d) differs from the one sent (%d bytes, seq %d):\n got % x\nwant % x",
				i, len(got[i]), seqOf(got[i]), len(want[i]), seqOf(want[i]), head(got[i]), head(want[i]))
		}
	}
}

func head(b []byte) []byte {
	if len(b) > 32 {
		return b[:32]
	}
	return b
}

func smallRing(name string, pool packet.Pool) Options {
	return Options{Name: name, Interface: "lra", Pool: pool, BlockSize: 1 << 16, Blocks: 16, Promiscuous: true, QdiscBypass: true}
}

// ringFor is an rx ring that holds n frames of up to maxFrame bytes however
// they arrive. The kernel hands a block over when block_timeout passes with
// a single frame in it, and a loaded machine can space a test's sends (or
// the softirqs that deliver them) that far apart: the ring's capacity is then
// its number of blocks, not its bytes. One block per frame, each big enough
// for the largest, holds all n whatever the timing.
func ringFor(name string, pool packet.Pool, n, maxFrame int) Options {
	o := smallRing(name, pool)
	// A block holds its header, then the frame's tpacket3_hdr and sockaddr_ll,
	// the PACKET_RESERVE (the pool's headroom) and the frame, each aligned:
	// 256 bytes cover all but the reserve and the frame.
	o.BlockSize = 4096
	for o.BlockSize < maxFrame+pool.Headroom()+256 {
		o.BlockSize <<= 1
	}
	o.Blocks = n
	return o
}

// txAll transmits b from queue q, what the port does not take at once a
// burst at a time as room comes back: the tx ring's slots and the socket's
// send buffer are freed only as the peer's softirq consumes the frames.
// Every call must leave the caller's burst as it was.
func txAll(t *testing.T, p *Port, q int, b *packet.Burst) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for b.N > 0 {
		before := *b
		n := p.TxBurst(q, b)
		if *b != before {
			t.Fatal("TxBurst modified the burst")
		}
		b.N = copy(b.H[:], b.H[n:b.N])
		if n == 0 {
			if time.Now().After(deadline) {
				packet.Free(b)
				t.Fatalf("the port took none of %d frames for %v", b.N, wait)
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
}

func TestRx(t *testing.T) {
	l := newLink(t, 9000)
	pool := porttest.Pool(t, 512, 9216)
	frames := testFrames(true)
	p := l.open(t, ringFor("rx", pool, len(frames), 9018))
	raw := l.raw(t, "lrb")
	var bytes uint64
	for _, f := range frames {
		raw.send(t, f)
		bytes += uint64(len(f))
	}
	got := pollRx(t, p, len(frames), wait)
	sameFrames(t, got[0], frames)
	st := p.Stats()
	if st.RxPackets != uint64(len(frames)) || st.RxBytes != bytes || st.RxDropped != 0 {
		t.Errorf("stats %+v, want %d packets, %d bytes", st, len(frames), bytes)
	}
	if st.Extra["tp_packets"] != uint64(len(frames)) {
		t.Errorf("kernel counted %d packets, want %d", st.Extra["tp_packets"], len(frames))
	}
	if pool.InUse() != 0 {
		t.Errorf("%d buffers in use", pool.InUse())
	}
}

func TestRxTooBig(t *testing.T) {
	l := newLink(t, 9000)
	pool := porttest.Pool(t, 64, 2048)
	p := l.open(t, smallRing("rx", pool))
	raw := l.raw(t, "lrb")
	// The kernel's ring holds the tagged frame as 2046 bytes; with its tag put
	// back it is 2050, two more than a buffer holds.
	small, big := mkFrame(plain, 1, 2048), mkFrame(vlan, 2, 2050)
	raw.send(t, big)
	raw.send(t, small)
	raw.send(t, mkFrame(plain, 3, 4000))
	got := pollRx(t, p, 1, wait)
	sameFrames(t, got[0], [][]byte{small})
	deadline := time.Now().Add(wait)
	for p.Stats().Extra["rx_too_big"] < 2 && time.Now().Before(deadline) {
		pollRx(t, p, 1<<30, time.Millisecond) // poll only: nothing more is ours
	}
	if st := p.Stats(); st.Extra["rx_too_big"] != 2 || st.RxDropped != 2 {
		t.Errorf("stats %+v", st)
	}
}

func TestTx(t *testing.T) {
	for _, ring := range []bool{true, false} {
		t.Run(fmt.Sprintf("tx_ring=%v", ring), func(t *testing.T) {
			l := newLink(t, 9000)
			pool := porttest.Pool(t, 512, 9216)
			o := smallRing("tx", pool)
			o.NoTxRing = !ring
			p := l.open(t, o)
			raw := l.raw(t, "lrb")
			frames := testFrames(true)
			// Past the MTU: by 1 byte untagged, and by 5 with an 802.1Q tag.
			all := append(append([][]byte(nil), frames...), mkFrame(plain, 998, 9015), mkFrame(vlan, 999, 9019))
			var b packet.Burst
			for len(all) > 0 {
				b.Reset()
				k := min(len(all), packet.MaxBurst)
				if pool.Alloc(&b, k) != k {
					t.Fatal("pool empty")
				}
				for i := 0; i < k; i++ {
					d, err := b.P(i).Append(len(all[i]))
					if err != nil {
						t.Fatal(err)
					}
					copy(d, all[i])
				}
				txAll(t, p, 0, &b)
				all = all[k:]
			}
			got := raw.recv(t, len(frames), wait)
			if d := raw.drops(t); d != 0 {
				t.Errorf("the receiving socket dropped %d frames", d)
			}
			sameFrames(t, got, frames)
			st := p.Stats()
			if st.TxPackets != uint64(len(frames)) || st.TxDropped != 2 || st.Extra["tx_too_big"] != 2 {
				t.Errorf("stats %+v", st)
			}
			if more := raw.recv(t, 1, 50*time.Millisecond); len(more) != 0 {
				t.Errorf("%d frames more than sent (a too-big one?)", len(more))
			}
		})
	}
}

// TestTxRingFull fills a small tx ring faster than a one-burst kick drains it:
// what the ring cannot take stays with the caller, and everything sent arrives
// once.
func TestTxRingFull(t *testing.T) {
	l := newLink(t, 0)
	pool := porttest.Pool(t, 256, 2048)
	o := smallRing("tx", pool)
	o.BlockSize, o.Blocks, o.FrameSize = 4096, 2, 2048 // a ring of four frames
	p := l.open(t, o)
	raw := l.raw(t, "lrb")
	var b packet.Burst
	pool.Alloc(&b, 32)
	for i := 0; i < b.N; i++ {
		d, _ := b.P(i).Append(100)
		copy(d, mkFrame(plain, i, 100))
	}
	sent := 0
	// The ring's slots come back as the peer's softirq consumes the frames.
	deadline := time.Now().Add(wait)
	for b.N > 0 && time.Now().Before(deadline) {
		n := p.TxBurst(0, &b)
		if n > 4 {
			t.Fatalf("a four-frame ring took %d", n)
		}
		// What the port took is its own; move the rest to the front.
		b.N = copy(b.H[:], b.H[n:b.N])
		sent += n
		if n == 0 {
			time.Sleep(100 * time.Microsecond)
		}
	}
	if b.N != 0 {
		packet.Free(&b)
		t.Fatalf("ring never drained: %d sent", sent)
	}
	got := raw.recv(t, 32, wait)
	seen := map[int]bool{}
	for _, f := range got {
		seen[seqOf(f)] = true
	}
	if len(got) != 32 || len(seen) != 32 {
		t.Errorf("received %d frames, %d distinct, want 32", len(got), len(seen))
	}
}

func TestFanout(t *testing.T) {
	l := newLink(t, 0)
	pool := porttest.Pool(t, 512, 2048)
	const n = 256
	// Either queue may get every flow: each ring holds all n.
	o := ringFor("fanout", pool, n, 200)
	o.RxQueues = 2
	p := l.open(t, o)
	if p.Info().RxQueues != 2 {
		t.Fatalf("info %+v", p.Info())
	}
	raw := l.raw(t, "lrb")
	for i := 0; i < n; i++ {
		raw.send(t, mkFrame(udp4, i, 200)) // one flow per frame
	}
	got := pollRx(t, p, n, wait)
	if st := p.Stats(); st.RxDropped != 0 {
		t.Errorf("rings sized for every frame dropped some: %+v", st)
	}
	seen := make([]int, n)
	for q, fs := range got {
		if len(fs) == 0 {
			t.Errorf("queue %d received nothing from %d flows", q, n)
		}
		for _, f := range fs {
			if s := seqOf(f); s >= 0 && s < n {
				seen[s]++
			} else {
				t.Errorf("queue %d: a frame without a sequence number", q)
			}
		}
	}
	for s, c := range seen {
		if c != 1 {
			t.Errorf("frame %d received %d times", s, c)
		}
	}
	t.Logf("queue 0: %d, queue 1: %d", len(got[0]), len(got[1]))

	// A second port on the same interface has a fanout group of its own, so it
	// sees every frame too.
	other := l.open(t, o)
	raw.send(t, mkFrame(udp4, 7, 200))
	if a, b := pollRx(t, p, 1, wait), pollRx(t, other, 1, wait); len(a[0])+len(a[1]) != 1 || len(b[0])+len(b[1]) != 1 {
		t.Errorf("two ports: %d and %d frames, want 1 each", len(a[0])+len(a[1]), len(b[0])+len(b[1]))
	}
}

// TestKernelDrops overflows a tiny ring the test does not poll: every frame is
// either delivered or counted in the kernel's tp_drops. The kernel may take
// its time to deliver the frames sent (and to hand over the last block), so
// the test polls until every frame is accounted for, one way or the other.
func TestKernelDrops(t *testing.T) {
	l := newLink(t, 0)
	pool := porttest.Pool(t, 256, 2048)
	o := smallRing("drops", pool)
	o.BlockSize, o.Blocks = 4096, 2
	p := l.open(t, o)
	raw := l.raw(t, "lrb")
	const n = 100
	for i := 0; i < n; i++ {
		raw.send(t, mkFrame(plain, i, 1000))
	}
	received := 0
	var st ports.Stats
	for deadline := time.Now().Add(wait); ; {
		got := pollRx(t, p, n, time.Millisecond)
		received += len(got[0])
		st = p.Stats()
		if uint64(received)+st.Extra["tp_drops"] >= n || time.Now().After(deadline) {
			break
		}
	}
	drops := st.Extra["tp_drops"]
	if drops == 0 || st.RxDropped != drops {
		t.Errorf("a 8 KiB ring took %d × 1000 bytes without a drop: %+v", n, st)
	}
	if uint64(received)+drops != n || st.Extra["tp_packets"] != n {
		t.Errorf("received %d, kernel dropped %d, counted %d: want %d in all", received, drops, st.Extra["tp_packets"], n)
	}
	if st.Extra["tp_freeze_q_cnt"] == 0 {
		t.Logf("no queue freeze counted: %+v", st.Extra)
	}
}

func TestInfo(t *testing.T) {
	l := newLink(t, 4000)
	pool := porttest.Pool(t, 16, 2048)
	p := l.open(t, smallRing("info", pool))
	var want net.HardwareAddr
	var index int
	if err := l.ns.Do(func() error {
		ifc, err := net.InterfaceByName("lra")
		if err == nil {
			want, index = ifc.HardwareAddr, ifc.Index
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	info := p.Info()
	if info.Driver != "afpacket" || info.MTU != 4000 || !bytes.Equal(info.MAC[:], want) || !info.LinkUp ||
		info.TimestampSource != "engine" || info.RxQueues != 1 || info.TxQueues != 1 || info.Ifindex != index {
		t.Errorf("info %+v, want MAC %v, ifindex %d", info, want, index)
	}
	l.ns.IP(t, "link", "set", "lrb", "down")
	// The kernel turns the carrier off at once, but the operational state
	// (IFF_RUNNING) only when its linkwatch worker runs.
	deadline := time.Now().Add(wait)
	for p.Info().LinkUp && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if p.Info().LinkUp {
		t.Error("link up with the peer down")
	}
}

// TestNoAllocs sends bursts through one port and receives them on another,
// which takes the kernel's rx stamps; neither side allocates.
func TestNoAllocs(t *testing.T) {
	l := newLink(t, 0)
	pool := porttest.Pool(t, 512, 2048)
	a := l.open(t, smallRing("a", pool))
	ob := smallRing("b", pool)
	ob.Interface = "lrb"
	clk := clock.NewSystem()
	t.Cleanup(clk.Close)
	ob.Clock = clk
	bp := l.open(t, ob)
	if src := bp.Info().TimestampSource; src != TimestampKernel {
		t.Fatalf("timestamp source %q", src)
	}
	frame := mkFrame(plain, 1, 200)
	var tx, rx packet.Burst
	allocs := testing.AllocsPerRun(50, func() {
		tx.Reset()
		pool.Alloc(&tx, 16)
		for i := 0; i < tx.N; i++ {
			d, _ := tx.P(i).Append(len(frame))
			copy(d, frame)
		}
		if n := a.TxBurst(0, &tx); n != 16 {
			t.Fatalf("took %d", n)
		}
		got := 0
		for deadline := time.Now().Add(wait); got < 16 && time.Now().Before(deadline); {
			rx.Reset()
			got += bp.RxBurst(0, &rx)
			packet.Free(&rx)
			if got < 16 {
				runtime.Gosched()
			}
		}
		if got != 16 {
			t.Fatalf("received %d", got)
		}
	})
	if allocs != 0 {
		t.Errorf("%.1f allocations per tx+rx burst", allocs)
	}
}

func TestConfig(t *testing.T) {
	pool := porttest.Pool(t, 16, 2048)
	bad := map[string]string{
		"no interface":  `blocks = 4`,
		"unknown key":   `interface = "lra"` + "\nring = 3",
		"fanout":        `interface = "lra"` + "\nfanout = \"spray\"",
		"block_size":    `interface = "lra"` + "\nblock_size = 1000",
		"frame_size":    `interface = "lra"` + "\nframe_size = 100",
		"block_timeout": `interface = "lra"` + "\nblock_timeout = \"100us\"",
		"wrong type":    `interface = "lra"` + "\npromiscuous = 1",
		"long name":     `interface = "a-very-long-interface-name"`,
	}
	for name, cfg := range bad {
		t.Run(name, func(t *testing.T) {
			_, err := ports.Open("afpacket", &ports.Setup{Name: "p", Config: porttest.Config(cfg), Pool: pool, DryRun: true})
			if err == nil {
				t.Fatal("no error")
			}
			t.Log(err)
		})
	}
	good := `interface = "lra"
block_size = 65536
blocks = 4
frame_size = 4096
block_timeout = "5ms"
fanout = "lb"
promiscuous = false
qdisc_bypass = false
tx_ring = false`
	// Offline, the keys alone; otherwise the interface must be here, and the
	// error names it (linerate validate, with and without --offline).
	p, err := ports.Open("afpacket", &ports.Setup{Name: "p", Config: porttest.Config(good), Pool: pool, DryRun: true, Offline: true})
	if err != nil || p != nil {
		t.Errorf("offline dry run: %v, %v", p, err)
	}
	_, err = ports.Open("afpacket", &ports.Setup{Name: "p", Config: porttest.Config(good), Pool: pool, DryRun: true})
	if want := `interface "lra": no such network interface here`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("dry run of a missing interface: %v, want %q", err, want)
	}
	lo := strings.Replace(good, `"lra"`, `"lo"`, 1)
	if _, err := ports.Open("afpacket", &ports.Setup{Name: "p", Config: porttest.Config(lo), Pool: pool, DryRun: true}); err != nil {
		t.Errorf("dry run on lo: %v", err)
	}
	if _, err := ports.Open("afpacket", &ports.Setup{Name: "p", Config: porttest.Config(`interface = "lr-nonexistent"`), Pool: pool, RxQueues: 1, TxQueues: 1}); err == nil {
		t.Error("opened a missing interface")
	}
}

// TestOpenFromConfig opens the port the way the engine does, with every key.
func TestOpenFromConfig(t *testing.T) {
	l := newLink(t, 0)
	pool := porttest.Pool(t, 64, 2048)
	cfg := porttest.Config(`interface = "lra"
block_size = 65536
blocks = 4
block_timeout = "2ms"
fanout = "lb"
promiscuous = false
qdisc_bypass = false
tx_ring = false`)
	var p ports.Port
	if err := l.ns.Do(func() (err error) {
		p, err = ports.Open("afpacket", &ports.Setup{Name: "p", Config: cfg, Pool: pool, RxQueues: 2, TxQueues: 2})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	raw := l.raw(t, "lrb")
	for i := 0; i < 8; i++ {
		raw.send(t, mkFrame(plain, i, 100))
	}
	got := pollRx(t, p.(*Port), 8, wait)
	if len(got[0])+len(got[1]) != 8 {
		t.Errorf("received %d + %d frames, want 8", len(got[0]), len(got[1]))
	}
	var b packet.Burst
	pool.Alloc(&b, 2)
	for i := 0; i < 2; i++ {
		d, _ := b.P(i).Append(100)
		copy(d, mkFrame(plain, 50+i, 100))
	}
	txAll(t, p.(*Port), 1, &b)
	if got := raw.recv(t, 2, wait); len(got) != 2 {
		t.Errorf("peer received %d frames", len(got))
	}
}

// BenchmarkVeth sends bursts through one port's tx ring and receives them on
// the other end of a veth pair; the figure is the pair's, kernel included.
func BenchmarkVeth(b *testing.B) {
	for _, size := range []int{64, 1500} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			ns := netns.New(b)
			netns.Veth(b, ns, "lra", ns, "lrb")
			pool, err := packet.NewSlab(packet.SlabConfig{Name: b.Name(), Buffers: 4096})
			if err != nil {
				b.Fatal(err)
			}
			defer pool.Close()
			var a, c *Port
			if err := ns.Do(func() (err error) {
				o := DefaultOptions()
				o.Name, o.Interface, o.Pool = "a", "lra", pool
				if a, err = New(o); err != nil {
					return err
				}
				o.Name, o.Interface = "c", "lrb"
				c, err = New(o)
				return err
			}); err != nil {
				b.Fatal(err)
			}
			defer a.Close()
			defer c.Close()
			frame := mkFrame(plain, 1, size)
			var tx, rx packet.Burst
			sent, got := 0, 0
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				tx.Reset()
				pool.Alloc(&tx, packet.MaxBurst)
				for j := 0; j < tx.N; j++ {
					d, _ := tx.P(j).Append(len(frame))
					copy(d, frame)
				}
				n := a.TxBurst(0, &tx)
				sent += n
				tx.N = copy(tx.H[:], tx.H[n:tx.N])
				packet.Free(&tx)
				for k := 0; k < 4; k++ {
					rx.Reset()
					got += c.RxBurst(0, &rx)
					packet.Free(&rx)
				}
			}
			for spins := 0; got < sent && spins < 1e6; spins++ {
				rx.Reset()
				got += c.RxBurst(0, &rx)
				packet.Free(&rx)
			}
			b.ReportMetric(float64(got)/b.Elapsed().Seconds()/1e6, "Mpps")
			b.ReportMetric(float64(sent-got), "lost")
		})
	}
}

// ifMTU is an interface's MTU in the link's namespace.
func (l *link) ifMTU(t *testing.T, name string) int {
	t.Helper()
	var mtu int
	if err := l.ns.Do(func() error {
		ifc, err := net.InterfaceByName(name)
		if err == nil {
			mtu = ifc.MTU
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return mtu
}

// TestMTU: the mtu key is the interface's while the port is open (the kernel
// holds the link to it: a larger frame from the peer never arrives), and the
// interface gets its own back at Close. Left out, the interface's MTU is the
// port's.
func TestMTU(t *testing.T) {
	l := newLink(t, 0)
	pool := porttest.Pool(t, 64, 2048)
	cfg := porttest.Config(`interface = "lra"`)
	open := func(mtu int) (ports.Port, error) {
		var p ports.Port
		err := l.ns.Do(func() (err error) {
			p, err = ports.Open("afpacket", &ports.Setup{Name: "p", Config: cfg, Pool: pool, RxQueues: 1, TxQueues: 1, MTU: mtu})
			return err
		})
		return p, err
	}
	p, err := open(1400)
	if err != nil {
		t.Fatal(err)
	}
	if got := l.ifMTU(t, "lra"); got != 1400 || p.Info().MTU != 1400 {
		t.Errorf("interface MTU %d, port's %d; want 1400", got, p.Info().MTU)
	}
	raw := l.raw(t, "lrb")
	l.ns.IP(t, "link", "set", "lrb", "mtu", "1500")
	// Over the port's MTU: the kernel drops it (veth refuses it at the peer's
	// transmit, ENOBUFS).
	_, _ = unix.Write(raw.fd, mkFrame(plain, 1, 14+1448))
	raw.send(t, mkFrame(plain, 2, 14+1400))
	got := pollRx(t, p.(*Port), 1, 10*time.Second)
	if len(got[0]) != 1 || seqOf(got[0][0]) != 2 {
		t.Errorf("received %d frames (seq %d), want the one that fits", len(got[0]), seqOf(got[0][0]))
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if got := l.ifMTU(t, "lra"); got != 1500 {
		t.Errorf("after Close the interface's MTU is %d, want its own 1500 back", got)
	}
	// Left out: the interface's, untouched.
	l.ns.IP(t, "link", "set", "lra", "mtu", "2000")
	if p, err = open(0); err != nil {
		t.Fatal(err)
	}
	if p.Info().MTU != 2000 {
		t.Errorf("port MTU %d, want the interface's 2000", p.Info().MTU)
	}
	p.Close()
	if got := l.ifMTU(t, "lra"); got != 2000 {
		t.Errorf("interface MTU %d after a port without mtu", got)
	}
	// One the device refuses: a clear error, and the interface as it was.
	if _, err := open(60); err == nil || !strings.Contains(err.Error(), "mtu 60: set lra's MTU to 60 (it is 2000)") {
		t.Errorf("mtu 60: %v", err)
	}
	if got := l.ifMTU(t, "lra"); got != 2000 {
		t.Errorf("interface MTU %d after a refused mtu", got)
	}
}
