package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// logConfig is a config that stops by itself and logs a warning (an unused
// port), with the [log] table given.
func logConfig(t *testing.T, log string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "log.toml")
	cfg := `version = 1
[engine]
pin = false
[control]
listen = ""
` + log + `
[[ports]]
name = "null0"
driver = "null"
[[pipelines]]
name = "gen"
[[pipelines.stages]]
kind = "generator"
src = "2001:db8::1"
dst = "2001:db8::2"
count = 100
[[pipelines.stages]]
kind = "forward"
port = "null0"
`
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestLogFormats: [log] format = "json" logs one JSON object a line, with
// the same messages and attributes as the text format; level filters them.
func TestLogFormats(t *testing.T) {
	_, textLog, code := runCLI(t, "run", "-c", logConfig(t, "[log]\nformat = \"text\"\nlevel = \"debug\""), "--live=false", "--json")
	if code != 0 {
		t.Fatalf("text run: exit %d\n%s", code, textLog)
	}
	_, jsonLog, code := runCLI(t, "run", "-c", logConfig(t, "[log]\nformat = \"json\"\nlevel = \"debug\""), "--live=false", "--json")
	if code != 0 {
		t.Fatalf("json run: exit %d\n%s", code, jsonLog)
	}
	var msgs []string
	for _, l := range strings.Split(strings.TrimSpace(jsonLog), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("a json log line is not JSON: %v\n%q", err, l)
		}
		for _, k := range []string{"time", "level", "msg"} {
			if _, ok := rec[k]; !ok {
				t.Errorf("json record without %q: %s", k, l)
			}
		}
		msgs = append(msgs, rec["msg"].(string))
		if rec["msg"] == "running" && rec["config"] == nil {
			t.Errorf("the json \"running\" record lost its config attribute: %s", l)
		}
	}
	if len(msgs) < 2 {
		t.Fatalf("json log has %d records:\n%s", len(msgs), jsonLog)
	}
	for _, m := range msgs {
		if !strings.Contains(textLog, "msg="+m) && !strings.Contains(textLog, "msg=\""+m+"\"") {
			t.Errorf("json record %q is not in the text log:\n%s", m, textLog)
		}
	}
	// level = "error" keeps the info records out.
	_, quiet, code := runCLI(t, "run", "-c", logConfig(t, "[log]\nlevel = \"error\""), "--live=false", "--json")
	if code != 0 || strings.Contains(quiet, "level=INFO") {
		t.Errorf("level = \"error\": exit %d, log:\n%s", code, quiet)
	}
	// A bad value is a config error with file:line and key.
	_, errs, code := runCLI(t, "validate", "--offline", "-c", logConfig(t, "[log]\nformat = \"xml\""))
	if code == 0 || !strings.Contains(errs, ":7: log.format:") {
		t.Errorf("format = \"xml\": exit %d, %s", code, errs)
	}
}

// Under the journal each line starts with its syslog priority and text
// records leave the time to journald.
func TestJournalLog(t *testing.T) {
	var b bytes.Buffer
	log, err := newLogger(&b, "text", "debug", true)
	if err != nil {
		t.Fatal(err)
	}
	log.Debug("d")
	log.With("stage", "s").Info("i", "n", 1)
	log.Warn("w")
	log.Error("e")
	want := "<7>level=DEBUG msg=d\n<6>level=INFO msg=i stage=s n=1\n<4>level=WARN msg=w\n<3>level=ERROR msg=e\n"
	if b.String() != want {
		t.Errorf("journal log:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	log, _ = newLogger(&b, "json", "info", true)
	log.Warn("w", "k", "v")
	line, ok := strings.CutPrefix(b.String(), "<4>")
	var rec map[string]any
	if !ok || json.Unmarshal([]byte(line), &rec) != nil || rec["k"] != "v" || rec["time"] == nil {
		t.Errorf("journal json log: %q", b.String())
	}
	if _, err := newLogger(&b, "xml", "info", false); err == nil {
		t.Error("format xml accepted")
	}
}

func TestParseJournalStream(t *testing.T) {
	if d, i, ok := parseJournalStream("8:12345"); !ok || d != 8 || i != 12345 {
		t.Errorf("8:12345: %d %d %v", d, i, ok)
	}
	for _, s := range []string{"", "8", "a:b", "8:"} {
		if _, _, ok := parseJournalStream(s); ok {
			t.Errorf("%q parsed", s)
		}
	}
}
