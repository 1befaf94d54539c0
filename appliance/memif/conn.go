package memif

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// HandshakeTimeout bounds a connection's handshake.
const HandshakeTimeout = 5 * time.Second

// maxMapped bounds the bytes of all the regions of one connection the server
// maps: a client cannot take the address space.
const maxMapped = 1 << 40

// ErrNotAllowed is the error of a peer whose credentials Allow refuses.
var ErrNotAllowed = errors.New("memif: peer not allowed")

// Allow is who may be the peer, by the credentials the kernel gives for the
// socket (SO_PEERCRED: the peer's uid and gid when it connected, or listened).
// A peer is allowed when its uid or its gid is listed.
type Allow struct {
	UIDs, GIDs []uint32
}

// Check refuses a peer whose credentials are not allowed.
func (a *Allow) Check(cr *unix.Ucred) error {
	if a == nil {
		return nil
	}
	if slices.Contains(a.UIDs, cr.Uid) || slices.Contains(a.GIDs, cr.Gid) {
		return nil
	}
	return fmt.Errorf("%w: pid %d uid %d gid %d", ErrNotAllowed, cr.Pid, cr.Uid, cr.Gid)
}

// PeerCred is the peer's credentials (SO_PEERCRED).
func PeerCred(uc *net.UnixConn) (*unix.Ucred, error) {
	rc, err := uc.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cr *unix.Ucred
	var gerr error
	if err := rc.Control(func(fd uintptr) { cr, gerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) }); err != nil {
		return nil, err
	}
	return cr, gerr
}

// checkPeer applies allow to uc's peer.
func checkPeer(uc *net.UnixConn, allow *Allow) error {
	if allow == nil {
		return nil
	}
	cr, err := PeerCred(uc)
	if err != nil {
		return fmt.Errorf("%w: no credentials: %v", ErrNotAllowed, err)
	}
	return allow.Check(cr)
}

// Addr is a control socket's address: a path, or "@name" for an abstract
// socket, whose name is the bytes after the @ (no NUL padding, as DPDK 22.11
// binds it): "@/run/memif.sock" is DPDK's default socket.
func Addr(socket string) *net.UnixAddr { return &net.UnixAddr{Name: socket, Net: "unixpacket"} }

// RingSpec is where the client lays out one ring.
type RingSpec struct {
	Kind   int // C2S or S2C
	Index  uint16
	Region uint16
	Offset uint32
	Log2   uint8
}

// ClientConfig is the client's side of a connection.
type ClientConfig struct {
	Socket string
	// Allow, when set, is who the server may be; another is refused
	// (ErrNotAllowed) before anything is shared.
	Allow   *Allow
	ID      uint32
	Secret  string
	Name    string     // our name, sent in init and connect
	Regions []*Region  // the memory we share, region i at index i
	Rings   []RingSpec // C2S rings first, then S2C, each by index from 0
}

// ServerConfig is the server's side of a connection.
type ServerConfig struct {
	ID uint32
	// IDs, when not zero, takes any interface id below it instead of ID
	// alone: one socket for several interfaces (Conn.ID says which).
	IDs    uint32
	Secret string
	Name   string
	// MaxC2S and MaxS2C are how many rings of each kind the server takes.
	MaxC2S, MaxS2C int
	// PollC2S masks interrupts on the C2S rings: the server polls them.
	PollC2S bool
	// Allow, when set, is who the client may be; another is refused
	// (ErrNotAllowed) before its first message is read.
	Allow *Allow
	// Timeout bounds the handshake; HandshakeTimeout when zero.
	Timeout time.Duration
	// Connect, when set, is asked when the client's connect arrives, its
	// rings checked: an error refuses the client with its text (a port that
	// has a client already).
	Connect func() error
}

// Conn is an established connection: the regions and rings both sides see.
type Conn struct {
	uc      *net.UnixConn
	Regions []*Region
	C2S     []*Ring
	S2C     []*Ring
	// Peer is the peer's name from its hello or init; ID the interface id.
	Peer      string
	ID        uint32
	ownMemory bool // the server mapped the regions: Close unmaps them

	mu     sync.Mutex
	done   chan struct{}
	reason string
}

