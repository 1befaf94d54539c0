package external

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/linerate/linerate/appliance/clock"
	"github.com/linerate/linerate/appliance/memif"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/plugins"
	"github.com/linerate/linerate/plugins/external/api"
)

// Plugin states, as Status reports them.
const (
	StateStarting = "starting"
	StateUp       = "up"
	StateDown     = "down" // lost, waiting to restart
	StateStopped  = "stopped"
)

// supervisor runs one plugin process for the instances of one external stage:
// it launches it through go-plugin, connects each instance's memif link,
// watches it, and when it dies or hangs kills it, reaps it, tells the
// instances (which reclaim what they lent) and starts it again with backoff.
type supervisor struct {
	cfg       stageConfig
	name      string
	where     string
	toml      string
	ports     []*api.Port
	instances int
	log       *slog.Logger

	mu     sync.Mutex
	client *plugin.Client
	rpc    api.StagePluginClient
	conn   *grpc.ClientConn // the broker's connection to the plugin's own services; nil when it has none
	// brokered: conn is the broker's, ours to close (an earlier release's
	// plugin serves its services on go-plugin's own connection).
	brokered bool
	pid      int
	dir      string      // the plugin's sockets' directory, 0700
	cg       *cgroupLeaf // the generation's cgroup; nil with containment = "none"
	// lingering: a killed generation whose cgroup did not empty in time;
	// kill tries it again, and nothing starts or is reclaimed until it is.
	lingering *proc
	err       string // Status.Err
	peerUID   int    // the plugin's uid: its sockets' peer must have it
	caps      *api.CapabilitiesReply
	state     atomic.Value // string
	// What the plugin's stage asked to make packets with (Setup.Pool): spare
	// buffers per instance, and their data room; 0 when it makes none.
	emitBuffers, emitDataRoom int
	// emitRings: the plugin speaks an extension with spare and emit rings
	// (version 2 on); its links have them.
	emitRings bool
	stats     atomic.Pointer[map[string]uint64]
	// reasons maps the running generation's reason numbers to linerate's
	// (reasons.go); named, what its plugins added, over every generation.
	reasons []packet.Reason
	named   pluginReasons
	// warnedFull: the first full ring was logged.
	warnedFull atomic.Bool

	// gen is the plugin process's generation; dead the generation last lost
	// (killed and reaped). An instance whose link is of a dead generation
	// reclaims what it lent, then takes the next link.
	gen  atomic.Uint64
	dead atomic.Uint64
	// killing: kill is ending the generation, so go-plugin's "plugin
	// process exited" with "signal: killed" is a stop we asked for, not an
	// error (hclogBridge).
	killing atomic.Bool
	next    []atomic.Pointer[link]
	inst    []*instance

	lost, restarts atomic.Uint64
	startOnce      sync.Once
	endOnce        sync.Once
	startErr       error
	stop           chan struct{}
	done           chan struct{}
	refs           atomic.Int32
}

// proc is what kill must end of one generation.
type proc struct {
	client *plugin.Client
	pid    int
	dir    string
	cg     *cgroupLeaf
}

// link is an instance's connection to one generation of the plugin.
type link struct {
	conn     *memif.Conn
	rings    *memif.Region
	regionOf [packet.MaxPools]uint16  // pool id → region index; 0: not shared
	base     [packet.MaxPools]uintptr // pool id → its region's first byte
	gen      uint64
	emits    bool // it has the spare and emit rings (C2S 1, S2C 1)
	// reasons maps the plugin's reason numbers to linerate's reasons.
	reasons []packet.Reason
}

func (l *link) close() {
	l.conn.Close()
	l.rings.Close()
}

