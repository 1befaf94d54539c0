package tester

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/linerate/linerate/tester/search"
)

// algorithms lists the searches to compare; algorithm keeps its meaning
// ("both" is draft-01 and binary), and the two cannot be mixed.
func TestProfileAlgorithms(t *testing.T) {
	for _, c := range []struct {
		keys string
		want []string
		err  string
	}{
		{"", []string{"mlrsearch"}, ""},
		{`algorithm = "both"`, []string{"mlrsearch", "binary"}, ""},
		{`algorithm = "mlrsearch-15"`, []string{"mlrsearch-15"}, ""},
		{`algorithms = ["mlrsearch-15", "mlrsearch"]`, []string{"mlrsearch-15", "mlrsearch"}, ""},
		{`algorithms = ["mlrsearch-15", "mlrsearch", "binary"]`, []string{"mlrsearch-15", "mlrsearch", "binary"}, ""},
		{"algorithm = \"binary\"\nalgorithms = [\"mlrsearch\"]", nil, "set algorithm or algorithms, not both"},
		{`algorithms = ["mlrsearch", "both"]`, nil, `"both": each one of`},
		{`algorithms = ["binary", "binary"]`, nil, `"binary" is listed twice`},
	} {
		p, err := Parse("alg.toml", []byte(strings.Replace(lateProfile, "[test]\n", "[test]\n"+c.keys+"\n", 1)))
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: error %v, want %q", c.keys, err, c.err)
		case c.err == "" && err != nil:
			t.Errorf("%s: %v", c.keys, err)
		case c.err == "" && !slices.Equal(p.Test.Searches(), c.want):
			t.Errorf("%s: searches %q, want %q", c.keys, p.Test.Searches(), c.want)
		}
	}
}

// algorithms = ["mlrsearch-15", "mlrsearch", "binary"] runs the three on
// the same DUT, in that order, each with its draft and every result in
// draft-15's terms, in report.json and results.csv alike.
func TestThreeSearches(t *testing.T) {
	text := strings.Replace(lateProfile, "[test]\n", `[test]
algorithms = ["mlrsearch-15", "mlrsearch", "binary"]
latency = [0.5]
latency_duration = "100ms"
`, 1) + `
[[test.goals]]
preset = "pdr"
final_trial_duration = "200ms"
duration_sum = "400ms"
initial_trial_duration = "100ms"
width = 0.05
`
	p, err := Parse("three.toml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := (&Runner{Profile: p}).Run(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	s := rep.Sizes[0]
	var got []string
	for _, sr := range s.Searches {
		got = append(got, sr.Algorithm+" "+sr.Draft)
		for _, r := range sr.Results {
			if g := r.Goal; g == nil || (g.Regular == (g.Reason != "")) || g.RelevantLowerBound == 0 && r.LowerFound {
				t.Errorf("%s loss %g: goal result %+v", sr.Algorithm, r.LossRatio, g)
			}
		}
	}
	want := []string{"mlrsearch-15 " + search.Draft15, "mlrsearch " + Draft, "binary "}
	if !slices.Equal(got, want) || !slices.Equal(rep.Algorithms, Algorithms) || rep.Draft != search.Draft15 {
		t.Errorf("searches %q (report %q, %s), want %q", got, rep.Algorithms, rep.Draft, want)
	}
	if len(s.Searches[0].Results) != 1 || len(s.Searches[1].Results) != 2 {
		t.Errorf("draft-15 has %d results (one goal), draft-01 %d (two loss ratios)", len(s.Searches[0].Results), len(s.Searches[1].Results))
	}
	dir := t.TempDir()
	if _, err := rep.WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	csv, err := os.ReadFile(filepath.Join(dir, "results.csv"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(csv)), "\n")
	if len(lines) != 1+1+2+2 || !strings.HasSuffix(lines[0], "goal,regular,irregular_reason,relevant_lower_pps,relevant_upper_pps,conditional_throughput_pps") {
		t.Errorf("results.csv:\n%s", csv)
	}
	if !strings.HasPrefix(lines[1], "128,mlrsearch-15,0.005,") || !strings.Contains(lines[1], ",PDR 0.5%,") {
		t.Errorf("results.csv's draft-15 row: %s", lines[1])
	}
}
