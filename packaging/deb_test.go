package packaging

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/linerate/linerate/internal/testenv"
)

var debBuild struct {
	sync.Once
	path string
	err  error
}

// buildDeb runs `make deb` once for the package's tests and returns the
// linerate package's path.
func buildDeb(t *testing.T) string {
	t.Helper()
	mk := testenv.RequireCmd(t, "make")
	debBuild.Do(func() {
		old, _ := filepath.Glob("../bin/linerate*_amd64.deb")
		for _, d := range old {
			_ = os.Remove(d)
		}
		if out, err := exec.Command(mk, "-C", "..", "deb").CombinedOutput(); err != nil {
			debBuild.err = fmt.Errorf("make deb: %v\n%s", err, out)
			return
		}
		debs, _ := filepath.Glob("../bin/linerate_*_amd64.deb")
		if len(debs) != 1 {
			debBuild.err = fmt.Errorf("make deb made %v, not one bin/linerate_*_amd64.deb", debs)
			return
		}
		debBuild.path = debs[0]
	})
	if debBuild.err != nil {
		t.Fatal(debBuild.err)
	}
	return debBuild.path
}

// TestDeb builds the package with `make deb` and checks it as a user and
// Debian would: lintian reports nothing (its overrides are in the package,
// each justified), the unpacked binary runs `version` and `validate` on the
// packaged config, the unit verifies, the man page renders every command
// and the bash completion loads.
func TestDeb(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the package: not in -short")
	}
	lintian := testenv.RequireCmd(t, "lintian")
	dpkgDeb := testenv.RequireCmd(t, "dpkg-deb")
	deb := buildDeb(t)
	if out, err := exec.Command(lintian, "--fail-on", "error,warning", deb).CombinedOutput(); err != nil {
		t.Errorf("lintian: %v\n%s", err, out)
	} else if s := strings.TrimSpace(strings.ReplaceAll(string(out), "running with root privileges is not recommended!", "")); s != "" {
		t.Errorf("lintian says:\n%s", s)
	}
	info, err := exec.Command(dpkgDeb, "-f", deb, "Package", "Depends").Output()
	if err != nil || !strings.Contains(string(info), "Package: linerate") || !strings.Contains(string(info), "libc6") {
		t.Errorf("control: %v\n%s", err, info)
	}

	root := t.TempDir()
	if out, err := exec.Command(dpkgDeb, "-x", deb, root).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb -x: %v\n%s", err, out)
	}
	bin := filepath.Join(root, "usr/bin/linerate")
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "linerate ") {
		t.Errorf("packaged linerate version: %v %q", err, out)
	}
	cfg := filepath.Join(root, "etc/linerate/linerate.toml")
	if out, err := exec.Command(bin, "validate", "--offline", "-c", cfg).CombinedOutput(); err != nil {
		t.Errorf("packaged linerate validate the packaged config: %v\n%s", err, out)
	}
	if b, _ := os.ReadFile(cfg); !strings.Contains(string(b), "\nlisten = \"127.0.0.1:9087\"") {
		t.Error("the packaged config serves no metrics on 127.0.0.1:9087")
	}
	checkInert(t, bin, cfg)
	lab := filepath.Join(root, "usr/share/doc/linerate/examples/lab.toml")
	if out, err := exec.Command(bin, "validate", "--offline", "-c", lab).CombinedOutput(); err != nil {
		t.Errorf("packaged linerate validate the lab example: %v\n%s", err, out)
	}
	for _, f := range []string{"lib/systemd/system/linerate.service", "usr/share/doc/linerate/copyright",
		"usr/share/doc/linerate/changelog.Debian.gz", "usr/share/doc/linerate/operations.md",
		"usr/share/doc/linerate/examples/nfacctd.conf", "usr/share/doc/linerate/examples/primitives.lst"} {
		if _, err := os.Stat(filepath.Join(root, f)); err != nil {
			t.Errorf("the package has no %s", f)
		}
	}
	// The man page has a section per command, from the binary's help.
	if man, err := exec.Command("man", "-l", "-Tascii", filepath.Join(root, "usr/share/man/man1/linerate.1.gz")).Output(); err == nil {
		for _, c := range []string{"run", "validate", "status", "stamp create", "ioam pot-keys", "-log-format"} {
			if !strings.Contains(string(man), c) {
				t.Errorf("the man page has no %q", c)
			}
		}
	} else if testenv.InCI() {
		t.Errorf("man: %v", err)
	}
	// The DPDK build's package, where libdpdk is installed (as make deps
	// installs it): lintian, its dependencies, and its binary runs from it.
	if exec.Command("pkg-config", "--exists", "libdpdk").Run() == nil {
		dd, _ := filepath.Glob("../bin/linerate-dpdk_*_amd64.deb")
		if len(dd) != 1 {
			t.Fatalf("make deb made %v, not one linerate-dpdk package", dd)
		}
		if out, err := exec.Command(lintian, "--fail-on", "error,warning", dd[0]).CombinedOutput(); err != nil {
			t.Errorf("lintian linerate-dpdk: %v\n%s", err, out)
		}
		dep, _ := exec.Command(dpkgDeb, "-f", dd[0], "Depends").Output()
		for _, want := range []string{"linerate (= ", "librte-ethdev23 (>= ", "librte-eal23 (>= "} {
			if !strings.Contains(string(dep), want) {
				t.Errorf("linerate-dpdk Depends has no %s: %s", want, dep)
			}
		}
		droot := t.TempDir()
		if out, err := exec.Command(dpkgDeb, "-x", dd[0], droot).CombinedOutput(); err != nil {
			t.Fatalf("dpkg-deb -x: %v\n%s", err, out)
		}
		dbin := filepath.Join(droot, "usr/bin/linerate-dpdk")
		// It says it is the DPDK build, and which DPDK it runs on.
		if out, err := exec.Command(dbin, "version").CombinedOutput(); err != nil ||
			!regexp.MustCompile(`^linerate \S+ \(DPDK build, DPDK \d+\.\d+`).Match(out) {
			t.Errorf("packaged linerate-dpdk version: %v %q", err, out)
		}
		if out, err := exec.Command(dbin, "stages").CombinedOutput(); err != nil || !strings.Contains(string(out), "forward") {
			t.Errorf("packaged linerate-dpdk stages: %v\n%s", err, out)
		}
		if out, err := exec.Command(dbin, "validate", "--offline", "-c", cfg).CombinedOutput(); err != nil {
			t.Errorf("packaged linerate-dpdk validate the packaged config: %v\n%s", err, out)
		}
	} else if testenv.InCI() {
		t.Error("no libdpdk (make deps installs it): the linerate-dpdk package is not checked")
	}

	// The completion loads and completes the commands and run's flags.
	comp := filepath.Join(root, "usr/share/bash-completion/completions/linerate")
	script := `source "$1"; COMP_WORDS=(linerate va); COMP_CWORD=1; _linerate; echo "${COMPREPLY[@]}";` +
		`COMP_WORDS=(linerate run --log-f); COMP_CWORD=2; _linerate; echo "${COMPREPLY[@]}"`
	if out, err := exec.Command("bash", "-c", script, "bash", comp).CombinedOutput(); err != nil || string(out) != "validate\n--log-format\n" {
		t.Errorf("bash completion: %v %q", err, out)
	}
}

