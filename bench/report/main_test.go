package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

// sampleResults are the results of a made-up run: a cost against a bare
// loop, a rate against a floor, a scaling curve, a failed run and a
// skipped benchmark.
func sampleResults() []runResult {
	l := func(pkg, name string, ms ...metric) line {
		return line{Pkg: pkg, Name: name, Iters: 100, Metrics: ms}
	}
	return []runResult{
		{Run: run{Pkg: "./a"}, Lines: []line{
			l("./a", "BenchmarkEngine", metric{20, "ns/pkt"}),
			l("./a", "BenchmarkEngine", metric{22, "ns/pkt"}),
			l("./a", "BenchmarkEngine", metric{18, "ns/pkt"}),
			l("./a", "BenchmarkEngine/baseline=bare", metric{5, "ns/pkt"}),
			l("./a", "BenchmarkDecoder", metric{4, "GB/s"}, metric{0.7, "x-floor"}),
			l("./a", "BenchmarkLookup/traffic=hot/routes=10", metric{10, "ns/lookup"}),
			l("./a", "BenchmarkLookup/traffic=hot/routes=1000000", metric{12, "ns/lookup"}),
			l("./a", "BenchmarkLookup/traffic=cold/routes=10", metric{10, "ns/lookup"}),
			l("./a", "BenchmarkLookup/traffic=cold/routes=1000", metric{15, "ns/lookup"}),
			l("./a", "BenchmarkLookup/traffic=cold/routes=1000000", metric{80, "ns/lookup"}),
		}, Skips: []skip{{Pkg: "./a", Name: "BenchmarkVeth", Reason: "needs root"}}},
		{Run: run{Pkg: "./b"}, Lines: []line{l("./b", "BenchmarkMulAdd", metric{80, "GB/s"})}},
		{Run: run{Pkg: "./broken"}, Err: "build: exit status 1: undefined: x"},
		{Run: run{Pkg: "./skipped"}, Skipped: true, Err: "needs -tags dpdk"},
	}
}

var sampleFigures = []figure{
	{ID: "met", Title: "engine", Of: ref{Pkg: "./a", Name: "BenchmarkEngine", Metric: "ns/pkt"},
		Base: ref{Pkg: "./a", Name: "BenchmarkEngine/baseline=bare", Metric: "ns/pkt"}, Goal: goal{"<=", 4.5}},
	{ID: "notmet", Title: "engine, strict", Of: ref{Pkg: "./a", Name: "BenchmarkEngine", Metric: "ns/pkt"},
		Base: ref{Pkg: "./a", Name: "BenchmarkEngine/baseline=bare", Metric: "ns/pkt"}, Goal: goal{"<=", 3.0}},
	{ID: "floor", Title: "decoder vs floor", Of: ref{Pkg: "./a", Name: "BenchmarkDecoder", Metric: "GB/s"},
		Base: ref{Pkg: "./b", Name: "BenchmarkMulAdd", Metric: "GB/s", Scale: 1.0 / 16}, Goal: goal{">=", 0.8}},
	{ID: "info", Title: "decoder", Of: ref{Pkg: "./a", Name: "BenchmarkDecoder", Metric: "GB/s"}},
	{ID: "missing", Title: "not written yet", Of: ref{Pkg: "./a", Name: "BenchmarkLookup4/traffic=hot", Metric: "ns/lookup"},
		Goal: goal{"<=", 2}},
	{ID: "nometric", Title: "no such metric", Of: ref{Pkg: "./a", Name: "BenchmarkEngine", Metric: "Mpps"}},
	{ID: "failed", Title: "broken package", Of: ref{Pkg: "./broken", Name: "BenchmarkX", Metric: "ns/op"}},
	{ID: "skippedrun", Title: "dpdk", Of: ref{Pkg: "./skipped", Name: "BenchmarkX", Metric: "ns/op"}},
	{ID: "skippedbench", Title: "veth", Of: ref{Pkg: "./a", Name: "BenchmarkVeth/size=64", Metric: "Mpps"}},
	{ID: "notrun", Title: "left out", Of: ref{Pkg: "./c", Name: "BenchmarkX", Metric: "ns/op"}},
	{ID: "max", Title: "largest table", Of: ref{Pkg: "./a", Name: "BenchmarkLookup/traffic=cold/routes=max", Metric: "ns/lookup"},
		Base: ref{Pkg: "./a", Name: "BenchmarkLookup/traffic=cold/routes=10", Metric: "ns/lookup"}, Goal: goal{"<=", 1.5}},
	{ID: "inrun", Title: "decoder vs floor, in the run", Of: ref{Pkg: "./a", Name: "BenchmarkDecoder", Metric: "x-floor"},
		InRun: "the floor, same iterations", Goal: goal{">=", 0.8}, Note: "needs a free CPU"},
	{ID: "nomax", Title: "no such table", Of: ref{Pkg: "./a", Name: "BenchmarkLookup/traffic=warm/routes=max", Metric: "ns/lookup"}},
}

