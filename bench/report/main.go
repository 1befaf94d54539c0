// Command report is `make bench`: it runs every benchmark the project has,
// each beside its baseline in the same run, and writes one table of figures
// (value, baseline, ratio, goal, met or not, under 100 columns) with the
// machine they were measured on, report.json, the raw results in Go's
// benchmark format for benchstat, and the scaling curves as plots.
//
// The figures, the runs and the goals are one table in spec.go. Every
// package with a benchmark runs, named in the spec or not; a figure whose
// benchmark does not exist yet is "missing", and a package that fails to
// build or run is "failed": the report goes on and says so.
//
//	go run ./bench/report                  # make bench: -count 3, every package
//	go run ./bench/report -short           # make bench-quick: 100x, once, smallest sizes
//	go run ./bench/report -pkg 'gf|rlnc'   # the runs whose package matches
//	go run ./bench/report -benchfmt a.json # report.json back to benchmark format
//
// Output in -out (bench/out): report.txt (the table), report.json (its
// schema is in docs/performance.md), raw.txt (benchstat old.txt new.txt),
// log.txt (every run's whole output), plots in -plots.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

func main() {
	if err := mainErr(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "bench/report:", err)
		os.Exit(1)
	}
}

// config is what one invocation does.
type config struct {
	options
	Plots    string // directory of the scaling plots
	Doc      string // a file whose marked block gets the table
	Readmes  bool   // update marked blocks in the figures' own READMEs
	Strict   bool   // exit 1 if a run failed
	Figures  []figure
	Runs     []run
	Discover bool
}

func mainErr(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	short := fs.Bool("short", false, "quick mode: -benchtime 100x, count 1, -test.short, the figures' subsets")
	count := fs.Int("count", 3, "-test.count of each run in the full mode (the figure is the median)")
	pkg := fs.String("pkg", "", "run only the packages matching this regexp (./plugins/rlnc …)")
	out := fs.String("out", "bench/out", "directory of report.txt, report.json, raw.txt and log.txt")
	plots := fs.String("plots", "", "directory of the scaling plots (default OUT/plots)")
	doc := fs.String("doc", "", "write the table into this file's marked block (docs/performance.md)")
	readmes := fs.Bool("readmes", false, "update the figures' READMEs where they have a marked block")
	strict := fs.Bool("strict", false, "exit 1 if a package fails to build or a run fails")
	timeout := fs.Duration("timeout", 30*time.Minute, "longest run of one package")
	benchfmt := fs.String("benchfmt", "", "print this report.json's results in benchmark format and exit")
	from := fs.String("from", "", "run nothing: compute the figures of these report.json files (a,b) again")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: go run ./bench/report [flags]\n\nFlags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	root, module, err := moduleRoot()
	if err != nil {
		return err
	}
	if *benchfmt != "" {
		return printBenchfmt(*benchfmt, module, stdout)
	}
	c := config{options: options{Short: *short, Count: *count, Out: *out, Root: root,
		Timeout: *timeout}, Plots: *plots, Doc: *doc, Readmes: *readmes, Strict: *strict,
		Figures: figures, Runs: runs, Discover: true}
	if *count < 1 {
		return fmt.Errorf("-count %d: at least 1", *count)
	}
	if *pkg != "" {
		re, err := regexp.Compile(*pkg)
		if err != nil {
			return fmt.Errorf("-pkg: %w", err)
		}
		c.Pkg = re
	}
	var rep *report
	if *from != "" {
		c.Out = absIn(root, c.Out)
		c.Plots = absIn(root, c.Plots)
		if c.Plots == "" {
			c.Plots = filepath.Join(c.Out, "plots")
		}
		if rep, err = reevaluate(c, module, strings.Split(*from, ",")); err != nil {
			return err
		}
	} else {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
		defer stop()
		if rep, err = generate(ctx, c, module, stderr); err != nil {
			return err
		}
	}
	writeTable(stdout, rep)
	if c.Strict {
		for _, r := range rep.Runs {
			if r.Error != "" && !r.Skipped {
				return fmt.Errorf("%s: %s", r.Pkg, r.Error)
			}
		}
	}
	return nil
}

