package memif

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// rawPeer speaks the control protocol message by message, as a hostile peer
// written from the wire format would.
type rawPeer struct {
	t  testing.TB
	uc *net.UnixConn
}

func dialRaw(t testing.TB, sock string) *rawPeer {
	t.Helper()
	uc, err := net.DialUnix("unixpacket", nil, Addr(sock))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { uc.Close() })
	return &rawPeer{t: t, uc: uc}
}

func (p *rawPeer) send(m Msg, fd int) error { return send(p.uc, &m, fd) }

// recv reads one message; a descriptor it carries is closed.
func (p *rawPeer) recv() (Msg, error) {
	m, fd, err := recv(p.uc)
	closeFD(fd)
	return m, err
}

// expect reads a message of type want or fails the test.
func (p *rawPeer) expect(want MsgType) Msg {
	p.t.Helper()
	m, err := p.recv()
	if err != nil || m.Type != want {
		p.t.Fatalf("got %s (%s, %v), want %s", m.Type, m.Reason, err, want)
	}
	return m
}

// toAck runs a client's handshake up to the server's ack of init.
func (p *rawPeer) toAck() {
	p.t.Helper()
	p.expect(MsgHello)
	if err := p.send(Msg{Type: MsgInit, Version: Version, Name: "hostile"}, -1); err != nil {
		p.t.Fatal(err)
	}
	p.expect(MsgAck)
}

// refused reads what the server says next: it must be a disconnect (or the
// socket closing).
func (p *rawPeer) refused() string {
	p.t.Helper()
	m, err := p.recv()
	if err != nil {
		return err.Error()
	}
	if m.Type != MsgDisconnect {
		p.t.Fatalf("got %s, want a disconnect", m.Type)
	}
	return m.Reason
}

func memfd(t testing.TB, size int64, seals int) int {
	t.Helper()
	fd, err := unix.MemfdCreate("hostile", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Ftruncate(fd, size); err != nil {
		t.Fatal(err)
	}
	if seals != 0 {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals); err != nil {
			t.Fatal(err)
		}
	}
	return fd
}

// server listens on a fresh socket and runs one handshake per Accept in the
// background; each result arrives on the channel.
func server(t testing.TB, cfg ServerConfig) (string, chan error) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "m.sock")
	ln, err := Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	res := make(chan error, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept(cfg)
			if ln.Closed() {
				if c != nil {
					c.Close()
				}
				return
			}
			if c != nil {
				c.Close()
			}
			res <- err
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return sock, res
}

// TestRegionTruncatedAfterSizeCheck: a client that keeps its memfd truncates it
// to 0 and seals it against shrinking between the server's two checks of it.
// The server must refuse it, not map an empty file and die of SIGBUS reading
// the ring cookie.
func TestRegionTruncatedAfterSizeCheck(t *testing.T) {
	const size = 1 << 16
	fd := memfd(t, size, 0)
	defer unix.Close(fd)
	testHookRegion = func() {
		_ = unix.Ftruncate(fd, 0)
		_, _ = unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK)
	}
	defer func() { testHookRegion = nil }()
	sock, res := server(t, ServerConfig{MaxC2S: 1, MaxS2C: 1})
	p := dialRaw(t, sock)
	p.toAck()
	if err := p.send(Msg{Type: MsgAddRegion, Size: size}, fd); err != nil {
		t.Fatal(err)
	}
	// Were the region taken, the rest of the handshake reads its cookies.
	if m, err := p.recv(); err == nil && m.Type == MsgAck {
		for _, m := range []Msg{
			{Type: MsgAddRing, Flags: addRingFlagC2S, Log2Ring: 4},
			{Type: MsgAddRing, Offset: uint32(RingBytes(4)), Log2Ring: 4},
		} {
			efd, _ := unix.Eventfd(0, unix.EFD_CLOEXEC)
			_ = p.send(m, efd)
			unix.Close(efd)
			p.recv()
		}
		_ = p.send(Msg{Type: MsgConnect}, -1)
		p.recv()
	}
	if err := <-res; err == nil {
		t.Fatal("a region truncated to 0 was accepted")
	}
}

