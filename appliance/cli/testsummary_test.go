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
	if !rowStarts(b.String(), "64", "mlrsearch", "NDR", "500.00kpps*") || !strings.Contains(b.String(), "64 B mlrsearch NDR: tester-limited at 580.00kpps") {
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
