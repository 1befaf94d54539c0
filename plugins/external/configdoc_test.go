package external

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/linerate/linerate/internal/readmetest"
)

// docKeys is the first column of the table under heading in a markdown
// file: the keys it documents, sorted.
func docKeys(t *testing.T, path, heading string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("%s has no %q", path, heading)
	}
	cell := regexp.MustCompile("^\\| `([a-z_0-9]+)` \\|")
	var keys []string
	for _, line := range strings.Split(rest, "\n") {
		if strings.HasPrefix(line, "#") {
			break
		}
		if m := cell.FindStringSubmatch(line); m != nil {
			keys = append(keys, m[1])
		}
	}
	slices.Sort(keys)
	return keys
}

// TestConfigDocKeys: docs/config.md documents every key of the external
// stage's table, and no other, so the reference cannot drift from the code
// again (copy_buffers was documented nowhere, restart_after only in prose).
func TestConfigDocKeys(t *testing.T) {
	want := readmetest.FlatKeys(stageConfig{})
	slices.Sort(want)
	if got := docKeys(t, "../../docs/config.md", "### The `external` stage"); !slices.Equal(got, want) {
		t.Errorf("docs/config.md's external stage keys %v, the code's %v", got, want)
	}
}