// Done is closed when the peer disconnects or the control socket fails.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Reason is why the connection ended, once Done is closed.
func (c *Conn) Reason() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reason
}

func send(uc *net.UnixConn, m *Msg, fd int) error {
	var b [MsgSize]byte
	m.Encode(&b)
	var oob []byte
	if fd >= 0 {
		oob = unix.UnixRights(fd)
	}
	n, _, err := uc.WriteMsgUnix(b[:], oob, nil)
	if err == nil && n != MsgSize {
		err = fmt.Errorf("memif: short write of %s", m.Type)
	}
	return err
}

// recv reads one message and the descriptor it carries, or -1.
func recv(uc *net.UnixConn) (Msg, int, error) {
	var b [MsgSize + 1]byte
	oob := make([]byte, unix.CmsgSpace(4*4))
	n, oobn, flags, _, err := uc.ReadMsgUnix(b[:], oob)
	if err != nil {
		return Msg{}, -1, err
	}
	fd := -1
	if oobn > 0 {
		cms, perr := unix.ParseSocketControlMessage(oob[:oobn])
		if perr == nil {
			for _, cm := range cms {
				fds, rerr := unix.ParseUnixRights(&cm)
				if rerr != nil {
					continue
				}
				for _, f := range fds {
					if fd < 0 {
						fd = f
					} else {
						unix.Close(f) // one descriptor per message; more is the peer's mistake
					}
				}
			}
		}
	}
	if n == 0 {
		closeFD(fd)
		return Msg{}, -1, errors.New("memif: peer closed the control socket")
	}
	if flags&unix.MSG_TRUNC != 0 || n != MsgSize {
		closeFD(fd)
		return Msg{}, -1, fmt.Errorf("%w: %d bytes", ErrMsg, n)
	}
	m, err := Decode(b[:n])
	if err != nil {
		closeFD(fd)
		return Msg{}, -1, err
	}
	return m, fd, nil
}

func closeFD(fd int) {
	if fd >= 0 {
		unix.Close(fd)
	}
}

// expect reads a message of type t, which carries no descriptor: one the peer
// attached anyway is closed. A disconnect is an error with its reason.
func expect(uc *net.UnixConn, t MsgType) (Msg, error) {
	m, fd, err := recv(uc)
	closeFD(fd)
	if err != nil {
		return m, err
	}
	if m.Type == MsgDisconnect {
		return m, fmt.Errorf("memif: peer refused: %s", m.Reason)
	}
	if m.Type != t {
		return m, fmt.Errorf("memif: got %s, expected %s", m.Type, t)
	}
	return m, nil
}

func refuse(uc *net.UnixConn, reason string) error {
	_ = send(uc, &Msg{Type: MsgDisconnect, Reason: reason}, -1)
	return errors.New("memif: " + reason)
}

// Dial connects to a memif server as its client and shares cfg's regions and
// rings. Each ring gets a fresh header and an eventfd.
func Dial(cfg ClientConfig) (*Conn, error) {
	uc, err := net.DialUnix("unixpacket", nil, Addr(cfg.Socket))
	if err != nil {
		return nil, err
	}
	c, err := clientHandshake(uc, cfg)
	if err != nil {
		uc.Close()
		return nil, fmt.Errorf("memif %s: %w", cfg.Socket, err)
	}
	return c, nil
}

