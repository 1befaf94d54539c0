//go:build linux

package memif_test

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/linerate/linerate/appliance/memif"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/internal/porttest"
	"github.com/linerate/linerate/internal/testenv"
	"github.com/linerate/linerate/ports"
	pm "github.com/linerate/linerate/ports/memif"
)

// A test client's layout: its C2S ring, its S2C ring, then buffers of 2048
// bytes, one per slot of each ring.
const (
	tcLog2 = 4
	tcBuf  = 2048
)

func tcBufOffset(ring, slot int) uint32 {
	return uint32(2*memif.RingBytes(tcLog2) + (ring<<tcLog2+slot&(1<<tcLog2-1))*tcBuf)
}

// testClient connects to a linerate server as a bare memif client whose rings
// the test writes itself.
func testClient(t testing.TB, sock string) (*memif.Conn, *memif.Region) {
	t.Helper()
	reg, err := memif.NewRegion("tc", int(tcBufOffset(2, 0)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	c, err := memif.Dial(memif.ClientConfig{Socket: sock, Name: "tc", Regions: []*memif.Region{reg},
		Rings: []memif.RingSpec{{Kind: memif.C2S, Log2: tcLog2}, {Kind: memif.S2C, Offset: uint32(memif.RingBytes(tcLog2)), Log2: tcLog2}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, reg
}

func waitUp(t testing.TB, p *pm.Port) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !p.Info().LinkUp {
		if time.Now().After(deadline) {
			t.Fatalf("never connected: %+v", p.Stats().Extra)
		}
		time.Sleep(time.Millisecond)
	}
}

func frames(t testing.TB, pool packet.Pool, first, n, size int) *packet.Burst {
	t.Helper()
	var b packet.Burst
	for i := range n {
		if pool.Alloc(&b, 1) != 1 {
			t.Fatal("pool empty")
		}
		d, _ := b.H[i].P().Append(size)
		d[0], d[1] = byte((first+i)>>8), byte(first+i)
	}
	return &b
}

// TestServerTxSkipsBadDesc: a client that puts one bad descriptor among good
// ones on its S2C ring gets every frame, in the slots around it, and the bad
// slot back empty; tx_bad_desc counts it once.
func TestServerTxSkipsBadDesc(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "m.sock")
	pool := newPool(t, "memif-txbad")
	srv, err := pm.New(pm.Options{Name: "srv", Server: true, Socket: sock, Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	c, reg := testClient(t, sock)
	waitUp(t, srv)
	r := c.S2C[0]
	for s := range 16 {
		*r.D(uint16(s)) = memif.Desc{Offset: tcBufOffset(1, s), Length: tcBuf}
	}
	*r.D(3) = memif.Desc{Offset: 1 << 30, Length: tcBuf}
	r.SetHead(16)
	b := frames(t, pool, 0, 10, 100)
	if n := srv.TxBurst(0, b); n != 10 {
		t.Fatalf("took %d of 10", n)
	}
	if r.Tail() != 11 {
		t.Fatalf("tail %d, want 11: %+v", r.Tail(), srv.Stats())
	}
	next := 0
	for s := range 11 {
		d := r.Load(uint16(s))
		if s == 3 {
			if d.Length != 0 {
				t.Errorf("the bad slot came back with %d bytes", d.Length)
			}
			continue
		}
		buf := reg.Mem[tcBufOffset(1, s):]
		if d.Length != 100 || int(buf[0])<<8|int(buf[1]) != next {
			t.Fatalf("slot %d: %d bytes, frame %d, want frame %d", s, d.Length, int(buf[0])<<8|int(buf[1]), next)
		}
		next++
	}
	if s := srv.Stats(); s.Extra["tx_bad_desc"] != 1 || s.TxPackets != 10 {
		t.Errorf("stats %+v", s)
	}
}

// TestEndlessChain: a chain of descriptors that never ends (every one flagged
// next, the whole ring) is consumed once and counted as one drop, not read
// again at every poll; the frame after it arrives.
func TestEndlessChain(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "m.sock")
	pool := newPool(t, "memif-chain")
	srv, err := pm.New(pm.Options{Name: "srv", Server: true, Socket: sock, Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	c, _ := testClient(t, sock)
	waitUp(t, srv)
	r := c.C2S[0]
	for s := range 16 {
		*r.D(uint16(s)) = memif.Desc{Flags: memif.DescFlagNext, Offset: tcBufOffset(0, s), Length: 64}
	}
	r.SetHead(16)
	var b packet.Burst
	for range 100 {
		srv.RxBurst(0, &b)
	}
	if b.N != 0 || r.Tail() != 16 {
		t.Fatalf("%d frames, tail %d: the chain was not consumed", b.N, r.Tail())
	}
	if s := srv.Stats(); s.RxDropped != 1 || s.Extra["rx_bad_desc"] != 1 {
		t.Errorf("stats %+v: want one drop", s)
	}
	*r.D(16) = memif.Desc{Offset: tcBufOffset(0, 0), Length: 64}
	r.SetHead(17)
	srv.RxBurst(0, &b)
	if b.N != 1 || r.Tail() != 17 {
		t.Errorf("%d frames after the chain, tail %d", b.N, r.Tail())
	}
	packet.Free(&b)
}

// TestStaleWriterAfterReconnect: a server whose lcore goes on writing into
// the rings of a connection that ended (DPDK does not stop its lcores before
// it unmaps) must not reach the next connection's rings: a client makes new
// memory for each connection, or the stale tail would deliver old buffers as
// frames.
func TestStaleWriterAfterReconnect(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "m.sock")
	ln, err := memif.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	pool := newPool(t, "memif-stale")
	cli, err := pm.New(pm.Options{Name: "cli", Socket: sock, Pool: pool, RingSize: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	cfg := memif.ServerConfig{MaxC2S: 1, MaxS2C: 1}
	c1, err := ln.Accept(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The first connection's memory, as the stale lcore still sees it.
	size := len(c1.Regions[0].Mem)
	old, err := unix.Mmap(c1.Regions[0].FD, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(old)
	waitUp(t, cli)
	c1.Close()
	c2, err := ln.Accept(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	for cli.Stats().Extra["connects"] != 2 {
		time.Sleep(time.Millisecond)
	}
	// The rx queue's S2C ring follows the tx queue's C2S ring.
	stale := memif.ViewRing(old[memif.RingBytes(6):], 6)
	stale.SetTail(5)
	var b packet.Burst
	for range 20 {
		cli.RxBurst(0, &b)
	}
	if b.N != 0 {
		t.Errorf("%d frames from the last connection's ring", b.N)
	}
	packet.Free(&b)
}

// TestRegionPast4GiB: a client region whose buffers would lie past 4 GiB,
// where memif's 32-bit offsets cannot reach, is a config error.
func TestRegionPast4GiB(t *testing.T) {
	pool := newPool(t, "memif-4g")
	_, err := pm.New(pm.Options{Name: "big", Socket: "@lrtest-4g", Pool: pool, RingSize: 1 << 14, BufferSize: 65535, RxQueues: 4, TxQueues: 4})
	if err == nil || !strings.Contains(err.Error(), "4 GiB") {
		t.Fatalf("err %v", err)
	}
	_, err = ports.Open("memif", &ports.Setup{Name: "big", Config: porttest.Config("ring_size = 16384\nbuffer_size = 65535\n"),
		Pool: pool, RxQueues: 3, TxQueues: 2, DryRun: true})
	if err == nil || !strings.Contains(err.Error(), "4 GiB") {
		t.Fatalf("err %v", err)
	}
	// Just under: every offset fits.
	p, err := pm.New(pm.Options{Name: "fits", Socket: "@lrtest-4g-fits", Pool: pool, RingSize: 1 << 14, BufferSize: 65535, RxQueues: 2, TxQueues: 1})
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
}

// TestSilentClient: a client that connects and says nothing does not keep a
// good one out: handshakes run side by side. The silent one still holds its
// connection (the handshake timeout is a minute here) when the good one is up.
func TestSilentClient(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "m.sock")
	pool := newPool(t, "memif-silent")
	srv, err := pm.New(pm.Options{Name: "srv", Server: true, Socket: sock, Pool: pool, HandshakeTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	silent, err := net.DialUnix("unixpacket", nil, memif.Addr(sock))
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	// Its hello: the server has taken it and waits for its init.
	var msg [memif.MsgSize]byte
	if _, err := silent.Read(msg[:]); err != nil {
		t.Fatal(err)
	}
	cli, err := pm.New(pm.Options{Name: "cli", Socket: sock, Pool: pool, RingSize: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	waitUp(t, srv)
	waitUp(t, cli)
	relay(t, cli, srv, pool, 100)
	_ = silent.SetReadDeadline(time.Now().Add(time.Millisecond))
	if _, err := silent.Read(msg[:]); err == nil || !os.IsTimeout(err) {
		t.Errorf("the silent client's connection: %v, want it still open", err)
	}
}

// TestHandshakeLogLimited: a peer that fails its handshake in a loop gets a
// few log lines, not one each, and each names the port once.
func TestHandshakeLogLimited(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "m.sock")
	pool := newPool(t, "memif-loglimit")
	var logged syncBuf
	log := slogTo(&logged).With("port", "srv") // as the engine names it
	srv, err := pm.New(pm.Options{Name: "srv", Server: true, Socket: sock, Pool: pool, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	const n = 50
	for range n {
		uc, err := net.DialUnix("unixpacket", nil, memif.Addr(sock))
		if err != nil {
			t.Fatal(err)
		}
		var msg [memif.MsgSize]byte
		_, _ = uc.Read(msg[:])
		_, _ = uc.Write(msg[:10]) // not a message
		_, _ = uc.Read(msg[:])    // the server's disconnect, or its close
		uc.Close()
	}
	deadline := time.Now().Add(30 * time.Second)
	for srv.Stats().Extra["handshake_failed"] != n {
		if time.Now().After(deadline) {
			t.Fatalf("stats %+v", srv.Stats().Extra)
		}
		time.Sleep(time.Millisecond)
	}
	lines := strings.Count(logged.String(), "failed")
	if lines == 0 || lines > 3 {
		t.Errorf("%d log lines for %d failed handshakes:\n%s", lines, n, logged.String())
	}
	for l := range strings.Lines(logged.String()) {
		if strings.Count(l, "port=") != 1 {
			t.Errorf("line %q", l)
		}
	}
}

// TestAllowKeys: allow_uids and allow_gids go through the driver's decode and
// check.
func TestAllowKeys(t *testing.T) {
	pool := newPool(t, "memif-allow")
	for cfg, want := range map[string]string{
		"allow_uids = [1000, 1001]\nallow_gids = [27]": "",
		"allow_uids = [-1]":                            "allow_uids",
		"allow_gids = [4294967295]":                    "allow_gids",
		"allow_uids = \"vpp\"":                         "allow_uids",
	} {
		_, err := ports.Open("memif", &ports.Setup{Name: "m", Config: porttest.Config(cfg), Pool: pool, RxQueues: 1, TxQueues: 1, DryRun: true})
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("%q: %v", cfg, err)
		}
	}
}

// peerEnv runs the test binary as a memif peer (TestMain): "dial SOCKET" or
// "serve SOCKET".
const peerEnv = "LINERATE_MEMIF_TEST_PEER"

func TestMain(m *testing.M) {
	if v := os.Getenv(peerEnv); v != "" {
		os.Exit(runPeer(v))
	}
	os.Exit(m.Run())
}

func runPeer(v string) int {
	mode, sock, _ := strings.Cut(v, " ")
	switch mode {
	case "dial":
		reg, err := memif.NewRegion("peer", 2*memif.RingBytes(4))
		if err != nil {
			fmt.Println("error:", err)
			return 1
		}
		c, err := memif.Dial(memif.ClientConfig{Socket: sock, Name: "peer", Regions: []*memif.Region{reg},
			Rings: []memif.RingSpec{{Kind: memif.C2S, Log2: 4}, {Kind: memif.S2C, Offset: uint32(memif.RingBytes(4)), Log2: 4}}})
		if err != nil {
			fmt.Println("refused:", err)
			return 0
		}
		c.Close()
		fmt.Println("connected")
	case "serve":
		ln, err := memif.Listen(sock)
		if err != nil {
			fmt.Println("error:", err)
			return 1
		}
		fmt.Println("listening")
		for {
			c, err := ln.Accept(memif.ServerConfig{MaxC2S: 1, MaxS2C: 1})
			if err != nil {
				fmt.Println("failed:", err)
				continue
			}
			fmt.Println("connected")
			<-c.Done()
			c.Close()
		}
	}
	return 0
}

// asNobody starts the test binary as uid and gid 65534, as a peer.
func asNobody(t *testing.T, mode, sock string) (*exec.Cmd, *bufio.Reader) {
	t.Helper()
	testenv.RequireRoot(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// A copy nobody may run: the build's own directory is private.
	dir, err := os.MkdirTemp("", "lrmemif")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin := filepath.Join(dir, "peer.test")
	in, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.Copy(out, in)
	in.Close()
	if cerr := out.Close(); err != nil || cerr != nil {
		t.Fatal(err, cerr)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Dir = "/"
	cmd.Env = append(os.Environ(), peerEnv+"="+mode+" "+sock)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd, bufio.NewReader(stdout)
}

func abstractSock() string { return fmt.Sprintf("@lrtest-memif-%d", rand.Uint32()) }

// TestRefuseOtherUser: on an abstract socket, which has no permissions, a
// client running as another user (65534) is refused by its credentials and
// counted; root is taken.
func TestRefuseOtherUser(t *testing.T) {
	sock := abstractSock()
	pool := newPool(t, "memif-uid")
	srv, err := pm.New(pm.Options{Name: "srv", Server: true, Socket: sock, Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	_, out := asNobody(t, "dial", sock)
	line, err := out.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "refused:") || !strings.Contains(line, "Permission denied") {
		t.Fatalf("uid 65534: %q %v", line, err)
	}
	// The peer reads the refusal before the server's handshake goroutine
	// has counted it: wait for the count, then hold it to exactly one.
	deadline := time.Now().Add(30 * time.Second)
	for srv.Stats().Extra["refused"] == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if s := srv.Stats(); s.Extra["refused"] != 1 {
		t.Errorf("stats %+v", s.Extra)
	}
	cli, err := pm.New(pm.Options{Name: "cli", Socket: sock, Pool: pool, RingSize: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	relay(t, cli, srv, pool, 10)
}

// TestRefuseOtherUserServer: as a client, linerate refuses a server running as
// another user, before it shares any memory.
func TestRefuseOtherUserServer(t *testing.T) {
	sock := abstractSock()
	_, out := asNobody(t, "serve", sock)
	if line, err := out.ReadString('\n'); err != nil || line != "listening\n" {
		t.Fatalf("peer: %q %v", line, err)
	}
	pool := newPool(t, "memif-uid-srv")
	cli, err := pm.New(pm.Options{Name: "cli", Socket: sock, Pool: pool, RingSize: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	deadline := time.Now().Add(30 * time.Second)
	for cli.Stats().Extra["refused"] == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("stats %+v", cli.Stats().Extra)
		}
		time.Sleep(time.Millisecond)
	}
	if cli.Info().LinkUp {
		t.Error("connected to another user's server")
	}
	// The peer never got as far as a connection.
	cli.Close()
	if line, _ := out.ReadString('\n'); strings.HasPrefix(line, "connected") {
		t.Errorf("peer: %q", line)
	}
}

// syncBuf is a log destination the port's goroutines and the test share.
type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func slogTo(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }
