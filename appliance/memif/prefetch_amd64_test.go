package memif

import (
	"os"
	"strings"
	"testing"
)

// The CPUID probe agrees with what the kernel read of the same bit
// (3dnowprefetch in /proc/cpuinfo's flags).
func TestHasPrefetchW(t *testing.T) {
	info, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		t.Fatal(err)
	}
	var flags []string
	for _, l := range strings.Split(string(info), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "flags" {
			flags = strings.Fields(v)
			break
		}
	}
	want := false
	for _, f := range flags {
		want = want || f == "3dnowprefetch"
	}
	if hasPrefetchW != want {
		t.Errorf("hasPrefetchW %v, /proc/cpuinfo says %v", hasPrefetchW, want)
	}
}
