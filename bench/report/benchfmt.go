package main

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// line is one result line of Go's benchmark format
// (golang.org/x/perf/benchfmt): a name, an iteration count and value–unit
// pairs,
//
//	BenchmarkForwardMem/engine-2   1000   20123 ns/op   48.6 Mpps   20.6 cpu-ns/pkt
//
// Name is without the -GOMAXPROCS suffix the testing package adds, so that
// names are the same on any machine.
type line struct {
	Pkg     string // the last "pkg:" line above it
	Name    string
	Iters   int64
	Metrics []metric // in their order on the line
}

type metric struct {
	Value float64
	Unit  string
}

// skip is a benchmark that skipped itself ("--- SKIP: BenchmarkX"), with the
// first line of its reason.
type skip struct {
	Pkg    string `json:"-"`
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// procSuffix is the -GOMAXPROCS suffix of a result's name.
var procSuffix = regexp.MustCompile(`-[0-9]+$`)

// parseBench reads benchmark output: result lines, "pkg:" lines and skips.
// Everything else (logs, PASS, ok) is ignored. A line that starts like a
// result but is not one is ignored too, as benchstat does: a benchmark's log
// may begin with "Benchmark". Values must be finite.
func parseBench(out []byte, pkg string) ([]line, []skip) {
	var lines []line
	var skips []skip
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	var pendingSkip *skip
	for sc.Scan() {
		text := sc.Text()
		if pendingSkip != nil {
			// The reason is the next line, indented: "    file_test.go:12: why".
			if t := strings.TrimSpace(text); t != "" && strings.HasPrefix(text, " ") {
				if i := strings.Index(t, ": "); i >= 0 && strings.Contains(t[:i], ".go:") {
					t = t[i+2:]
				}
				pendingSkip.Reason = t
			}
			skips = append(skips, *pendingSkip)
			pendingSkip = nil
		}
		switch {
		case strings.HasPrefix(text, "pkg: "):
			pkg = strings.TrimSpace(text[len("pkg: "):])
		case strings.HasPrefix(text, "--- SKIP: Benchmark"):
			f := strings.Fields(text[len("--- SKIP: "):])
			if len(f) > 0 {
				pendingSkip = &skip{Pkg: pkg, Name: procSuffix.ReplaceAllString(f[0], "")}
			}
		case strings.HasPrefix(text, "Benchmark"):
			if l, ok := parseLine(text); ok {
				l.Pkg = pkg
				lines = append(lines, l)
			}
		}
	}
	if pendingSkip != nil {
		skips = append(skips, *pendingSkip)
	}
	return lines, skips
}

// parseLine parses one result line; ok is false if it is not one.
func parseLine(text string) (line, bool) {
	f := strings.Fields(text)
	// A name, the iterations, then pairs.
	if len(f) < 4 || len(f)%2 != 0 || !strings.HasPrefix(f[0], "Benchmark") {
		return line{}, false
	}
	iters, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil || iters <= 0 {
		return line{}, false
	}
	l := line{Name: procSuffix.ReplaceAllString(f[0], ""), Iters: iters}
	for i := 2; i < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
			return line{}, false
		}
		l.Metrics = append(l.Metrics, metric{v, f[i+1]})
	}
	return l, true
}

// String is the line in the benchmark format, which parseLine reads back.
// It has no -GOMAXPROCS suffix, unless the name itself ends like one
// ("…/offset=-2"): then "-1", which readers take off again.
func (l line) String() string {
	var sb strings.Builder
	name := l.Name
	if procSuffix.MatchString(name) {
		name += "-1"
	}
	fmt.Fprintf(&sb, "%s %d", name, l.Iters)
	for _, m := range l.Metrics {
		fmt.Fprintf(&sb, " %s %s", strconv.FormatFloat(m.Value, 'g', -1, 64), m.Unit)
	}
	return sb.String()
}

// sizeElem is a sub-benchmark name element that gives a state's size:
// routes=N, sessions=N … (the scaling curves' x).
var sizeElem = regexp.MustCompile(`^(routes|sessions|generations|neighbours|neighbors|namespaces|flows|keys)=([0-9]+)$`)

// splitSize splits a benchmark's name into its path (the name without the
// size element) and the size: "BenchmarkLookup4/traffic=hot/routes=1000"
// gives "BenchmarkLookup4/traffic=hot", "routes", 1000. ok is false when the
// name has no size element.
func splitSize(name string) (path, key string, size int64, ok bool) {
	elems := strings.Split(name, "/")
	for i, e := range elems {
		m := sizeElem.FindStringSubmatch(e)
		if m == nil {
			continue
		}
		n, err := strconv.ParseInt(m[2], 10, 64)
		if err != nil || n <= 0 {
			return "", "", 0, false
		}
		rest := append(append([]string(nil), elems[:i]...), elems[i+1:]...)
		key = m[1]
		if key == "neighbors" {
			key = "neighbours"
		}
		return strings.Join(rest, "/"), key, n, true
	}
	return "", "", 0, false
}
