package tester

import (
	"encoding/json"
	"regexp"
	"testing"
	"time"

	"github.com/linerate/linerate/tester/search"
)

var snake = regexp.MustCompile(`^[a-z0-9]+(_[a-z0-9]+)*$`)

// walkKeys calls fn with the path of every object key at every depth.
func walkKeys(v any, path string, fn func(path, key string)) {
	switch v := v.(type) {
	case map[string]any:
		for k, c := range v {
			fn(path, k)
			walkKeys(c, path+"."+k, fn)
		}
	case []any:
		for _, c := range v {
			walkKeys(c, path+"[]", fn)
		}
	}
}

// TestReportJSONKeys: report.json has one key style, snake_case, at every
// depth (search.Trial's fields were Rate, Sent … beside snake_case keys),
// and a trial's sent is what the tx port took, not the load asked for: a
// tester throttled to 1 kpps asked for 4 kpps sends less than asked, and the
// shortfall is its unsent, counted as lost.
func TestReportJSONKeys(t *testing.T) {
	p, err := Parse("keys.toml", []byte(lateProfile))
	if err != nil {
		t.Fatal(err)
	}
	r := &Runner{Profile: p, genCap: 1000}
	tr, err := r.measure(t.Context(), 128, 4000, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	var txSent uint64
	for _, s := range tr.Streams {
		txSent += s.Sent
	}
	if tr.Sent != txSent || tr.Sent >= tr.Asked || tr.Asked != 800 {
		t.Errorf("trial sent %d, asked %d; the tx ports took %d of 800 asked", tr.Sent, tr.Asked, txSent)
	}
	if tr.Unsent != tr.Asked-tr.Sent || tr.LossRatio() < 0.5 {
		t.Errorf("unsent %d of asked %d sent %d, loss %.3f: the shortfall must count as lost", tr.Unsent, tr.Asked, tr.Sent, tr.LossRatio())
	}
	tr.TesterDrops = map[string]uint64{"tx_full": 1}
	st := tr.Trial
	rep := &Report{Profile: "keys.toml", Sizes: []SizeReport{{Size: 128, Name: "128", Warmup: tr,
		Searches: []SearchReport{{Algorithm: "mlrsearch-15", Trials: []*Trial{tr},
			Results: []search.Result{{LossRatio: 0, LowerTrial: &st, UpperTrial: &st,
				Goal: &search.GoalResult{UpperTrials: []search.Trial{st}, LowerTrials: []search.Trial{st}}}},
			Irregular: []Irregular{{Note: "x"}}}},
		Latency: []LatencyPoint{{Share: 0.5, Trial: tr}}}}}
	if tr.Latency == nil {
		tr.Latency = &Histogram{Buckets: []Bucket{{Lo: 1, Hi: 2, Count: 1}}}
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	walkKeys(v, "", func(path, key string) {
		if !snake.MatchString(key) {
			t.Errorf("report.json key %q at %q is not snake_case", key, path)
		}
	})
	var back struct {
		Sizes []struct {
			Warmup struct {
				Asked, Sent uint64
			}
		} `json:"frame_sizes"`
	}
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if w := back.Sizes[0].Warmup; w.Sent != txSent || w.Asked != 800 {
		t.Errorf("report.json trial: sent %d asked %d, want sent %d (the tx count) asked 800", w.Sent, w.Asked, txSent)
	}
}
