package main

import (
	"fmt"
	"io"
	"math"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// schemaVersion is report.json's "schema"; docs/performance.md documents
// it. Raise it when a key changes meaning or goes away.
const schemaVersion = 1

// report is report.json.
type report struct {
	Schema     int         `json:"schema"`
	Mode       string      `json:"mode"` // "full" or "short"
	Count      int         `json:"count"`
	Started    time.Time   `json:"started"`
	Finished   time.Time   `json:"finished"`
	Commit     string      `json:"commit,omitempty"`
	Machine    machine     `json:"machine"`
	Figures    []figureOut `json:"figures"`
	Curves     []curveOut  `json:"curves"`
	Runs       []runOut    `json:"runs"`
	Benchmarks []benchOut  `json:"benchmarks"`
	Raw        string      `json:"raw"` // the benchmark-format file, for benchstat
	// Sources are the report.json files -from merged, when more than one.
	Sources []string `json:"sources,omitempty"`
}

// figureOut is one figure: its value, its baseline's, the ratio, the goal
// and whether it is met.
type figureOut struct {
	ID     string   `json:"id"`
	Title  string   `json:"title"`
	Where  string   `json:"where"`
	Of     valueOut `json:"of"`
	Base   valueOut `json:"baseline"`
	Ratio  *float64 `json:"ratio"`
	Goal   *goal    `json:"goal"`
	Status string   `json:"status"`
	Note   string   `json:"note,omitempty"`
}

// valueOut is one side of a figure: the median of its samples times Scale.
type valueOut struct {
	Pkg       string    `json:"pkg,omitempty"`
	Benchmark string    `json:"benchmark,omitempty"`
	Metric    string    `json:"metric,omitempty"`
	Scale     float64   `json:"scale,omitempty"`
	Value     *float64  `json:"value"`
	Samples   []float64 `json:"samples,omitempty"`
	// Spread is (max − min) / median of the samples: how far the runs
	// disagreed, which a loaded machine widens.
	Spread *float64 `json:"spread,omitempty"`
}

// curveOut is a scaling curve: a benchmark path's cost by state size.
type curveOut struct {
	ID     string     `json:"id"`
	Pkg    string     `json:"pkg"`
	Path   string     `json:"path"`
	Key    string     `json:"key"`
	Metric string     `json:"metric"`
	Points []pointOut `json:"points"`
}

type pointOut struct {
	Size  int64   `json:"size"`
	Value float64 `json:"value"` // median
}

// runOut is one run: what it ran, how long it took, and its error.
type runOut struct {
	Pkg     string   `json:"pkg"`
	Args    []string `json:"args,omitempty"` // each invocation's, joined
	Seconds float64  `json:"seconds"`
	Results int      `json:"results"`
	Error   string   `json:"error,omitempty"`
	Skipped bool     `json:"skipped,omitempty"`
	Skips   []skip   `json:"skips,omitempty"`  // benchmarks that skipped themselves
	Subset  []string `json:"subset,omitempty"` // the quick mode's patterns, when a subset ran
}

// benchOut is every result line of one benchmark, in run order.
type benchOut struct {
	Pkg  string      `json:"pkg"`
	Name string      `json:"name"`
	Runs []sampleOut `json:"runs"`
}

type sampleOut struct {
	Iters   int64              `json:"iters"`
	Metrics map[string]float64 `json:"metrics"`
	Order   []string           `json:"units"` // the metrics' order on the line
}

// Status values.
const (
	statusMet     = "met"
	statusNotMet  = "NOT MET"
	statusInfo    = "info"    // no goal
	statusMissing = "missing" // the benchmark or metric does not exist (yet)
	statusFailed  = "failed"  // its run failed
	statusSkipped = "skipped" // its run or benchmark skipped
	statusNotRun  = "not run" // -pkg left its package out
)

// results indexes benchmarks by package and name.
type results struct {
	benches []*benchOut
	by      map[string]*benchOut
	runs    map[string]*runResult // by Pkg
}

func key(pkg, name string) string { return pkg + "\x00" + name }

func collect(rs []runResult) *results {
	r := &results{by: map[string]*benchOut{}, runs: map[string]*runResult{}}
	for i := range rs {
		r.runs[rs[i].Run.Pkg] = &rs[i]
		for _, l := range rs[i].Lines {
			r.add(l)
		}
	}
	return r
}

func (r *results) add(l line) {
	b := r.by[key(l.Pkg, l.Name)]
	if b == nil {
		b = &benchOut{Pkg: l.Pkg, Name: l.Name}
		r.by[key(l.Pkg, l.Name)] = b
		r.benches = append(r.benches, b)
	}
	s := sampleOut{Iters: l.Iters, Metrics: map[string]float64{}}
	for _, m := range l.Metrics {
		if _, dup := s.Metrics[m.Unit]; !dup {
			s.Order = append(s.Order, m.Unit)
		}
		s.Metrics[m.Unit] = m.Value
	}
	b.Runs = append(b.Runs, s)
}

// resolveMax gives a name with a size element "KEY=max" the largest size
// this run has of it ("BenchmarkLookup6/traffic=hot/routes=max" is
// …/routes=230000, or less under -short), or the name unchanged.
func (r *results) resolveMax(pkg, name string) string {
	elems := strings.Split(name, "/")
	at := -1
	for i, e := range elems {
		if strings.HasSuffix(e, "=max") && sizeElem.MatchString(strings.TrimSuffix(e, "max")+"1") {
			at = i
		}
	}
	if at < 0 {
		return name
	}
	best, bestN := name, int64(-1)
	for _, b := range r.benches {
		e := strings.Split(b.Name, "/")
		if b.Pkg != pkg || len(e) != len(elems) {
			continue
		}
		same := true
		for i := range e {
			if i != at && e[i] != elems[i] {
				same = false
			}
		}
		m := sizeElem.FindStringSubmatch(e[at])
		if !same || m == nil || m[1] != strings.TrimSuffix(elems[at], "=max") {
			continue
		}
		if n, err := strconv.ParseInt(m[2], 10, 64); err == nil && n > bestN {
			best, bestN = b.Name, n
		}
	}
	return best
}

// samples are a result's values of one metric; why says why there are none.
func (r *results) samples(rf ref) (vals []float64, status, why string) {
	rf.Name = r.resolveMax(rf.Pkg, rf.Name)
	if b := r.by[key(rf.Pkg, rf.Name)]; b != nil {
		for _, s := range b.Runs {
			if v, ok := s.Metrics[rf.Metric]; ok {
				vals = append(vals, v)
			}
		}
		if len(vals) > 0 {
			return vals, "", ""
		}
		return nil, statusMissing, fmt.Sprintf("%s reports no %s", rf.Name, rf.Metric)
	}
	run := r.runs[rf.Pkg]
	switch {
	case run == nil:
		return nil, statusNotRun, rf.Pkg + " not run"
	case run.Skipped:
		return nil, statusSkipped, rf.Pkg + ": " + run.Err
	}
	for _, s := range run.Skips {
		if s.Name == rf.Name || strings.HasPrefix(rf.Name, s.Name+"/") {
			return nil, statusSkipped, s.Name + ": " + s.Reason
		}
	}
	if run.Err != "" {
		return nil, statusFailed, rf.Pkg + ": " + run.Err
	}
	if len(run.Patterns) > 0 && !matchesAny(run.Patterns, rf.Name) {
		return nil, statusNotRun, rf.Name + " is not in the quick mode's subset"
	}
	return nil, statusMissing, fmt.Sprintf("no %s in %s", rf.Name, rf.Pkg)
}

// matchesAny says whether go test -bench would run name with one of
// patterns: each slash-separated element of a pattern matches the name's
// element at the same depth (testing's rule; a name deeper than the
// pattern matches on its first elements).
func matchesAny(patterns []string, name string) bool {
	elems := strings.Split(name, "/")
	for _, p := range patterns {
		pe := splitPattern(p)
		ok := len(elems) >= len(pe)
		for i := 0; ok && i < len(pe); i++ {
			re, err := regexp.Compile(pe[i])
			ok = err == nil && re.MatchString(elems[i])
		}
		if ok {
			return true
		}
	}
	return false
}

// splitPattern splits a -bench pattern at the slashes outside brackets and
// parentheses, as the testing package does.
func splitPattern(p string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '[', '(':
			depth++
		case ']', ')':
			depth--
		case '\\':
			i++
		case '/':
			if depth == 0 {
				out = append(out, p[start:i])
				start = i + 1
			}
		}
	}
	return append(out, p[start:])
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// evaluate computes one figure.
func (r *results) evaluate(f figure) figureOut {
	out := figureOut{ID: f.ID, Title: f.Title, Where: f.Where}
	if f.Goal.Op != "" {
		g := f.Goal
		out.Goal = &g
	}
	side := func(rf ref) (valueOut, string, string) {
		v := valueOut{Pkg: rf.Pkg, Benchmark: r.resolveMax(rf.Pkg, rf.Name), Metric: rf.Metric}
		vals, st, why := r.samples(rf)
		if st != "" {
			return v, st, why
		}
		scale := 1.0
		if rf.Scale != 0 {
			scale, v.Scale = rf.Scale, rf.Scale
		}
		med := median(vals)
		m := med * scale
		v.Value, v.Samples = &m, vals
		if len(vals) > 1 && med != 0 {
			sp := math.Abs((slices.Max(vals) - slices.Min(vals)) / med)
			v.Spread = &sp
		}
		return v, "", ""
	}
	var st, why string
	out.Of, st, why = side(f.Of)
	if f.Base.Name != "" {
		var bst, bwhy string
		out.Base, bst, bwhy = side(f.Base)
		if st == "" {
			st, why = bst, bwhy
		}
	}
	switch {
	case st != "":
		out.Status, out.Note = st, why
	case f.InRun != "":
		// The value is the ratio, to a baseline of the same iterations.
		ratio := *out.Of.Value
		out.Ratio = &ratio
		out.Status = statusInfo
		if f.Goal.Op != "" {
			out.Status = goalStatus(f.Goal, ratio)
		}
	case f.Base.Name == "":
		out.Status = statusInfo
	default:
		if *out.Base.Value == 0 {
			out.Status, out.Note = statusFailed, "the baseline is 0"
			break
		}
		ratio := *out.Of.Value / *out.Base.Value
		out.Ratio = &ratio
		out.Status = statusInfo
		if f.Goal.Op != "" {
			out.Status = goalStatus(f.Goal, ratio)
		}
	}
	if f.Base.Note != "" && out.Note == "" {
		out.Note = "baseline " + f.Base.Note
	}
	if f.Note != "" && out.Note == "" {
		out.Note = f.Note
	}
	return out
}

