package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// options are the command line's choices.
type options struct {
	Short   bool
	Count   int
	Pkg     *regexp.Regexp // runs whose Pkg matches; nil: all
	Out     string         // bench/out
	Root    string         // the module's root
	Timeout time.Duration  // per run
	Log     io.Writer      // progress
}

// runResult is what one run gave.
type runResult struct {
	Run     run
	Args    []string // each invocation's arguments
	Lines   []line
	Skips   []skip
	Seconds float64
	Err     string // a build or run failure, or why it was skipped
	Skipped bool
	CPU     string // the testing package's "cpu:" line: the CPUID brand
	// Patterns are the quick mode's -test.bench patterns when it ran a
	// subset: a figure outside them is "not run", not "missing".
	Patterns []string
}

// discover adds a default run for every package with a benchmark that runs
// does not name: a new benchmark is in `make bench` without a spec row.
func discover(root string, specRuns []run) ([]run, error) {
	cmd := exec.Command("go", "list", "-f",
		`{{.Dir}}|{{join .TestGoFiles ","}}|{{join .XTestGoFiles ","}}`, "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	known := map[string]bool{}
	for _, r := range specRuns {
		known[filepath.Clean(r.Pkg)] = true
	}
	all := slices.Clone(specRuns)
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		parts := strings.Split(l, "|")
		if len(parts) != 3 {
			continue
		}
		rel, err := filepath.Rel(root, parts[0])
		if err != nil {
			continue
		}
		pkg := "./" + filepath.ToSlash(rel)
		if known[filepath.Clean(pkg)] {
			continue
		}
		var files []string
		for _, s := range parts[1:] {
			if s != "" {
				files = append(files, strings.Split(s, ",")...)
			}
		}
		if hasBenchmark(parts[0], files) {
			all = append(all, run{Pkg: pkg, Bench: "."})
		}
	}
	return all, nil
}

var benchFunc = regexp.MustCompile(`(?m)^func Benchmark[A-Z_0-9]`)

func hasBenchmark(dir string, files []string) bool {
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err == nil && benchFunc.Match(b) {
			return true
		}
	}
	return false
}

// binName is the file a run's binary is built into.
func binName(r run) string {
	n := strings.Trim(strings.ReplaceAll(filepath.Clean(r.Pkg), "/", "_"), "._")
	if r.Program != nil {
		return n
	}
	return n + ".test"
}

// runAll builds every selected run's binary, then runs them one after
// another (benchmarks must not overlap). A failure is recorded in its run's
// result and the rest go on.
func runAll(ctx context.Context, o options, all []run, log io.Writer) []runResult {
	binDir := filepath.Join(o.Out, "bin")
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return []runResult{{Err: err.Error()}}
	}
	var results []runResult
	for _, r := range all {
		if o.Pkg != nil && !o.Pkg.MatchString(r.Pkg) {
			continue
		}
		res := runResult{Run: r}
		if r.Skip != "" {
			res.Skipped, res.Err = true, r.Skip
		}
		results = append(results, res)
	}
	// Build once, before any benchmark runs.
	for i := range results {
		res := &results[i]
		if res.Skipped {
			continue
		}
		bin := filepath.Join(binDir, binName(res.Run))
		_ = os.Remove(bin)
		var args []string
		if res.Run.Program != nil {
			args = []string{"build", "-o", bin, res.Run.Pkg}
		} else {
			args = []string{"test", "-c", "-vet=off", "-o", bin, res.Run.Pkg}
		}
		fmt.Fprintf(log, "build %s\n", res.Run.Pkg)
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = o.Root
		if out, err := cmd.CombinedOutput(); err != nil {
			res.Err = fmt.Sprintf("build: %v: %s", err, firstLines(out, 3))
			continue
		}
		if _, err := os.Stat(bin); err != nil {
			// go test -c writes nothing for a package without tests.
			res.Skipped, res.Err = true, "no test files"
		}
	}
	for i := range results {
		res := &results[i]
		if res.Skipped || res.Err != "" {
			continue
		}
		runOne(ctx, o, res, filepath.Join(binDir, binName(res.Run)), log)
	}
	return results
}