// TestRegionSealedEmpty: an empty memfd sealed against shrinking, declared
// larger, is refused.
func TestRegionSealedEmpty(t *testing.T) {
	sock, res := server(t, ServerConfig{MaxC2S: 1, MaxS2C: 1})
	p := dialRaw(t, sock)
	p.toAck()
	fd := memfd(t, 0, unix.F_SEAL_SHRINK)
	defer unix.Close(fd)
	if err := p.send(Msg{Type: MsgAddRegion, Size: 1 << 16}, fd); err != nil {
		t.Fatal(err)
	}
	if r := p.refused(); !strings.Contains(r, "smaller") {
		t.Errorf("refused as %q", r)
	}
	if err := <-res; err == nil {
		t.Fatal("accepted")
	}
}

// TestFaultSafe: a read of shared memory that faults is an error, not the
// process's death.
func TestFaultSafe(t *testing.T) {
	fd := memfd(t, 1<<16, 0)
	defer unix.Close(fd)
	mem, err := unix.Mmap(fd, 0, 1<<16, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	r := newRing(mem, 0, 4, -1)
	r.init()
	if err := faultSafe(func() { _ = r.Cookie() }); err != nil {
		t.Fatal(err)
	}
	if err := unix.Ftruncate(fd, 0); err != nil {
		t.Fatal(err)
	}
	if err := faultSafe(func() { _ = r.Cookie() }); err == nil {
		t.Fatal("a read past the end of the file did not fault")
	}
}

func countFDs(t testing.TB) int {
	t.Helper()
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}

// TestNoFDLeakServer: descriptors a client attaches to messages that carry
// none (init, ack, hello, connect) and those of failed handshakes are closed.
func TestNoFDLeakServer(t *testing.T) {
	sock, res := server(t, ServerConfig{MaxC2S: 1, MaxS2C: 1})
	attack := func(i int) {
		p := dialRaw(t, sock)
		defer p.uc.Close()
		p.expect(MsgHello)
		fd := memfd(t, 4096, unix.F_SEAL_SHRINK)
		defer unix.Close(fd)
		if err := p.send(Msg{Type: MsgInit, Version: Version, Name: "hostile"}, fd); err != nil {
			t.Fatal(err)
		}
		p.expect(MsgAck)
		switch i % 4 {
		case 0: // an ack, a hello, then a connect, each with a memfd
			_ = p.send(Msg{Type: MsgAck}, fd)
		case 1:
			_ = p.send(Msg{Type: MsgHello}, fd)
		case 2: // a good region, then a ring, then a connect with a memfd: no rings of the other kind
			_ = p.send(Msg{Type: MsgAddRegion, Size: 4096}, fd)
			p.recv()
			efd, _ := unix.Eventfd(0, unix.EFD_CLOEXEC)
			_ = p.send(Msg{Type: MsgAddRing, Flags: addRingFlagC2S, Log2Ring: 4}, efd)
			unix.Close(efd)
			p.recv()
			_ = p.send(Msg{Type: MsgConnect}, fd)
		case 3: // a region, then the socket closes
			_ = p.send(Msg{Type: MsgAddRegion, Size: 4096}, fd)
			p.recv()
			return
		}
		p.recv()
	}
	attack(0) // the runtime's own descriptors (netpoll) are made by now
	<-res
	before := countFDs(t)
	for i := range 40 {
		attack(i)
		<-res
	}
	if after := countFDs(t); after != before {
		t.Errorf("%d descriptors open before 40 hostile clients, %d after", before, after)
	}
}

// hostileServer plays a server for one client that attaches a memfd to each
// of its messages (hello, ack, connected) and refuses the client at its
// stage-th message (init 0, region 1, rings 2 and 3, connect 4; from 5 on it
// connects). stop closes it and waits until it has.
func hostileServer(t testing.TB, stage int) (sock string, stop func()) {
	t.Helper()
	sock = filepath.Join(t.TempDir(), "h.sock")
	ln, err := net.ListenUnix("unixpacket", Addr(sock))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			uc, err := ln.AcceptUnix()
			if err != nil {
				return
			}
			fd := memfd(t, 4096, 0)
			hello := Msg{Type: MsgHello, MinVersion: Version, MaxVersion: Version, MaxRegion: 255, MaxC2S: 255, MaxS2C: 255, MaxLog2Ring: 14}
			_ = send(uc, &hello, fd)
			for i := 0; ; i++ {
				m, rfd, err := recv(uc)
				closeFD(rfd)
				if err != nil || m.Type == MsgDisconnect {
					break
				}
				reply := Msg{Type: MsgAck}
				if m.Type == MsgConnect {
					reply.Type = MsgConnected
				}
				if i == stage {
					reply = Msg{Type: MsgDisconnect, Reason: "go away"}
				}
				_ = send(uc, &reply, fd)
			}
			unix.Close(fd)
			uc.Close()
		}
	}()
	return sock, func() { ln.Close(); <-done }
}