func newSupervisor(cfg stageConfig, s *plugins.Setup, tomlText string) (*supervisor, error) {
	sv := &supervisor{cfg: cfg, name: s.Name, where: s.Config.Where(), toml: tomlText, instances: s.NumInstances,
		log: s.Log.With("plugin", filepath.Base(cfg.Plugin)), stop: make(chan struct{}), done: make(chan struct{}),
		next: make([]atomic.Pointer[link], s.NumInstances), inst: make([]*instance, s.NumInstances)}
	sv.state.Store(StateStarting)
	for _, p := range s.Ports.All() {
		sv.ports = append(sv.ports, &api.Port{Id: uint32(p.ID), Name: p.Name, Mtu: uint32(p.MTU), Mac: p.MAC[:]})
	}
	// A first run checks the plugin and its table now, where config errors
	// belong (linerate validate builds stages too); the plugin runs for good
	// only from Start to Stop, so an engine that never starts leaves no
	// process behind.
	if err := sv.launch(); err != nil {
		return nil, err
	}
	if err := sv.kill(); err != nil {
		return nil, err
	}
	register(sv)
	return sv, nil
}

// launch starts a plugin process and configures it: Capabilities, then
// Configure with the stage's table.
func (sv *supervisor) launch() error {
	sv.killing.Store(false)
	var sum []byte
	if sv.cfg.SHA256 != "" {
		var err error
		if sum, err = hexBytes(sv.cfg.SHA256); err != nil {
			return err
		}
	}
	// Checked, hashed and run through one descriptor, at every launch: go-plugin's
	// SecureConfig would hash the path, which is not the file that runs.
	bin, err := openPlugin(sv.cfg.Plugin, sum)
	if err != nil {
		return err
	}
	defer bin.Close() // the child has its own from the fork on
	cmd := exec.Command(pluginExec)
	cmd.Args[0] = sv.cfg.Plugin
	cmd.ExtraFiles = []*os.File{bin} // fd 3: pluginExec; open in the child, so a #! script's interpreter can read it
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	uid, gid, err := sv.pluginUser()
	if err != nil {
		return err
	}
	if uid >= 0 {
		// No supplementary groups (root's would stay otherwise); a non-root
		// linerate may not set them, nor switch to another user at all.
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: os.Geteuid() != 0}
	}
	// The generation's cgroup: the plugin starts in it (clone3's
	// CLONE_INTO_CGROUP), and so does whatever it starts.
	var cg *cgroupLeaf
	if sv.cfg.Containment != "none" {
		if cg, err = newLeaf(sv.name); err != nil {
			return fmt.Errorf("plugin %s: %w", sv.cfg.Plugin, uncontained(err))
		}
		cgfd, err := cg.open()
		if err != nil {
			cg.remove()
			return fmt.Errorf("plugin %s: %w", sv.cfg.Plugin, uncontained(err))
		}
		defer unix.Close(cgfd) // the child has it from the clone on
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, cgfd
	}
	// A directory of the launch's own for the plugin's sockets: memif's,
	// and go-plugin's and its broker's (which a killed plugin cannot remove
	// itself). kill removes it.
	dir, err := socketDir(uid)
	if err != nil {
		if cg != nil {
			cg.remove()
		}
		return fmt.Errorf("plugin %s: its sockets' directory: %w", sv.cfg.Plugin, err)
	}
	// go-plugin's sockets are made group-writable for linerate's group, as
	// the SDK makes memif's: linerate reaches them with no DAC override.
	cmd.Env = append(os.Environ(), plugin.EnvUnixSocketDir+"="+dir, plugin.EnvUnixSocketGroup+"="+strconv.Itoa(os.Getegid()))
	var client *plugin.Client
	var conn *grpc.ClientConn
	brokered := false
	fail := func(err error) error {
		if brokered {
			closeConn(conn)
		}
		// What started, and whatever it started, goes: through kill, which
		// empties the cgroup.
		sv.mu.Lock()
		sv.lingering = &proc{client: client, dir: dir, cg: cg}
		sv.mu.Unlock()
		if kerr := sv.kill(); kerr != nil {
			return fmt.Errorf("plugin %s: %w (and %w)", sv.cfg.Plugin, err, kerr)
		}
		return fmt.Errorf("plugin %s: %w", sv.cfg.Plugin, err)
	}
	peerUID := uid
	if peerUID < 0 {
		peerUID = os.Geteuid()
	}
	// go-plugin's connection goes to the address the plugin announced,
	// and only to the plugin's user in the plugin's cgroup (SO_PEERCRED):
	// its directory is private already; this holds if it were not.
	var addr net.Addr
	peer := func(ctx context.Context, _ string) (net.Conn, error) {
		if addr == nil {
			return nil, errors.New("the plugin announced no address")
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, addr.Network(), addr.String())
		if err != nil {
			return nil, err
		}
		if err := checkPeer(c, peerUID, cg); err != nil {
			c.Close()
			return nil, err
		}
		return c, nil
	}
	cc := &plugin.ClientConfig{
		HandshakeConfig:  api.Handshake,
		Plugins:          api.Plugins(nil, nil, nil),
		Cmd:              cmd,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		AutoMTLS:         true,
		Logger:           hclogBridge(sv.log, &sv.killing),
		StartTimeout:     30 * time.Second,
		GRPCDialOptions:  []grpc.DialOption{grpc.WithContextDialer(peer)},
	}
	client = plugin.NewClient(cc)
	if err := startNoNewPrivs(client); err != nil {
		if cg != nil && (errors.Is(err, unix.EACCES) || errors.Is(err, unix.EBUSY) || errors.Is(err, unix.EROFS) ||
			errors.Is(err, unix.ENOSYS)) {
			err = uncontained(err) // clone3 could not start it in its cgroup
		}
		return fail(err)
	}
	if rc := client.ReattachConfig(); rc != nil {
		addr = rc.Addr // before Client dials
	}
	proto, err := client.Client()
	if err != nil {
		return fail(err)
	}
	raw, err := proto.Dispense(api.PluginName)
	if err != nil {
		return fail(err)
	}
	pc := raw.(*api.Client)
	rpc := pc.StagePluginClient
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	caps, err := rpc.Capabilities(ctx, &api.CapabilitiesRequest{})
	if err == nil && (caps.ExtVersion < memif.ExtMinVersion || caps.ExtVersion > memif.ExtVersion) {
		err = fmt.Errorf("speaks descriptor extension %d, linerate %d..%d", caps.ExtVersion, memif.ExtMinVersion, memif.ExtVersion)
	}
	if err == nil && len(caps.Services) > 0 {
		// The plugin's own services: on the broker's connection it accepts
		// on, beside go-plugin's (which carries StagePlugin alone). A plugin
		// of an earlier release (extension version 1) served them on
		// go-plugin's connection itself, and still may.
		switch {
		case caps.BrokerId != 0:
			if conn, err = pc.Broker.Dial(caps.BrokerId); err != nil {
				err = fmt.Errorf("its services %v: the broker's connection %d: %w", caps.Services, caps.BrokerId, err)
			}
			brokered = err == nil
		case caps.ExtVersion == 1:
			if g, ok := proto.(*plugin.GRPCClient); ok {
				conn = g.Conn
			}
		default:
			err = fmt.Errorf("serves %v but announces no broker connection", caps.Services)
		}
	}
	var conf *api.ConfigureReply
	if err == nil {
		conf, err = rpc.Configure(ctx, &api.ConfigureRequest{Name: sv.name, ConfigToml: sv.toml, Where: sv.where,
			Instances: uint32(sv.instances), Ports: sv.ports})
	}
	if err == nil && conf.EmitBuffers > 0 && (conf.EmitDataRoom < 64 || conf.EmitDataRoom > maxEmitDataRoom) {
		err = fmt.Errorf("asks for buffers of %d bytes to make packets in: 64..%d", conf.EmitDataRoom, maxEmitDataRoom)
	}
	if err != nil {
		return fail(grpcMessage(err))
	}
	sv.mu.Lock()
	sv.client, sv.rpc, sv.caps, sv.dir, sv.conn, sv.brokered, sv.cg = client, rpc, caps, dir, conn, brokered, cg
	sv.peerUID = peerUID
	sv.emitBuffers, sv.emitDataRoom = int(conf.EmitBuffers), int(conf.EmitDataRoom)
	sv.emitRings = caps.ExtVersion >= 2
	sv.reasons = sv.named.table(caps.Reasons)
	sv.pid = client.ReattachConfig().Pid
	sv.mu.Unlock()
	sv.gen.Add(1)
	return nil
}