func clientHandshake(uc *net.UnixConn, cfg ClientConfig) (*Conn, error) {
	_ = uc.SetDeadline(time.Now().Add(HandshakeTimeout))
	if err := checkPeer(uc, cfg.Allow); err != nil {
		_ = refuse(uc, "Permission denied")
		return nil, err
	}
	h, err := expect(uc, MsgHello)
	if err != nil {
		return nil, err
	}
	if h.MinVersion > Version || h.MaxVersion < Version {
		return nil, refuse(uc, "Incompatible memif version")
	}
	c := &Conn{uc: uc, Regions: cfg.Regions, Peer: h.Name, done: make(chan struct{})}
	nc, ns := 0, 0
	for _, r := range cfg.Rings {
		if r.Kind == C2S {
			nc++
		} else {
			ns++
		}
		if int(r.Region) >= len(cfg.Regions) || int(r.Offset)+RingBytes(r.Log2) > len(cfg.Regions[r.Region].Mem) {
			return nil, fmt.Errorf("ring %d outside its region", r.Index)
		}
	}
	switch {
	case len(cfg.Regions) > int(h.MaxRegion)+1:
		return nil, refuse(uc, fmt.Sprintf("server takes %d regions, not %d", h.MaxRegion+1, len(cfg.Regions)))
	case nc > int(h.MaxC2S)+1 || ns > int(h.MaxS2C)+1:
		return nil, refuse(uc, "server takes fewer rings")
	}
	for _, r := range cfg.Rings {
		if r.Log2 > h.MaxLog2Ring {
			return nil, refuse(uc, fmt.Sprintf("server takes rings of up to 2^%d slots", h.MaxLog2Ring))
		}
	}
	if err := send(uc, &Msg{Type: MsgInit, Version: Version, ID: cfg.ID, Mode: modeEthernet, Secret: cfg.Secret, Name: cfg.Name}, -1); err != nil {
		return nil, err
	}
	if _, err := expect(uc, MsgAck); err != nil {
		return nil, err
	}
	for i, r := range cfg.Regions {
		if err := send(uc, &Msg{Type: MsgAddRegion, Index: uint16(i), Size: uint64(len(r.Mem))}, r.FD); err != nil {
			return nil, err
		}
		if _, err := expect(uc, MsgAck); err != nil {
			return nil, err
		}
	}
	ok := false
	defer func() {
		if !ok {
			c.closeIntr()
		}
	}()
	for _, s := range cfg.Rings {
		efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
		if err != nil {
			return nil, err
		}
		r := newRing(cfg.Regions[s.Region].Mem, int(s.Offset), s.Log2, efd)
		r.init()
		if s.Kind == C2S {
			c.C2S = append(c.C2S, r)
		} else {
			c.S2C = append(c.S2C, r)
		}
		flags := uint16(0)
		if s.Kind == C2S {
			flags = addRingFlagC2S
		}
		m := Msg{Type: MsgAddRing, Flags: flags, Index: s.Index, Region: s.Region, Offset: s.Offset, Log2Ring: s.Log2}
		if err := send(uc, &m, efd); err != nil {
			return nil, err
		}
		if _, err := expect(uc, MsgAck); err != nil {
			return nil, err
		}
	}
	if err := send(uc, &Msg{Type: MsgConnect, Name: cfg.Name}, -1); err != nil {
		return nil, err
	}
	if _, err := expect(uc, MsgConnected); err != nil {
		return nil, err
	}
	ok = true
	_ = uc.SetDeadline(time.Time{})
	go c.watch()
	return c, nil
}

// Listener is a server's control socket.
type Listener struct {
	ul     *net.UnixListener
	path   string // a filesystem socket to remove at Close
	closed atomic.Bool
}

// Closed reports whether Close was called: why Accept failed.
func (l *Listener) Closed() bool { return l.closed.Load() }

// Listen opens a server's control socket. A filesystem socket's directory is
// made (0750) if missing, and the socket is left at mode 0660: its file's
// permissions are the first access control, as the control API's. A stale
// socket left by a process that died is replaced. An abstract socket ("@name")
// has no permissions: anyone on the host may connect, and only the
// credentials check (ServerConfig.Allow) and the secret stand.
func Listen(socket string) (*Listener, error) {
	a := Addr(socket)
	path := ""
	if !strings.HasPrefix(socket, "@") {
		path = socket
		if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
			return nil, fmt.Errorf("memif: socket directory: %w", err)
		}
		if c, err := net.DialUnix("unixpacket", nil, a); err == nil {
			c.Close()
			return nil, fmt.Errorf("memif: %s: a server is listening there already", socket)
		}
		if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("memif: %s exists and is not a socket", path)
		}
		_ = unix.Unlink(socket)
	}
	ul, err := net.ListenUnix("unixpacket", a)
	if err != nil {
		return nil, err
	}
	ul.SetUnlinkOnClose(false)
	if path != "" {
		if err := os.Chmod(path, 0o660); err != nil {
			ul.Close()
			_ = unix.Unlink(path)
			return nil, fmt.Errorf("memif: chmod socket: %w", err)
		}
	}
	return &Listener{ul: ul, path: path}, nil
}

