package external_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/linerate/linerate/appliance"
	_ "github.com/linerate/linerate/appliance/all"
	"github.com/linerate/linerate/appliance/control"
	"github.com/linerate/linerate/appliance/control/host"
	"github.com/linerate/linerate/appliance/metrics"
	"github.com/linerate/linerate/appliance/stats"
	lrconfig "github.com/linerate/linerate/config"
	"github.com/linerate/linerate/internal/enginetest"
	"github.com/linerate/linerate/internal/testenv"
	"github.com/linerate/linerate/plugins/external"
)

// buildSampler builds the example plugin into a directory of the test's own
// (root's, 0755: writable by root alone, as the stage asks of every directory
// on the way, and open to the unprivileged user the plugin runs as).
func buildSampler(t *testing.T) string {
	t.Helper()
	goBin := testenv.RequireCmd(t, "go")
	bin := filepath.Join(trustedTree(t), "linerate-sampler")
	if out, err := exec.Command(goBin, "build", "-o", bin, "../sdk/examples/sampler").CombinedOutput(); err != nil {
		t.Fatalf("build the sampler: %v\n%s", err, out)
	}
	return bin
}

func config(bin string, count int, rate, extra string) string {
	return pluginConfig(bin, "sampler", "every = 10", count, rate, extra)
}

// pluginConfig runs the plugin bin as the external stage name, with table
// as its config, between a generator of count packets at rate (0: until
// stopped) and a forward to a mem port whose peer a sink reads; extra goes
// into the stage's table. The plugin runs as nobody unless extra names a
// user.
func pluginConfig(bin, name, table string, count int, rate, extra string) string {
	if !strings.Contains(extra, "user =") {
		extra += "\n" + `user = "nobody"`
	}
	return fmt.Sprintf(`
version = 1
[engine]
pin = false
[control]
listen = ""
[[pools]]
name = "default"
buffers = 8192
[[ports]]
name = "m0"
driver = "mem"
peer = "m1"
[[ports]]
name = "m1"
driver = "mem"
peer = "m0"
[[pipelines]]
name = "source"
lcores = [0]
[[pipelines.stages]]
kind = "generator"
ip_version = 4
src = "192.0.2.1"
dst = "198.51.100.1"
flows = 8
sizes = [64, 128, 1518]
count = %d
rate = %q
[[pipelines.stages]]
kind = "external"
name = %q
plugin = %q
%s
config = { %s }
[[pipelines.stages]]
kind = "forward"
port = "m0"
[[pipelines]]
name = "dest"
lcores = [1]
rx = ["m1"]
[[pipelines.stages]]
kind = "sink"
name = "sink"
`, count, rate, name, bin, extra, table)
}

func drops(s *stats.Snapshot) (uint64, map[string]uint64) {
	var n uint64
	m := map[string]uint64{}
	for _, d := range s.Drops {
		n += d.Count
		m[d.Reason] += d.Count
	}
	return n, m
}

// TestSampler runs the example plugin as an external stage: every packet goes
// through it and on down the chain, one in ten is marked, and every buffer
// comes back.
func TestSampler(t *testing.T) {
	bin := buildSampler(t)
	const n = 100_000
	e := enginetest.Start(t, config(bin, n, "200kpps", ""), appliance.Options{})
	select {
	case <-e.Done():
	case <-time.After(2 * time.Minute):
		e.Stop()
		t.Fatal("the engine did not stop by itself")
	}
	s := e.Snapshot()
	got := enginetest.Counter(s, "sink", "received")
	dropped, why := drops(s)
	if got+dropped != n {
		t.Errorf("sink received %d, %d dropped (%v): want %d in all", got, dropped, why, n)
	}
	lent, returned := enginetest.Counter(s, "sampler", "lent"), enginetest.Counter(s, "sampler", "returned")
	marked := enginetest.Counter(s, "sampler", "marked")
	if lent == 0 || returned != lent || marked != lent/10 {
		t.Errorf("lent %d, returned %d, marked %d", lent, returned, marked)
	}
	for name, used := range e.InUse() {
		if used != 0 {
			t.Errorf("pool %q has %d buffers in use", name, used)
		}
	}
}

// pluginPID finds the running plugin: our child whose binary is bin.
func pluginPID(t *testing.T, bin string) int {
	t.Helper()
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err != nil || exe != bin {
			continue
		}
		stat, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(f) > 2 && f[1] == strconv.Itoa(os.Getpid()) {
			return pid
		}
	}
	return 0
}

