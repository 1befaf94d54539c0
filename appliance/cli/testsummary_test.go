package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/linerate/linerate/appliance/cli/table"
	"github.com/linerate/linerate/tester"
	"github.com/linerate/linerate/tester/search"
)

// summaryReport is one frame size, one search and one trial.
func summaryReport(tr *tester.Trial) *tester.Report {
	return &tester.Report{Algorithm: "mlrsearch", Precision: 0.01, Final: time.Second, Drain: 100 * time.Millisecond,
		Sizes: []tester.SizeReport{{Size: 64, Name: "64", LineRate: 1e6, MaxRate: 1e6,
			Searches: []tester.SearchReport{{Algorithm: "mlrsearch",
				Results: []search.Result{{LossRatio: 0, Lower: 5e5, LowerFound: true, Upper: 6e5, UpperFound: true}},
				Trials:  []*tester.Trial{tr}}}}}}
}

// Packets of earlier trials that a DUT held past the drain are told in the
// summary, not hidden.
func TestSummaryLateFromEarlier(t *testing.T) {
	var b strings.Builder
	rep := summaryReport(&tester.Trial{Trial: search.Trial{Rate: 5e5, Sent: 690, Received: 690}, LateFromEarlier: 174})
	if err := writeTestSummary(&b, rep, table.Options{Wide: true}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "Late from earlier trials: 174 packets in 1 trials") {
		t.Errorf("no note of the 174 late packets:\n%s", b.String())
	}
}

// A result the tester's shortfall shaped is marked in the table, and said.
func TestSummaryTesterLimited(t *testing.T) {
	var b strings.Builder
	rep := summaryReport(&tester.Trial{Trial: search.Trial{Rate: 6e5, Sent: 600, Received: 580}, TesterShort: 20})
	rep.Sizes[0].Searches[0].Irregular = []tester.Irregular{{LossRatio: 0, Rate: 580000}}
	if err := writeTestSummary(&b, rep, table.Options{Wide: true}); err != nil {
		t.Fatal(err)
	}
	if !rowStarts(b.String(), "64", "mlrsearch", "NDR", "500.00k*") || !strings.Contains(b.String(), "64 B mlrsearch NDR: tester-limited at 580000 pps") {
		t.Errorf("the NDR is not marked tester-limited:\n%s", b.String())
	}
}

// A stopped run's summary says it is incomplete.
func TestSummaryIncomplete(t *testing.T) {
	var b strings.Builder
	rep := summaryReport(&tester.Trial{Trial: search.Trial{Rate: 5e5, Sent: 500, Received: 500}})
	rep.Incomplete, rep.Stopped = true, "context canceled"
	if err := writeTestSummary(&b, rep, table.Options{Wide: true}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "INCOMPLETE: the run was stopped (context canceled)") {
		t.Errorf("not marked incomplete:\n%s", b.String())
	}
}

// A log line written while the live line shows starts on a cleared line.
func TestLiveLineClearedBeforeLog(t *testing.T) {
	var b strings.Builder
	lw := &liveWriter{w: &b}
	lw.Live("64 B  mlrsearch trial 3  1.00Mpps")
	_, _ = lw.Write([]byte("level=WARN msg=\"trial repeated\"\n"))
	lw.Clear()
	want := "\r\033[K64 B  mlrsearch trial 3  1.00Mpps\r\033[Klevel=WARN msg=\"trial repeated\"\n"
	if b.String() != want {
		t.Errorf("stderr %q, want %q", b.String(), want)
	}
}

// goalReport is a run of the three searches at one frame size, each result
// in draft-15's terms: draft-15's PDR Regular, its NDR Irregular (Max Load
// is a Lower Bound) and tester-limited, draft-01's and binary's as
// RFC 2544's goal.
func goalReport() *tester.Report {
	reg := func(name string, ratio, lo, up, cond float64) search.Result {
		return search.Result{LossRatio: ratio, Lower: lo, LowerFound: true, Upper: up, UpperFound: true,
			Goal: &search.GoalResult{Goal: search.SearchGoal{Name: name, LossRatio: ratio}, Regular: true,
				RelevantLowerBound: lo, RelevantUpperBound: up, ConditionalThroughput: cond}}
	}
	ndr := search.Result{LossRatio: 0, Lower: 14.88e6, LowerFound: true, Upper: 14.88e6,
		Goal: &search.GoalResult{Goal: search.SearchGoal{Name: "NDR"}, Reason: "tester-limited at 14200000 pps; Max Load is a Lower Bound: no Upper Bound",
			RelevantLowerBound: 14.88e6, ConditionalThroughput: 14.88e6, TesterLimited: 14.2e6}}
	tr := []*tester.Trial{{Trial: search.Trial{Rate: 14.88e6, Sent: 1, Received: 1}}}
	return &tester.Report{Algorithms: []string{"mlrsearch-15", "mlrsearch", "binary"}, Draft: search.Draft15, Precision: 0.005,
		Final: time.Second, Sizes: []tester.SizeReport{{Size: 1518, Name: "1518", LineRate: 8.127e5 * 18.3, MaxRate: 14.88e6,
			Searches: []tester.SearchReport{
				{Algorithm: "mlrsearch-15", Trials: tr, Results: []search.Result{ndr, reg("PDR 0.5%", 0.005, 12.34e6, 12.40e6, 12.33e6)},
					Irregular: []tester.Irregular{{LossRatio: 0, Rate: 14.2e6}}},
				{Algorithm: "mlrsearch", Trials: tr, Results: []search.Result{reg("", 0, 12.1e6, 12.16e6, 12.1e6)}},
				{Algorithm: "binary", Trials: tr, Results: []search.Result{reg("", 0, 12.0e6, 12.06e6, 12.0e6)}},
			}}}}
}