// TestEvaluate: each figure's value is the median of its samples, the ratio
// is to its baseline of the same run (scaled where the spec says), the goal's
// direction decides met or not, and a figure without a value says why
// instead of failing the report.
func TestEvaluate(t *testing.T) {
	res := collect(sampleResults())
	want := map[string]struct {
		status string
		ratio  float64
	}{
		"met": {statusMet, 4}, "notmet": {statusNotMet, 4}, "floor": {statusMet, 0.8},
		"info": {statusInfo, 0}, "missing": {statusMissing, 0}, "nometric": {statusMissing, 0},
		"failed": {statusFailed, 0}, "skippedrun": {statusSkipped, 0},
		"skippedbench": {statusSkipped, 0}, "notrun": {statusNotRun, 0},
		"max": {statusNotMet, 8}, "nomax": {statusMissing, 0}, "inrun": {statusNotMet, 0.7},
	}
	for _, f := range sampleFigures {
		got := res.evaluate(f)
		w := want[f.ID]
		if got.Status != w.status {
			t.Errorf("%s: status %q (%s), want %q", f.ID, got.Status, got.Note, w.status)
		}
		if w.ratio != 0 && (got.Ratio == nil || *got.Ratio < w.ratio-1e-9 || *got.Ratio > w.ratio+1e-9) {
			t.Errorf("%s: ratio %v, want %v", f.ID, got.Ratio, w.ratio)
		}
		if w.ratio == 0 && got.Ratio != nil {
			t.Errorf("%s: ratio %v, want none", f.ID, *got.Ratio)
		}
		if got.Status != statusInfo && got.Status != statusMet && got.Status != statusNotMet && got.Note == "" {
			t.Errorf("%s: %s without a note", f.ID, got.Status)
		}
	}
	for _, f := range sampleFigures {
		if got := res.evaluate(f); f.ID == "inrun" && got.Note != f.Note {
			t.Errorf("inrun: note %q, want the spec's %q", got.Note, f.Note)
		}
	}
	if f := res.evaluate(sampleFigures[0]); *f.Of.Value != 20 || len(f.Of.Samples) != 3 {
		t.Errorf("engine: value %v samples %v, want the median 20 of 3", *f.Of.Value, f.Of.Samples)
	}
	for _, f := range sampleFigures {
		if f.ID == "max" {
			if got := res.evaluate(f).Of.Benchmark; got != "BenchmarkLookup/traffic=cold/routes=1000000" {
				t.Errorf("routes=max resolved to %s", got)
			}
		}
	}
}

