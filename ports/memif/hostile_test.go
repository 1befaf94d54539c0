//go:build linux

package memif_test

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/linerate/linerate/appliance"
	"github.com/linerate/linerate/appliance/memif"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/internal/enginetest"
	_ "github.com/linerate/linerate/plugins/builtin" // forward
	pm "github.com/linerate/linerate/ports/memif"
)

// The hostile peer: written from the wire format, it sends what it likes with
// whatever descriptor it likes, and writes what it likes into shared memory.

func rawSend(uc *net.UnixConn, m memif.Msg, fd int) {
	var b [memif.MsgSize]byte
	m.Encode(&b)
	var oob []byte
	if fd >= 0 {
		oob = unix.UnixRights(fd)
	}
	_, _, _ = uc.WriteMsgUnix(b[:], oob, nil)
}

// rawRecv reads a message, closing any descriptor it carries; ok is false on
// an error or a disconnect.
func rawRecv(uc *net.UnixConn) (memif.Msg, []int, bool) {
	var b [memif.MsgSize]byte
	oob := make([]byte, unix.CmsgSpace(4*4))
	_ = uc.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, oobn, _, _, err := uc.ReadMsgUnix(b[:], oob)
	var fds []int
	if oobn > 0 {
		if cms, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
			for _, cm := range cms {
				if f, err := unix.ParseUnixRights(&cm); err == nil {
					fds = append(fds, f...)
				}
			}
		}
	}
	if err != nil || n != memif.MsgSize {
		closeAll(fds)
		return memif.Msg{}, nil, false
	}
	m, err := memif.Decode(b[:])
	if err != nil || m.Type == memif.MsgDisconnect {
		closeAll(fds)
		return m, nil, false
	}
	return m, fds, true
}

func closeAll(fds []int) {
	for _, f := range fds {
		unix.Close(f)
	}
}

// wrongFD is a descriptor of kind k: a sealed memfd, an unsealed one, an empty
// sealed one, a pipe, a socket, a directory, an eventfd.
func wrongFD(k int) int {
	switch k % 7 {
	case 0, 1, 2:
		fd, _ := unix.MemfdCreate("hostile", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
		if k%7 != 2 {
			_ = unix.Ftruncate(fd, 1<<16)
		}
		if k%7 != 1 {
			_, _ = unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK)
		}
		return fd
	case 3:
		var p [2]int
		_ = unix.Pipe2(p[:], unix.O_CLOEXEC)
		unix.Close(p[0])
		return p[1]
	case 4:
		p, _ := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		unix.Close(p[0])
		return p[1]
	case 5:
		fd, _ := unix.Open("/", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		return fd
	default:
		fd, _ := unix.Eventfd(0, unix.EFD_CLOEXEC)
		return fd
	}
}

// scribble writes what a hostile peer would into a connection's rings and
// their buffers: descriptors outside the region, huge lengths, chains that do
// not end, counters that jump, random bytes over headers and cookies.
func scribble(rng *rand.Rand, r *memif.Ring, mem []byte, head bool) {
	s := uint16(rng.Uint32())
	switch rng.IntN(7) {
	case 0:
		*r.D(s) = memif.Desc{Offset: rng.Uint32(), Length: rng.Uint32(), Region: uint16(rng.IntN(3))}
	case 1:
		*r.D(s) = memif.Desc{Offset: uint32(rng.IntN(len(mem))), Length: 0xFFFFFFFF}
	case 2:
		for i := range r.Size() {
			r.D(s + i).Flags = memif.DescFlagNext
		}
	case 3:
		*r.D(s) = memif.Desc{Flags: uint16(rng.Uint32()), Offset: uint32(rng.IntN(len(mem))), Length: uint32(rng.IntN(4096))}
	case 4: // the whole header, cookie and counters, and some descriptors
		hdr := unsafeHeader(r)
		for i := range hdr {
			hdr[i] = byte(rng.Uint32())
		}
	}
	if head {
		r.SetHead(r.Head() + uint16(rng.IntN(1<<16)))
	} else {
		r.SetTail(r.Tail() + uint16(rng.IntN(1<<16)))
	}
}

// unsafeHeader is a ring's header, cookie to tail, as bytes.
func unsafeHeader(r *memif.Ring) []byte {
	return unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(r.D(0)), -memif.RingHdrSize)), memif.RingHdrSize)
}