// checkPeer refuses a connection whose peer (SO_PEERCRED) is not the
// plugin's user, or, with containment, not a process of its cgroup.
func checkPeer(c net.Conn, uid int, cg *cgroupLeaf) error {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return fmt.Errorf("the plugin's address %s is not a unix socket", c.RemoteAddr())
	}
	cr, err := memif.PeerCred(uc)
	if err != nil {
		return fmt.Errorf("the plugin's socket: no credentials: %w", err)
	}
	if cr.Uid != uint32(uid) {
		return fmt.Errorf("the plugin's socket is served by uid %d (pid %d), not the plugin's uid %d", cr.Uid, cr.Pid, uid)
	}
	if cg != nil && !cg.holds(int(cr.Pid)) {
		return fmt.Errorf("the plugin's socket is served by pid %d, outside the plugin's cgroup", cr.Pid)
	}
	return nil
}

// uncontained is the error of a plugin that no cgroup can hold.
func uncontained(err error) error {
	return fmt.Errorf("no cgroup v2 of its own to run in (%w): a process it starts could outlive its kill "+
		"and keep the shared pools' memory. Give linerate a cgroup it may write (the packaged unit's Delegate=yes), "+
		"or accept the risk with containment = \"none\" in the stage's table", err)
}

func closeConn(c *grpc.ClientConn) {
	if c != nil {
		c.Close()
	}
}

