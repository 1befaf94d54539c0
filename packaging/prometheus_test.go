package packaging

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/linerate/linerate/internal/testenv"
)

// TestPrometheusScrape runs the lab with its metrics endpoint and Debian's
// prometheus server with the scrape config of docs/operations.md, its
// targets replaced by the lab's: the scrape is up, queries return the
// lab's counters with the appliance label, and promtool check metrics
// passes on the exposition.
func TestPrometheusScrape(t *testing.T) {
	promtool := testenv.RequireCmd(t, "promtool")
	dir := t.TempDir()
	mport := freePort(t, "tcp")
	lr := start(t, []string{"LINERATE_CONTROL=unix:" + filepath.Join(dir, "ctl.sock")},
		linerateBin, "run", "-c", labConfig(t, dir, mport), "--live=false", "--log-level", "warn")
	target := "127.0.0.1:" + strconv.Itoa(mport)
	var exposition []byte
	waitFor(t, "metrics on "+target, lr, func() bool {
		resp, err := http.Get("http://" + target + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		exposition, err = io.ReadAll(resp.Body)
		return err == nil && resp.StatusCode == 200 && strings.Contains(string(exposition), "linerate_port_tx_packets_total{")
	})
	checkExposition(t, promtool, exposition)
	if !strings.Contains(string(exposition), "linerate_stage_count_packets_total{") {
		t.Error("the counter stage's metric is not served")
	}

	prom, query := startPrometheus(t, dir, target)
	waitFor(t, "up{appliance=\"appliance-1\"} == 1", prom, func() bool {
		return query(`up{job="linerate"}`)["appliance-1/"] == "1"
	})
	waitFor(t, "up{appliance=\"appliance-2\"} == 0 (a box that does not answer)", prom, func() bool {
		return query(`up{job="linerate"}`)["appliance-2/"] == "0"
	})
	// The lab's ports count what they send: a query returns the counter,
	// by port, with the appliance label, and it grows.
	var first float64
	positive := regexp.MustCompile(`^[1-9][0-9.e+]*$`)
	waitFor(t, "linerate_port_tx_packets_total > 0", prom, func() bool {
		for k, v := range query(`sum by (appliance, port) (linerate_port_tx_packets_total)`) {
			if strings.HasPrefix(k, "appliance-1/") && positive.MatchString(v) {
				first, _ = strconv.ParseFloat(v, 64)
				return true
			}
		}
		return false
	})
	waitFor(t, "linerate_port_tx_packets_total to grow", prom, func() bool {
		for k, v := range query(`sum by (appliance, port) (linerate_port_tx_packets_total)`) {
			if f, _ := strconv.ParseFloat(v, 64); strings.HasPrefix(k, "appliance-1/") && f > first {
				return true
			}
		}
		return false
	})
	if q := query(`sum by (appliance) (linerate_stage_packets_total)`); q["appliance-1/"] == "" {
		t.Errorf("no linerate_stage_packets_total for appliance-1: %v", q)
	}
	if err := prom.stop(); err != nil {
		t.Errorf("prometheus: %v\n%s", err, prom.out.String())
	}
	if err := lr.stop(); err != nil {
		t.Errorf("linerate: %v\n%s", err, lr.out.String())
	}
}

// startPrometheus runs Debian's prometheus with docs/operations.md's scrape
// config: its first target is target, its second a box that does not
// answer, and it scrapes every second. query runs an instant query and
// returns the value of each series by "appliance/port".
func startPrometheus(t *testing.T, dir, target string) (*proc, func(q string) map[string]string) {
	t.Helper()
	promBin := testenv.RequireCmd(t, "prometheus")
	promtool := testenv.RequireCmd(t, "promtool")
	conf := docBlock(t, "prometheus.yml")
	conf = strings.Replace(conf, "appliance-1.example.net:9087", target, 1)
	conf = strings.Replace(conf, "appliance-2.example.net:9087", "127.0.0.1:"+strconv.Itoa(freePort(t, "tcp")), 1)
	conf = strings.Replace(conf, "scrape_interval: 15s", "scrape_interval: 1s", 1)
	confPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "config", confPath).CombinedOutput(); err != nil {
		t.Fatalf("promtool check config: %v\n%s", err, out)
	}
	web := "127.0.0.1:" + strconv.Itoa(freePort(t, "tcp"))
	prom := start(t, nil, promBin, "--config.file="+confPath, "--storage.tsdb.path="+filepath.Join(dir, "tsdb"),
		"--web.listen-address="+web)
	query := func(q string) map[string]string {
		resp, err := http.Get("http://" + web + "/api/v1/query?query=" + url.QueryEscape(q))
		if err != nil {
			return nil
		}
		defer resp.Body.Close()
		var r struct {
			Status string
			Data   struct {
				Result []struct {
					Metric map[string]string
					Value  [2]any
				}
			}
		}
		if json.NewDecoder(resp.Body).Decode(&r) != nil || r.Status != "success" {
			return nil
		}
		out := map[string]string{}
		for _, s := range r.Data.Result {
			out[s.Metric["appliance"]+"/"+s.Metric["port"]] = fmt.Sprint(s.Value[1])
		}
		return out
	}
	return prom, query
}

// checkExposition runs promtool check metrics on the exposition as served,
// every line of it: deprecated names are served to the same scrapers and
// must pass too (docs/compatibility.md). Their HELP says they are.
func checkExposition(t *testing.T, promtool string, exposition []byte) {
	t.Helper()
	for _, l := range strings.Split(string(exposition), "\n") {
		if strings.HasPrefix(l, "# HELP ") && strings.Contains(l, "renamed to") && !strings.Contains(l, " Deprecated: renamed to ") {
			t.Errorf("a deprecated name's HELP does not start with Deprecated: %s", l)
		}
	}
	check := exec.Command(promtool, "check", "metrics")
	check.Stdin = strings.NewReader(string(exposition))
	if out, err := check.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}