// TestCurves: sub-benchmarks with a size element become one curve per path,
// each a figure of its largest size against its smallest, and a plot per key.
func TestCurves(t *testing.T) {
	cs := collect(sampleResults()).curves()
	if len(cs) != 2 {
		t.Fatalf("%d curves, want 2: %+v", len(cs), cs)
	}
	cold, hot := cs[0], cs[1]
	if cold.Path != "BenchmarkLookup/traffic=cold" || len(cold.Points) != 3 || cold.Metric != "ns/lookup" ||
		cold.Points[0].Size != 10 || cold.Points[2].Size != 1e6 {
		t.Errorf("cold curve %+v", cold)
	}
	if f := scaleFigure(cold); f.Status != statusNotMet || *f.Ratio != 8 {
		t.Errorf("cold: %s %v, want NOT MET at 8×", f.Status, *f.Ratio)
	}
	if f := scaleFigure(hot); f.Status != statusMet || *f.Ratio != 1.2 {
		t.Errorf("hot: %s %v, want met at 1.2×", f.Status, *f.Ratio)
	}
	if f := scaleFigure(hot); f.Title != "Lookup hot routes 10→1M" {
		t.Errorf("title %q", f.Title)
	}
	dir := t.TempDir()
	stale := filepath.Join(dir, "scale-flows.png")
	if err := os.WriteFile(stale, []byte("an older run's"), 0o644); err != nil {
		t.Fatal(err)
	}
	files, err := writePlots(dir, cs)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(files, " ") != "scale-routes.png scale-routes.svg" {
		t.Errorf("plots %v", files)
	}
	for _, f := range files {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() < 1000 {
			t.Errorf("%s: %v", f, err)
		}
	}
	if _, err := os.Stat(stale); err == nil {
		t.Error("an older run's plot of a key this run does not have is still there")
	}
	for n, want := range map[int64]string{10: "10", 1000: "1k", 65535: "65.5k", 230000: "230k", 1048576: "1.05M", 1e6: "1M"} {
		if got := siCount(n); got != want {
			t.Errorf("siCount(%d) = %s, want %s", n, got, want)
		}
	}
	if got := shortPath("BenchmarkScaleReflector/auth=false/traffic=cold/size=64"); got != "ScaleReflector auth=false cold size=64" {
		t.Errorf("shortPath: %s", got)
	}
}

// TestTableWidth: the table fits 100 columns whatever the titles, values
// and machine, and lists why each figure without a value has none.
func TestTableWidth(t *testing.T) {
	res := collect(sampleResults())
	rep := &report{Mode: "full", Count: 3, Machine: machine{
		CPUModel: strings.Repeat("Very Long CPU Model Name ", 8), CPUs: 2, VM: true,
		CPUFlags: map[string]bool{"gfni": true}, Kernel: "Linux 6.18", Arch: "amd64", GoVersion: "go1.26",
		LoadStart: []float64{12.5, 10, 8}, LoadEnd: []float64{20, 15, 10}, Loaded: true}}
	long := figure{ID: "long", Title: strings.Repeat("a very long title ", 5),
		Of:   ref{Pkg: "./a", Name: "BenchmarkEngine", Metric: "ns/pkt"},
		Base: ref{Pkg: "./a", Name: "BenchmarkEngine/baseline=bare", Metric: "ns/pkt"}, Goal: goal{">=", 123456}}
	huge := figure{ID: "huge", Title: "rate", Of: ref{Pkg: "./a", Name: "BenchmarkEngine", Metric: "a_very_long_metric_name/s",
		Scale: 1e12}}
	for _, f := range append(sampleFigures, long, huge) {
		rep.Figures = append(rep.Figures, res.evaluate(f))
	}
	var b bytes.Buffer
	writeTable(&b, rep)
	text := b.String()
	for i, l := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		if w := utf8.RuneCountInString(l); w > tableWidth {
			t.Errorf("line %d: %d columns: %s", i+1, w, l)
		}
	}
	for _, want := range []string{"without a value:", "LOADED", "no BenchmarkLookup4/traffic=hot in ./a", "4.00×",
		"notes:\n  inrun: needs a free CPU", "0.70×"} {
		if !strings.Contains(text, want) {
			t.Errorf("table has no %q:\n%s", want, text)
		}
	}
	for unit, want := range map[string]string{"engine+stage-ns/pkt": "2 ns/pkt", "bare-ns/pkt": "2 ns/pkt",
		"cpu-ns/pkt": "2 cpu-ns/pkt", "reflector_ns/pkt": "2 ns/pkt", "x-floor": "2 x-floor"} {
		two := 2.0
		if got := fmtValue(valueOut{Metric: unit, Value: &two}); got != want {
			t.Errorf("%s: %q, want %q", unit, got, want)
		}
	}
	if strings.Contains(text, "left out") {
		t.Errorf("a figure of a package -pkg left out is in the table:\n%s", text)
	}
}

