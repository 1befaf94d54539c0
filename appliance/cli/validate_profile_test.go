package cli

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestValidateTestProfile: validate accepts a good test profile (a [test]
// table, no pipelines) as linerate test reads it, printing "FILE: ok", and
// names the file and line of a misspelt key in it.
func TestValidateTestProfile(t *testing.T) {
	good, err := os.ReadFile(filepath.Join("..", "..", "docs", "examples", "test", "wire.toml"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "profile.toml")
	if err := os.WriteFile(path, good, 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := runCLI(t, "validate", "-c", path)
	if code != 0 || strings.TrimSpace(out) != path+": ok" {
		t.Fatalf("validate refused a good test profile (code %d): out %q stderr %q", code, out, stderr)
	}

	// A misspelt key in [test] is refused with its file and line.
	bad := strings.Replace(string(good), "precision = 0.02", "precison = 0.02", 1)
	if bad == string(good) {
		t.Fatal("wire.toml has no precision line to misspell")
	}
	line := 1 + strings.Count(bad[:strings.Index(bad, "precison")], "\n")
	if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, code = runCLI(t, "validate", "-c", path)
	if code == 0 {
		t.Fatalf("validate accepted a misspelt key in a test profile")
	}
	for _, want := range []string{path + ":" + strconv.Itoa(line) + ":", "precison"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("validate's message %q lacks %q", stderr, want)
		}
	}
}
