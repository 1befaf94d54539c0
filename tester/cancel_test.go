package tester

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// Cancelled mid-search (Ctrl-C), Run abandons the trial under way and
// returns what it found so far, marked incomplete; the report can be written.
func TestCancelKeepsReport(t *testing.T) {
	p, err := Parse("cancel.toml", []byte(lateProfile))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	progress := func(pr Progress) {
		if pr.Trial == 2 {
			cancel() // during the search's second trial
		}
	}
	rep, err := (&Runner{Profile: p}).Run(ctx, progress)
	if err == nil {
		t.Fatal("no error from a cancelled run")
	}
	if rep == nil || !rep.Incomplete || rep.Stopped == "" {
		t.Fatalf("report %+v (%v): want it marked incomplete", rep, err)
	}
	if len(rep.Sizes) != 1 || len(rep.Sizes[0].Searches) != 1 || len(rep.Sizes[0].Searches[0].Trials) != 1 {
		t.Fatalf("want the search's finished trial in the report: %+v", rep.Sizes)
	}
	dir := t.TempDir()
	if _, err := rep.WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Incomplete bool `json:"incomplete"`
	}
	if err := json.Unmarshal(b, &got); err != nil || !got.Incomplete {
		t.Errorf("report.json does not say incomplete (%v)", err)
	}
}