// TestSpec: the spec's rows are well formed, so a typo shows here and not
// as a figure that is silently "missing".
func TestSpec(t *testing.T) {
	ids := map[string]bool{}
	pkgs := map[string]bool{}
	for _, r := range runs {
		if pkgs[r.Pkg] {
			t.Errorf("%s: two runs", r.Pkg)
		}
		pkgs[r.Pkg] = true
		if !strings.HasPrefix(r.Pkg, "./") {
			t.Errorf("%s: not relative to the module root", r.Pkg)
		}
		if st, err := os.Stat(filepath.Join("..", "..", r.Pkg)); err != nil || !st.IsDir() {
			t.Errorf("%s: no such package directory", r.Pkg)
		}
		for _, p := range append([]string{r.Bench}, r.Short...) {
			for _, e := range strings.Split(p, "/") {
				if _, err := regexp.Compile(e); err != nil {
					t.Errorf("%s: pattern %q: %v", r.Pkg, p, err)
				}
			}
		}
		if r.Program == nil && r.Skip == "" && r.Bench == "" {
			t.Errorf("%s: no -bench pattern", r.Pkg)
		}
	}
	for _, f := range figures {
		if ids[f.ID] {
			t.Errorf("%s: two figures", f.ID)
		}
		ids[f.ID] = true
		if n := utf8.RuneCountInString(f.Title); n > titleWidth || n == 0 {
			t.Errorf("%s: title of %d columns", f.ID, n)
		}
		for _, r := range []ref{f.Of, f.Base} {
			if r.Name == "" {
				continue
			}
			if !pkgs[r.Pkg] {
				t.Errorf("%s: package %s has no run", f.ID, r.Pkg)
			}
			if !strings.HasPrefix(r.Name, "Benchmark") || r.Metric == "" || procSuffix.MatchString(r.Name) {
				t.Errorf("%s: %s %q: not a benchmark name and metric", f.ID, r.Name, r.Metric)
			}
		}
		if f.Goal.Op != "" && ((f.Goal.Op != "<=" && f.Goal.Op != ">=") || f.Goal.Ratio <= 0 ||
			(f.Base.Name == "" && f.InRun == "")) {
			t.Errorf("%s: goal %+v needs <= or >=, a positive ratio and a baseline", f.ID, f.Goal)
		}
		if f.InRun != "" && f.Base.Name != "" {
			t.Errorf("%s: a ratio measured in the run (InRun) and a baseline", f.ID)
		}
		if n := utf8.RuneCountInString(fmt.Sprintf("  %s: %s", f.ID, f.Note)); f.Note != "" && n > tableWidth {
			t.Errorf("%s: note of %d columns under the table", f.ID, n)
		}
		if f.Where == "" {
			t.Errorf("%s: belongs nowhere", f.ID)
		}
	}
}

