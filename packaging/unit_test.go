package packaging

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/linerate/linerate/internal/testenv"
)

// linerateBin is the command, built once for the tests.
var linerateBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "linerate-pkg")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	linerateBin = filepath.Join(dir, "linerate")
	if out, err := exec.Command("go", "build", "-o", linerateBin, "github.com/linerate/linerate/appliance/cmd/linerate").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build linerate: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// TestUnitVerify runs systemd-analyze verify on a copy of the unit whose
// commands point at the built binary (verify refuses a missing one) and
// whose config is the packaged default: no warning, no error.
func TestUnitVerify(t *testing.T) {
	analyze := testenv.RequireCmd(t, "systemd-analyze")
	unit, err := os.ReadFile("linerate.service")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	text := strings.ReplaceAll(string(unit), "/usr/bin/linerate", linerateBin)
	text = strings.ReplaceAll(text, "/etc/linerate/linerate.toml", filepath.Join(dir, "linerate.toml"))
	if text == string(unit) {
		t.Fatal("the unit does not run /usr/bin/linerate")
	}
	path := filepath.Join(dir, "linerate.service")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", "--man=no", path).CombinedOutput()
	// verify prints nothing for a good unit; lines about other units
	// (the host's own) are not this one's.
	var ours []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if strings.Contains(l, "linerate") {
			ours = append(ours, l)
		}
	}
	if err != nil || len(ours) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	// verify exits 0 on a unit it only warns about: a broken copy must
	// show what the check above would catch.
	bad := filepath.Join(dir, "linerate-bad.service")
	if err := os.WriteFile(bad, []byte(strings.Replace(text, "Type=notify", "Type=notified", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, _ := exec.Command(analyze, "verify", "--man=no", bad).CombinedOutput(); !strings.Contains(string(out), "linerate-bad.service") {
		t.Errorf("systemd-analyze verify says nothing of a bad Type:\n%s", out)
	}
	// The DPDK package's drop-in, on the unit: verify reads it from the
	// unit's .d directory.
	dropin, err := os.ReadFile("dpdk-dropin.conf")
	if err != nil {
		t.Fatal(err)
	}
	dbin := filepath.Join(dir, "linerate-dpdk")
	copyFile(t, linerateBin, dbin)
	if err := os.MkdirAll(filepath.Join(dir, "linerate.service.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "linerate.service.d", "dpdk.conf"),
		[]byte(strings.ReplaceAll(strings.ReplaceAll(string(dropin), "/usr/bin/linerate-dpdk", dbin), "/etc/linerate/linerate.toml", filepath.Join(dir, "linerate.toml"))), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(analyze, "verify", "--man=no", path).CombinedOutput(); err != nil || strings.Contains(string(out), "linerate") {
		t.Errorf("systemd-analyze verify with the DPDK drop-in: %v\n%s", err, out)
	}
	for _, want := range []string{"Type=notify", "Restart=on-failure", "ExecReload=/usr/bin/linerate reload ",
		"RuntimeDirectory=linerate", "LimitMEMLOCK=infinity", "CapabilityBoundingSet="} {
		if !strings.Contains(string(unit), "\n"+want) {
			t.Errorf("the unit has no %s", want)
		}
	}
}
