package cli

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/linerate/linerate/appliance"
	"github.com/linerate/linerate/appliance/cli/table"
	"github.com/linerate/linerate/appliance/control"
	"github.com/linerate/linerate/appliance/control/controltest"
	"github.com/linerate/linerate/appliance/stats"
	"github.com/linerate/linerate/config"
)

// statusAgainst runs `linerate status` against a control server over src.
func statusAgainst(t *testing.T, src control.Source, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "ctl.sock")
	srv := control.NewServer(src, nil)
	if _, err := srv.Start("unix:" + sock); err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	var out, errb bytes.Buffer
	code = runStatus(append([]string{"--control", "unix:" + sock}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

// hasRow reports whether out has a line whose whitespace-separated fields are
// fields.
func hasRow(out string, fields ...string) bool {
	for _, line := range strings.Split(out, "\n") {
		if strings.Join(strings.Fields(line), " ") == strings.Join(fields, " ") {
			return true
		}
	}
	return false
}

func TestStatusTables(t *testing.T) {
	code, out, errs := statusAgainst(t, controltest.New())
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, row := range [][]string{
		{"config", "/etc/linerate/lab.toml"},
		{"PORT", "DRIVER", "LINK", "MTU", "RXQ", "TXQ", "MAC", "TIMESTAMPS", "RX", "PACKETS", "TX", "PACKETS"},
		{"p0", "mem", "up", "1500", "2", "2", "02:00:00:00:00:01", "software", "1000", "990"},
		{"p1", "afpacket", "down", "9000", "1", "2", "02:00:00:00:00:02", "hardware", "500", "400"},
		{"edge", "0,1", "classify", "→", "ioam.encap", "→", "forward"},
		{"coded", "1", "rlnc.encoder", "→", "forward"},
		// 900×200ns, 90×2µs, 9×50µs, 1×3ms: bucket midpoints, within 0.4%.
		{"0", "2", "edge", "100000", "2.5%", "1150", "200ns", "200ns", "2.00µs", "50.0µs", "3.00ms"},
		{"1", "-", "edge,coded", "80000", "1.5%", "700", "200ns", "200ns", "2.00µs", "50.0µs", "3.00ms"},
		{"DROP", "REASON", "PACKETS"},
	} {
		if !hasRow(out, row...) {
			t.Errorf("no row %q in:\n%s", row, out)
		}
	}
	if !regexp.MustCompile(`(?m)^linerate 1\.2\.3-test\s+running, up \S+ since 2026-11-29`).MatchString(out) {
		t.Errorf("no header line in:\n%s", out)
	}
	// Drops by count, then reason.
	if i, j, k := strings.Index(out, "too_big"), strings.Index(out, "malformed"), strings.Index(out, "no_buffer"); !(i >= 0 && i < j && j < k) {
		t.Errorf("drops out of order:\n%s", out)
	}
	if strings.Contains(out, "POOL") {
		t.Errorf("pools printed without --stats:\n%s", out)
	}
}

// TestStatusStats: --wide prints every counter of a row on its line; by
// default a list that does not fit moves below its table, under the row's
// name, or wraps within its column.
func TestStatusStats(t *testing.T) {
	code, out, errs := statusAgainst(t, controltest.New(), "--stats")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, row := range [][]string{
		{"p0", "1000", "64000", "990", "63360", "1", "2", "3"},
		{"p1", "500", "750000", "400", "600000", "0", "0", "0"},
		{"p1"},
		{"driver", "counters", "poll_wakeups=11", "ring_full=7"},
		{"edge", "encap", "ioam.encap", "2", "550", "encapsulated=540", "too_big=10"},
		{"too_big_total=10"},
	} {
		if !hasRow(out, row...) {
			t.Errorf("no row %q in:\n%s", row, out)
		}
	}
	checkWidth(t, "status --stats", out)
	code, out, errs = statusAgainst(t, controltest.New(), "--stats", "--wide")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, row := range [][]string{
		{"p0", "1000", "64000", "990", "63360", "1", "2", "3", "-"},
		{"p1", "500", "750000", "400", "600000", "0", "0", "0", "poll_wakeups=11", "ring_full=7"},
		{"edge", "encap", "ioam.encap", "2", "550", "encapsulated=540", "too_big_total=10", "too_big=10"},
		{"coded", "encoder", "rlnc.encoder", "-", "300", "generations=12", "no_buffer=5", "malformed=1"},
		{"p0", "4096", "128", "0", "3"},
		// Each histogram under its owner. 50×10µs, 40×20µs, 10×1ms: min
		// 10µs, mean 113µs.
		{"HISTOGRAM", "COUNT", "MIN", "MEAN", "P50", "P90", "P99", "P99.9", "MAX"},
		{"edge/encap"},
		{"latency", "100", "10.0µs", "113µs", "10.0µs", "20.0µs", "1.00ms", "1.00ms", "1.00ms"},
		// 3×1500B, 9×6000B: 6000's bucket is [5984, 6015], midpoint 5999.
		{"coded/encoder"},
		{"generation_size", "12", "1500B", "4875B", "5999B", "5999B", "5999B", "5999B", "6000B"},
	} {
		if !hasRow(out, row...) {
			t.Errorf("no row %q in:\n%s", row, out)
		}
	}
}

// checkWidth fails the test when a line of out is wider than table.Width.
func checkWidth(t *testing.T, what, out string) {
	t.Helper()
	for i, l := range strings.Split(out, "\n") {
		if n := utf8.RuneCountInString(l); n > table.Width {
			t.Errorf("%s: line %d is %d columns wide:\n%s", what, i+1, n, l)
		}
	}
}

func TestStatusEmptyHistogram(t *testing.T) {
	src := controltest.New()
	snap := controltest.Snapshot()
	snap.Histogram[0].Hist = stats.NewHistSnapshot()
	src.Set(snap, controltest.Status())
	code, out, errs := statusAgainst(t, src, "--stats")
	if code != 0 || !hasRow(out, "latency", "0", "-", "-", "-", "-", "-", "-", "-") {
		t.Errorf("exit %d %s\n%s", code, errs, out)
	}
}

func TestStatusJSON(t *testing.T) {
	code, out, errs := statusAgainst(t, controltest.New(), "--json", "--stats")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var v struct {
		Status struct {
			Version string
			State   string
			Ports   []struct{ Name string }
		}
		Stats struct {
			Lcores []struct {
				LoopGap struct {
					Count   string
					P99     string
					Buckets []struct{ Le, Count string }
				} `json:"loop_gap"`
			}
			Drops []struct {
				Reason string
				Count  string
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if v.Status.Version != "1.2.3-test" || v.Status.State != "STATE_RUNNING" || len(v.Status.Ports) != 2 {
		t.Errorf("status = %+v", v.Status)
	}
	if len(v.Stats.Lcores) != 2 || v.Stats.Lcores[0].LoopGap.Count != "1000" || len(v.Stats.Lcores[0].LoopGap.Buckets) != 4 {
		t.Errorf("lcores = %+v", v.Stats.Lcores)
	}
	if len(v.Stats.Drops) != 4 {
		t.Errorf("drops = %+v", v.Stats.Drops)
	}

	// Without --stats, no buckets.
	_, out, _ = statusAgainst(t, controltest.New(), "--json")
	if strings.Contains(out, `"le"`) {
		t.Errorf("buckets without --stats:\n%.400s", out)
	}
}

func TestStatusStarting(t *testing.T) {
	src := &controltest.Source{}
	src.Set(nil, appliance.Status{Version: "x", State: appliance.StateStarting})
	code, out, errs := statusAgainst(t, src)
	if code != 0 || !strings.Contains(out, "starting") || !strings.Contains(out, "no stats yet") {
		t.Errorf("exit %d\n%s\n%s", code, out, errs)
	}
}

func TestStatusErrors(t *testing.T) {
	var out, errb bytes.Buffer
	sock := filepath.Join(t.TempDir(), "none.sock")
	if code := runStatus([]string{"--control", "unix:" + sock, "--timeout", "2s"}, &out, &errb); code != 1 ||
		!strings.Contains(errb.String(), "cannot reach the appliance at unix:"+sock) {
		t.Errorf("no server: exit %d, %q", code, errb.String())
	}
	for _, args := range [][]string{{"--bogus"}, {"extra"}, {"--control", "nonsense"}} {
		out.Reset()
		errb.Reset()
		code := runStatus(args, &out, &errb)
		if code == 0 || errb.Len() == 0 {
			t.Errorf("%q: exit %d, stderr %q", args, code, errb.String())
		}
	}
	out.Reset()
	errb.Reset()
	if code := runStatus([]string{"--help"}, &out, &errb); code != 0 || !strings.Contains(out.String(), "Usage: linerate status") ||
		!strings.Contains(out.String(), "--control address") || errb.Len() != 0 {
		t.Errorf("--help: exit %d\n%s\n%s", code, out.String(), errb.String())
	}
}

func TestDefaultControl(t *testing.T) {
	if got := defaultControl(); got != "unix:/run/linerate/linerate.sock" {
		t.Errorf("default control address %q", got)
	}
}

func TestFmtNs(t *testing.T) {
	for ns, want := range map[uint64]string{
		0: "0ns", 999: "999ns", 1000: "1.00µs", 12_345: "12.3µs", 999_499: "999µs", 999_500: "1.00ms",
		1_234_567: "1.23ms", 2_000_000_000: "2.00s", 3_600_000_000_000: "3600s",
	} {
		if got := fmtNs(ns); got != want {
			t.Errorf("fmtNs(%d) = %q, want %q", ns, got, want)
		}
	}
}

// TestClientsFindTheServer: for a user who is not root, run listens in the
// runtime directory, and the clients' default address is the same socket.
func TestClientsFindTheServer(t *testing.T) {
	const def = "unix:/run/linerate/linerate.sock"
	if got := userAddr(def, 0, "/run/user/0"); got != def {
		t.Errorf("root: %s, want %s", got, def)
	}
	if got, want := userAddr(def, 1000, "/run/user/1000"), "unix:/run/user/1000/linerate-1000.sock"; got != want {
		t.Errorf("user 1000: %s, want %s", got, want)
	}
	if got := userAddr("unix:/srv/lr.sock", 1000, "/run/user/1000"); got != "unix:/srv/lr.sock" {
		t.Errorf("a socket the config names moved to %s", got)
	}
	var f config.File
	f.Defaults()
	if defaultControl() != controlAddr(&f) {
		t.Errorf("clients dial %s, run listens on %s", defaultControl(), controlAddr(&f))
	}
}