func TestReplaceMarked(t *testing.T) {
	file := filepath.Join(t.TempDir(), "doc.md")
	doc := "# Doc\n\n" + tableBegin + "\nold table\n" + markEnd + "\n\nafter\n"
	if err := os.WriteFile(file, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	for range 2 { // twice: the second run replaces the first's table
		if err := replaceMarked(file, tableBegin, "new table\n"); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := os.ReadFile(file)
	if want := "# Doc\n\n" + tableBegin + "\nnew table\n" + markEnd + "\n\nafter\n"; string(b) != want {
		t.Errorf("got %q, want %q", b, want)
	}
	if err := replaceMarked(file, figuresBegin, "x"); !errors.Is(err, errNoMarker) {
		t.Errorf("no marker: %v", err)
	}
}

// TestFlags: bad flags are errors that say what is wrong, not panics.
func TestFlags(t *testing.T) {
	for _, args := range [][]string{{"-count", "0"}, {"-pkg", "("}, {"extra"}, {"-benchfmt", "/nonexistent.json"}} {
		var stderr bytes.Buffer
		if err := mainErr(args, &bytes.Buffer{}, &stderr); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
}

// TestQuick runs the quick mode (make bench-quick) on one cheap package
// with the real spec, plus a figure whose benchmark does not exist and a
// package that does not: it must write a report.json of the documented
// schema, a table of at most 100 columns and a raw file that reads back,
// and report the figures "missing" and "failed" instead of stopping.
func TestQuick(t *testing.T) {
	root, module, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	var log bytes.Buffer
	c := config{options: options{Short: true, Count: 1, Out: out, Root: root,
		Pkg: regexp.MustCompile(`^\./(appliance/packet|no/such/package)$`), Timeout: 5 * 60e9},
		Runs: append(append([]run(nil), runs...), run{Pkg: "./no/such/package", Bench: "."}), Discover: false,
		Figures: append(append([]figure(nil), figures...),
			figure{ID: "test.missing", Title: "not yet",
				Of: ref{Pkg: "./appliance/packet", Name: "BenchmarkNotYet", Metric: "ns/pkt"}, Where: issue28},
			figure{ID: "test.failed", Title: "no such package",
				Of: ref{Pkg: "./no/such/package", Name: "BenchmarkX", Metric: "ns/pkt"}, Where: issue28})}
	rep, err := generate(context.Background(), c, module, &log)
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if len(rep.Runs) != 2 || rep.Runs[1].Error == "" {
		t.Fatalf("runs %+v\n%s", rep.Runs, log.String())
	}
	// A package that does not build today is its own tests' failure, not
	// this one's: the report must then say "failed", and still be whole.
	broken := rep.Runs[0].Error != ""
	if broken {
		t.Logf("appliance/packet failed: %s", rep.Runs[0].Error)
	} else if rep.Runs[0].Results == 0 {
		t.Fatalf("no results\n%s", log.String())
	}

	b, err := os.ReadFile(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("report.json: %v", err)
	}
	for _, k := range []string{"schema", "mode", "count", "started", "finished", "machine", "figures",
		"curves", "runs", "benchmarks", "raw"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("report.json has no %q", k)
		}
	}
	if doc["schema"] != float64(schemaVersion) || doc["mode"] != "short" {
		t.Errorf("schema %v mode %v", doc["schema"], doc["mode"])
	}
	m := doc["machine"].(map[string]any)
	for _, k := range []string{"cpu_model", "cpu_flags", "cpus", "kernel", "go_version", "load_start", "load_end", "loaded"} {
		if _, ok := m[k]; !ok {
			t.Errorf("machine has no %q", k)
		}
	}
	status := map[string]string{}
	var walk figureOut
	for _, f := range rep.Figures {
		status[f.ID] = f.Status
		if f.ID == "packet.walk" {
			walk = f
		}
	}
	wantMissing := statusMissing
	if broken {
		wantMissing = statusFailed
	}
	if status["test.missing"] != wantMissing || status["engine.forward"] != statusNotRun ||
		status["test.failed"] != statusFailed {
		t.Errorf("statuses %v", status)
	}
	switch {
	case broken && (walk.Status != statusFailed || walk.Note == ""):
		t.Errorf("packet.walk of a failed run: %+v", walk)
	case !broken && (walk.Ratio == nil || *walk.Of.Value <= 0 || *walk.Base.Value <= 0):
		t.Errorf("packet.walk: %+v", walk)
	}

	table, err := os.ReadFile(filepath.Join(out, "report.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(table), "\n") {
		if utf8.RuneCountInString(l) > tableWidth {
			t.Errorf("%d columns: %s", utf8.RuneCountInString(l), l)
		}
	}
	if !strings.Contains(string(table), "header walk vs gopacket") || !strings.Contains(string(table), "load:") {
		t.Errorf("table without the header walk:\n%s", table)
	}

	// raw.txt and -benchfmt of report.json give the same benchmark lines.
	raw, err := os.ReadFile(filepath.Join(out, "raw.txt"))
	if err != nil {
		t.Fatal(err)
	}
	lines, _ := parseBench(raw, "")
	if len(lines) != rep.Runs[0].Results {
		t.Errorf("raw.txt has %d results, the run %d", len(lines), rep.Runs[0].Results)
	}
	var conv bytes.Buffer
	if err := printBenchfmt(filepath.Join(out, "report.json"), module, &conv); err != nil {
		t.Fatal(err)
	}
	if conv.String() != string(raw) {
		t.Errorf("-benchfmt differs from raw.txt:\n%s\n---\n%s", conv.String(), raw)
	}

	// -from: the same figures again from report.json, and a new row of
	// the spec evaluated on the old results.
	c2 := c
	c2.Out = t.TempDir()
	c2.Plots = filepath.Join(c2.Out, "plots")
	c2.Figures = append(c.Figures, figure{ID: "test.new", Title: "accessors",
		Of: ref{Pkg: "./appliance/packet", Name: "BenchmarkAccessors", Metric: "ns/pkt"}, Where: issue28})
	again, err := reevaluate(c2, module, []string{filepath.Join(out, "report.json")})
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range rep.Figures {
		if g := again.Figures[i]; g.ID != f.ID || g.Status != f.Status {
			t.Errorf("-from: %s %s, the run gave %s %s", g.ID, g.Status, f.ID, f.Status)
		}
	}
	var added figureOut
	for _, f := range again.Figures {
		if f.ID == "test.new" {
			added = f
		}
	}
	if want := map[bool]string{false: statusInfo, true: statusFailed}[broken]; added.Status != want {
		t.Errorf("-from: the new row is %q (%s), want %q", added.Status, added.Note, want)
	}
	raw2, err := os.ReadFile(filepath.Join(c2.Out, "raw.txt"))
	if err != nil || string(raw2) != string(raw) {
		t.Errorf("-from: raw.txt differs (%v)", err)
	}
}

// TestDocGoals: docs/performance.md's goals table lists every figure of the
// spec, and no figure the spec does not have.
func TestDocGoals(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "performance.md"))
	if err != nil {
		t.Fatal(err)
	}
	section := docSection(t, string(b), "## Goals and where each is measured")
	row := regexp.MustCompile("(?m)^\\| `([a-z0-9.]+)` \\|")
	doc := map[string]bool{}
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		doc[m[1]] = true
	}
	for _, f := range figures {
		if !doc[f.ID] {
			t.Errorf("docs/performance.md does not list %s", f.ID)
		}
		delete(doc, f.ID)
	}
	for id := range doc {
		t.Errorf("docs/performance.md lists %s, which the spec does not have", id)
	}
	if !strings.Contains(string(b), tableBegin) || !strings.Contains(string(b), markEnd) {
		t.Error("docs/performance.md has no marked block for the table")
	}
}