// attackServer is one attack on a server port's socket, by number.
func attackServer(t *testing.T, sock string, i int, rng *rand.Rand) {
	uc, err := net.DialUnix("unixpacket", nil, memif.Addr(sock))
	if err != nil {
		t.Errorf("attack %d: %v", i, err)
		return
	}
	defer uc.Close()
	hello, fds, ok := rawRecv(uc)
	closeAll(fds)
	if !ok || hello.Type != memif.MsgHello {
		t.Errorf("attack %d: no hello", i)
		return
	}
	initMsg := memif.Msg{Type: memif.MsgInit, Version: memif.Version, Name: "hostile"}
	toAck := func(fd int) bool {
		rawSend(uc, initMsg, fd)
		_, fds, ok := rawRecv(uc)
		closeAll(fds)
		return ok
	}
	withFD := func(k int, f func(fd int)) {
		fd := wrongFD(k)
		defer unix.Close(fd)
		f(fd)
	}
	switch i % 12 {
	case 0: // silent
	case 1: // not a message
		_, _ = uc.Write([]byte("GET / HTTP/1.1\r\n"))
	case 2: // random bytes, of a message's size
		b := make([]byte, memif.MsgSize)
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		_, _ = uc.Write(b)
	case 3: // out of order: connect, a ring, a region before init
		withFD(i/12, func(fd int) {
			rawSend(uc, []memif.Msg{{Type: memif.MsgConnect}, {Type: memif.MsgAddRing}, {Type: memif.MsgAddRegion, Size: 4096}}[rng.IntN(3)], fd)
		})
	case 4: // a wrong id, version or secret, with a descriptor
		withFD(i/12, func(fd int) {
			m := initMsg
			switch rng.IntN(3) {
			case 0:
				m.ID = 7
			case 1:
				m.Version = 0x0100
			default:
				m.Mode = 1
			}
			rawSend(uc, m, fd)
		})
	case 5: // init, ack, hello with a memfd
		withFD(0, func(fd int) {
			if toAck(fd) {
				rawSend(uc, memif.Msg{Type: []memif.MsgType{memif.MsgAck, memif.MsgHello, memif.MsgInit}[rng.IntN(3)]}, fd)
			}
		})
	case 6: // a region of the wrong kind: unsealed, empty, a pipe, a socket, a directory, an eventfd
		withFD(1+i/12, func(fd int) {
			if toAck(-1) {
				rawSend(uc, memif.Msg{Type: memif.MsgAddRegion, Size: 1 << 16}, fd)
			}
		})
	case 7: // a good region, then a ring whose interrupt fd is of the wrong kind
		withFD(0, func(fd int) {
			if !toAck(-1) {
				return
			}
			rawSend(uc, memif.Msg{Type: memif.MsgAddRegion, Size: 1 << 16}, fd)
			if _, fds, ok := rawRecv(uc); ok {
				closeAll(fds)
				withFD(3+i/12, func(bad int) { rawSend(uc, memif.Msg{Type: memif.MsgAddRing, Flags: 1, Log2Ring: 4}, bad) })
			}
		})
	case 8: // rings outside the region, too big, twice the same, or none
		withFD(0, func(fd int) {
			if !toAck(-1) {
				return
			}
			rawSend(uc, memif.Msg{Type: memif.MsgAddRegion, Size: 1 << 16}, fd)
			if _, fds, ok := rawRecv(uc); !ok {
				return
			} else {
				closeAll(fds)
			}
			efd, _ := unix.Eventfd(0, unix.EFD_CLOEXEC)
			defer unix.Close(efd)
			for _, m := range [][]memif.Msg{
				{{Type: memif.MsgAddRing, Flags: 1, Offset: 1 << 20, Log2Ring: 4}, {Type: memif.MsgAddRing, Log2Ring: 4}},
				{{Type: memif.MsgAddRing, Flags: 1, Log2Ring: 15}},
				{{Type: memif.MsgAddRing, Flags: 1, Log2Ring: 4}, {Type: memif.MsgAddRing, Flags: 1, Log2Ring: 4}},
				{},
			}[rng.IntN(4)] {
				rawSend(uc, m, efd)
				if _, fds, ok := rawRecv(uc); !ok {
					return
				} else {
					closeAll(fds)
				}
			}
			rawSend(uc, memif.Msg{Type: memif.MsgConnect}, -1)
			_, fds, _ := rawRecv(uc)
			closeAll(fds)
		})
	default: // a whole handshake, then shared memory at its worst
		uc.Close()
		reg, err := memif.NewRegion("hostile", 2*memif.RingBytes(4)+32*2048)
		if err != nil {
			t.Error(err)
			return
		}
		defer reg.Close()
		c, err := memif.Dial(memif.ClientConfig{Socket: sock, Name: "hostile", Regions: []*memif.Region{reg},
			Rings: []memif.RingSpec{{Kind: memif.C2S, Log2: 4}, {Kind: memif.S2C, Offset: uint32(memif.RingBytes(4)), Log2: 4}}})
		if err != nil {
			return // another hostile client holds the port
		}
		defer c.Close()
		for k := 0; k < 20; k++ {
			scribble(rng, c.C2S[0], reg.Mem, true)
			scribble(rng, c.S2C[0], reg.Mem, true)
			runtime.Gosched()
		}
		time.Sleep(time.Millisecond) // let the engine's lcore meet it
	}
}