// The summary table has, per goal, the Relevant Lower and Upper Bounds, the
// Conditional Throughput and Regular or not, for every search; an
// Irregular result's reason is under the table; and the table is a table
// (a line per row) within 100 columns.
func TestSummaryGoalColumns(t *testing.T) {
	var b strings.Builder
	if err := writeTestSummary(&b, goalReport(), table.Options{}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	t.Log(out)
	checkWidth(t, "test summary", out)
	for _, row := range [][]string{
		{"FRAME", "SEARCH", "GOAL", "LOWER", "UPPER", "COND", "GBIT/S", "LINE", "REGULAR", "TRIALS", "TIME"},
		{"1518", "mlrsearch-15", "NDR", "14.88M*", "-", "14.88M"},
		{"1518", "mlrsearch-15", "PDR", "0.5%", "12.34M", "12.40M", "12.33M"},
		{"1518", "mlrsearch", "NDR", "12.10M", "12.16M", "12.10M"},
		{"1518", "binary", "NDR", "12.00M", "12.06M", "12.00M"},
	} {
		if !rowStarts(out, row...) {
			t.Errorf("no row %q", row)
		}
	}
	for _, want := range []string{
		"1518 B mlrsearch-15 NDR: tester-limited at 14200000 pps; Max Load is a Lower Bound: no Upper Bound.",
		"MLRsearch (draft-ietf-bmwg-mlrsearch-15), MLRsearch (draft-ietf-bmwg-mlrsearch-01) and RFC 2544",
	} {
		if !strings.Contains(strings.Join(strings.Fields(out), " "), want) {
			t.Errorf("no %q in the notes", want)
		}
	}
	regular := map[string]string{"mlrsearch-15 NDR": "no", "mlrsearch-15 PDR": "yes", "mlrsearch NDR": "yes", "binary NDR": "yes"}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 11 || len(f) == 12 {
			if want, ok := regular[f[1]+" "+f[2]]; ok && f[len(f)-3] != want {
				t.Errorf("row %q: regular %s, want %s", line, f[len(f)-3], want)
			}
		}
	}
}

// The end of the summary sums up the tester's retries and shortfall.
func TestSummaryTesterRetries(t *testing.T) {
	rep := summaryReport(&tester.Trial{Trial: search.Trial{Rate: 6e5, Sent: 590, Received: 590}, Asked: 600, TesterShort: 10, Retries: 3})
	rep.Sizes[0].Searches[0].Trials = append(rep.Sizes[0].Searches[0].Trials,
		&tester.Trial{Trial: search.Trial{Rate: 5e5, Sent: 500, Received: 500}, Asked: 500, Retries: 1},
		&tester.Trial{Trial: search.Trial{Rate: 4e5, Sent: 400, Received: 400}, Asked: 400})
	rep.Tester = tester.TesterSummary{Trials: 3, Retried: 2, Retries: 4, Short: 1, ShortPackets: 10, ShortAsked: 600, Worst: 10.0 / 600, WorstRate: 6e5}
	var b strings.Builder
	if err := writeTestSummary(&b, rep, table.Options{Wide: true}); err != nil {
		t.Fatal(err)
	}
	want := "Tester: 3 trials; 2 retried (4 reruns in all) for falling short of their load; 1 still short after 3 retries: " +
		"10 of the 600 packets they asked for went unsent (1.67%, counted as lost), at worst 1.67% of a trial at 600.00kpps."
	if !strings.Contains(b.String(), want) {
		t.Errorf("no %q in:\n%s", want, b.String())
	}
	b.Reset()
	rep.Tester = tester.TesterSummary{Trials: 3}
	if err := writeTestSummary(&b, rep, table.Options{Wide: true}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "Tester: 3 trials, none retried or short of its load.") {
		t.Errorf("no tester summary in:\n%s", b.String())
	}
}

// Bidirectional streams: the latency table has a row per direction.
func TestSummaryLatencyDirections(t *testing.T) {
	rep := summaryReport(&tester.Trial{Trial: search.Trial{Rate: 5e5, Sent: 500, Received: 500}})
	h := func(min uint64) *tester.Histogram {
		return &tester.Histogram{Count: 100, Min: min, P50: 2 * min, P90: 3 * min, P99: 4 * min, P999: 5 * min, Max: 6 * min}
	}
	rep.Sizes[0].Latency = []tester.LatencyPoint{{Share: 0.5, Trial: &tester.Trial{Latency: h(1000)},
		Directions: []tester.DirectionLatency{{Stream: "east", Tx: "tg0", Rx: "tg1", Latency: h(1000)},
			{Stream: "west", Tx: "tg1", Rx: "tg0", Latency: h(7000)}}}}
	var b strings.Builder
	if err := writeTestSummary(&b, rep, table.Options{}); err != nil {
		t.Fatal(err)
	}
	checkWidth(t, "test summary", b.String())
	if !rowStarts(b.String(), "64", "50%", "PDR", "east", "100", "1.000µs", "2.000µs") ||
		!rowStarts(b.String(), "64", "50%", "PDR", "west", "100", "7.000µs", "14.00µs") {
		t.Errorf("no latency row per direction:\n%s", b.String())
	}
}
