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
