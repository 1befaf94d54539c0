package memif

import (
	"slices"
	"testing"

	"github.com/linerate/linerate/internal/readmetest"
)

// TestConfigDocKeys: docs/config.md's memif driver section documents every
// key of the port's table, and no other, so the reference cannot drift
// from the code (it named the driver and none of its keys).
func TestConfigDocKeys(t *testing.T) {
	want := readmetest.FlatKeys(portConfig{})
	slices.Sort(want)
	if got := readmetest.TableKeys(t, "../../docs/config.md", "### The `memif` driver"); !slices.Equal(got, want) {
		t.Errorf("docs/config.md's memif keys %v, the code's %v", got, want)
	}
}
