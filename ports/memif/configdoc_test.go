package memif

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/linerate/linerate/internal/readmetest"
)

// TestConfigDocKeys: docs/config.md's memif driver section documents every
// key of the port's table, and no other, so the reference cannot drift
// from the code (it named the driver and none of its keys).
func TestConfigDocKeys(t *testing.T) {
	b, err := os.ReadFile("../../docs/config.md")
	if err != nil {
		t.Fatal(err)
	}
	const heading = "### The `memif` driver"
	_, rest, ok := strings.Cut(string(b), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("docs/config.md has no %q", heading)
	}
	cell := regexp.MustCompile("^\\| `([a-z_0-9]+)` \\|")
	var got []string
	for _, line := range strings.Split(rest, "\n") {
		if strings.HasPrefix(line, "#") {
			break
		}
		if m := cell.FindStringSubmatch(line); m != nil {
			got = append(got, m[1])
		}
	}
	slices.Sort(got)
	want := readmetest.FlatKeys(portConfig{})
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("docs/config.md's memif keys %v, the code's %v", got, want)
	}
}
