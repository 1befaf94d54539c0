package tester

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/linerate/linerate/tester/search"
)

// WriteJSON writes the report, every trial included.
func (rep *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// Gbits is a load in packets per second as Gbit/s on the wire (the frame and
// its 20 bytes of preamble and gap).
func Gbits(pps float64, size int) float64 { return pps * 8 * wireBytes(size) / 1e9 }

// WriteResultsCSV writes a row per frame size, search and loss ratio.
func (rep *Report) WriteResultsCSV(w io.Writer) error {
	c := csv.NewWriter(w)
	_ = c.Write([]string{"frame_size", "algorithm", "loss_ratio", "throughput_pps", "throughput_gbps",
		"found", "upper_pps", "relative_width", "trials", "trial_time_s", "wall_s", "tester_limited_pps",
		"goal", "regular", "irregular_reason", "relevant_lower_pps", "relevant_upper_pps", "conditional_throughput_pps"})
	for _, s := range rep.Sizes {
		for _, sr := range s.Searches {
			for _, r := range sr.Results {
				lim := ""
				if l := sr.LimitedAt(r); l > 0 {
					lim = f(l)
				}
				goal := []string{"", "", "", "", "", ""}
				if g := r.Goal; g != nil {
					goal = []string{GoalName(r), strconv.FormatBool(g.Regular), g.Reason, f(g.RelevantLowerBound),
						f(g.RelevantUpperBound), f(g.ConditionalThroughput)}
				}
				_ = c.Write(append([]string{s.Name, sr.Algorithm, f(r.LossRatio), f(r.Lower), f(Gbits(r.Lower, s.Size)),
					strconv.FormatBool(r.LowerFound), f(r.Upper), f(r.RelativeWidth()), strconv.Itoa(len(sr.Trials)),
					f(sr.TrialTime.Seconds()), f(sr.Wall.Seconds()), lim}, goal...))
			}
		}
	}
	c.Flush()
	return c.Error()
}

// WriteTrialsCSV writes a row per trial and stream.
func (rep *Report) WriteTrialsCSV(w io.Writer) error {
	c := csv.NewWriter(w)
	_ = c.Write([]string{"frame_size", "search", "phase", "rate_pps", "duration_s", "stream", "asked", "sent",
		"received", "late", "late_from_earlier", "reordered", "duplicates", "dut_consumed", "loss_ratio", "retries",
		"latency_min_ns", "latency_p50_ns", "latency_p99_ns", "latency_max_ns"})
	row := func(size, search string, t *Trial) {
		for _, s := range t.Streams {
			lat := []string{"", "", "", ""}
			if h := s.Latency; h != nil {
				lat = []string{u(h.Min), u(h.P50), u(h.P99), u(h.Max)}
			}
			_ = c.Write(append([]string{size, search, t.Phase, f(t.Rate), f(t.Duration.Seconds()), s.Name,
				u(s.Asked), u(s.Sent), u(s.Received), u(s.Late), u(s.LateFromEarlier), u(s.Reordered), u(s.Duplicates), u(t.Consumed),
				f(t.LossRatio()), strconv.Itoa(t.Retries)}, lat...))
		}
	}
	for _, s := range rep.Sizes {
		if s.Warmup != nil {
			row(s.Name, "", s.Warmup)
		}
		for _, sr := range s.Searches {
			for _, t := range sr.Trials {
				row(s.Name, sr.Algorithm, t)
			}
		}
		for _, l := range s.Latency {
			row(s.Name, "", l.Trial)
		}
	}
	c.Flush()
	return c.Error()
}

// Trials calls fn for every trial of the report: warm-ups, searches' and
// latency trials.
func (rep *Report) Trials(fn func(size SizeReport, t *Trial)) {
	for _, s := range rep.Sizes {
		if s.Warmup != nil {
			fn(s, s.Warmup)
		}
		for _, sr := range s.Searches {
			for _, t := range sr.Trials {
				fn(s, t)
			}
		}
		for _, l := range s.Latency {
			fn(s, l.Trial)
		}
	}
}

func f(v float64) string { return strconv.FormatFloat(v, 'g', 10, 64) }
func u(v uint64) string  { return strconv.FormatUint(v, 10) }

// WriteDir writes the whole report to dir: report.json, results.csv,
// trials.csv and the plots as PNG and SVG. It returns the files written.
func (rep *Report) WriteDir(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var files []string
	write := func(name string, fn func(io.Writer) error) error {
		path := filepath.Join(dir, name)
		fh, err := os.Create(path)
		if err != nil {
			return err
		}
		if err := fn(fh); err != nil {
			fh.Close()
			return fmt.Errorf("%s: %w", path, err)
		}
		files = append(files, path)
		return fh.Close()
	}
	for _, w := range []struct {
		name string
		fn   func(io.Writer) error
	}{{"report.json", rep.WriteJSON}, {"results.csv", rep.WriteResultsCSV}, {"trials.csv", rep.WriteTrialsCSV}} {
		if err := write(w.name, w.fn); err != nil {
			return files, err
		}
	}
	plots, err := rep.plots()
	if err != nil {
		return files, err
	}
	for _, p := range plots {
		for _, ext := range []string{"png", "svg"} {
			path := filepath.Join(dir, p.name+"."+ext)
			if err := p.plot.Save(p.w, p.h, path); err != nil {
				return files, fmt.Errorf("%s: %w", path, err)
			}
			files = append(files, path)
		}
	}
	return files, nil
}

// TesterSummary sums up what the tester itself did to a run's trials: how
// many it ran again because it could not send their load, and how many were
// still short after that, by how much. A short trial's shortfall counts as
// the DUT's loss (draft-15 recommends it for the search), so this is how
// far the tester may have shaped the results.
type TesterSummary struct {
	Trials int `json:"trials"`
	// Retried trials were run again (Retries times in all) for falling
	// short of their load.
	Retried int `json:"retried"`
	Retries int `json:"retries"`
	// Short trials were still short after their retries: ShortPackets of
	// the ShortAsked packets they asked for went unsent.
	Short        int    `json:"short"`
	ShortPackets uint64 `json:"short_packets"`
	ShortAsked   uint64 `json:"short_asked"`
	// Worst is the largest shortfall, as a share of its trial's ask, and
	// WorstRate that trial's load.
	Worst     float64 `json:"worst_short_share"`
	WorstRate float64 `json:"worst_short_rate_pps"`
}

func summarize(rep *Report) TesterSummary {
	var s TesterSummary
	rep.Trials(func(_ SizeReport, t *Trial) {
		s.Trials++
		if t.Retries > 0 {
			s.Retried++
			s.Retries += t.Retries
		}
		if t.TesterShort > 0 {
			s.Short++
			s.ShortPackets += t.TesterShort
			s.ShortAsked += t.Asked
			if t.Asked > 0 {
				if share := float64(t.TesterShort) / float64(t.Asked); share > s.Worst {
					s.Worst, s.WorstRate = share, t.Rate
				}
			}
		}
	})
	return s
}

// GoalName is how reports name a result's goal: a draft-15 goal's name, else
// "NDR" for loss ratio 0 and "PDR 0.5%" for the others.
func GoalName(r search.Result) string {
	if g := r.Goal; g != nil && g.Goal.Name != "" {
		return g.Goal.Name
	}
	return ratioName(r.LossRatio)
}