// Close stops listening; a blocked Accept returns.
func (l *Listener) Close() error {
	l.closed.Store(true)
	err := l.ul.Close()
	if l.path != "" {
		_ = unix.Unlink(l.path)
	}
	return err
}

// Accept waits for a client and runs the server's handshake with it: it maps
// the client's regions and views its rings, after checking that every ring
// lies inside its region. One client at a time: a server that must not wait
// on a slow client takes AcceptPending and runs the handshakes itself.
func (l *Listener) Accept(cfg ServerConfig) (*Conn, error) {
	p, err := l.AcceptPending()
	if err != nil {
		return nil, err
	}
	return p.Handshake(cfg)
}

// Pending is a client's control connection, accepted, before its handshake.
type Pending struct {
	uc *net.UnixConn
}

// AcceptPending waits for a client's connection and returns it before any
// message: the caller runs its handshake (Handshake), or refuses it.
func (l *Listener) AcceptPending() (*Pending, error) {
	uc, err := l.ul.AcceptUnix()
	if err != nil {
		return nil, err
	}
	return &Pending{uc: uc}, nil
}

// Close closes the connection: a Handshake running on it fails.
func (p *Pending) Close() error { return p.uc.Close() }

// Refuse tells the client why, and closes its connection.
func (p *Pending) Refuse(reason string) {
	_ = p.uc.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	_ = refuse(p.uc, reason)
	p.uc.Close()
}

// Handshake checks the client's credentials and runs the server's handshake.
// On an error the connection is closed and nothing of it stays open.
func (p *Pending) Handshake(cfg ServerConfig) (*Conn, error) {
	if err := checkPeer(p.uc, cfg.Allow); err != nil {
		p.Refuse("Permission denied")
		return nil, err
	}
	c, err := serverHandshake(p.uc, cfg)
	if err != nil {
		p.uc.Close()
		return nil, err
	}
	return c, nil
}

type ringMsg struct {
	m  Msg
	fd int
}