// startNoNewPrivs starts the plugin from a thread with no_new_privs set, which
// the child inherits: it can never gain privileges (setuid binaries, file
// capabilities). Go's SysProcAttr has no such field, so the thread is
// locked, marked, used for the fork, and then ends with its goroutine.
func startNoNewPrivs(c *plugin.Client) error {
	errc := make(chan error, 1)
	var mark func()
	mark = func() {
		runtime.LockOSThread() // never unlocked: the marked thread exits with us
		if unix.Gettid() == unix.Getpid() {
			// The main thread never exits, and it would keep the mark: hold it
			// and mark another, which a new goroutine gets while this one is
			// locked here.
			done := make(chan struct{})
			go func() { mark(); close(done) }()
			<-done
			runtime.UnlockOSThread()
			return
		}
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			errc <- fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
			return
		}
		_, err := c.Start()
		errc <- err
	}
	go mark()
	return <-errc
}

// grpcMessage is the plugin's own error text, without gRPC's code prefix:
// what a config error from the plugin says.
func grpcMessage(err error) error {
	if s, ok := status.FromError(err); ok {
		return errors.New(s.Message())
	}
	return err
}

func hexBytes(s string) ([]byte, error) {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != sha256.Size {
		return nil, fmt.Errorf("sha256 %q: 64 hex digits", s)
	}
	return b, nil
}

// start runs once, from the first instance's Start: the plugin listens, each
// instance gets its link, and the watch begins.
func (sv *supervisor) start() error {
	sv.startOnce.Do(func() {
		sv.startErr = sv.launch()
		if sv.startErr == nil {
			sv.startErr = sv.connect()
		}
		if sv.startErr != nil {
			// The engine does not start: nothing is watched or restarted.
			if err := sv.kill(); err != nil {
				sv.log.Error("plugin not ended", "err", err)
			}
			close(sv.done)
			return
		}
		sv.state.Store(StateUp)
		go sv.watch()
	})
	return sv.startErr
}

func (sv *supervisor) socket() string { return filepath.Join(sv.dir, "memif.sock") }