// TestNoFDLeakClient: a server's descriptors on hello, ack and connected are
// closed by the client, and so is everything of a failed handshake.
func TestNoFDLeakClient(t *testing.T) {
	reg, err := NewRegion("client", RingBytes(4)*2)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	cfg := ClientConfig{Regions: []*Region{reg}, Rings: []RingSpec{{Kind: C2S, Log2: 4}, {Kind: S2C, Offset: uint32(RingBytes(4)), Log2: 4}}}
	run := func(stage int) {
		sock, stop := hostileServer(t, stage)
		cfg.Socket = sock
		c, err := Dial(cfg)
		if stage < 5 && err == nil {
			t.Fatalf("stage %d: connected", stage)
		}
		if c != nil {
			c.Close()
		}
		stop()
	}
	run(0)
	before := countFDs(t)
	for i := range 24 {
		run(i % 6)
	}
	if after := countFDs(t); after != before {
		t.Errorf("%d descriptors open before 24 hostile servers, %d after", before, after)
	}
}

// TestNoRings: a client that declares no rings is refused at connect, as
// DPDK's server refuses it, and so is one with rings of one kind only.
func TestNoRings(t *testing.T) {
	for _, rings := range [][]Msg{
		nil,
		{{Type: MsgAddRing, Flags: addRingFlagC2S, Log2Ring: 4}},
		{{Type: MsgAddRing, Log2Ring: 4}},
	} {
		sock, res := server(t, ServerConfig{MaxC2S: 1, MaxS2C: 1})
		p := dialRaw(t, sock)
		p.toAck()
		reg, err := NewRegion("norings", RingBytes(4))
		if err != nil {
			t.Fatal(err)
		}
		newRing(reg.Mem, 0, 4, -1).init()
		if err := p.send(Msg{Type: MsgAddRegion, Size: uint64(len(reg.Mem))}, reg.FD); err != nil {
			t.Fatal(err)
		}
		p.expect(MsgAck)
		for _, m := range rings {
			efd, _ := unix.Eventfd(0, unix.EFD_CLOEXEC)
			_ = p.send(m, efd)
			unix.Close(efd)
			p.expect(MsgAck)
		}
		_ = p.send(Msg{Type: MsgConnect}, -1)
		if r := p.refused(); !strings.Contains(r, "ring") {
			t.Errorf("%d rings: refused as %q", len(rings), r)
		}
		if err := <-res; err == nil {
			t.Errorf("%d rings: connected", len(rings))
		}
		reg.Close()
	}
}

