package cli

import (
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigService: `config service` is the package's default config: it
// validates, and a run of it sends, receives and generates nothing, with
// its metrics on (not on the node exporter's port). `config default` is
// still the lab, which generates traffic.
func TestConfigService(t *testing.T) {
	svc, errs, code := runCLI(t, "config", "service")
	if code != 0 || errs != "" {
		t.Fatalf("config service: exit %d: %s", code, errs)
	}
	if !strings.Contains(svc, "\nlisten = \"127.0.0.1:9087\"") {
		t.Errorf("config service serves no metrics on 127.0.0.1:9087:\n%s", svc)
	}
	if strings.Contains(svc, "generator") {
		t.Errorf("config service has a generator:\n%s", svc)
	}
	if lab, _, code := runCLI(t, "config", "default"); code != 0 || !strings.Contains(lab, `kind = "generator"`) {
		t.Errorf("config default is not the lab (exit %d)", code)
	}
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	path := filepath.Join(dir, "linerate.toml")
	cfg := strings.Replace(svc, `listen = "127.0.0.1:9087"`, `listen = "`+addr+`"`, 1)
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, errs, code := runCLI(t, "validate", "-c", path); code != 0 {
		t.Fatalf("validate config service: exit %d %s %s", code, out, errs)
	}
	run := exec.Command(linerateBin, "run", "-c", path, "--duration", "1s", "--json", "--live=false")
	run.Env = append(os.Environ(), "LINERATE_CONTROL=unix:"+filepath.Join(dir, "ctl.sock"))
	out, err := run.Output()
	if err != nil {
		t.Fatalf("run config service: %v\n%s", err, out)
	}
	var sum struct {
		Generated uint64 `json:"generated"`
		Ports     []struct {
			Name      string `json:"name"`
			RxPackets uint64 `json:"rx_packets"`
			TxPackets uint64 `json:"tx_packets"`
		} `json:"ports"`
	}
	if err := json.Unmarshal(out, &sum); err != nil || len(sum.Ports) == 0 {
		t.Fatalf("run --json: %v\n%s", err, out)
	}
	if sum.Generated != 0 {
		t.Errorf("config service generated %d packets", sum.Generated)
	}
	for _, p := range sum.Ports {
		if p.RxPackets != 0 || p.TxPackets != 0 {
			t.Errorf("port %s: rx %d tx %d packets", p.Name, p.RxPackets, p.TxPackets)
		}
	}
}