// connect asks the plugin to listen and dials one link per instance.
func (sv *supervisor) connect() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sv.mu.Lock()
	rpc, gen, emits, reasons := sv.rpc, sv.gen.Load(), sv.emitRings, sv.reasons
	sv.mu.Unlock()
	if _, err := rpc.Start(ctx, &api.StartRequest{Socket: sv.socket(), Cpu: int32(sv.cfg.CPU)}); err != nil {
		return fmt.Errorf("plugin start: %w", err)
	}
	for i := 0; i < sv.instances; i++ {
		l, err := sv.dial(i, gen, emits)
		if err != nil {
			return err
		}
		l.reasons = reasons
		if old := sv.next[i].Swap(l); old != nil {
			old.close()
		}
	}
	return nil
}

// maxEmitDataRoom bounds the buffers a plugin may ask for to make packets
// in: a jumbo frame's.
const maxEmitDataRoom = 9216

// dial makes instance i's link: region 0 its four rings (lent packets and
// spare buffers to the plugin, results and emits back; the first and third
// alone for a plugin of extension version 1), then every shared slab pool,
// so that any packet of those pools can be lent without a copy.
func (sv *supervisor) dial(i int, gen uint64, emits bool) (*link, error) {
	log2 := uint8(0)
	for 1<<log2 < sv.cfg.RingSize {
		log2++
	}
	rb := uint32(memif.RingBytes(log2))
	rings, err := memif.NewRegion(fmt.Sprintf("linerate-%s-%d", sv.name, i), 4*int(rb))
	if err != nil {
		return nil, err
	}
	l := &link{rings: rings, gen: gen, emits: emits}
	regions := []*memif.Region{rings}
	for _, p := range packet.Pools() {
		s, ok := p.(*packet.Slab)
		if !ok || !shareable(s) || len(regions) == memif.MaxRegions {
			continue // its packets are copied (checkRegions refused one too big at build)
		}
		fd, mem, _, _ := s.SharedMemory()
		l.regionOf[s.ID()] = uint16(len(regions))
		l.base[s.ID()] = uintptr(unsafe.Pointer(unsafe.SliceData(mem)))
		regions = append(regions, &memif.Region{Mem: mem, FD: fd})
	}
	specs := []memif.RingSpec{{Kind: memif.C2S, Log2: log2}, {Kind: memif.S2C, Offset: 2 * rb, Log2: log2}}
	if emits {
		specs = []memif.RingSpec{specs[0], {Kind: memif.C2S, Index: 1, Offset: rb, Log2: log2},
			specs[1], {Kind: memif.S2C, Index: 1, Offset: 3 * rb, Log2: log2}}
	}
	sv.mu.Lock()
	allow := &memif.Allow{UIDs: []uint32{uint32(sv.peerUID)}} // SO_PEERCRED: the plugin's user alone
	sv.mu.Unlock()
	c, err := memif.Dial(memif.ClientConfig{Socket: sv.socket(), ID: uint32(i), Name: "linerate:" + sv.name,
		Regions: regions, Rings: specs, Allow: allow})
	if err != nil {
		rings.Close()
		return nil, err
	}
	l.conn = c
	return l, nil
}