// fuzzFD is a descriptor of kind k for FuzzHandshake to attach: none (-1), a
// memfd sealed with two rings' cookies laid out (log2 4, at 0 and one ring
// on), an unsealed one, an empty sealed one, a pipe, a socket, a directory,
// an eventfd.
func fuzzFD(k byte) int {
	switch k % 8 {
	case 0:
		return -1
	case 1, 2, 3:
		fd, _ := unix.MemfdCreate("fuzz", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
		if k%8 != 3 {
			_ = unix.Ftruncate(fd, 1<<16)
		}
		if k%8 == 1 {
			var c [4]byte
			le.PutUint32(c[:], Cookie)
			_, _ = unix.Pwrite(fd, c[:], 0)
			_, _ = unix.Pwrite(fd, c[:], int64(RingBytes(4)))
		}
		if k%8 != 2 {
			_, _ = unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK)
		}
		return fd
	case 4:
		var p [2]int
		_ = unix.Pipe2(p[:], unix.O_CLOEXEC)
		unix.Close(p[0])
		return p[1]
	case 5:
		p, _ := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		unix.Close(p[0])
		return p[1]
	case 6:
		fd, _ := unix.Open("/", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		return fd
	default:
		fd, _ := unix.Eventfd(0, unix.EFD_CLOEXEC)
		return fd
	}
}

// FuzzHandshake drives a live server's handshake with the fuzzer's control
// messages, each a record of an fd kind (fuzzFD) and 128 bytes sent as they
// are: the server never crashes, ends every handshake, and leaks no
// descriptor.
func FuzzHandshake(f *testing.F) {
	rec := func(k byte, m Msg) []byte {
		var b [MsgSize]byte
		m.Encode(&b)
		return append([]byte{k}, b[:]...)
	}
	good := slices.Concat(
		rec(0, Msg{Type: MsgInit, Version: Version, Name: "fuzz"}),
		rec(1, Msg{Type: MsgAddRegion, Size: 1 << 16}),
		rec(7, Msg{Type: MsgAddRing, Flags: addRingFlagC2S, Log2Ring: 4}),
		rec(7, Msg{Type: MsgAddRing, Offset: uint32(RingBytes(4)), Log2Ring: 4}),
		rec(0, Msg{Type: MsgConnect}))
	f.Add(good)
	f.Add(slices.Concat(rec(1, Msg{Type: MsgInit, Version: Version}), rec(4, Msg{Type: MsgAddRegion, Size: 1 << 16})))
	f.Add(slices.Concat(rec(0, Msg{Type: MsgInit, Version: Version}), rec(3, Msg{Type: MsgAddRegion, Size: 1 << 16})))
	f.Add(slices.Concat(rec(0, Msg{Type: MsgInit, Version: Version}), rec(0, Msg{Type: MsgConnect})))
	f.Add([]byte("garbage"))
	sock, res := server(f, ServerConfig{MaxC2S: 2, MaxS2C: 2, Timeout: 2 * time.Second})
	baseline := -1
	f.Fuzz(func(t *testing.T, in []byte) {
		uc, err := net.DialUnix("unixpacket", nil, Addr(sock))
		if err != nil {
			t.Fatal(err)
		}
		_ = uc.SetDeadline(time.Now().Add(5 * time.Second))
		p := &rawPeer{t: t, uc: uc}
		if _, err := p.recv(); err != nil {
			t.Fatal(err)
		}
		for len(in) > 0 {
			n := min(len(in), 1+MsgSize)
			fd := fuzzFD(in[0])
			_, _, err := uc.WriteMsgUnix(in[1:n], rightsOf(fd), nil)
			closeFD(fd)
			in = in[n:]
			if err != nil {
				break
			}
			if m, err := p.recv(); err != nil || m.Type == MsgDisconnect || m.Type == MsgConnected {
				break
			}
		}
		uc.Close()
		<-res
		if n := countFDs(t); baseline < 0 {
			baseline = n
		} else if n != baseline {
			t.Fatalf("%d descriptors open, %d after the first handshake", n, baseline)
		}
	})
}

func rightsOf(fd int) []byte {
	if fd < 0 {
		return nil
	}
	return unix.UnixRights(fd)
}
