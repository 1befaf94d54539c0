package packaging

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/linerate/linerate/internal/netns"
	"github.com/linerate/linerate/internal/testenv"
)

// maxExposure is the highest `systemd-analyze security` exposure the unit
// may have (it was 6.4 MEDIUM before SystemCallFilter and the rest; the
// settings that stay off are in the unit, each with why).
const maxExposure = 4.1

// TestUnitSecurity: systemd's own rating of the unit, offline (it needs no
// running systemd and reads only the file), is at most maxExposure.
func TestUnitSecurity(t *testing.T) {
	analyze := testenv.RequireCmd(t, "systemd-analyze")
	out, err := exec.Command(analyze, "security", "--offline=yes", "--no-pager", "linerate.service").CombinedOutput()
	m := regexp.MustCompile(`Overall exposure level for linerate\.service: (\d+\.\d+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("systemd-analyze security: %v\n%s", err, out)
	}
	score, _ := strconv.ParseFloat(string(m[1]), 64)
	t.Logf("exposure %.1f", score)
	if score > maxExposure {
		t.Errorf("systemd-analyze security rates the unit %.1f, above %.1f:\n%s", score, maxExposure, out)
	}
}

// unitValues is every value of key in the unit's [Service], in order.
func unitValues(t *testing.T, key string) []string {
	t.Helper()
	b, err := os.ReadFile("linerate.service")
	if err != nil {
		t.Fatal(err)
	}
	var vs []string
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, key+"="); ok {
			vs = append(vs, strings.Fields(v)...)
		}
	}
	return vs
}

// allowedSyscalls expands the unit's SystemCallFilter (an allow-list of
// calls and @groups) with systemd-analyze's own table of the groups.
func allowedSyscalls(t *testing.T, analyze string) map[string]bool {
	t.Helper()
	out, err := exec.Command(analyze, "syscall-filter", "--no-pager").Output()
	if err != nil {
		t.Fatalf("systemd-analyze syscall-filter: %v", err)
	}
	groups := map[string][]string{}
	group := ""
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(l, "@"):
			group = f
		case f == "" || strings.HasPrefix(f, "#"):
		case group != "" && strings.HasPrefix(l, " "):
			groups[group] = append(groups[group], f)
		}
	}
	allowed := map[string]bool{}
	var add func(string)
	add = func(s string) {
		if !strings.HasPrefix(s, "@") {
			allowed[s] = true
			return
		}
		members, ok := groups[s]
		if !ok {
			t.Fatalf("systemd-analyze knows no group %s", s)
		}
		for _, m := range members {
			add(m)
		}
	}
	filter := unitValues(t, "SystemCallFilter")
	if len(filter) == 0 || strings.HasPrefix(filter[0], "~") {
		t.Fatalf("the unit has no SystemCallFilter allow-list: %v", filter)
	}
	for _, s := range filter {
		add(s)
	}
	return allowed
}

// traced is what the processes strace followed did: each system call's
// name, and each socket's address family.
type traced struct {
	calls, families map[string]string // → the line that shows it
}

var (
	callRE   = regexp.MustCompile(`^\d+\s+(?:<\.\.\. )?([a-z0-9_]+)(?:\(| resumed>)`)
	socketRE = regexp.MustCompile(`\bsocket\((AF_[A-Z0-9]+|\d+)`)
)

func readTrace(t *testing.T, path string, into *traced) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if m := callRE.FindStringSubmatch(l); m != nil {
			into.calls[m[1]] = l
		}
		if m := socketRE.FindStringSubmatch(l); m != nil {
			into.families[m[1]] = l
		}
	}
}

// straced runs linerate under strace (following its threads and children)
// and adds what it did to tr.
func straced(t *testing.T, strace string, tr *traced, prefix []string, args ...string) string {
	t.Helper()
	return stracedBin(t, strace, tr, prefix, linerateBin, args...)
}

func stracedBin(t *testing.T, strace string, tr *traced, prefix []string, bin string, args ...string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "trace")
	argv := append(append(append([]string{}, prefix...), strace, "-f", "-qq", "-s", "0", "-e", "signal=none", "-o", out, bin), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %v\n%s", argv, err, b)
	}
	readTrace(t, out, tr)
	return string(b)
}

// TestUnitSyscalls runs linerate under strace as the unit runs it: the
// ExecStartPre validate and run on the packaged default config, and, as
// root, run forwarding between veths with afpacket ports and with xdp ports
// (XDP programs and AF_XDP sockets). Every system call it makes is in the
// unit's SystemCallFilter, and every socket it opens is of a family in
// RestrictAddressFamilies: under the unit, a call outside the set kills it
// (SIGSYS), a family outside it fails.
func TestUnitSyscalls(t *testing.T) {
	analyze := testenv.RequireCmd(t, "systemd-analyze")
	strace := testenv.RequireCmd(t, "strace")
	allowed := allowedSyscalls(t, analyze)
	families := map[string]bool{}
	for _, f := range unitValues(t, "RestrictAddressFamilies") {
		families[f] = true
	}
	if len(families) == 0 {
		t.Fatal("the unit has no RestrictAddressFamilies")
	}
	tr := &traced{calls: map[string]string{}, families: map[string]string{}}
	dir := t.TempDir()
	t.Setenv("LINERATE_CONTROL", "unix:"+filepath.Join(dir, "ctl.sock"))

	// The packaged default config, its metrics on a free port.
	def, err := exec.Command(linerateBin, "config", "service").Output()
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "linerate.toml")
	text := strings.Replace(string(def), `listen = "127.0.0.1:9087"`, `listen = "127.0.0.1:`+strconv.Itoa(freePort(t, "tcp"))+`"`, 1)
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	straced(t, strace, tr, nil, "validate", "-c", cfg)
	straced(t, strace, tr, nil, "run", "-c", cfg, "--duration", "2s", "--live=false")

	// The DPDK build, where libdpdk is (make deps installs it): two
	// net_null ports, no hugepages (docs/examples/dpdk-null.toml).
	if exec.Command("pkg-config", "--exists", "libdpdk").Run() == nil {
		dbin := filepath.Join(dir, "linerate-dpdk")
		if out, err := exec.Command("go", "build", "-tags", "dpdk", "-o", dbin, "github.com/linerate/linerate/appliance/cmd/linerate").CombinedOutput(); err != nil {
			t.Fatalf("build linerate-dpdk: %v\n%s", err, out)
		}
		out := stracedBin(t, strace, tr, nil, dbin, "run", "-c", "../docs/examples/dpdk-null.toml", "--duration", "2s", "--live=false")
		if !strings.Contains(out, "null0") {
			t.Errorf("linerate-dpdk with net_null: no port null0 in the summary:\n%s", out)
		}
	} else if testenv.InCI() {
		t.Error("no libdpdk (make deps installs it): the DPDK build's calls are not checked")
	}

	if os.Geteuid() == 0 || testenv.InCI() {
		testenv.RequireRoot(t)
		for _, driver := range []string{"afpacket", "xdp"} {
			a, mid, b := netns.New(t), netns.New(t), netns.New(t)
			netns.Veth(t, a, "a0", mid, "a1")
			netns.Veth(t, mid, "b1", b, "b0")
			// An xdp port takes what its match rules say: here all of it.
			extra := ""
			if driver == "xdp" {
				extra = "take_all = true\n"
			}
			wire := filepath.Join(dir, driver+".toml")
			if err := os.WriteFile(wire, []byte(`version = 1
[engine]
pin = false
[control]
listen = ""
[[ports]]
name = "a1"
driver = "`+driver+`"
interface = "a1"
`+extra+`[[ports]]
name = "b1"
driver = "`+driver+`"
interface = "b1"
`+extra+`[[pipelines]]
name = "wire"
rx = ["a1", "b1"]
stages = [{ kind = "forward", port = "b1" }]
`), 0o644); err != nil {
				t.Fatal(err)
			}
			out := straced(t, strace, tr, []string{"ip", "netns", "exec", mid.Name()},
				"run", "-c", wire, "--duration", "2s", "--live=false", "--json")
			if !strings.Contains(out, `"a1"`) {
				t.Errorf("%s: no port a1 in the summary:\n%s", driver, out)
			}
		}
	}

	var calls []string
	for c := range tr.calls {
		calls = append(calls, c)
	}
	sort.Strings(calls)
	t.Logf("%d system calls: %s", len(calls), strings.Join(calls, " "))
	// Calls outside the set that linerate does without: they fail with the
	// unit's SystemCallErrorNumber, as they fail without the capability.
	tolerated := map[string]string{
		"iopl": "DPDK's EAL asks for port I/O at start; without CAP_SYS_RAWIO it has none anyway",
	}
	if errno := unitValues(t, "SystemCallErrorNumber"); len(errno) != 1 || errno[0] != "EPERM" {
		t.Errorf("SystemCallErrorNumber is %v, not EPERM: a call outside the set kills linerate", errno)
	}
	for _, c := range calls {
		if why, ok := tolerated[c]; ok {
			t.Logf("%s is outside the set and fails with EPERM: %s", c, why)
			continue
		}
		if !allowed[c] {
			t.Errorf("linerate calls %s, which the unit's SystemCallFilter does not allow: %s", c, tr.calls[c])
		}
	}
	t.Logf("socket families: %v", keys(tr.families))
	for f, l := range tr.families {
		if !families[f] {
			t.Errorf("linerate opens an %s socket, which RestrictAddressFamilies does not allow: %s", f, l)
		}
	}
	if tr.calls["bpf"] == "" && os.Geteuid() == 0 {
		t.Error("the xdp run made no bpf call: it did not run as the test meant")
	}
}

func keys(m map[string]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