// watch checks the plugin ten times a second: a process that exited, or an
// instance with packets lent and no result for hang_timeout, is lost.
func (sv *supervisor) watch() {
	defer close(sv.done)
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	backoff := sv.cfg.restartMin()
	upSince := time.Now()
	lastStats := time.Time{}
	for {
		select {
		case <-sv.stop:
			return
		case <-t.C:
		}
		why := ""
		sv.mu.Lock()
		client := sv.client
		sv.mu.Unlock()
		if client == nil || client.Exited() {
			why = "the plugin process exited"
		} else if i, ok := sv.hung(); ok {
			why = fmt.Sprintf("instance %d made no progress for %v", i, sv.cfg.hang())
		}
		if why == "" && sv.state.Load() == StateUp {
			if time.Since(upSince) > 10*time.Second {
				backoff = sv.cfg.restartMin()
			}
			if time.Since(lastStats) >= time.Second {
				sv.pollStats()
				lastStats = time.Now()
			}
			continue
		}
		if sv.state.Load() == StateUp {
			sv.log.Error("plugin lost", "why", why, "pid", sv.pid)
			sv.lost.Add(1)
			if err := sv.kill(); err != nil {
				sv.log.Error("plugin not ended", "err", err)
			}
			sv.state.Store(StateDown)
		}
		select {
		case <-sv.stop:
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
		if sv.lingers() {
			// No new generation while an old one may still write.
			if err := sv.kill(); err != nil {
				sv.log.Error("plugin not ended", "err", err, "next_try", backoff)
				sv.setErr(err)
				continue
			}
		}
		if err := sv.restart(); err != nil {
			sv.log.Error("plugin restart failed", "err", err, "next_try", backoff)
			sv.setErr(err)
			if err := sv.kill(); err != nil {
				sv.log.Error("plugin not ended", "err", err)
			}
			continue
		}
		sv.setErr(nil)
		sv.restarts.Add(1)
		sv.state.Store(StateUp)
		upSince = time.Now()
		sv.log.Info("plugin restarted", "pid", sv.pid)
	}
}

// warnRingFull logs, once for the stage, that a ring filled: packets are
// dropped until the plugin catches up, and a deeper ring absorbs longer
// bursts (a pcap replayed at full speed fills the default one at once).
func (sv *supervisor) warnRingFull(slots int) {
	if sv.warnedFull.CompareAndSwap(false, true) {
		sv.log.Warn("plugin ring full: packets the plugin has no slot for are dropped as plugin_ring_full "+
			"(logged once); raise the stage's ring_size if bursts outrun the plugin",
			"stage", sv.name, "ring_size", slots)
	}
}

// hung reports an instance with packets lent whose last progress is older
// than hang_timeout.
func (sv *supervisor) hung() (int, bool) {
	now := clock.Mono()
	for i, in := range sv.inst {
		if in == nil {
			continue
		}
		if in.outstanding.Load() > 0 && now-in.progress.Load() > int64(sv.cfg.hang()) {
			return i, true
		}
	}
	return 0, false
}

// kill ends the plugin generation: cgroup.kill ends every process in its
// cgroup, those that left its process group or session too, and kill waits
// until cgroup.events says the cgroup is empty; then go-plugin reaps the
// plugin. Only then is the generation dead, and only then do the instances
// take their lent buffers back: no process that could write them is left.
// With containment = "none" it kills the process group alone (the risk
// accepted by name). An error leaves the generation lingering, alive for
// all we know: nothing it was lent is reused, and the next kill tries again.
func (sv *supervisor) kill() error {
	sv.killing.Store(true)
	sv.mu.Lock()
	p := sv.lingering
	if p == nil {
		p = &proc{client: sv.client, pid: sv.pid, dir: sv.dir, cg: sv.cg}
	}
	conn, brokered := sv.conn, sv.brokered
	sv.client, sv.dir, sv.conn, sv.brokered, sv.cg, sv.lingering = nil, "", nil, false, nil, nil
	sv.mu.Unlock()
	if brokered {
		closeConn(conn)
	}
	if p.cg != nil {
		if err := p.cg.kill(killTimeout); err != nil {
			sv.mu.Lock()
			sv.lingering = p
			sv.mu.Unlock()
			return fmt.Errorf("plugin %s: %w", sv.cfg.Plugin, err)
		}
	} else if p.pid > 0 {
		_ = unix.Kill(-p.pid, unix.SIGKILL)
		_ = unix.Kill(p.pid, unix.SIGKILL)
	}
	if p.client != nil {
		sv.reap(p.client)
	}
	if p.dir != "" {
		removeSocketDir(p.dir)
	}
	if p.cg != nil {
		if err := p.cg.remove(); err != nil {
			sv.log.Warn("plugin cgroup not removed", "err", err)
		}
	}
	sv.dead.Store(sv.gen.Load())
	return nil
}

// reap has go-plugin reap the killed plugin. It waits for the plugin's
// stdout and stderr to close too: with containment = "none" a descendant
// that kept them would hold it forever, so the wait is bounded.
func (sv *supervisor) reap(c *plugin.Client) {
	done := make(chan struct{})
	go func() {
		c.Kill()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(killTimeout):
		sv.log.Warn("plugin not reaped: a process outside its cgroup holds its stdout or stderr", "after", killTimeout)
	}
}

func (sv *supervisor) setErr(err error) {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	sv.err = ""
	if err != nil {
		sv.err = err.Error()
	}
}

// lingers reports a killed generation whose cgroup did not empty.
func (sv *supervisor) lingers() bool {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	return sv.lingering != nil
}

// reaped reports that no generation may be alive: the last one launched
// is dead.
func (sv *supervisor) reaped() bool { return sv.dead.Load() == sv.gen.Load() }

func (sv *supervisor) restart() error {
	if err := sv.launch(); err != nil {
		return err
	}
	return sv.connect()
}

func (sv *supervisor) pollStats() {
	sv.mu.Lock()
	rpc := sv.rpc
	sv.mu.Unlock()
	if rpc == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if r, err := rpc.Stats(ctx, &api.StatsRequest{}); err == nil {
		m := ownCounters(r.Counters)
		sv.stats.Store(&m)
	}
}

// maxPluginCounters bounds the counters of a plugin's Stats that linerate
// shows (linerate plugins, /metrics' linerate_external_plugin_counter).
const maxPluginCounters = 64

// ownCounters is what linerate shows of a plugin's counters: a plugin is
// not trusted with the cardinality of linerate's metrics, so names are
// sanitised as drop reasons are, and past maxPluginCounters names (in
// sorted order) the rest are summed under plugin_counter_overflow.
func ownCounters(in map[string]uint64) map[string]uint64 {
	names := make([]string, 0, len(in))
	for k := range in {
		names = append(names, k)
	}
	slices.Sort(names)
	out := make(map[string]uint64, min(len(in), maxPluginCounters+1))
	for _, k := range names {
		name := reasonName(k)
		if _, seen := out[name]; name == "" || !seen && len(out) >= maxPluginCounters {
			name = "plugin_counter_overflow"
		}
		out[name] += in[k]
	}
	return out
}

// end stops the watch, asks the plugin to stop (when graceful: a plugin
// with packets lent and unanswered may hang, and is not waited for), and
// ends it: once, from the first instance that stops with something lent, or
// from close. After it the plugin is reaped and never restarted, so what it
// had can be reused.
func (sv *supervisor) end(graceful bool) {
	sv.endOnce.Do(func() {
		close(sv.stop)
		sv.startOnce.Do(func() { close(sv.done) })
		<-sv.done
		sv.mu.Lock()
		rpc := sv.rpc
		sv.mu.Unlock()
		if rpc != nil && graceful && sv.state.Load() == StateUp {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_, _ = rpc.Stop(ctx, &api.StopRequest{})
			cancel()
		}
		if err := sv.kill(); err != nil {
			sv.log.Error("plugin not ended", "err", err)
		}
	})
}

// close ends the plugin and its links. The instances have reclaimed or got
// back everything they lent.
func (sv *supervisor) close() {
	if sv.state.Load() == StateStopped {
		return
	}
	sv.end(true)
	for i := range sv.next {
		if l := sv.next[i].Swap(nil); l != nil {
			l.close()
		}
	}
	sv.state.Store(StateStopped)
	unregister(sv)
}

// hclogBridge gives go-plugin an hclog.Logger that writes to log: the
// plugin's own log lines (hclog JSON on its stderr) arrive with their level
// and attributes. While killing is set, the plugin's exit is logged at Info.
func hclogBridge(log *slog.Logger, killing *atomic.Bool) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Output: &slogWriter{log: log, killing: killing}, JSONFormat: true, Level: hclog.Info})
}

