package appliance_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/linerate/linerate/internal/testenv"
)

// The engine and the stage contract know nothing of the control plane: the
// engine exposes plain Go types (Status, stats snapshots, stage instances, Do),
// and appliance/control serves them over gRPC and appliance/metrics to
// Prometheus. Neither package may pull those in, even indirectly.
func TestNoControlPlaneDeps(t *testing.T) {
	goBin := testenv.RequireCmd(t, "go")
	forbidden := []string{
		"google.golang.org/grpc",
		"google.golang.org/protobuf",
		"github.com/prometheus/",
		"github.com/linerate/linerate/appliance/control",
		"github.com/linerate/linerate/appliance/api",
		"github.com/linerate/linerate/appliance/metrics",
	}
	for _, pkg := range []string{"github.com/linerate/linerate/appliance", "github.com/linerate/linerate/plugins"} {
		out, err := exec.Command(goBin, "list", "-deps", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		deps := strings.Fields(string(out))
		if len(deps) < 10 {
			t.Fatalf("go list -deps %s lists only %v", pkg, deps)
		}
		for _, d := range deps {
			for _, f := range forbidden {
				if d == f || strings.HasPrefix(d, strings.TrimSuffix(f, "/")+"/") {
					t.Errorf("%s imports %s", pkg, d)
				}
			}
		}
	}
}

// TestCoreNamesNoPlugin: the core (the engine and config) depends on the
// stage contract and the port contract, never on a plugin or a driver; the
// stage contract depends on packets, the clock and stats alone. What a plugin
// or driver adds reaches the core through their registries.
func TestCoreNamesNoPlugin(t *testing.T) {
	goBin := testenv.RequireCmd(t, "go")
	const mod = "github.com/linerate/linerate/"
	deps := func(pkg string) []string {
		out, err := exec.Command(goBin, "list", "-deps", mod+pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		return strings.Fields(string(out))
	}
	for _, core := range []string{"appliance", "config"} {
		for _, d := range deps(core) {
			p, ok := strings.CutPrefix(d, mod)
			if ok && (strings.HasPrefix(p, "plugins/") || strings.HasPrefix(p, "ports/")) {
				t.Errorf("%s depends on %s", core, p)
			}
		}
	}
	allowed := map[string]bool{"appliance/packet": true, "appliance/clock": true, "appliance/stats": true, "plugins": true}
	for _, d := range deps("plugins") {
		if p, ok := strings.CutPrefix(d, mod); ok && !allowed[p] {
			t.Errorf("the stage contract (plugins) depends on %s", p)
		} else if !ok && strings.Contains(d, ".") {
			t.Errorf("the stage contract (plugins) depends on %s, outside the standard library", d)
		}
	}
}
