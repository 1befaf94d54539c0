package tester

import (
	"os"
	"testing"
	"time"
)

// TestProfileGoals: [[test.goals]] from presets, overridden key by key, and
// CSIT's goals when there are none.
func TestProfileGoals(t *testing.T) {
	wire, err := os.ReadFile("../docs/examples/test/wire.toml")
	if err != nil {
		t.Fatal(err)
	}
	p, err := Parse("wire.toml", wire)
	if err != nil {
		t.Fatal(err)
	}
	if gs := p.Test.SearchGoals(); len(gs) != len(p.Test.LossRatios) || gs[0].DurationSum != 21*time.Second || gs[0].ExceedRatio != 0.5 {
		t.Errorf("default goals %+v, want CSIT's per loss ratio", gs)
	}
	text := string(wire) + `
[[test.goals]]
preset = "rfc2544"
final_trial_duration = "2s"

[[test.goals]]
preset = "tst009"
loss_ratio = 0.001
width = 0.01

[[test.goals]]
name = "PDR 1%"
loss_ratio = 0.01
`
	p, err = Parse("goals.toml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	gs := p.Test.SearchGoals()
	if len(gs) != 3 {
		t.Fatalf("%d goals", len(gs))
	}
	if g := gs[0]; g.Name != "RFC 2544" || g.FinalTrialDuration != 2*time.Second || g.DurationSum != time.Minute || g.ExceedRatio != 0 || g.LossRatio != 0 {
		t.Errorf("rfc2544 goal %+v", g)
	}
	if g := gs[1]; g.DurationSum != 2*time.Minute || g.ExceedRatio != 0.5 || g.LossRatio != 0.001 || g.Width != 0.01 {
		t.Errorf("tst009 goal %+v", g)
	}
	if g := gs[2]; g.Name != "PDR 1%" || g.LossRatio != 0.01 || g.DurationSum != 21*time.Second || g.FinalTrialDuration != time.Second {
		t.Errorf("plain goal %+v", g)
	}
	for _, bad := range []string{"[[test.goals]]\npreset = \"rfc9999\"\n", "[[test.goals]]\nexceed_ratio = 1.0\n"} {
		if _, err := Parse("bad.toml", []byte(string(wire)+"\n"+bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}
