package cli

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/linerate/linerate/appliance"
	"github.com/linerate/linerate/internal/enginetest"
)

// stampLoop is a sender and a reflector in one engine over an in-memory wire,
// with a 1 ms link each way.
const stampLoop = `
version = 1
[engine]
pin = false
[control]
listen = ""
[[ports]]
name = "s0"
driver = "mem"
peer = "s1"
[[ports]]
name = "s1"
driver = "mem"
peer = "s0"
[[pipelines]]
name = "sender"
lcores = [1]
rx = ["s0"]
[[pipelines.stages]]
kind = "stamp.collector"
[[pipelines.stages]]
kind = "stamp.sender"
src = "2001:db8:a::2"
interval = "2ms"
[[pipelines.stages]]
kind = "link"
delay = "1ms"
[[pipelines.stages]]
kind = "forward"
port = "s0"
[[pipelines]]
name = "reflector"
lcores = [1]
rx = ["s1"]
[[pipelines.stages]]
kind = "stamp.reflector"
[[pipelines.stages.sessions]]
ssid = 3
mode = "stateful"
[[pipelines.stages]]
kind = "link"
delay = "1ms"
[[pipelines.stages]]
kind = "forward"
port = "s1"
`

// stampCLI runs `linerate stamp …` against an engine serving stampLoop.
func stampCLI(t *testing.T) func(args ...string) (int, string, string) {
	t.Helper()
	return stampCLIWith(t, stampLoop)
}

// stampCLIWith runs `linerate stamp …` against an engine serving cfg.
func stampCLIWith(t *testing.T, cfg string) func(args ...string) (int, string, string) {
	t.Helper()
	sock := enginetest.Serve(t, enginetest.Start(t, cfg, appliance.Options{}))
	return func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		// The control flag goes after the command's own arguments too.
		full := append(append([]string(nil), args...), "--control", sock)
		code := runStamp(full, &out, &errb)
		return code, out.String(), errb.String()
	}
}