func serverHandshake(uc *net.UnixConn, cfg ServerConfig) (*Conn, error) {
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = HandshakeTimeout
	}
	_ = uc.SetDeadline(time.Now().Add(timeout))
	hello := Msg{Type: MsgHello, Name: cfg.Name, MinVersion: Version, MaxVersion: Version,
		MaxRegion: MaxRegions - 1, MaxC2S: uint16(max(cfg.MaxC2S, 1) - 1), MaxS2C: uint16(max(cfg.MaxS2C, 1) - 1),
		MaxLog2Ring: MaxLog2Ring}
	if err := send(uc, &hello, -1); err != nil {
		return nil, err
	}
	in, err := expect(uc, MsgInit)
	if err != nil {
		return nil, err
	}
	switch {
	case in.Version != Version:
		return nil, refuse(uc, "Incompatible memif version")
	case cfg.IDs == 0 && in.ID != cfg.ID, cfg.IDs != 0 && in.ID >= cfg.IDs:
		return nil, refuse(uc, "ID not found")
	case in.Mode != modeEthernet:
		return nil, refuse(uc, "Only ethernet mode supported")
	case cfg.Secret != "" && in.Secret != cfg.Secret:
		return nil, refuse(uc, "Incorrect secret")
	}
	if err := send(uc, &Msg{Type: MsgAck}, -1); err != nil {
		return nil, err
	}
	c := &Conn{uc: uc, Peer: in.Name, ID: in.ID, ownMemory: true, done: make(chan struct{})}
	var rings []ringMsg
	fail := func(err error) (*Conn, error) {
		for _, r := range rings {
			closeFD(r.fd)
		}
		for _, r := range c.Regions {
			r.Close()
		}
		return nil, err
	}
	for {
		m, fd, err := recv(uc)
		if err != nil {
			return fail(err)
		}
		switch m.Type {
		case MsgAddRegion:
			if err := c.addRegion(m, fd); err != nil {
				closeFD(fd)
				return fail(refuse(uc, err.Error()))
			}
		case MsgAddRing:
			max := cfg.MaxS2C
			if m.Flags&addRingFlagC2S != 0 {
				max = cfg.MaxC2S
			}
			dup := slices.ContainsFunc(rings, func(r ringMsg) bool {
				return r.m.Index == m.Index && r.m.Flags&addRingFlagC2S == m.Flags&addRingFlagC2S
			})
			if fd < 0 || dup || int(m.Index) >= max || m.Log2Ring > MaxLog2Ring || m.PrivHdrSize != 0 {
				closeFD(fd)
				return fail(refuse(uc, "Invalid ring"))
			}
			if err := checkEventfd(fd); err != nil {
				closeFD(fd)
				return fail(refuse(uc, err.Error()))
			}
			rings = append(rings, ringMsg{m, fd})
		case MsgConnect:
			closeFD(fd)
			if err := c.viewRings(rings, cfg.PollC2S); err != nil {
				return fail(refuse(uc, err.Error()))
			}
			if cfg.Connect != nil {
				if err := cfg.Connect(); err != nil {
					c.C2S, c.S2C = nil, nil // the rings' descriptors are closed with rings
					return fail(refuse(uc, err.Error()))
				}
			}
			rings = nil // the rings own the descriptors now
			if err := send(uc, &Msg{Type: MsgConnected, Name: cfg.Name}, -1); err != nil {
				c.Close()
				return nil, err
			}
			_ = uc.SetDeadline(time.Time{})
			go c.watch()
			return c, nil
		case MsgDisconnect:
			closeFD(fd)
			return fail(fmt.Errorf("memif: peer disconnected: %s", m.Reason))
		default:
			closeFD(fd)
			return fail(refuse(uc, "Unexpected message "+m.Type.String()))
		}
		if err := send(uc, &Msg{Type: MsgAck}, -1); err != nil {
			return fail(err)
		}
	}
}

