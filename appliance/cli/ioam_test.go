package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestIoamPOTKeys: `linerate ioam pot-keys` deals a path's keys into files of
// mode 0600 without printing them, refuses to replace them unless told to,
// and a config whose encap, transit and decap use the files proves every
// packet's path.
func TestIoamPOTKeys(t *testing.T) {
	for _, args := range [][]string{{"ioam", "--help"}, {"ioam", "pot-keys", "--help"}, {"help", "ioam"}} {
		if out, errOut, code := runCLI(t, args...); code != 0 || !strings.Contains(out+errOut, "Usage") {
			t.Errorf("%v: exit %d, output %q", args, code, out+errOut)
		}
	}
	if _, _, code := runCLI(t, "ioam", "pot-keys", "--nodes", "1"); code == 0 {
		t.Error("one node accepted")
	}
	dir := filepath.Join(t.TempDir(), "pot")
	out, errOut, code := runCLI(t, "ioam", "pot-keys", "--nodes", "3", "--dir", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var files []string
	for i := 1; i <= 3; i++ {
		f := filepath.Join(dir, fmt.Sprintf("node%d.toml", i))
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %04o, want 0600", f, st.Mode().Perm())
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		// Keys are never printed.
		for _, m := range regexp.MustCompile(`"(0x[0-9a-f]+)"`).FindAllStringSubmatch(string(b), -1) {
			if m[1] != "0xffffffffffffffc5" && strings.Contains(out+errOut, m[1]) {
				t.Errorf("the output shows key material %s", m[1])
			}
		}
		if hasSecret := strings.Contains(string(b), "secret ="); hasSecret != (i == 3) {
			t.Errorf("%s: secret %v", f, hasSecret)
		}
		files = append(files, f)
	}
	if !strings.Contains(out, files[2]) || !strings.Contains(out, "verifier") {
		t.Errorf("output %q", out)
	}
	if _, _, code := runCLI(t, "ioam", "pot-keys", "--nodes", "3", "--dir", dir); code == 0 {
		t.Error("existing keys replaced without --force")
	}

	cfg := fmt.Sprintf(`version = 1
[engine]
pin = false
[control]
listen = ""
[[ports]]
name = "m0"
driver = "mem"
[[pipelines]]
name = "path"
lcores = [0]
[[pipelines.stages]]
kind = "generator"
src = "2001:db8:1::1"
dst = "2001:db8:2::1"
count = 500
[[pipelines.stages]]
kind = "ioam.encap"
name = "encap"
mode = "inline"
namespaces = [ { id = 123 } ]
[[pipelines.stages.profiles]]
trace = { namespace = 123, type = "0xC00000", hops = 3 }
pot = { namespace = 123, key_file = %q }
[[pipelines.stages]]
kind = "ioam.transit"
name = "transit"
namespaces = [ { id = 123 } ]
pot = [ { namespace = 123, key_file = %q } ]
[[pipelines.stages]]
kind = "ioam.decap"
name = "decap"
namespaces = [ { id = 123 } ]
pot = [ { namespace = 123, key_file = %q } ]
[[pipelines.stages]]
kind = "sink"
`, files[0], files[1], files[2])
	path := filepath.Join(t.TempDir(), "pot.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := runCLI(t, "run", "-c", path, "--live=false", "--duration", "60s")
	if code != 0 {
		t.Fatalf("linerate run exited %d: %s", code, stderr)
	}
	counter := func(name string) int {
		m := regexp.MustCompile(`\b` + name + `=(\d+)`).FindStringSubmatch(stdout)
		if m == nil {
			return 0
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	if v, iv := counter("pot_valid"), counter("pot_invalid"); v != 500 || iv != 0 {
		t.Errorf("pot_valid %d, pot_invalid %d, want 500 and 0:\n%s", v, iv, stdout)
	}

	// --force deals new keys in place, mode 0600 still.
	if _, errOut, code := runCLI(t, "ioam", "pot-keys", "--nodes", "3", "--dir", dir, "--force", "--prefix", "node"); code != 0 {
		t.Fatalf("--force: exit %d: %s", code, errOut)
	}
	for _, f := range files {
		if st, err := os.Stat(f); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s after --force: %v", f, err)
		}
	}
}

// TestRunPrintsDecapDelays: `linerate run` prints the IOAM decap's delay
// percentiles in its summary, with no sink in the config.
func TestRunPrintsDecapDelays(t *testing.T) {
	dir := t.TempDir()
	cfg := fmt.Sprintf(`version = 1
[engine]
pin = false
[control]
listen = ""
[[ports]]
name = "out"
driver = "pcap"
tx_file = %q
[[pipelines]]
name = "path"
lcores = [0]
[[pipelines.stages]]
kind = "generator"
src = "2001:db8:1::1"
dst = "2001:db8:2::1"
count = 300
[[pipelines.stages]]
kind = "ioam.encap"
mode = "inline"
[[pipelines.stages.profiles]]
trace = { namespace = 0, type = "0x300000", hops = 2 }
[[pipelines.stages]]
kind = "ioam.decap"
name = "decap"
[[pipelines.stages]]
kind = "forward"
port = "out"
`, filepath.Join(dir, "out.pcap"))
	path := filepath.Join(dir, "delays.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := runCLI(t, "run", "-c", path, "--live=false", "--duration", "60s")
	if code != 0 {
		t.Fatalf("linerate run exited %d: %s", code, stderr)
	}
	for _, h := range []string{"hop1_delay", "e2e_delay"} {
		// Each histogram on its own line, under its owner's.
		if !regexp.MustCompile(`(?m)^path/decap\n(  \S+ .*\n)*  ` + h + ` +300 +\S`).MatchString(stdout) {
			t.Errorf("no %s percentiles in the summary:\n%s", h, stdout)
		}
	}
}