// TestDocJSONKeys: docs/performance.md's report.json section names every
// key the program writes.
func TestDocJSONKeys(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "performance.md"))
	if err != nil {
		t.Fatal(err)
	}
	section := docSection(t, string(b), "## report.json")
	res := collect(sampleResults())
	rep := report{Machine: machine{CPUFlags: map[string]bool{}, CPUBrand: "b"}, Sources: []string{"a", "b"}}
	for _, f := range sampleFigures[:1] {
		rep.Figures = append(rep.Figures, res.evaluate(f))
	}
	rep.Curves = res.curves()
	rep.Runs = []runOut{{Pkg: "./a", Args: []string{"x"}, Error: "e", Skipped: true, Subset: []string{"."},
		Skips: []skip{{Name: "BenchmarkVeth", Reason: "needs root"}}}}
	for _, bo := range res.benches {
		rep.Benchmarks = append(rep.Benchmarks, *bo)
	}
	rep.Figures[0].Note = "n"
	js, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := json.Unmarshal(js, &doc); err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if k == "metrics" || k == "cpu_flags" {
					keys[k] = true
					continue // units and flag names, not keys
				}
				keys[k] = true
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(doc)
	for k := range keys {
		if !strings.Contains(section, "`"+k+"`") && !strings.Contains(section, "`"+k+"[]`") {
			t.Errorf("the report.json section does not name %q", k)
		}
	}
}