type slogWriter struct {
	log     *slog.Logger
	killing *atomic.Bool
}

func (w *slogWriter) Write(b []byte) (int, error) {
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		w.log.Info(string(b))
		return len(b), nil
	}
	msg, _ := m["@message"].(string)
	lvl := slog.LevelInfo
	switch m["@level"] {
	case "error":
		lvl = slog.LevelError
	case "warn":
		lvl = slog.LevelWarn
	case "debug", "trace":
		lvl = slog.LevelDebug
	}
	if lvl == slog.LevelError && msg == "plugin process exited" && w.killing != nil && w.killing.Load() {
		lvl = slog.LevelInfo // we killed it
	}
	var attrs []any
	for k, v := range m {
		if k != "@message" && k != "@level" && k != "@timestamp" && k != "@module" {
			attrs = append(attrs, k, v)
		}
	}
	w.log.Log(context.Background(), lvl, msg, attrs...)
	return len(b), nil
}

// serves is the broker's connection to the plugin when it serves service
// and runs.
func (sv *supervisor) serves(service string) grpc.ClientConnInterface {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	if sv.conn == nil || sv.caps == nil {
		return nil
	}
	for _, s := range sv.caps.Services {
		if s == service {
			return sv.conn
		}
	}
	return nil
}

// socketDir makes the plugin's sockets' directory, private to the plugin's
// user (uid, -1 for linerate's own) and linerate: the plugin's, in linerate's
// group, 02770 (its sockets are born in linerate's group), inside a
// directory of linerate's own, 0711, from which linerate can remove it
// without CAP_FOWNER (a directory of another user's in sticky /tmp it could
// not).
func socketDir(uid int) (string, error) {
	outer, err := os.MkdirTemp("", "linerate-plugin-")
	if err != nil {
		return "", err
	}
	dir := filepath.Join(outer, "s")
	err = os.Chmod(outer, 0o711)
	if err == nil {
		err = os.Mkdir(dir, 0o700)
	}
	if err == nil && uid >= 0 {
		// Mode before owner: once it is the plugin's, changing it would need
		// CAP_FOWNER.
		if err = os.Chmod(dir, os.ModeSetgid|0o770); err == nil {
			err = os.Chown(dir, uid, os.Getegid())
		}
	}
	if err != nil {
		os.RemoveAll(outer)
		return "", err
	}
	return dir, nil
}