func waitFor(t *testing.T, what string, d time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// killPlugin SIGKILLs the plugin bin of stage once the stage's progress
// counter has passed n, waits until the engine counts it lost and restarts
// it, then until the restarted plugin has moved progress by n again. It
// returns the killed plugin's pid.
func killPlugin(t *testing.T, e *appliance.Engine, bin, stage, progress string, n uint64) int {
	t.Helper()
	counter := func(name string) uint64 { return enginetest.Counter(e.Snapshot(), stage, name) }
	waitFor(t, "progress of the plugin", time.Minute, func() bool { return counter(progress) > n })
	pid := pluginPID(t, bin)
	if pid == 0 {
		t.Fatal("no plugin process")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the plugin's loss counted", time.Minute, func() bool { return counter("plugin_lost") == 1 })
	waitFor(t, "the plugin restarted", time.Minute, func() bool { return counter("plugin_restarts") >= 1 })
	after := counter(progress)
	waitFor(t, "progress of the restarted plugin", time.Minute, func() bool { return counter(progress) > after+n })
	return pid
}

// TestKillUnderLoad kills the plugin with SIGKILL mid-run: the engine keeps
// forwarding (failing closed while it is down), the plugin is counted lost,
// restarted, and takes traffic again; every packet is accounted for and every
// buffer comes back.
func TestKillUnderLoad(t *testing.T) {
	bin := buildSampler(t)
	e := enginetest.Start(t, config(bin, 0, "100kpps", `fail = "closed"`+"\n"+`restart_after = "50ms"`), appliance.Options{})
	pid := killPlugin(t, e, bin, "sampler", "returned", 10_000)
	if p2 := pluginPID(t, bin); p2 == 0 || p2 == pid {
		t.Errorf("plugin pid %d after the kill of %d", p2, pid)
	}
	e.Stop()
	s := e.Snapshot()
	sent := enginetest.Counter(s, "source", "sent") + enginetest.Counter(s, "generator#0", "sent")
	got := enginetest.Counter(s, "sink", "received")
	reclaimed := enginetest.Counter(s, "sampler", "reclaimed")
	dropped, why := drops(s)
	// Failing closed, what the lost plugin had is taken back and dropped
	// as plugin_lost: a named drop, as every other.
	if sent == 0 || got+dropped != sent || why["plugin_lost"] != reclaimed {
		t.Errorf("sent %d: received %d + dropped %d (%v); reclaimed %d", sent, got, dropped, why, reclaimed)
	}
	for name, used := range e.InUse() {
		if used != 0 {
			t.Errorf("pool %q has %d buffers in use", name, used)
		}
	}
}

func newEngine(t *testing.T, toml string) (*appliance.Engine, error) {
	t.Helper()
	cfg, err := configParse(toml)
	if err != nil {
		t.Fatal(err)
	}
	e, err := appliance.New(cfg, appliance.Options{Log: enginetest.Quiet})
	if err == nil {
		t.Cleanup(func() { e.Close() })
	}
	return e, err
}

func configParse(toml string) (*lrconfig.File, error) {
	return lrconfig.Parse("test.toml", []byte(toml))
}

// TestSteadyStateAllocatesNothing: lending and taking results back allocate
// nothing on the lcore.
func TestSteadyStateAllocatesNothing(t *testing.T) {
	bin := buildSampler(t)
	e := enginetest.Start(t, config(bin, 0, "", ""), appliance.Options{Manual: true})
	counter := func(stage, name string) uint64 { return enginetest.Counter(e.Snapshot(), stage, name) }
	waitFor(t, "results from the plugin", time.Minute, func() bool {
		for i := 0; i < 100; i++ {
			e.Step()
		}
		return counter("sampler", "returned") > 10_000
	})
	if a := testing.AllocsPerRun(2000, func() { e.Step() }); a != 0 {
		t.Errorf("a loop allocates %.2f times", a)
	}
	if counter("sampler", "returned") == 0 {
		t.Error("nothing came back")
	}
	e.Stop()
	for name, used := range e.InUse() {
		if used != 0 {
			t.Errorf("pool %q has %d buffers in use", name, used)
		}
	}
}

// procStatus is /proc/pid/status as key: value, the value's blanks squeezed.
func procStatus(t *testing.T, pid int) map[string]string {
	t.Helper()
	st, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		t.Fatal(err)
	}
	fields := map[string]string{}
	for _, l := range strings.Split(string(st), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok {
			fields[k] = strings.Join(strings.Fields(v), " ")
		}
	}
	return fields
}

// TestPrivileges: with no user in its table, the plugin runs as the default
// unprivileged user (nobody here, for linerate-plugin), with no
// capabilities and no new privileges, in a process group of its own; its
// sockets' directory is that user's, 0700.
func TestPrivileges(t *testing.T) {
	testenv.RequireRoot(t)
	defer external.SetDefaultUser("nobody")()
	bin := buildSampler(t)
	e := enginetest.Start(t, config(bin, 0, "10kpps", `# user = default`), appliance.Options{})
	counter := func(stage, name string) uint64 { return enginetest.Counter(e.Snapshot(), stage, name) }
	waitFor(t, "results from the plugin", time.Minute, func() bool { return counter("sampler", "returned") > 100 })
	pid := pluginPID(t, bin)
	if pid == 0 {
		t.Fatal("no plugin process")
	}
	fields := procStatus(t, pid)
	if fields["Uid"] != "65534 65534 65534 65534" || fields["NoNewPrivs"] != "1" || fields["Groups"] != "" {
		t.Errorf("plugin Uid %q, Groups %q, NoNewPrivs %q", fields["Uid"], fields["Groups"], fields["NoNewPrivs"])
	}
	for _, c := range []string{"CapInh", "CapPrm", "CapEff", "CapAmb"} {
		if fields[c] != "0000000000000000" {
			t.Errorf("plugin %s %s", c, fields[c])
		}
	}
	if pgid, _ := syscall.Getpgid(pid); pgid != pid {
		t.Errorf("plugin pgid %d, want its own (%d)", pgid, pid)
	}
	// Its sockets' directory: the plugin's and linerate's group's alone,
	// setgid so that its sockets are born in that group; each socket is
	// writable by the group, no one else.
	env, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "environ"))
	dir := ""
	for _, kv := range strings.Split(string(env), "\x00") {
		if d, ok := strings.CutPrefix(kv, "PLUGIN_UNIX_SOCKET_DIR="); ok {
			dir = d
		}
	}
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil || st.Uid != 65534 || st.Gid != uint32(os.Getegid()) || st.Mode&0o7777 != 0o2770 {
		t.Errorf("the sockets' directory %q: %v, uid %d, gid %d, mode %o", dir, err, st.Uid, st.Gid, st.Mode&0o7777)
	}
	socks, _ := filepath.Glob(filepath.Join(dir, "*"))
	if len(socks) < 2 {
		t.Errorf("sockets %v: want go-plugin's and memif's", socks)
	}
	for _, s := range socks {
		if err := syscall.Stat(s, &st); err != nil || st.Gid != uint32(os.Getegid()) || st.Mode&0o007 != 0 || st.Mode&0o020 == 0 {
			t.Errorf("socket %s: %v, gid %d, mode %o", s, err, st.Gid, st.Mode&0o777)
		}
	}
	// The marked threads are gone: linerate itself keeps its privileges.
	tasks, _ := filepath.Glob("/proc/self/task/*/status")
	for _, f := range tasks {
		if b, err := os.ReadFile(f); err == nil && strings.Contains(string(b), "NoNewPrivs:\t1") {
			t.Errorf("linerate's thread %s has no_new_privs", f)
		}
	}
	e.Stop()
}