func goalStatus(g goal, ratio float64) string {
	ok := ratio <= g.Ratio
	if g.Op == ">=" {
		ok = ratio >= g.Ratio
	}
	if ok {
		return statusMet
	}
	return statusNotMet
}

// curves finds every sub-benchmark with a size element and groups them by
// path: one curve each, in the first metric of scaleMetrics they all report.
func (r *results) curves() []curveOut {
	type ck struct{ pkg, path, key string }
	byCurve := map[ck]map[int64]*benchOut{}
	var order []ck
	for _, b := range r.benches {
		p, k, size, ok := splitSize(b.Name)
		if !ok {
			continue
		}
		c := ck{b.Pkg, p, k}
		if byCurve[c] == nil {
			byCurve[c] = map[int64]*benchOut{}
			order = append(order, c)
		}
		byCurve[c][size] = b
	}
	var out []curveOut
	for _, c := range order {
		pts := byCurve[c]
		metric := ""
	metrics:
		for _, m := range scaleMetrics {
			for _, b := range pts {
				found := false
				for _, s := range b.Runs {
					if _, ok := s.Metrics[m]; ok {
						found = true
					}
				}
				if !found {
					continue metrics
				}
			}
			metric = m
			break
		}
		if metric == "" {
			continue
		}
		cv := curveOut{Pkg: c.pkg, Path: c.path, Key: c.key, Metric: metric,
			ID: "scale." + path.Base(c.pkg) + "." + strings.TrimPrefix(c.path, "Benchmark") + "." + c.key}
		for size, b := range pts {
			var vals []float64
			for _, s := range b.Runs {
				if v, ok := s.Metrics[metric]; ok {
					vals = append(vals, v)
				}
			}
			cv.Points = append(cv.Points, pointOut{Size: size, Value: median(vals)})
		}
		sort.Slice(cv.Points, func(i, j int) bool { return cv.Points[i].Size < cv.Points[j].Size })
		out = append(out, cv)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// scaleFigure is a curve's figure: the cost at its largest size against its
// smallest, goal scaleGoal.
func scaleFigure(c curveOut) figureOut {
	lo, hi := c.Points[0], c.Points[len(c.Points)-1]
	name := func(p pointOut) string {
		return fmt.Sprintf("%s/%s=%d", c.Path, c.Key, p.Size)
	}
	g := scaleGoal
	f := figureOut{ID: c.ID, Where: issue28, Goal: &g,
		Title: fmt.Sprintf("%s %s %s→%s", shortPath(c.Path), c.Key, siCount(lo.Size), siCount(hi.Size)),
		Of:    valueOut{Pkg: c.Pkg, Benchmark: name(hi), Metric: c.Metric, Value: &hi.Value},
		Base:  valueOut{Pkg: c.Pkg, Benchmark: name(lo), Metric: c.Metric, Value: &lo.Value},
	}
	if len(c.Points) < 2 || lo.Value == 0 {
		f.Status, f.Note = statusInfo, "one size only"
		return f
	}
	ratio := hi.Value / lo.Value
	f.Ratio = &ratio
	f.Status = goalStatus(g, ratio)
	return f
}

// siCount writes a count in three digits at most: 10, 1k, 65.5k, 1.05M.
func siCount(n int64) string {
	switch {
	case n >= 1e6:
		return fmt.Sprintf("%.3gM", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.3gk", float64(n)/1e3)
	}
	return fmt.Sprint(n)
}

// shortPath is a curve's path for a title: without "Benchmark", and each
// element KEY=VALUE as its value where that says enough ("traffic=cold" is
// "cold"; "auth=false" stays).
func shortPath(p string) string {
	elems := strings.Split(strings.TrimPrefix(p, "Benchmark"), "/")
	for i, e := range elems {
		k, v, ok := strings.Cut(e, "=")
		if !ok || k == "" {
			continue
		}
		if _, err := strconv.ParseFloat(v, 64); err != nil && v != "true" && v != "false" {
			elems[i] = v
		}
	}
	return strings.Join(elems, " ")
}

// The table: at most tableWidth columns (docs and terminals alike).
const (
	tableWidth = 100
	titleWidth = 32
	valueWidth = 15
)

// writeTable prints the figures, the notes on those that have no value, the
// notes on those that have one (what the figure needs: a free CPU), and the
// machine.
func writeTable(w io.Writer, rep *report) {
	head := fmt.Sprintf("make bench: %s mode, count %d, %s, %s", rep.Mode, rep.Count,
		rep.Started.UTC().Format("2006-01-02 15:04 UTC"), rep.Finished.Sub(rep.Started).Round(time.Second))
	if rep.Commit != "" {
		head += ", " + rep.Commit
	}
	fmt.Fprintln(w, clip(head, tableWidth))
	for i, src := range rep.Sources {
		fmt.Fprintln(w, clip(fmt.Sprintf("  run %d of %d: %s", i+1, len(rep.Sources), src), tableWidth))
	}
	if rep.Mode == "short" {
		fmt.Fprintln(w, "quick mode: few iterations, smallest sizes; a check that it runs, not a measurement")
	}
	row := func(cells ...string) {
		widths := []int{titleWidth, valueWidth, valueWidth, 8, 8, 0}
		var sb strings.Builder
		for i, c := range cells {
			if i > 0 {
				sb.WriteString("  ")
			}
			if widths[i] > 0 {
				sb.WriteString(pad(clip(c, widths[i]), widths[i]))
			} else {
				sb.WriteString(c)
			}
		}
		fmt.Fprintln(w, strings.TrimRight(clip(sb.String(), tableWidth), " "))
	}
	row("figure", "value", "baseline", "ratio", "goal", "status")
	row(strings.Repeat("-", titleWidth), strings.Repeat("-", valueWidth), strings.Repeat("-", valueWidth),
		strings.Repeat("-", 8), strings.Repeat("-", 8), "-------")
	var notes, others []string
	for _, f := range rep.Figures {
		if f.Status == statusNotRun {
			continue
		}
		ratio := "—"
		if f.Ratio != nil {
			ratio = fmt.Sprintf("%.2f×", *f.Ratio)
		}
		row(f.Title, fmtValue(f.Of), fmtValue(f.Base), ratio, fmtGoal(f.Goal), f.Status)
		switch f.Status {
		case statusMissing, statusFailed, statusSkipped:
			notes = append(notes, clip(fmt.Sprintf("  %s: %s", f.ID, f.Note), tableWidth))
		default:
			if f.Note != "" {
				others = append(others, clip(fmt.Sprintf("  %s: %s", f.ID, f.Note), tableWidth))
			}
		}
	}
	for _, part := range []struct {
		head  string
		notes []string
	}{{"without a value:", notes}, {"notes:", others}} {
		if len(part.notes) > 0 {
			fmt.Fprintln(w, "\n"+part.head)
			for _, n := range part.notes {
				fmt.Fprintln(w, n)
			}
		}
	}
	fmt.Fprintln(w)
	for _, l := range rep.Machine.lines() {
		fmt.Fprintln(w, l)
	}
}

func fmtGoal(g *goal) string {
	if g == nil {
		return "—"
	}
	op := "≤"
	if g.Op == ">=" {
		op = "≥"
	}
	return fmt.Sprintf("%s %.1f×", op, g.Ratio)
}

// fmtValue writes a value in three significant digits with its unit. A
// unit such as reflector_ns/pkt shows as ns/pkt, and a long one such as
// engine+stage-ns/pkt or bare-ns/pkt too: the title says whose (cpu-ns/pkt
// and x-floor stay whole).
func fmtValue(v valueOut) string {
	if v.Value == nil {
		return "—"
	}
	unit := v.Metric
	if i := strings.LastIndex(unit, "_"); i >= 0 {
		unit = unit[i+1:]
	}
	if i := strings.LastIndex(unit, "-"); i >= 0 && utf8.RuneCountInString(unit) > len("cpu-ns/pkt") &&
		strings.Contains(unit[i+1:], "/") {
		unit = unit[i+1:]
	}
	x := *v.Value
	var s string
	switch a := math.Abs(x); {
	case a >= 1e9:
		s = fmt.Sprintf("%.3gG", x/1e9)
	case a >= 1e6:
		s = fmt.Sprintf("%.3gM", x/1e6)
	case a >= 1e4:
		s = fmt.Sprintf("%.3gk", x/1e3)
	case a >= 1000:
		s = fmt.Sprintf("%.0f", x)
	default:
		s = fmt.Sprintf("%.3g", x)
	}
	return s + " " + unit
}

// clip cuts s to n columns (runes), ending in "…" if cut.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

func pad(s string, n int) string {
	if k := utf8.RuneCountInString(s); k < n {
		return s + strings.Repeat(" ", n-k)
	}
	return s
}

// writeBenchfmt writes every result in Go's benchmark format, which
// benchstat reads: a "pkg:" line before each package's results.
func writeBenchfmt(w io.Writer, module string, m machine, benches []benchOut) {
	fmt.Fprintf(w, "goos: linux\ngoarch: %s\n", m.Arch)
	if m.CPUModel != "" {
		fmt.Fprintf(w, "cpu: %s\n", m.CPUModel)
	}
	last := ""
	for _, b := range benches {
		if b.Pkg != last {
			fmt.Fprintf(w, "pkg: %s\n", path.Join(module, b.Pkg))
			last = b.Pkg
		}
		for _, s := range b.Runs {
			l := line{Name: b.Name, Iters: s.Iters}
			for _, u := range s.Order {
				l.Metrics = append(l.Metrics, metric{s.Metrics[u], u})
			}
			fmt.Fprintln(w, l.String())
		}
	}
}

// figureMarkdown is a markdown table of figures, for a README's marked
// block.
func figureMarkdown(figs []figureOut) string {
	var sb strings.Builder
	sb.WriteString("| figure | value | baseline | ratio | goal | status | note |\n" +
		"|---|---|---|---|---|---|---|\n")
	for _, f := range figs {
		ratio := "—"
		if f.Ratio != nil {
			ratio = fmt.Sprintf("%.2f×", *f.Ratio)
		}
		fmt.Fprintf(&sb, "| %s | %s | %s | %s | %s | %s | %s |\n", f.Title, fmtValue(f.Of), fmtValue(f.Base),
			ratio, fmtGoal(f.Goal), f.Status, strings.ReplaceAll(f.Note, "|", "\\|"))
	}
	return sb.String()
}