func removeSocketDir(dir string) { os.RemoveAll(filepath.Dir(dir)) }

// defaultUser is who a plugin runs as when its table names no user: a
// system user of its own, which the Debian package creates. Setting the uid
// from root drops every capability.
var defaultUser = "linerate-plugin"

// pluginUser is the uid and gid the plugin runs as; -1 when it keeps
// linerate's (a linerate that is not root, whose plugin has its user and
// no more, and cannot switch).
func (sv *supervisor) pluginUser() (uid, gid int, err error) {
	name := sv.cfg.User
	if name == "" {
		if os.Geteuid() != 0 {
			return -1, -1, nil
		}
		name = defaultUser
	}
	u, err := user.Lookup(name)
	if err != nil && sv.cfg.User == "" {
		return 0, 0, fmt.Errorf("plugin %s runs as the unprivileged user %q when its table names none, and there is no such user: "+
			"create it (adduser --system --no-create-home --group %s; the Debian package does), "+
			"or name one in the stage's table: user = \"nobody\", or user = \"root\" to run it as root", sv.cfg.Plugin, name, name)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("plugin %s: user %q: %w", sv.cfg.Plugin, name, err)
	}
	uid, err = strconv.Atoi(u.Uid)
	if err == nil {
		gid, err = strconv.Atoi(u.Gid)
	}
	return uid, gid, err
}