// TestDefaultUserMissing: where the default user does not exist (a
// development machine), the plugin does not run, and the error says how to
// create the user or choose one.
func TestDefaultUserMissing(t *testing.T) {
	testenv.RequireRoot(t)
	defer external.SetDefaultUser("linerate-no-such-user")()
	bin := buildSampler(t)
	_, err := newEngine(t, config(bin, 0, "1kpps", `# user = default`))
	if err == nil || !strings.Contains(err.Error(), "adduser --system --no-create-home --group linerate-no-such-user") ||
		!strings.Contains(err.Error(), `user = "root"`) {
		t.Fatalf("err = %v, want how to create the user or choose one", err)
	}
	if pluginPID(t, bin) != 0 {
		t.Error("a plugin process is left")
	}
}

// TestRootByName: user = "root" runs the plugin as root, asked by name.
func TestRootByName(t *testing.T) {
	testenv.RequireRoot(t)
	bin := buildSampler(t)
	e := enginetest.Start(t, config(bin, 0, "10kpps", `user = "root"`), appliance.Options{})
	waitFor(t, "the plugin", time.Minute, func() bool { return pluginPID(t, bin) != 0 })
	if uid := procStatus(t, pluginPID(t, bin))["Uid"]; uid != "0 0 0 0" {
		t.Errorf("plugin Uid %q", uid)
	}
	e.Stop()
}