// checkInert runs the config at path, its control socket and metrics moved
// where this test may put them, for a moment: a service's default sends and
// receives nothing, and makes no packet.
func checkInert(t *testing.T, bin, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := strings.Replace(string(b), `listen = "127.0.0.1:9087"`, `listen = "127.0.0.1:`+strconv.Itoa(freePort(t, "tcp"))+`"`, 1)
	moved := filepath.Join(dir, "linerate.toml")
	if err := os.WriteFile(moved, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	run := exec.Command(bin, "run", "-c", moved, "--duration", "1s", "--json", "--live=false")
	run.Env = append(os.Environ(), "LINERATE_CONTROL=unix:"+filepath.Join(dir, "ctl.sock"))
	out, err := run.Output()
	if err != nil {
		t.Fatalf("run the packaged config: %v\n%s", err, out)
	}
	var sum struct {
		Generated uint64
		Ports     []struct {
			Name      string
			RxPackets uint64 `json:"rx_packets"`
			TxPackets uint64 `json:"tx_packets"`
		}
	}
	if err := json.Unmarshal(out, &sum); err != nil {
		t.Fatalf("run --json: %v\n%s", err, out)
	}
	if sum.Generated != 0 {
		t.Errorf("the packaged config generated %d packets", sum.Generated)
	}
	if len(sum.Ports) == 0 {
		t.Errorf("no ports in the summary:\n%s", out)
	}
	for _, p := range sum.Ports {
		if p.RxPackets != 0 || p.TxPackets != 0 {
			t.Errorf("port %s of the packaged config: rx %d tx %d packets", p.Name, p.RxPackets, p.TxPackets)
		}
	}
}

// TestMetricsPort: linerate's metrics port is 9087 in the package, the
// configs and the docs, not the port of prometheus-node-exporter: a line of
// the repository that names that one is about the node exporter.
func TestMetricsPort(t *testing.T) {
	files, err := exec.Command("git", "-C", "..", "ls-files").Output()
	if err != nil {
		t.Skipf("git ls-files: %v", err)
	}
	port := "91" + "00" // not this file's own line
	for _, f := range strings.Fields(string(files)) {
		if strings.HasSuffix(f, "go.sum") || strings.HasSuffix(f, ".pb.go") {
			continue
		}
		b, err := os.ReadFile(filepath.Join("..", f))
		if err != nil || strings.IndexByte(string(b), 0) >= 0 {
			continue // gone from the work tree, or binary
		}
		for i, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, port) && !strings.Contains(l, "node exporter") {
				t.Errorf("%s:%d names port %s, the node exporter's, without saying so: %s", f, i+1, port, strings.TrimSpace(l))
			}
		}
	}
}