// docSection is the text of a markdown section, from its heading to the
// next of its level.
func docSection(t *testing.T, doc, heading string) string {
	t.Helper()
	i := strings.Index(doc, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("no section %q", heading)
	}
	rest := doc[i+len(heading)+2:]
	if j := strings.Index(rest, "\n## "); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

// TestMerge: -from a.json,b.json takes b's packages in place of a's and
// keeps a's others, and the table names both runs.
func TestMerge(t *testing.T) {
	_, module, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name string, runs []runOut, lines ...line) string {
		res := &results{by: map[string]*benchOut{}}
		for _, l := range lines {
			res.add(l)
		}
		rep := report{Schema: schemaVersion, Mode: "full", Count: 1, Runs: runs}
		for _, b := range res.benches {
			rep.Benchmarks = append(rep.Benchmarks, *b)
		}
		js, _ := json.Marshal(rep)
		file := filepath.Join(dir, name)
		if err := os.WriteFile(file, js, 0o644); err != nil {
			t.Fatal(err)
		}
		return file
	}
	first := write("first.json", []runOut{{Pkg: "./a"}, {Pkg: "./b"}},
		line{Pkg: "./a", Name: "BenchmarkX", Iters: 1, Metrics: []metric{{10, "ns/pkt"}}},
		line{Pkg: "./a", Name: "BenchmarkGone", Iters: 1, Metrics: []metric{{1, "ns/pkt"}}},
		line{Pkg: "./b", Name: "BenchmarkY", Iters: 1, Metrics: []metric{{2, "ns/pkt"}}})
	second := write("second.json", []runOut{{Pkg: "./a"}},
		line{Pkg: "./a", Name: "BenchmarkX", Iters: 1, Metrics: []metric{{20, "ns/pkt"}}})
	c := config{options: options{Out: filepath.Join(dir, "out")}, Plots: filepath.Join(dir, "plots"),
		Figures: []figure{
			{ID: "x", Title: "x", Of: ref{Pkg: "./a", Name: "BenchmarkX", Metric: "ns/pkt"},
				Base: ref{Pkg: "./b", Name: "BenchmarkY", Metric: "ns/pkt"}, Goal: goal{"<=", 5}},
			{ID: "gone", Title: "gone", Of: ref{Pkg: "./a", Name: "BenchmarkGone", Metric: "ns/pkt"}},
		}}
	rep, err := reevaluate(c, module, []string{first, second})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Figures[0].Status != statusNotMet || *rep.Figures[0].Ratio != 10 {
		t.Errorf("x: %s %v, want NOT MET at 10× (the second run's ./a)", rep.Figures[0].Status, rep.Figures[0].Ratio)
	}
	if rep.Figures[1].Status != statusMissing {
		t.Errorf("gone: %s, want missing: the second run of ./a replaced the first", rep.Figures[1].Status)
	}
	table, _ := os.ReadFile(filepath.Join(c.Out, "report.txt"))
	if !strings.Contains(string(table), "run 1 of 2: "+filepath.Base(dir)+"/first.json") ||
		!strings.Contains(string(table), "run 2 of 2") {
		t.Errorf("table without its sources:\n%s", table)
	}
}