// generate runs the benchmarks and writes every output file.
func generate(ctx context.Context, c config, module string, log io.Writer) (*report, error) {
	out := c.Out
	if !filepath.IsAbs(out) {
		out = filepath.Join(c.Root, out)
	}
	c.Out = out
	if c.Plots == "" {
		c.Plots = filepath.Join(out, "plots")
	} else if !filepath.IsAbs(c.Plots) {
		c.Plots = filepath.Join(c.Root, c.Plots)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	// The output directory ignores itself: nothing in it is committed.
	if err := os.WriteFile(filepath.Join(out, ".gitignore"), []byte("*\n"), 0o644); err != nil {
		return nil, err
	}
	_ = os.Remove(filepath.Join(out, "log.txt"))
	all := c.Runs
	if c.Discover {
		var err error
		if all, err = discover(c.Root, c.Runs); err != nil {
			return nil, err
		}
	}
	rep := &report{Schema: schemaVersion, Mode: "full", Count: c.Count, Started: time.Now().UTC(),
		Machine: readMachine(), Commit: gitCommit(c.Root), Raw: "raw.txt"}
	if c.Short {
		rep.Mode, rep.Count = "short", 1
	}
	rs := runAll(ctx, c.options, all, log)
	for _, r := range rs {
		if r.CPU != "" {
			rep.Machine.CPUBrand = r.CPU
			break
		}
	}
	rep.Machine.LoadEnd = loadAvg()
	rep.Machine.Loaded = rep.Machine.loaded()
	rep.Finished = time.Now().UTC()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for _, r := range rs {
		rep.Runs = append(rep.Runs, runOut{Pkg: r.Run.Pkg, Args: r.Args, Seconds: r.Seconds,
			Results: len(r.Lines), Error: r.Err, Skipped: r.Skipped, Skips: r.Skips, Subset: r.Patterns})
	}
	if err := finish(c, module, rep, collect(rs)); err != nil {
		return nil, err
	}
	return rep, nil
}

// finish computes the figures and curves of a run's results and writes
// every output file.
func finish(c config, module string, rep *report, res *results) error {
	out := c.Out
	rep.Figures = nil
	for _, f := range c.Figures {
		rep.Figures = append(rep.Figures, res.evaluate(f))
	}
	rep.Curves = res.curves()
	for _, cv := range rep.Curves {
		if len(cv.Points) >= 2 { // one size is no curve (BenchmarkUpdate4/routes=1000000)
			rep.Figures = append(rep.Figures, scaleFigure(cv))
		}
	}
	if rep.Curves == nil {
		rep.Curves = []curveOut{}
	}
	rep.Benchmarks = []benchOut{}
	for _, b := range res.benches {
		rep.Benchmarks = append(rep.Benchmarks, *b)
	}

	var raw bytes.Buffer
	writeBenchfmt(&raw, module, rep.Machine, rep.Benchmarks)
	if err := os.WriteFile(filepath.Join(out, "raw.txt"), raw.Bytes(), 0o644); err != nil {
		return err
	}
	js, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "report.json"), append(js, '\n'), 0o644); err != nil {
		return err
	}
	var table bytes.Buffer
	writeTable(&table, rep)
	if err := os.WriteFile(filepath.Join(out, "report.txt"), table.Bytes(), 0o644); err != nil {
		return err
	}
	if _, err := writePlots(c.Plots, rep.Curves); err != nil {
		return err
	}
	if c.Doc != "" {
		if err := replaceMarked(filepath.Join(c.Root, c.Doc), tableBegin,
			"```text\n"+table.String()+"```\n"); err != nil {
			return err
		}
	}
	if c.Readmes {
		return updateReadmes(c.Root, rep.Figures)
	}
	return nil
}

// reevaluate reads report.json files and computes their figures again with
// this spec, without running anything: after a change to the spec, or to
// see an old run against today's goals. With several files, a package a
// later file ran replaces that package's results of the earlier ones (a
// package run again on its own); the machine is the first file's, its load
// at the end the last's, and the report lists its sources.
func reevaluate(c config, module string, files []string) (*report, error) {
	var rep *report
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		var r report
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if r.Schema != schemaVersion {
			return nil, fmt.Errorf("%s: schema %d, this program reads %d", file, r.Schema, schemaVersion)
		}
		src := fmt.Sprintf("%s (%s, %s)", filepath.Base(filepath.Dir(file))+"/"+filepath.Base(file),
			r.Commit, r.Started.Format("15:04 UTC"))
		if rep == nil {
			rep = &r
			rep.Sources = []string{src}
			continue
		}
		rep.merge(&r)
		rep.Sources = append(rep.Sources, src)
	}
	if rep == nil {
		return nil, errors.New("-from: no file")
	}
	if len(rep.Sources) == 1 {
		rep.Sources = nil
	}
	res := &results{by: map[string]*benchOut{}, runs: map[string]*runResult{}}
	for i := range rep.Benchmarks {
		bo := &rep.Benchmarks[i]
		res.by[key(bo.Pkg, bo.Name)] = bo
		res.benches = append(res.benches, bo)
	}
	for _, r := range rep.Runs {
		res.runs[r.Pkg] = &runResult{Run: run{Pkg: r.Pkg}, Err: r.Error, Skipped: r.Skipped, Skips: r.Skips,
			Patterns: r.Subset}
	}
	if err := os.MkdirAll(c.Out, 0o755); err != nil {
		return nil, err
	}
	if err := finish(c, module, rep, res); err != nil {
		return nil, err
	}
	return rep, nil
}

