package packaging

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/linerate/linerate/internal/testenv"
)

// TestFreshBox follows docs/operations.md on the package as a fresh box
// would, as far as a machine without systemd as its init can: it unpacks
// the .deb, puts the lab example in the config's place and edits it as the
// docs say (the metrics address, IOAM export, an [ipfix] table), runs the
// unit's ExecStartPre and
// ExecStart lines from the packaged unit with systemd's notify socket, and
// sees READY=1; then Debian's prometheus scrapes it with the docs' scrape
// config and nfacctd, with the package's example files, prints its IOAM
// hops; ExecReload (linerate reload) reloads it, and a stop exits cleanly.
func TestFreshBox(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the package: not in -short")
	}
	dpkgDeb := testenv.RequireCmd(t, "dpkg-deb")
	deb := buildDeb(t)
	root, dir := t.TempDir(), t.TempDir()
	if out, err := exec.Command(dpkgDeb, "-x", deb, root).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb -x: %v\n%s", err, out)
	}
	bin := filepath.Join(root, "usr/bin/linerate")

	// The collectors first: nfacctd with the package's examples.
	nf, nfPort := startNfacctd(t, dir, filepath.Join(root, "usr/share/doc/linerate/examples"))

	// The lab example in the config's place, edited: metrics where this
	// test's prometheus scrapes (9087 may be taken on a shared machine),
	// IPFIX on.
	packaged, err := os.ReadFile(filepath.Join(root, "usr/share/doc/linerate/examples/lab.toml"))
	if err != nil {
		t.Fatal(err)
	}
	mport := freePort(t, "tcp")
	target := "127.0.0.1:" + strconv.Itoa(mport)
	cfg := strings.Replace(string(packaged), `listen = "127.0.0.1:9087"`, `listen = "`+target+`"`, 1)
	if cfg == string(packaged) {
		t.Fatal("the lab example has no metrics listen = \"127.0.0.1:9087\"")
	}
	cfg = withIPFIX(t, cfg, "udp:127.0.0.1:"+strconv.Itoa(nfPort))
	cfgPath := filepath.Join(dir, "linerate.toml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}

	// The unit's command lines, with the unpacked binary and the edited
	// config in place of /usr/bin/linerate and /etc/linerate/linerate.toml.
	unit, err := os.ReadFile(filepath.Join(root, "lib/systemd/system/linerate.service"))
	if err != nil {
		t.Fatal(err)
	}
	line := func(key string) []string {
		m := regexp.MustCompile(`(?m)^` + key + `=(.*)$`).FindStringSubmatch(string(unit))
		if m == nil {
			t.Fatalf("the unit has no %s", key)
		}
		r := strings.NewReplacer("/usr/bin/linerate", bin, "/etc/linerate/linerate.toml", cfgPath)
		return strings.Fields(r.Replace(m[1]))
	}
	pre := line("ExecStartPre")
	if out, err := exec.Command(pre[0], pre[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("ExecStartPre %v: %v\n%s", pre, err, out)
	}
	notify, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: filepath.Join(dir, "notify"), Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer notify.Close()
	next := func(want string) {
		t.Helper()
		buf := make([]byte, 4096)
		_ = notify.SetReadDeadline(time.Now().Add(90 * time.Second))
		n, err := notify.Read(buf)
		if err != nil || !strings.HasPrefix(string(buf[:n]), want) {
			t.Fatalf("sd_notify: %q %v, want %s", buf[:n], err, want)
		}
	}
	run := line("ExecStart")
	lr := start(t, []string{"NOTIFY_SOCKET=" + filepath.Join(dir, "notify"), "LINERATE_CONTROL=unix:" + filepath.Join(dir, "ctl.sock")},
		run[0], run[1:]...)
	next("READY=1")

	// Prometheus sees it.
	prom, query := startPrometheus(t, dir, target)
	waitFor(t, "prometheus: up == 1 and the ports' counters", prom, func() bool {
		if query(`up{job="linerate"}`)["appliance-1/"] != "1" {
			return false
		}
		for k, v := range query(`sum by (appliance, port) (linerate_port_tx_packets_total)`) {
			if f, _ := strconv.ParseFloat(v, 64); strings.HasPrefix(k, "appliance-1/") && f > 0 {
				return true
			}
		}
		return false
	})

	// nfacctd sees its IOAM hops and its STAMP session.
	waitFor(t, "nfacctd to print IOAM hops and STAMP intervals", lr, func() bool {
		hops, stamp := false, false
		sc := bufio.NewScanner(strings.NewReader(nf.out.String()))
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) != nil {
				continue
			}
			hops = hops || fmt.Sprint(m["ioam_hop_count"]) == "4"
			stamp = stamp || fmt.Sprint(m["stamp_ssid"]) == "1"
		}
		return hops && stamp
	})

	// Its exposition, IPFIX counters included, passes promtool.
	resp, err := http.Get("http://" + target + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	expo, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(expo), `linerate_ipfix_records_total{collector="udp:127.0.0.1:`+strconv.Itoa(nfPort)+`"}`) {
		t.Errorf("no linerate_ipfix_records_total for nfacctd in /metrics")
	}
	checkExposition(t, testenv.RequireCmd(t, "promtool"), expo)

	// ExecReload, which waits for the appliance's answer, then systemctl stop.
	rl := exec.Command(line("ExecReload")[0], line("ExecReload")[1:]...)
	rl.Env = append(os.Environ(), "LINERATE_CONTROL=unix:"+filepath.Join(dir, "ctl.sock"))
	if out, err := rl.CombinedOutput(); err != nil {
		t.Errorf("ExecReload %v: %v\n%s", rl.Args, err, out)
	}
	next("RELOADING=1")
	next("READY=1")
	if err := lr.stop(); err != nil {
		t.Errorf("the stop: %v\n%s", err, lr.out.String())
	}
	next("STOPPING=1")
}
