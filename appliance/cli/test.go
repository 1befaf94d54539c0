package cli

import (
	"context"
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
	"github.com/linerate/linerate/tester/search"
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
	calibrate := fs.Bool("calibrate", false, "measure the tester alone, tx ports joined to rx ports: for max_load_from")
	calibration := fs.String("calibration", "calibration.json", "the `file` --calibrate writes")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: linerate test -c PROFILE [--report DIR] [--wide | --json]
       linerate test --calibrate -c PROFILE [--calibration FILE] [--report DIR]
       linerate test --dut-help

Benchmarks a device under test as RFC 2544 and FD.io CSIT do: for each frame
size of the profile it sends learning frames, finds the NDR and the PDR in one
MLRsearch (%s; or RFC 2544 binary search), then measures
latency at 10, 50 and 90 %% of the PDR. It prints a summary table; --report
writes everything, every trial and the plots. docs/test.md describes the
profile. --calibrate finds the most the tester itself sustains, with its
ports joined back to back; max_load_from in the profile caps the search
there, so the tester's limit is not read as the DUT's.

Flags:
`, tester.Draft)
		fs.PrintDefaults()
	}
	rest, err := parseFlags(fs, args)
	if err != nil {
		return exitOf(err)
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
	if *calibrate {
		return runCalibrate(ctx, r, progress, lw, *calibration, *report, table.Options{Wide: *wide})
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

// runCalibrate runs linerate test --calibrate: the profile's search on a
// loopback, a table of what the tester sustains per frame size, and the
// file for max_load_from.
func runCalibrate(ctx context.Context, r *tester.Runner, progress func(tester.Progress), lw *liveWriter,
	path, report string, o table.Options) int {
	c, rep, err := r.Calibrate(ctx, progress)
	lw.Clear()
	if rep != nil && report != "" && len(rep.Sizes) > 0 {
		if _, werr := rep.WriteDir(report); werr != nil {
			return fail("report: %v", werr)
		}
	}
	if err != nil {
		return fail("calibration: %v", err)
	}
	fh, err := os.Create(path)
	if err != nil {
		return fail("%v", err)
	}
	if err := c.WriteJSON(fh); err != nil {
		fh.Close()
		return fail("%s: %v", path, err)
	}
	if err := fh.Close(); err != nil {
		return fail("%v", err)
	}
	if err := writeCalibration(os.Stdout, c, rep, path, o); err != nil {
		return fail("%v", err)
	}
	return 0
}

// writeCalibration prints a row per frame size: the tester's Max Load, as
// a share of what the calibration tried and of the line rate.
func writeCalibration(w io.Writer, c *tester.Calibration, rep *tester.Report, path string, o table.Options) error {
	cols := table.Cols("FRAME", "MAX LOAD", "GBIT/S", "LINE", "TRIED UP TO", "TRIALS", "RESULT")
	for _, i := range []int{1, 2, 3, 4, 5} {
		cols[i].Right = true
	}
	cols[6].Wrap = true
	t := table.New(cols...)
	for i, s := range c.Sizes {
		line := "-"
		if i < len(rep.Sizes) && rep.Sizes[i].LineRate > 0 {
			line = fmt.Sprintf("%.1f%%", 100*s.MaxLoad/rep.Sizes[i].LineRate)
		}
		result := "regular"
		if !s.Regular {
			result = s.Reason
		}
		t.Add(s.Name, rate(s.MaxLoad)+"pps", fmt.Sprintf("%.3f", tester.Gbits(s.MaxLoad, s.Size)), line,
			rate(s.SearchMax)+"pps", fmt.Sprint(s.Trials), result)
	}
	if err := t.Write(w, o); err != nil {
		return err
	}
	fmt.Fprintln(w)
	return table.Text(w, o, 0, fmt.Sprintf("Tester calibration (%s), %s. Written to %s: set max_load_from = %q "+
		"in the profile's [test] to cap each frame size's Max Load there. Where MAX LOAD is what it tried up to, "+
		"the tester kept up with all of it.", c.Method, c.Goal, path, path))
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
// and goal, in draft-15's terms), the latency table (a row per share of the
// PDR and stream), and the notes: the irregular results and why, and what
// the tester itself did to the trials.
func writeTestSummary(w io.Writer, rep *tester.Report, o table.Options) error {
	cols := table.Cols("FRAME", "SEARCH", "GOAL", "LOWER", "UPPER", "COND", "GBIT/S", "LINE", "REGULAR", "TRIALS", "TIME")
	for _, i := range []int{3, 4, 5, 6, 7, 9, 10} {
		cols[i].Right = true
	}
	t := table.New(cols...)
	t.Key = 3
	// The irregular results, grouped by reason.
	var reasons []string
	irregular := map[string][]string{}
	irregularAdd := func(reason, what string) {
		if _, ok := irregular[reason]; !ok {
			reasons = append(reasons, reason)
		}
		irregular[reason] = append(irregular[reason], what)
	}
	for _, s := range rep.Sizes {
		for _, sr := range s.Searches {
			for _, r := range sr.Results {
				goal := tester.GoalName(r)
				lower, upper, cond, regular := r.Lower, 0.0, 0.0, "-"
				if r.UpperFound {
					upper = r.Upper
				}
				if g := r.Goal; g != nil {
					upper, cond, regular = g.RelevantUpperBound, g.ConditionalThroughput, "yes"
					if !g.Regular {
						regular = "no"
						irregularAdd(g.Reason, fmt.Sprintf("%s %s %s", sizeLabel(s), sr.Algorithm, goal))
					}
				}
				tp := rate(lower)
				if !r.LowerFound {
					tp = "<" + tp // nothing passed, down to the minimum load
				}
				if l := sr.LimitedAt(r); l > 0 {
					tp += "*"
					if r.Goal == nil {
						irregularAdd(fmt.Sprintf("tester-limited at %.0f pps", l), fmt.Sprintf("%s %s %s", sizeLabel(s), sr.Algorithm, goal))
					}
				}
				line := "-"
				if s.LineRate > 0 {
					line = fmt.Sprintf("%.1f%%", 100*r.Lower/s.LineRate)
				}
				t.Add(s.Name, sr.Algorithm, goal, tp, rate(upper), rate(cond), fmt.Sprintf("%.3f", tester.Gbits(r.Lower, s.Size)),
					line, regular, fmt.Sprint(len(sr.Trials)), sr.Wall.Round(1e8).String())
			}
		}
	}
	if err := t.Write(w, o); err != nil {
		return err
	}
	lat := table.Cols("FRAME", "LOAD", "STREAM", "PACKETS", "MIN", "P50", "P90", "P99", "P99.9", "MAX")
	for i := 3; i < len(lat); i++ {
		lat[i].Right = true
	}
	lat[2].Wrap = true
	lt := table.New(lat...)
	lt.Key = 3
	for _, s := range rep.Sizes {
		for _, l := range s.Latency {
			load := fmt.Sprintf("%g%% PDR", 100*l.Share)
			// One row per stream: each direction of a bidirectional test
			// apart, as the merged figures would hide the slower one.
			for _, d := range l.Directions {
				if h := d.Latency; h == nil {
					lt.Add(s.Name, load, d.Stream, "0", "-", "-", "-", "-", "-", "-")
				} else {
					lt.Add(s.Name, load, d.Stream, fmt.Sprint(h.Count), dur(h.Min), dur(h.P50), dur(h.P90), dur(h.P99), dur(h.P999), dur(h.Max))
				}
			}
			if len(l.Directions) == 0 { // a report from before directions
				if h := l.Trial.Latency; h == nil {
					lt.Add(s.Name, load, "all", "0", "-", "-", "-", "-", "-", "-")
				} else {
					lt.Add(s.Name, load, "all", fmt.Sprint(h.Count), dur(h.Min), dur(h.P50), dur(h.P90), dur(h.P99), dur(h.P999), dur(h.Max))
				}
			}
		}
	}
	if len(lt.Rows) > 0 {
		fmt.Fprintln(w)
		if err := lt.Write(w, o); err != nil {
			return err
		}
	}
	notes := []string{fmt.Sprintf("Search: %s at %.2g%% precision, final trials of %v. LOWER and UPPER are the Relevant "+
		"Lower and Upper Bounds in pps (LOWER is the throughput), COND the Conditional Throughput (draft-15 terms; "+
		"draft-01 and binary search as RFC 2544's goal). Latency timestamps: %s.",
		searchName(rep), 100*rep.Precision, rep.Final, rep.Timestamps)}
	if rep.MaxLoadFrom != "" {
		var capped []string
		for _, s := range rep.Sizes {
			if s.CalibratedMax > 0 {
				capped = append(capped, fmt.Sprintf("%s at %.0f pps", sizeLabel(s), s.CalibratedMax))
			}
		}
		n := "Max Load: calibrated (" + rep.MaxLoadFrom + ")"
		if len(capped) > 0 {
			n += "; capped " + strings.Join(capped, ", ")
		}
		notes = append(notes, n+".")
	}
	if len(reasons) > 0 {
		n := "Irregular:"
		for _, r := range reasons {
			n += " " + strings.Join(irregular[r], ", ") + ": " + r + "."
		}
		if testerLimited(rep) {
			n += " * tester-limited: the tester could not send the load asked for (its shortfall counted as the DUT's loss), " +
				"or the DUT kept up with its calibrated maximum; the DUT may do better than shown. " +
				"Run on an idle, pinned tester, or calibrate it (linerate test --calibrate)."
		}
		notes = append(notes, n)
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
	notes = append(notes, testerNote(rep.Tester))
	for _, n := range notes {
		fmt.Fprintln(w)
		if err := table.Text(w, o, 0, n); err != nil {
			return err
		}
	}
	return nil
}

// sizeLabel is "64 B", or "IMIX".
func sizeLabel(s tester.SizeReport) string {
	if s.Size == tester.IMIXSize {
		return s.Name
	}
	return s.Name + " B"
}

// testerLimited: some result of rep is marked tester-limited.
func testerLimited(rep *tester.Report) bool {
	for _, s := range rep.Sizes {
		for _, sr := range s.Searches {
			if len(sr.Irregular) > 0 {
				return true
			}
		}
	}
	return false
}

// rate is a load in pps for the table, "-" for none.
func rate(pps float64) string {
	if pps <= 0 {
		return "-"
	}
	return strings.TrimSpace(human(pps))
}

// testerNote sums up the tester's retries and shortfall over the run.
func testerNote(s tester.TesterSummary) string {
	if s.Retried == 0 && s.Short == 0 {
		return fmt.Sprintf("Tester: %d trials, none retried or short of its load.", s.Trials)
	}
	n := fmt.Sprintf("Tester: %d trials; %d retried (%d reruns in all) for falling short of their load", s.Trials, s.Retried, s.Retries)
	if s.Short == 0 {
		return n + "; none still short after its retries."
	}
	return n + fmt.Sprintf("; %d still short after %d retries: %d of the %d packets they asked for went unsent (%.3g%%, "+
		"counted as lost), at worst %.3g%% of a trial at %spps.", s.Short, tester.TesterRetries, s.ShortPackets, s.ShortAsked,
		100*float64(s.ShortPackets)/float64(max(s.ShortAsked, 1)), 100*s.Worst, strings.TrimSpace(human(s.WorstRate)))
}

func searchName(rep *tester.Report) string {
	names := map[string]string{"binary": "RFC 2544 binary search", "mlrsearch": "MLRsearch (" + tester.Draft + ")",
		"mlrsearch-15": "MLRsearch (" + search.Draft15 + ")"}
	algs := rep.Algorithms
	if len(algs) == 0 { // a report from before algorithms
		algs = []string{rep.Algorithm}
		if rep.Algorithm == "both" {
			algs = []string{"mlrsearch", "binary"}
		}
	}
	var out []string
	for _, a := range algs {
		if n, ok := names[a]; ok {
			out = append(out, n)
		} else {
			out = append(out, "MLRsearch ("+strings.TrimSpace(rep.Draft)+")")
		}
	}
	if len(out) == 1 {
		return out[0]
	}
	return strings.Join(out[:len(out)-1], ", ") + " and " + out[len(out)-1]
}
