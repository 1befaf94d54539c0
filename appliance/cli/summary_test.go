package cli

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/linerate/linerate/appliance/cli/table"
	"github.com/linerate/linerate/appliance/stats"
)

func TestDur(t *testing.T) {
	for ns, want := range map[uint64]string{
		0: "0ns", 999: "999ns", 1000: "1.000µs", 12_345: "12.35µs", 123_456: "123.5µs", 999_949: "999.9µs",
		999_950: "1.000ms", 1_069_100: "1.069ms", 141_353_600: "141.4ms", 2_000_000_000: "2.000s", 3_600_000_000_000: "3600s",
	} {
		if got := dur(ns); got != want {
			t.Errorf("dur(%d) = %q, want %q", ns, got, want)
		}
	}
}

// TestRunJSON: run --json prints the summary as one JSON document on stdout,
// and what a stage prints (the lab's STAMP report) goes to stderr.
func TestRunJSON(t *testing.T) {
	stdout, stderr, code := runCLI(t, "run", "--live=false", "--duration", "1s", "--json", "--log-level", "warn")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var v struct {
		UptimeNs int64 `json:"uptime_ns"`
		Ports    []struct {
			Name      string `json:"name"`
			TxPackets uint64 `json:"tx_packets"`
		} `json:"ports"`
		Stages []struct {
			Pipeline, Name, Kind string
			Counters             map[string]uint64 `json:"counters"`
		} `json:"stages"`
		Generated uint64 `json:"generated"`
		Sinks     []struct {
			Name     string `json:"name"`
			Received uint64 `json:"received"`
		} `json:"sinks"`
		Histograms []struct {
			Owner, Name string
			Count, P50  uint64
		} `json:"histograms"`
	}
	if err := json.Unmarshal([]byte(stdout), &v); err != nil {
		t.Fatalf("%v:\n%s", err, stdout)
	}
	if v.UptimeNs <= 0 || len(v.Ports) == 0 || len(v.Stages) == 0 || len(v.Sinks) != 2 || len(v.Histograms) == 0 {
		t.Errorf("summary %+v", v)
	}
	var sent uint64
	for _, st := range v.Stages {
		if st.Kind == "generator" {
			sent += st.Counters["sent"]
		}
	}
	if sent == 0 || sent != v.Generated {
		t.Errorf("generators sent %d, generated %d", sent, v.Generated)
	}
	if !strings.Contains(stderr, "STAMP session 1") {
		t.Errorf("the STAMP report is not on stderr:\n%s", stderr)
	}
}

// TestStagesCommand: stages lists the kinds, as a table or as JSON.
func TestStagesCommand(t *testing.T) {
	out, _, code := runCLI(t, "stages")
	if code != 0 || !hasLine(out, "stamp.reflector", "STAMP Session-Reflector") {
		t.Errorf("stages: %d\n%s", code, out)
	}
	out, _, code = runCLI(t, "stages", "--json")
	var kinds []struct{ Kind, Summary string }
	if code != 0 || json.Unmarshal([]byte(out), &kinds) != nil || len(kinds) < 15 || kinds[0].Summary == "" {
		t.Errorf("stages --json: %d\n%s", code, out)
	}
	if _, _, code := runCLI(t, "stages", "extra"); code != 2 {
		t.Errorf("stages extra: exit %d", code)
	}
}

// TestSummaryMinMean: the run summary's histograms give each delay's minimum
// and mean before its percentiles, in the table (within 100 columns, with
// the lab's longest names) and in --json.
func TestSummaryMinMean(t *testing.T) {
	h := stats.NewHistogram()
	for _, v := range []uint64{1_812_345, 2_000_000, 2_050_000, 2_199_999} {
		h.Record(v)
	}
	h.Publish()
	other := stats.NewHistogram() // a second instance of the stage, empty
	other.Publish()
	snap := &stats.Snapshot{Uptime: 10 * time.Second, Histogram: []stats.NamedHist{
		{Owner: "stamp-sender/stamp-collector", Name: "forward_delay", Unit: "ns", Hist: h.Snapshot()},
		{Owner: "stamp-sender/stamp-collector", Name: "forward_delay", Unit: "ns", Hist: other.Snapshot()},
		{Owner: "rlnc-dest/rlnc-decoder", Name: "decode_latency", Unit: "ns", Hist: h.Snapshot()},
	}}
	var b strings.Builder
	if err := newSummary(snap).write(&b, table.Options{}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	t.Logf("\n%s", out)
	checkWidth(t, "summary", out)
	for _, row := range [][]string{
		{"HISTOGRAM", "COUNT", "MIN", "MEAN", "P50", "P90", "P99", "P99.9", "MAX"},
		{"stamp-sender/stamp-collector"},
		{"forward_delay", "4", "1.812ms", "2.016ms", "2.003ms", "2.200ms", "2.200ms", "2.200ms", "2.200ms"},
	} {
		if !hasRow(out, row...) {
			t.Errorf("no row %q:\n%s", row, out)
		}
	}
	if !strings.Contains(out, "\n  forward_delay ") {
		t.Errorf("forward_delay is not indented under its stage:\n%s", out)
	}
	b.Reset()
	if err := newSummary(snap).writeJSON(&b); err != nil {
		t.Fatal(err)
	}
	var v struct {
		Histograms []struct {
			Name       string
			Count, Min uint64
			Mean       float64
			P50, Max   uint64
		} `json:"histograms"`
	}
	if err := json.Unmarshal([]byte(b.String()), &v); err != nil {
		t.Fatal(err)
	}
	for _, h := range v.Histograms {
		if h.Count != 4 || h.Min != 1_812_345 || h.Mean != 2_015_586 || h.Max != 2_199_999 {
			t.Errorf("--json %+v: want count 4, min 1812345, mean 2015586, max 2199999", h)
		}
	}
}