// TestUnsharedPoolCopies: packets of a pool the plugin cannot map (a private
// pool here, a DPDK mempool in production) are copied into the stage's shared
// pool before they are lent, and the copies are counted.
func TestUnsharedPoolCopies(t *testing.T) {
	bin := buildSampler(t)
	cfg := strings.Replace(config(bin, 20_000, "100kpps", ""), `name = "default"
buffers = 8192`, `name = "default"
buffers = 8192
private = true`, 1)
	e := enginetest.Start(t, cfg, appliance.Options{})
	select {
	case <-e.Done():
	case <-time.After(2 * time.Minute):
		e.Stop()
		t.Fatal("the engine did not stop by itself")
	}
	s := e.Snapshot()
	lent, copies := enginetest.Counter(s, "sampler", "lent"), enginetest.Counter(s, "sampler", "copies")
	got := enginetest.Counter(s, "sink", "received")
	dropped, why := drops(s)
	if lent == 0 || copies != lent || got+dropped != 20_000 {
		t.Errorf("lent %d, copies %d; received %d + dropped %d (%v) of 20000", lent, copies, got, dropped, why)
	}
	for name, used := range e.InUse() {
		if used != 0 {
			t.Errorf("pool %q has %d buffers in use", name, used)
		}
	}
}

// TestInterruptMode: a plugin idle for long sleeps on its ring's eventfd and
// linerate's next lend wakes it (memif's interrupt mode): at 200 packets a
// second, the plugin's own counters show kicked wake-ups.
func TestInterruptMode(t *testing.T) {
	bin := buildSampler(t)
	e := enginetest.Start(t, config(bin, 0, "200pps", ""), appliance.Options{})
	waitFor(t, "a kicked wake-up", time.Minute, func() bool {
		for _, st := range external.Statuses() {
			if st.Counters["plugin_kicked"] > 0 {
				return true
			}
		}
		return false
	})
	e.Stop()
	if n := enginetest.Counter(e.Snapshot(), "sampler", "returned"); n == 0 {
		t.Error("nothing came back")
	}
}

// TestMetrics: /metrics has each plugin's state, losses, restarts and own
// counters beside the stage's counters.
func TestMetrics(t *testing.T) {
	bin := buildSampler(t)
	e := enginetest.Start(t, config(bin, 0, "10kpps", ""), appliance.Options{})
	srv := httptest.NewServer(metrics.Handler(e, host.Collectors(control.Host(e))...))
	defer srv.Close()
	var body string
	waitFor(t, "the plugin's series", time.Minute, func() bool {
		resp, err := http.Get(srv.URL)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		return strings.Contains(body, `linerate_external_plugin_counter{counter="sampled",stage="sampler"}`)
	})
	for _, want := range []string{`linerate_external_plugin_up{stage="sampler"} 1`,
		`linerate_external_plugin_lost_total{stage="sampler"} 0`, `linerate_external_plugin_restarts_total{stage="sampler"} 0`} {
		if !strings.Contains(body, want) {
			t.Errorf("no %s in /metrics", want)
		}
	}
	e.Stop()
}

// TestPoolOver4GiBConfig: a config whose shared pool is over 4 GiB, with an
// external stage, is refused at build (linerate validate) naming the pool.
func TestPoolOver4GiBConfig(t *testing.T) {
	cfg := strings.Replace(config("/nonexistent/plugin", 0, "1kpps", ""), `name = "default"
buffers = 8192`, `name = "default"
buffers = 66000
data_room = 65535`, 1)
	_, err := newEngine(t, cfg)
	if err == nil || !strings.Contains(err.Error(), `pool "default"`) || !strings.Contains(err.Error(), "4 GiB") {
		t.Fatalf("err = %v, want the pool over 4 GiB named", err)
	}
}