// runOne runs one binary in its package's directory, as go test does: once
// per pattern (the quick mode may have several).
func runOne(ctx context.Context, o options, res *runResult, bin string, log io.Writer) {
	r := res.Run
	var invocations [][]string
	if r.Program != nil {
		args := r.Program.Args
		if o.Short {
			args = r.Program.ShortArgs
		}
		invocations = append(invocations, args)
	} else {
		patterns, bt, count := []string{r.Bench}, r.Benchtime, r.Count
		if bt == "" {
			bt = defaultBenchtime
		}
		if count == 0 {
			count = o.Count
		}
		if o.Short {
			bt, count = r.ShortTime, 1
			if bt == "" {
				bt = shortBenchtime
			}
			if len(r.Short) > 0 {
				patterns = r.Short
				res.Patterns = r.Short
			}
		}
		for _, p := range patterns {
			args := []string{"-test.run", "^$", "-test.bench", p, "-test.benchtime", bt,
				"-test.benchmem", "-test.count", strconv.Itoa(count), "-test.timeout", o.Timeout.String()}
			if o.Short {
				args = append(args, "-test.short")
			}
			invocations = append(invocations, args)
		}
	}
	start := time.Now()
	for _, args := range invocations {
		res.Args = append(res.Args, strings.Join(args, " "))
		if err := invoke(ctx, o, res, bin, args, log); err != nil && res.Err == "" {
			res.Err = err.Error()
		}
	}
	res.Seconds = time.Since(start).Seconds()
}

// invoke runs the binary once and adds what it reported to res.
func invoke(ctx context.Context, o options, res *runResult, bin string, args []string, log io.Writer) error {
	r := res.Run
	fmt.Fprintf(log, "run   %s %s\n", r.Pkg, strings.Join(args, " "))
	rctx, cancel := context.WithTimeout(ctx, o.Timeout+time.Minute)
	defer cancel()
	cmd := exec.CommandContext(rctx, bin, args...)
	cmd.Dir = filepath.Join(o.Root, r.Pkg)
	if r.Program != nil {
		cmd.Dir = o.Root
	}
	// The output goes to log.txt as it comes, so a long run shows progress.
	var out bytes.Buffer
	var w io.Writer = &out
	if lf, err := os.OpenFile(filepath.Join(o.Out, "log.txt"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
		defer lf.Close()
		fmt.Fprintf(lf, "=== %s %s\n", r.Pkg, strings.Join(args, " "))
		w = io.MultiWriter(&out, lf)
	}
	cmd.Stdout, cmd.Stderr = w, w
	err := cmd.Run()
	var lines []line
	if r.Program != nil {
		var perr error
		lines, perr = r.Program.Parse(out.Bytes())
		if perr != nil && err == nil {
			err = perr
		}
	} else {
		var skips []skip
		lines, skips = parseBench(out.Bytes(), r.Pkg)
		if res.CPU == "" {
			res.CPU = cpuLine(out.Bytes())
		}
		for _, s := range skips {
			s.Pkg = r.Pkg
			res.Skips = append(res.Skips, s)
		}
	}
	for _, l := range lines {
		l.Pkg = r.Pkg
		res.Lines = append(res.Lines, l)
	}
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("%v: %s", err, lastFailure(out.Bytes()))
		}
		return err
	}
	return nil
}

// firstLines is up to n lines of out, joined, less the "# package" lines
// of go build's errors: the error comes first.
func firstLines(out []byte, n int) string {
	var l []string
	for _, s := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if !strings.HasPrefix(s, "# ") && len(l) < n {
			l = append(l, strings.TrimSpace(s))
		}
	}
	return strings.Join(l, "; ")
}

// lastFailure is the most telling line of a failed run: its first FAIL or
// panic line with the line after it.
func lastFailure(out []byte) string {
	l := strings.Split(string(out), "\n")
	for i, s := range l {
		if strings.HasPrefix(s, "--- FAIL") || strings.HasPrefix(s, "panic:") {
			if i+1 < len(l) {
				return strings.TrimSpace(s) + " " + strings.TrimSpace(l[i+1])
			}
			return strings.TrimSpace(s)
		}
	}
	return firstLines(out, 2)
}

// cpuLine is the value of the first "cpu: " line of a test binary's output.
func cpuLine(out []byte) string {
	for _, l := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(l, "cpu: "); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