// addRegion maps a client's region. It must be a memfd sealed against
// shrinking, or the client could truncate it under us and fault our accesses.
// The seal is checked before the size: a client that keeps the descriptor can
// truncate it until it seals it, and the seal cannot be taken back, so only a
// size read after the seal is final.
func (c *Conn) addRegion(m Msg, fd int) error {
	mapped := uint64(0)
	for _, r := range c.Regions {
		mapped += uint64(len(r.Mem))
	}
	switch {
	case fd < 0:
		return errors.New("missing region fd")
	case int(m.Index) != len(c.Regions) || len(c.Regions) >= MaxRegions:
		return errors.New("invalid region index")
	case m.Size == 0 || m.Size > maxMapped || mapped+m.Size > maxMapped:
		return errors.New("invalid region size")
	}
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil || seals&unix.F_SEAL_SHRINK == 0 {
		return errors.New("region not sealed against shrinking")
	}
	if testHookRegion != nil {
		testHookRegion()
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || uint64(st.Size) < m.Size {
		return errors.New("region smaller than its size")
	}
	mem, err := unix.Mmap(fd, 0, int(m.Size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("mmap region: %v", err)
	}
	c.Regions = append(c.Regions, &Region{Mem: mem, FD: fd})
	return nil
}

// viewRings checks the rings and resets their counters. Every access to the
// client's memory here is fault-safe: should a region fault after all, the
// handshake fails, not the process.
func (c *Conn) viewRings(rings []ringMsg, pollC2S bool) error {
	var err error
	if ferr := faultSafe(func() { err = c.viewRingsUnsafe(rings, pollC2S) }); ferr != nil {
		return errors.New("region faults")
	}
	return err
}

func (c *Conn) viewRingsUnsafe(rings []ringMsg, pollC2S bool) error {
	var c2s, s2c []*Ring
	for _, rm := range rings {
		m := rm.m
		if int(m.Region) >= len(c.Regions) || int(m.Offset)+RingBytes(m.Log2Ring) > len(c.Regions[m.Region].Mem) {
			return errors.New("ring outside its region")
		}
		r := newRing(c.Regions[m.Region].Mem, int(m.Offset), m.Log2Ring, rm.fd)
		if r.Cookie() != Cookie {
			return errors.New("wrong ring cookie")
		}
		if m.Flags&addRingFlagC2S != 0 {
			c2s = grow(c2s, int(m.Index))
			c2s[m.Index] = r
		} else {
			s2c = grow(s2c, int(m.Index))
			s2c[m.Index] = r
		}
	}
	// DPDK's client always brings rings of both kinds; a link without one
	// carries nothing one way.
	if len(c2s) == 0 || len(s2c) == 0 {
		return errors.New("no rings of a kind")
	}
	for _, set := range [][]*Ring{c2s, s2c} {
		for i, r := range set {
			if r == nil {
				return fmt.Errorf("ring %d missing", i)
			}
		}
	}
	// As DPDK's server does at connect: both counters start at 0.
	for _, r := range c2s {
		r.SetTail(0)
		r.SetHead(0)
		if pollC2S {
			r.SetFlags(RingFlagMaskInt)
		}
	}
	for _, r := range s2c {
		r.SetTail(0)
		r.SetHead(0)
	}
	c.C2S, c.S2C = c2s, s2c
	return nil
}

func grow(rs []*Ring, i int) []*Ring {
	for len(rs) <= i {
		rs = append(rs, nil)
	}
	return rs
}

// watch waits for the end of the connection: a disconnect, or the socket
// failing or closing.
func (c *Conn) watch() {
	reason := ""
	for {
		m, fd, err := recv(c.uc)
		closeFD(fd)
		if err != nil {
			reason = err.Error()
			break
		}
		if m.Type == MsgDisconnect {
			reason = "peer disconnected: " + m.Reason
			break
		}
	}
	c.mu.Lock()
	if c.reason == "" {
		c.reason = reason
	}
	c.mu.Unlock()
	close(c.done)
}

func (c *Conn) closeIntr() {
	for _, rs := range [][]*Ring{c.C2S, c.S2C} {
		for _, r := range rs {
			if r != nil && r.Intr >= 0 {
				unix.Close(r.Intr)
				r.Intr = -1
			}
		}
	}
}

// Close sends a disconnect, closes the socket and the eventfds, and unmaps
// the regions a server mapped. Nobody may touch the rings during or after
// Close.
func (c *Conn) Close() error {
	c.mu.Lock()
	if c.reason == "" {
		c.reason = "closed"
	}
	c.mu.Unlock()
	_ = c.uc.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	_ = send(c.uc, &Msg{Type: MsgDisconnect, Reason: "closed"}, -1)
	err := c.uc.Close()
	<-c.done
	c.closeIntr()
	if c.ownMemory {
		for _, r := range c.Regions {
			r.Close()
		}
	}
	c.Regions, c.C2S, c.S2C = nil, nil, nil
	return err
}

// testHookRegion runs between addRegion's two checks of a region.
var testHookRegion func()

// checkEventfd refuses a ring's interrupt descriptor that is not an eventfd
// (a pipe, a socket, a file …) and makes it non-blocking: a peer that fills a
// pipe, or an eventfd's counter, must not block a kick.
func checkEventfd(fd int) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != 0 {
		return errors.New("interrupt fd not an eventfd")
	}
	if l, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd)); err == nil && l != "anon_inode:[eventfd]" {
		return errors.New("interrupt fd not an eventfd")
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		return errors.New("interrupt fd not an eventfd")
	}
	return nil
}

// faultSafe runs fn, which reads or writes a peer's memory, and turns a fault
// there (SIGBUS of a truncated file) into an error instead of the process's
// death.
func faultSafe(fn func()) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("fault: %v", r)
		}
	}()
	fn()
	return nil
}