func TestStampCLI(t *testing.T) {
	run := stampCLI(t)
	code, out, errs := run("create", "sender", "--ssid", "3", "--reflector", "2001:db8:b::2", "--stateful-reflector", "--tlvs", "timestamp_info")
	if code != 0 || !strings.Contains(out, "2001:db8:b::2") || !strings.Contains(out, "stopped") {
		t.Fatalf("create: %d %s %s", code, out, errs)
	}
	if code, _, errs := run("create", "sender", "--ssid", "3", "--reflector", "2001:db8:b::2"); code == 0 || !strings.Contains(errs, "exists") {
		t.Errorf("duplicate create: %d %s", code, errs)
	}
	if code, out, errs := run("start", "3"); code != 0 || !strings.HasPrefix(out, "started") {
		t.Fatalf("start: %d %s %s", code, out, errs)
	}
	code, out, _ = run("list")
	if code != 0 || !regexp.MustCompile(`sender\s+3\s+\S+\s+running\s+api`).MatchString(out) ||
		!regexp.MustCompile(`reflector\s+3\s+\S+\s+running\s+config`).MatchString(out) {
		t.Errorf("list:\n%s", out)
	}
	// watch prints records and metrics for a while. A loaded machine may
	// not get a record and a metrics report through in one short watch:
	// watch again, for up to 10 s in all, until both came.
	for deadline := time.Now().Add(10 * time.Second); ; {
		code, out, errs = run("watch", "3", "--for", "600ms", "--interval", "200ms")
		if code != 0 || strings.Contains(out, "SEQ") && strings.Contains(out, "round trip") || time.Now().After(deadline) {
			break
		}
	}
	if code != 0 || !strings.Contains(out, "SEQ") || !strings.Contains(out, "round trip") {
		t.Errorf("watch: %d %s\n%s", code, errs, out)
	}
	time.Sleep(50 * time.Millisecond)
	if code, out, errs := run("stop", "3"); code != 0 || !strings.HasPrefix(out, "stopped") {
		t.Fatalf("stop: %d %s %s", code, out, errs)
	}
	code, out, errs = run("results", "3", "--metrics-only")
	if code != 0 || !hasRow(out, "DIRECTION", "MIN", "MEAN", "P50", "P90", "P99", "MAX", "IPDV", "SMOOTHED", "LOSS") ||
		!regexp.MustCompile(`(?m)^  round trip +\d`).MatchString(out) || !regexp.MustCompile(`(?m)^  forward +\d`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^  backward +\d`).MatchString(out) {
		t.Errorf("results: %d %s\n%s", code, errs, out)
	}
	checkWidth(t, "stamp results", out)
	code, out, _ = run("results", "3", "--json")
	var res struct {
		Metrics struct {
			Sent string `json:"sent"`
			Rtt  struct {
				P50 string `json:"p50Ns"`
			} `json:"rtt"`
		} `json:"metrics"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.Metrics.Sent == "" || res.Metrics.Rtt.P50 == "" {
		t.Errorf("results --json: %d %s", code, out)
	}
	if code, out, _ := run("destroy", "3"); code != 0 || !strings.HasPrefix(out, "destroyed") {
		t.Errorf("destroy: %d %s", code, out)
	}
	if code, _, errs := run("results", "3"); code == 0 || !strings.Contains(errs, "not found") {
		t.Errorf("results of a destroyed session: %d %s", code, errs)
	}
	if code, out, _ := run("stop", "--reflector", "3"); code != 0 || !strings.HasPrefix(out, "stopped") {
		t.Errorf("stop reflector: %d %s", code, out)
	}
	if code, _, _ := run("bogus"); code != 2 {
		t.Errorf("unknown command: %d", code)
	}
	if code, out, _ := run("results", "--help"); code != 0 || !strings.Contains(out, "--records") && !strings.Contains(out, "-records") {
		t.Errorf("help: %d %s", code, out)
	}
}

// "answered" is one number in the CLI and in the API: the test packets up
// to the highest sequence number answered, each received or lost.
func TestStampAnswered(t *testing.T) {
	// Every fourth test packet is lost on the way out: of 20, 3, 7, 11 and
	// 15 are lost and answered (a later one was), 19 is in flight.
	cfg := strings.Replace(stampLoop, "kind = \"link\"\ndelay = \"1ms\"\n[[pipelines.stages]]\nkind = \"forward\"\nport = \"s0\"",
		"kind = \"link\"\ndelay = \"1ms\"\nloss_pattern = \"0001\"\n[[pipelines.stages]]\nkind = \"forward\"\nport = \"s0\"", 1)
	if cfg == stampLoop {
		t.Fatal("no forward link to make lossy")
	}
	run := stampCLIWith(t, cfg)
	if code, out, errs := run("create", "sender", "--ssid", "3", "--reflector", "2001:db8:b::2", "--count", "20", "--start"); code != 0 {
		t.Fatalf("create: %d %s %s", code, out, errs)
	}
	var res struct {
		Metrics struct {
			Sent, Answered, Received, LostRoundTrip, InFlight string
		} `json:"metrics"`
	}
	for deadline := time.Now().Add(20 * time.Second); res.Metrics.Received != "15"; time.Sleep(20 * time.Millisecond) {
		code, out, errs := run("results", "3", "--metrics-only", "--json")
		if code != 0 || json.Unmarshal([]byte(out), &res) != nil {
			t.Fatalf("results --json: %d %s %s", code, out, errs)
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics %+v", res.Metrics)
		}
	}
	m := res.Metrics
	if m.Sent != "20" || m.Answered != "19" || m.LostRoundTrip != "4" || m.InFlight != "1" {
		t.Errorf("API metrics %+v", m)
	}
	code, out, errs := run("results", "3", "--metrics-only")
	want := "sent 20, answered 19 (15 received, 4 lost), 1 in flight"
	if code != 0 || !strings.Contains(out, want) {
		t.Errorf("results: %d %s\n%s\nwant %q", code, errs, out, want)
	}
}
