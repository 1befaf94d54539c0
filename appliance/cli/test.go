package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"github.com/linerate/linerate/appliance/cli/table"
	"github.com/linerate/linerate/tester"
)

func cmdTest(args []string) int {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	cfgPath := fs.String("c", "", "test profile `file` (docs/test.md)")
	report := fs.String("report", "", "write report.json, results.csv, trials.csv and the plots (PNG and SVG) to `dir`")
	live := fs.Bool("live", isTerminal(os.Stderr), "print a live line during the search (rate, trial, loss)")
	wide := fs.Bool("wide", false, "print each row of the tables on one line, however wide")
	asJSON := fs.Bool("json", false, "print the whole report, every trial included, as JSON")
	dutHelp := fs.Bool("dut-help", false, "print how to set up common devices under test, and exit")
	logLevel := fs.String("log-level", "warn", "debug, info, warn or error")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: linerate test -c PROFILE [--report DIR] [--wide | --json]
       linerate test --dut-help

Benchmarks a device under test as RFC 2544 and FD.io CSIT do: for each frame
size of the profile it sends learning frames, finds the NDR and the PDR in one
MLRsearch (%s; or RFC 2544 binary search), then measures
latency at 10, 50 and 90 %% of the PDR. It prints a summary table; --report
writes everything, every trial and the plots. docs/test.md describes the
profile.

Flags:
`, tester.Draft)
		fs.PrintDefaults()
	}
	rest, err := parseFlags(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *dutHelp {
		fmt.Print(tester.DUTHelp)
		return 0
	}
	if len(rest) > 0 || *cfgPath == "" {
		if len(rest) > 0 {
			fmt.Fprintf(fs.Output(), "linerate test: unexpected argument %q (a profile is -c FILE)\n\n", rest[0])
		} else {
			fmt.Fprintf(fs.Output(), "linerate test: no profile: -c FILE\n\n")
		}
		fs.Usage()
		return 2
	}
	lw := &liveWriter{w: os.Stderr}
	log, err := newLogger(lw, "text", *logLevel, onJournal())
	if err != nil {
		return fail("%v", err)
	}
	p, err := tester.Load(*cfgPath)
	if err != nil {
		return fail("%v", err)
	}
	r := &tester.Runner{Profile: p, Log: log}
	if p.Test.DUT.Control != "" {
		d, err := tester.DialDUT(p.Test.DUT)
		if err != nil {
			return fail("%v", err)
		}
		defer d.Close()
		r.DUT = d
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var progress func(tester.Progress)
	if *live {
		progress = func(pr tester.Progress) { lw.Live(progressLine(pr)) }
	}
	rep, err := r.Run(ctx, progress)
	lw.Clear()
	if err != nil && (rep == nil || !rep.Incomplete) {
		if rep != nil && *report != "" && len(rep.Sizes) > 0 {
			_, _ = rep.WriteDir(*report)
		}
		return fail("%v", err)
	}
	// Stopped (Ctrl-C): what was found so far is written and printed,
	// marked incomplete, and the exit status says it was interrupted.
	code := 0
	if err != nil {
		log.Warn("stopped before the end: the report is incomplete", "err", err)
		code = 130
	}
	if *report != "" {
		files, err := rep.WriteDir(*report)
		if err != nil {
			return fail("report: %v", err)
		}
		log.Info("report written", "dir", *report, "files", len(files))
	}
	if *asJSON {
		if err := rep.WriteJSON(os.Stdout); err != nil {
			return fail("%v", err)
		}
		return code
	}
	if err := writeTestSummary(os.Stdout, rep, table.Options{Wide: *wide}); err != nil {
		return fail("%v", err)
	}
	if *report != "" {
		fmt.Println()
		note := fmt.Sprintf("Report: %s (report.json, results.csv, trials.csv; throughput, loss and latency plots)", *report)
		if err := table.Text(os.Stdout, table.Options{Wide: *wide}, 0, note); err != nil {
			return fail("%v", err)
		}
	}
	return code
}

// liveWriter is stderr with a live line on it: whatever else is written
// there (a log line) first clears the live line, so nothing is glued to it.
type liveWriter struct {
	mu    sync.Mutex
	w     io.Writer
	shown bool
}

func (l *liveWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.clear()
	return l.w.Write(p)
}

// Live replaces the live line with s.
func (l *liveWriter) Live(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, "\r\033[K%s", s)
	l.shown = true
}

// Clear erases the live line, if one is shown.
func (l *liveWriter) Clear() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.clear()
}

func (l *liveWriter) clear() {
	if l.shown {
		fmt.Fprint(l.w, "\r\033[K")
		l.shown = false
	}
}

// progressLine is the live line: frame size, search, trial, load and the last
// trial's loss.
func progressLine(pr tester.Progress) string {
	what := pr.Phase
	if pr.Search != "" {
		what = fmt.Sprintf("%s trial %d", pr.Search, pr.Trial)
	}
	s := fmt.Sprintf("%s B  %s  %s pps", tester.SizeName(pr.Size), what, strings.TrimSpace(human(pr.Rate)))
	if pr.Last != nil {
		s += fmt.Sprintf("  last: %s pps, loss %.3g%%", strings.TrimSpace(human(pr.Last.Rate)), 100*pr.Last.LossRatio())
	}
	return s
}

// writeTestSummary prints the results table (a row per frame size, search
// and loss ratio) and the latency table.
func writeTestSummary(w io.Writer, rep *tester.Report, o table.Options) error {
	cols := table.Cols("FRAME", "SEARCH", "GOAL", "THROUGHPUT", "GBIT/S", "LINE", "TRIALS", "TIME")
	for _, i := range []int{3, 4, 5, 6, 7} {
		cols[i].Right = true
	}
	t := table.New(cols...)
	t.Key = 1
	var limited []string
	for _, s := range rep.Sizes {
		for _, sr := range s.Searches {
			for _, r := range sr.Results {
				tp := strings.TrimSpace(human(r.Lower)) + "pps"
				if !r.LowerFound {
					tp = "<" + tp // nothing passed, down to the minimum load
				}
				if l := sr.Limited(r.LossRatio); l != nil {
					tp += "*"
					limited = append(limited, fmt.Sprintf("%s B %s %s: tester-limited at %spps", s.Name, sr.Algorithm,
						goalName(r.LossRatio), strings.TrimSpace(human(l.Rate))))
				}
				line := "-"
				if s.LineRate > 0 {
					line = fmt.Sprintf("%.1f%%", 100*r.Lower/s.LineRate)
				}
				t.Add(s.Name, sr.Algorithm, goalName(r.LossRatio), tp, fmt.Sprintf("%.3f", tester.Gbits(r.Lower, s.Size)),
					line, fmt.Sprint(len(sr.Trials)), sr.Wall.Round(1e8).String())
			}
		}
	}
	if err := t.Write(w, o); err != nil {
		return err
	}
	lat := table.Cols("FRAME", "LOAD", "PACKETS", "MIN", "P50", "P90", "P99", "P99.9", "MAX")
	for i := 1; i < len(lat); i++ {
		lat[i].Right = true
	}
	lt := table.New(lat...)
	lt.Key = 1
	for _, s := range rep.Sizes {
		for _, l := range s.Latency {
			h := l.Trial.Latency
			load := fmt.Sprintf("%g%% PDR", 100*l.Share)
			if h == nil {
				lt.Add(s.Name, load, "0", "-", "-", "-", "-", "-", "-")
				continue
			}
			lt.Add(s.Name, load, fmt.Sprint(h.Count), dur(h.Min), dur(h.P50), dur(h.P90), dur(h.P99), dur(h.P999), dur(h.Max))
		}
	}
	if len(lt.Rows) > 0 {
		fmt.Fprintln(w)
		if err := lt.Write(w, o); err != nil {
			return err
		}
	}
	notes := []string{fmt.Sprintf("Search: %s at %.2g%% precision, final trials of %v. Latency timestamps: %s.",
		searchName(rep), 100*rep.Precision, rep.Final, rep.Timestamps)}
	if len(limited) > 0 {
		notes = append(notes, "* Irregular: the tester could not send the load asked for, and its shortfall counted as the DUT's loss; "+
			"the DUT may do better than shown. "+strings.Join(limited, "; ")+". Run on an idle, pinned tester, or lower max_rate.")
	}
	if rep.Incomplete {
		notes = append([]string{"INCOMPLETE: the run was stopped (" + rep.Stopped + "); the results are what its final-duration trials had found so far."}, notes...)
	}
	var late uint64
	var lateTrials int
	rep.Trials(func(_ tester.SizeReport, t *tester.Trial) {
		if t.LateFromEarlier > 0 {
			late += t.LateFromEarlier
			lateTrials++
		}
	})
	if late > 0 {
		notes = append(notes, fmt.Sprintf("Late from earlier trials: %d packets in %d trials came back after their own trial's drain "+
			"(the DUT held them; drain %v); counted in neither trial (report: late_from_earlier). A longer drain may be needed.",
			late, lateTrials, rep.Drain))
	}
	for _, n := range notes {
		fmt.Fprintln(w)
		if err := table.Text(w, o, 0, n); err != nil {
			return err
		}
	}
	return nil
}

func goalName(r float64) string {
	if r == 0 {
		return "NDR"
	}
	return fmt.Sprintf("PDR %g%%", 100*r)
}

func searchName(rep *tester.Report) string {
	switch rep.Algorithm {
	case "binary":
		return "RFC 2544 binary search"
	case "both":
		return "MLRsearch (" + rep.Draft + ") and RFC 2544 binary search"
	}
	return "MLRsearch (" + strings.TrimSpace(rep.Draft) + ")"
}
