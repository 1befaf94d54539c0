package packaging

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDPDKAbsentNamesPackage: the plain binary, asked for the dpdk driver,
// tells a user of the package which package to install (linerate-dpdk),
// not a make target of the source tree.
func TestDPDKAbsentNamesPackage(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "dpdk.toml")
	if err := os.WriteFile(cfg, []byte(`version = 1
[[ports]]
name = "p0"
driver = "dpdk"
[[pipelines]]
name = "main"
rx = ["p0"]
stages = [{ kind = "forward", port = "p0" }]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(linerateBin, "validate", "--offline", "-c", cfg).CombinedOutput()
	if err == nil {
		t.Fatalf("the plain binary validates a dpdk port:\n%s", out)
	}
	if !strings.Contains(string(out), "linerate-dpdk package") || strings.Contains(string(out), "make build-dpdk") {
		t.Errorf("the dpdk driver's absence does not name the linerate-dpdk package:\n%s", out)
	}
}
