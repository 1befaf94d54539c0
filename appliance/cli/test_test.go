package cli

import (
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/linerate/linerate/tester"
)

// linerate test on the wire example: every frame size and the IMIX in the
// table, NDR at the maximum load (a wire loses nothing), latency rows, and
// a report directory with the JSON, the CSVs and the plots.
func TestTestCommand(t *testing.T) {
	dir := t.TempDir()
	profile := filepath.Join("..", "..", "docs", "examples", "test", "wire.toml")
	out, errOut, code := runCLI(t, "test", "-c", profile, "--report", dir, "--live=false")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	t.Log(out)
	checkWidth(t, "linerate test", out)
	for _, size := range []string{"64", "512", "1518", "IMIX"} {
		if !rowStarts(out, size, "mlrsearch", "NDR") || !rowStarts(out, size, "mlrsearch", "PDR", "0.5%") {
			t.Errorf("no NDR and PDR rows for %s", size)
		}
		if !rowStarts(out, size, "50%", "PDR") {
			t.Errorf("no latency row at 50%% of the PDR for %s", size)
		}
	}
	if !rowStarts(out, "64", "mlrsearch", "NDR", "20.00k") {
		t.Errorf("the wire's NDR at 64 bytes is not the maximum load, 20 kpps:\n%s", out)
	}
	for _, f := range []string{"report.json", "results.csv", "trials.csv", "throughput.png", "throughput.svg",
		"loss.png", "loss.svg", "latency.png", "latency.svg"} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	fh, err := os.Open(filepath.Join(dir, "throughput.png"))
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	if _, err := png.Decode(fh); err != nil {
		t.Errorf("throughput.png: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Draft string `json:"mlrsearch_draft"`
		Sizes []struct {
			Name     string `json:"name"`
			Searches []struct {
				Results []struct {
					Lower float64 `json:"lower_pps"`
				} `json:"results"`
				Trials []json.RawMessage `json:"trials"`
			} `json:"searches"`
		} `json:"frame_sizes"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Draft != "draft-ietf-bmwg-mlrsearch-01" || len(rep.Sizes) != 4 {
		t.Fatalf("report: draft %q, %d frame sizes", rep.Draft, len(rep.Sizes))
	}
	for _, s := range rep.Sizes {
		// A wire loses nothing; a tester preempted for long on a busy
		// machine may fall short of the load, which counts as lost.
		if len(s.Searches) != 1 || len(s.Searches[0].Trials) == 0 || s.Searches[0].Results[0].Lower < 0.8*20000 {
			t.Errorf("frame size %s: %d searches, results %+v", s.Name, len(s.Searches), s.Searches[0].Results)
		}
	}
	csv, _ := os.ReadFile(filepath.Join(dir, "results.csv"))
	if n := strings.Count(string(csv), "\n"); n != 1+4*2 {
		t.Errorf("results.csv has %d lines, want a header and 8 rows:\n%s", n, csv)
	}
}

// rowStarts: a line of out begins with fields.
func rowStarts(out string, fields ...string) bool {
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= len(fields) && strings.Join(f[:len(fields)], " ") == strings.Join(fields, " ") {
			return true
		}
	}
	return false
}

// The profile's errors name the file, the line and the key.
func TestTestProfileErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.toml")
	err := os.WriteFile(path, []byte(`version = 1
[[ports]]
name = "tg0"
driver = "mem"
peer = "tg1"
[[ports]]
name = "tg1"
driver = "mem"
peer = "tg0"
[test]
frame_sizes = [64]
precision = 2
[[test.streams]]
tx = "tg0"
rx = "tg9"
src = "198.18.0.1"
dst = "2001:db8::1"
`), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	_, errOut, code := runCLI(t, "test", "-c", path)
	if code != 1 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"bad.toml:12: test.precision: 2: a relative width",
		`bad.toml:15: test.streams[0].rx: "tg9" is not a port`,
		"bad.toml:17: test.streams[0].dst: 2001:db8::1 is not an IPv4 address",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("no %q in:\n%s", want, errOut)
		}
	}
}

func TestTestDUTHelp(t *testing.T) {
	out, _, code := runCLI(t, "test", "--dut-help")
	if code != 0 || !strings.Contains(out, "dpdk-testpmd") || !strings.Contains(out, "ip_forward") {
		t.Errorf("exit %d:\n%s", code, out)
	}
}

// linerate test --calibrate on the wire example (a loopback: tg0 straight
// to tg1) writes a calibration that the profile's max_load_from reads, and
// says how to use it.
func TestTestCalibrate(t *testing.T) {
	dir := t.TempDir()
	cal := filepath.Join(dir, "calibration.json")
	profile := filepath.Join("..", "..", "docs", "examples", "test", "wire.toml")
	out, errOut, code := runCLI(t, "test", "--calibrate", "-c", profile, "--calibration", cal, "--live=false")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	t.Log(out)
	checkWidth(t, "linerate test --calibrate", out)
	c, err := tester.ReadCalibration(cal)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Sizes) != 4 || c.Sizes[3].Name != "IMIX" || !strings.Contains(out, "max_load_from") {
		t.Errorf("calibration %+v", c)
	}
	for _, s := range c.Sizes {
		if !rowStarts(out, s.Name) || s.MaxLoad <= 0 || s.MaxLoad > s.SearchMax {
			t.Errorf("frame size %s: max load %.0f of %.0f tried, row shown %v", s.Name, s.MaxLoad, s.SearchMax, rowStarts(out, s.Name))
		}
	}
}
