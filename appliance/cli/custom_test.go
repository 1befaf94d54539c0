package cli

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCustomBuild builds docs/examples/custom, linerate with a stage of its
// own, as README.md's "Custom builds" tells a user to, and runs the example's
// config with it: validate accepts it, and run counts each IP version.
func TestCustomBuild(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "linerate-custom")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/linerate/linerate/docs/examples/custom").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	// README.md shows the example's main.go, its doc comment left out.
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	main, err := os.ReadFile(filepath.Join("..", "..", "docs", "examples", "custom", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	_, code, _ := strings.Cut(string(main), "\npackage main\n")
	if !strings.Contains(string(readme), "```go\npackage main\n"+code+"```\n") {
		t.Errorf("README.md does not show docs/examples/custom/main.go as it is:\n%s", code)
	}
	cfg := filepath.Join("..", "..", "docs", "examples", "custom", "ipversion.toml")
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, args...)
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("linerate-custom %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errb.String())
		}
		return out.String()
	}
	if out := run("stages"); !hasLine(out, "example.ipversion", "count packets by IP version") || !hasLine(out, "stamp.sender") {
		t.Errorf("stages of the custom build:\n%s", out)
	}
	if out, _, _ := runCLI(t, "stages"); strings.Contains(out, "example.ipversion") {
		t.Errorf("the stock linerate has the example's stage:\n%s", out)
	}
	if out := run("validate", "-c", cfg); out != cfg+": ok\n" {
		t.Errorf("validate: %q", out)
	}
	// The generators have counts: run stops by itself.
	out := run("run", "-c", cfg, "--live=false", "--log-level", "warn", "--duration", "2m")
	if !hasRow(out, "mix", "versions", "example.ipversion", "0", "10000", "ipv4=4000", "ipv6=6000", "-") {
		t.Errorf("no example.ipversion row with its counters in:\n%s", out)
	}
	var sum struct {
		Stages []struct {
			Name     string
			Counters map[string]uint64
		}
	}
	if err := json.Unmarshal([]byte(run("run", "-c", cfg, "--json", "--log-level", "warn", "--duration", "2m")), &sum); err != nil {
		t.Fatal(err)
	}
	for _, st := range sum.Stages {
		if st.Name == "versions" {
			if c := st.Counters; c["ipv4"] != 4000 || c["ipv6"] != 6000 || c["other"] != 0 {
				t.Errorf("example.ipversion's counters: %v", c)
			}
			return
		}
	}
	t.Errorf("no stage versions in %+v", sum)
}