// merge takes a later report's packages in place of rep's.
func (rep *report) merge(later *report) {
	again := map[string]bool{}
	for _, r := range later.Runs {
		if !r.Skipped {
			again[r.Pkg] = true
		}
	}
	runs := rep.Runs[:0:0]
	for _, r := range rep.Runs {
		if !again[r.Pkg] {
			runs = append(runs, r)
		}
	}
	for _, r := range later.Runs {
		if again[r.Pkg] {
			runs = append(runs, r)
		}
	}
	rep.Runs = runs
	benches := rep.Benchmarks[:0:0]
	for _, b := range rep.Benchmarks {
		if !again[b.Pkg] {
			benches = append(benches, b)
		}
	}
	rep.Benchmarks = append(benches, later.Benchmarks...)
	if later.Started.Before(rep.Started) {
		rep.Started = later.Started
	}
	if later.Finished.After(rep.Finished) {
		rep.Finished = later.Finished
		rep.Machine.LoadEnd = later.Machine.LoadEnd
	}
	rep.Machine.Loaded = rep.Machine.Loaded || later.Machine.Loaded
}

// Marked blocks: the text between a begin marker and markEnd is the
// report's, replaced on every run.
const (
	tableBegin   = "<!-- make bench: table -->"
	figuresBegin = "<!-- make bench: figures -->"
	markEnd      = "<!-- make bench: end -->"
)

var errNoMarker = errors.New("no marked block")

// replaceMarked puts content between begin and markEnd in the file.
func replaceMarked(file, begin, content string) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	s := string(b)
	i := strings.Index(s, begin)
	if i < 0 {
		return fmt.Errorf("%s: %w (%s … %s)", file, errNoMarker, begin, markEnd)
	}
	j := strings.Index(s[i:], markEnd)
	if j < 0 {
		return fmt.Errorf("%s: %w: %s without %s", file, errNoMarker, begin, markEnd)
	}
	s = s[:i+len(begin)] + "\n" + content + s[i+j:]
	return os.WriteFile(file, []byte(s), 0o644)
}

// updateReadmes writes each README's own figures into its marked block,
// where it has one: a README's figures come from the same run as the
// table's.
func updateReadmes(root string, figs []figureOut) error {
	by := map[string][]figureOut{}
	for _, f := range figs {
		if strings.HasSuffix(f.Where, ".md") {
			by[f.Where] = append(by[f.Where], f)
		}
	}
	files := make([]string, 0, len(by))
	for f := range by {
		files = append(files, f)
	}
	sort.Strings(files)
	for _, f := range files {
		err := replaceMarked(filepath.Join(root, f), figuresBegin, figureMarkdown(by[f]))
		if err != nil && !errors.Is(err, errNoMarker) && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// absIn is path from root if it is relative; "" stays "".
func absIn(root, path string) string {
	if path == "" || filepath.IsAbs(path) {
		return path
	}
	return filepath.Join(root, path)
}

// moduleRoot is the main module's directory and path.
func moduleRoot() (dir, module string, err error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", "", errors.New("not inside a Go module: run from the linerate checkout")
	}
	b, err := os.ReadFile(gomod)
	if err != nil {
		return "", "", err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == "module" {
			return filepath.Dir(gomod), f[1], nil
		}
	}
	return "", "", fmt.Errorf("%s: no module line", gomod)
}

func gitCommit(root string) string {
	cmd := exec.Command("git", "describe", "--always", "--dirty")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// printBenchfmt prints a report.json's results in benchmark format.
func printBenchfmt(file, module string, w io.Writer) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var rep report
	if err := json.Unmarshal(b, &rep); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	if rep.Schema != schemaVersion {
		return fmt.Errorf("%s: schema %d, this program reads %d", file, rep.Schema, schemaVersion)
	}
	writeBenchfmt(w, module, rep.Machine, rep.Benchmarks)
	return nil
}