// serveHostile accepts linerate's client and misbehaves, one attack per
// connection, until ln closes; served counts them.
func serveHostile(ln *net.UnixListener, rng *rand.Rand, served *atomic.Int32, done chan<- struct{}) {
	defer close(done)
	for i := 0; ; i++ {
		uc, err := ln.AcceptUnix()
		if err != nil {
			return
		}
		clientAttack(uc, i, rng)
		uc.Close()
		served.Add(1)
	}
}

// clientAttack: every other connection a whole handshake, then shared memory
// at its worst (which also resets the client's backoff); between them,
// garbage, a wrong hello, or a refusal halfway.
func clientAttack(uc *net.UnixConn, i int, rng *rand.Rand) {
	hello := memif.Msg{Type: memif.MsgHello, MinVersion: memif.Version, MaxVersion: memif.Version,
		MaxRegion: 255, MaxC2S: 255, MaxS2C: 255, MaxLog2Ring: 14}
	mfd := wrongFD(1) // unsealed: the client should never care
	defer unix.Close(mfd)
	kind := 4
	if i%2 == 1 {
		kind = i / 2 % 4
	}
	switch kind {
	case 0:
		_, _ = uc.Write([]byte{1, 2, 3})
		return
	case 1:
		hello.MinVersion = 0x0300
		rawSend(uc, hello, mfd)
		return
	case 2:
		hello.MaxRegion = 0
		hello.MaxLog2Ring = 2
		rawSend(uc, hello, mfd)
		return
	}
	rawSend(uc, hello, mfd)
	var region []byte
	defer func() {
		if region != nil {
			unix.Munmap(region)
		}
	}()
	var rings []memif.Msg
	for {
		m, fds, ok := rawRecv(uc)
		if !ok {
			closeAll(fds)
			return
		}
		switch m.Type {
		case memif.MsgAddRegion:
			if len(fds) == 1 && region == nil && m.Size < 1<<30 {
				region, _ = unix.Mmap(fds[0], 0, int(m.Size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
			}
		case memif.MsgAddRing:
			rings = append(rings, m)
		}
		closeAll(fds)
		if kind == 3 && m.Type == memif.MsgAddRing {
			rawSend(uc, memif.Msg{Type: memif.MsgDisconnect, Reason: "go away"}, mfd)
			return
		}
		if m.Type == memif.MsgConnect {
			rawSend(uc, memif.Msg{Type: memif.MsgConnected, Name: "hostile"}, mfd)
			break
		}
		rawSend(uc, memif.Msg{Type: memif.MsgAck}, mfd)
	}
	if region == nil {
		return
	}
	for k := 0; k < 50; k++ {
		m := rings[rng.IntN(len(rings))]
		if int(m.Offset)+memif.RingBytes(m.Log2Ring) > len(region) {
			continue
		}
		r := memif.ViewRing(region[m.Offset:], m.Log2Ring)
		scribble(rng, r, region, false)
		runtime.Gosched()
	}
	time.Sleep(time.Millisecond)
	rawSend(uc, memif.Msg{Type: []memif.MsgType{memif.MsgDisconnect, memif.MsgInit, 99}[rng.IntN(3)]}, mfd)
}

// minFDs is the fewest descriptors open over a few looks: background
// goroutines open some for a moment (a client's dial).
func minFDs(t *testing.T) int {
	n := 1 << 30
	for range 20 {
		es, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		n = min(n, len(es))
		time.Sleep(time.Millisecond)
	}
	return n
}

// TestHostilePeer: a hostile peer attacks a server port and a client port of
// a running engine, in a bounded loop, with everything above: fds of the
// wrong kind, garbage and out-of-order messages, bad regions and rings, and
// once connected, shared memory at its worst. Meanwhile a good peer on
// another port gets every frame back, once and in order. Nothing crashes, no
// descriptor leaks, and every buffer is back after the engine drains.
func TestHostilePeer(t *testing.T) {
	dir := t.TempDir()
	victim, hostile, good := filepath.Join(dir, "victim.sock"), filepath.Join(dir, "hostile.sock"), filepath.Join(dir, "good.sock")
	e := enginetest.Start(t, fmt.Sprintf(`
version = 1
[engine]
pin = false
[control]
listen = ""
[[ports]]
name = "victim"
driver = "memif"
role = "server"
socket = %q
[[ports]]
name = "victimc"
driver = "memif"
socket = %q
ring_size = 64
[[ports]]
name = "good"
driver = "memif"
role = "server"
socket = %q
[[pipelines]]
name = "v"
cpus = [0]
rx = ["victim", "victimc"]
[[pipelines.stages]]
kind = "forward"
port = "victim"
[[pipelines]]
name = "g"
cpus = [0]
rx = ["good"]
[[pipelines.stages]]
kind = "forward"
port = "good"
`, victim, hostile, good), appliance.Options{})
	pool := newPool(t, "memif-goodpeer")
	peer, err := pm.New(pm.Options{Name: "peer", Socket: good, Pool: pool, RingSize: 256, Log: enginetest.Quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	waitUp(t, peer)
	before := minFDs(t)

	hln, err := net.ListenUnix("unixpacket", memif.Addr(hostile))
	if err != nil {
		t.Fatal(err)
	}
	hdone := make(chan struct{})
	var served atomic.Int32
	go serveHostile(hln, rand.New(rand.NewPCG(3, 4)), &served, hdone)
	adone := make(chan int)
	deadline := time.Now().Add(30 * time.Second)
	go func() {
		rng := rand.New(rand.NewPCG(1, 2))
		end := time.Now().Add(2 * time.Second)
		i := 0
		for ; i < 400 && time.Now().Before(end); i++ {
			attackServer(t, victim, i, rng)
		}
		adone <- i
	}()
	echo(t, peer, pool, 3000)
	attacks := <-adone
	for served.Load() < 12 { // the client's backoff paces these
		if time.Now().After(deadline) {
			t.Fatalf("the client came %d times", served.Load())
		}
		time.Sleep(time.Millisecond)
	}
	hln.Close()
	<-hdone

	deadline = time.Now().Add(20 * time.Second)
	for after := minFDs(t); after > before; after = minFDs(t) {
		if time.Now().After(deadline) {
			t.Fatalf("%d descriptors open before the attacks, %d after", before, after)
		}
	}
	peer.Close()
	e.Stop()
	for name, used := range e.InUse() {
		if used != 0 {
			t.Errorf("pool %q: %d buffers in use after the engine drained", name, used)
		}
	}
	for _, p := range e.Snapshot().Ports {
		if p.Name != "good" {
			t.Logf("%s: %v", p.Name, p.Extra)
		}
	}
	t.Logf("%d attacks on the server port", attacks)
}

// echo sends n numbered frames through port, whose peer sends them back, and
// checks each comes back once, in order, unchanged.
func echo(t *testing.T, port *pm.Port, pool packet.Pool, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	sent, got := 0, 0
	var tx, rx packet.Burst
	for got < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d frames back: %+v", got, n, port.Stats())
		}
		// At most 128 in flight: the rings hold 256, so no frame meets a full one.
		for tx.N < 32 && sent+tx.N < n && sent+tx.N-got < 128 && pool.Alloc(&tx, 1) == 1 {
			i := sent + tx.N - 1
			d, _ := tx.H[tx.N-1].P().Append(64 + i%700)
			d[0], d[1], d[2] = byte(i>>16), byte(i>>8), byte(i)
			d[63] = byte(i * 7)
		}
		k := port.TxBurst(0, &tx)
		copy(tx.H[:], tx.H[k:tx.N])
		tx.N -= k
		sent += k
		rx.N = 0
		port.RxBurst(0, &rx)
		for _, h := range rx.Handles() {
			d := h.P().Data()
			if i := int(d[0])<<16 | int(d[1])<<8 | int(d[2]); i != got || len(d) != 64+got%700 || d[63] != byte(got*7) {
				t.Fatalf("frame %d: got number %d, %d bytes", got, i, len(d))
			}
			got++
		}
		packet.Free(&rx)
		if rx.N == 0 {
			time.Sleep(50 * time.Microsecond)
		}
	}
	packet.Free(&tx)
	if s := port.Stats(); s.RxPackets != uint64(n) || s.TxPackets != uint64(n) {
		t.Errorf("stats %+v", s)
	}
}

// FuzzRings writes the fuzzer's bytes over a connected client's rings (both
// headers and descriptor tables) and lets a server port receive and transmit
// through them: it never crashes, never reads outside the regions, and every
// buffer comes back.
func FuzzRings(f *testing.F) {
	f.Add(make([]byte, 64), uint8(3))
	f.Add([]byte{0x20, 0xf2, 0xe3, 0x03, 0, 0, 16, 0}, uint8(1))
	f.Add(func() []byte {
		b := make([]byte, 2*memif.RingBytes(tcLog2))
		for i := memif.RingHdrSize; i < len(b); i++ {
			b[i] = 0xff
		}
		return b
	}(), uint8(8))
	sock := filepath.Join(f.TempDir(), "m.sock")
	pool := newPool(f, "memif-fuzzrings")
	srv, err := pm.New(pm.Options{Name: "srv", Server: true, Socket: sock, Pool: pool, Log: enginetest.Quiet})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { srv.Close() })
	_, reg := testClient(f, sock)
	waitUp(f, srv)
	f.Fuzz(func(t *testing.T, rings []byte, bursts uint8) {
		copy(reg.Mem[:2*memif.RingBytes(tcLog2)], rings)
		var b packet.Burst
		for range bursts % 16 {
			srv.RxBurst(0, &b)
			packet.Free(&b)
			tx := frames(t, pool, 0, 8, 200)
			k := srv.TxBurst(0, tx)
			copy(tx.H[:], tx.H[k:tx.N])
			tx.N -= k
			packet.Free(tx)
		}
		if n := pool.Stats().InUse; n != 0 {
			t.Fatalf("%d buffers in use", n)
		}
	})
}
