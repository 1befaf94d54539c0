package external

import (
	"slices"
	"testing"

	"github.com/linerate/linerate/internal/readmetest"
)

// TestConfigDocKeys: docs/config.md documents every key of the external
// stage's table, and no other, so the reference cannot drift from the code
// again (copy_buffers was documented nowhere, restart_after only in prose).
func TestConfigDocKeys(t *testing.T) {
	want := readmetest.FlatKeys(stageConfig{})
	slices.Sort(want)
	if got := readmetest.TableKeys(t, "../../docs/config.md", "### The `external` stage"); !slices.Equal(got, want) {
		t.Errorf("docs/config.md's external stage keys %v, the code's %v", got, want)
	}
}