func TestNiceTicks(t *testing.T) {
	var got []string
	for _, tk := range niceTicks(0, 2900) {
		got = append(got, tk.Label)
	}
	if strings.Join(got, " ") != "0 500 1000 1500 2000 2500" {
		t.Errorf("ticks %v", got)
	}
	if niceTicks(1, 1) != nil {
		t.Error("ticks on an empty range")
	}
}

func TestPlotTicks(t *testing.T) {
	var got []string
	for _, tk := range sizeTicks(10, 1e6) {
		got = append(got, tk.Label)
	}
	if strings.Join(got, " ") != "10 100 1k 10k 100k 1M" {
		t.Errorf("size ticks %v", got)
	}
	got = got[:0]
	for _, tk := range logTicks(3, 300) {
		got = append(got, tk.Label)
	}
	if strings.Join(got, " ") != "5 10 20 50 100 200" {
		t.Errorf("log ticks %v", got)
	}
}

// TestMatchesAny: a figure outside the quick mode's patterns is "not run",
// by go test's own matching rule.
func TestMatchesAny(t *testing.T) {
	for _, c := range []struct {
		patterns []string
		name     string
		want     bool
	}{
		{[]string{"^Benchmark(Encap|Decap)$/^size=(66|1200)$/^trace=0xf00000$"}, "BenchmarkEncap/size=1200/trace=0xf00000", true},
		{[]string{"^Benchmark(Encap|Decap)$/^size=(66|1200)$/^trace=0xf00000$"}, "BenchmarkEncap/size=1500/trace=0xf00000", false},
		{[]string{"^BenchmarkMulAdd$/^(size=1408|level=generic)$"}, "BenchmarkMulAdd/level=generic/size=1408", true},
		{[]string{"^BenchmarkForwardMem$", "^BenchmarkRing$"}, "BenchmarkRing/spsc", true},
		{[]string{"^BenchmarkForwardMem$"}, "BenchmarkRing/spsc", false},
		{[]string{"^BenchmarkA$/^x$/^y$"}, "BenchmarkA/x", false}, // a partial match does not report
		{[]string{`^BenchmarkA\/b$`}, "BenchmarkA", false},
	} {
		if got := matchesAny(c.patterns, c.name); got != c.want {
			t.Errorf("%v %s: %v, want %v", c.patterns, c.name, got, c.want)
		}
	}
	res := collect([]runResult{{Run: run{Pkg: "./a"}, Patterns: []string{"^BenchmarkX$"},
		Lines: []line{{Pkg: "./a", Name: "BenchmarkX", Iters: 1, Metrics: []metric{{1, "ns/op"}}}}}})
	if f := res.evaluate(figure{Of: ref{Pkg: "./a", Name: "BenchmarkY", Metric: "ns/op"}}); f.Status != statusNotRun {
		t.Errorf("outside the subset: %s", f.Status)
	}
	if f := res.evaluate(figure{Of: ref{Pkg: "./a", Name: "BenchmarkX/sub", Metric: "ns/op"}}); f.Status != statusMissing {
		t.Errorf("inside the subset: %s", f.Status)
	}
}

func TestFirstLines(t *testing.T) {
	out := "# github.com/x/y\ny/a.go:3:2: undefined: z\n# github.com/x/w\nw/b.go:1: bad\nmore\n"
	if got := firstLines([]byte(out), 2); got != "y/a.go:3:2: undefined: z; w/b.go:1: bad" {
		t.Errorf("got %q", got)
	}
}
