package main

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// The benchmark programs under bench/ print tables of their own; these
// adapters turn their rows into benchmark-format lines, so that their figures
// sit in the same table, JSON and raw file as the go test ones. A row the
// adapter does not recognise is left out: the figure that needs it is then
// "missing", and the program's whole output is in bench/out/log.txt.

// gfProgram is bench/gf: linerate's GF(2^8) kernels, ISA-L and klauspost
// in one process on the same buffers; GB/s, the median of -runs rounds.
var gfProgram = &program{
	Args:      []string{"-runs", "11"},
	ShortArgs: []string{"-runs", "1", "-dur", "2ms"},
	Parse:     parseGF,
}

// gfName is the benchmark name parseGF gives a row of bench/gf's table.
func gfName(op string, size int, impl string) string {
	return fmt.Sprintf("BenchmarkGFProgram/op=%s/size=%d/impl=%s", nameElem(op), size, nameElem(impl))
}

// parseGF reads bench/gf's first table: "operation size implementation
// median best", operation and implementation of one or more words.
func parseGF(out []byte) ([]line, error) {
	var lines []line
	for _, text := range strings.Split(string(out), "\n") {
		f := strings.Fields(text)
		if len(f) < 5 {
			continue
		}
		med, err1 := strconv.ParseFloat(f[len(f)-2], 64)
		best, err2 := strconv.ParseFloat(f[len(f)-1], 64)
		if err1 != nil || err2 != nil {
			continue
		}
		at := -1 // the size: the first field that is a whole number
		for i, s := range f[:len(f)-2] {
			if _, err := strconv.Atoi(s); err == nil {
				at = i
				break
			}
		}
		if at < 1 || at+1 >= len(f)-2 {
			continue
		}
		size, _ := strconv.Atoi(f[at])
		lines = append(lines, line{
			Name:  gfName(strings.Join(f[:at], " "), size, strings.Join(f[at+1:len(f)-2], " ")),
			Iters: 1,
			Metrics: []metric{
				{med, "GB/s"}, {best, "best-GB/s"},
			},
		})
	}
	if len(lines) == 0 {
		return nil, fmt.Errorf("no result rows in bench/gf's output")
	}
	return lines, nil
}

// externalProgram is bench/external: the same stage in process, out of
// process saturated and at < 1% loss, and a gRPC call per burst.
var externalProgram = &program{
	Args:      nil, // its defaults: 4M packets a run, median of 3
	ShortArgs: []string{"-count", "100000", "-runs", "1"},
	Parse:     parseExternal,
}

// externalName is the benchmark name parseExternal gives a case.
func externalName(c string) string {
	return "BenchmarkExternalProgram/case=" + nameElem(c)
}

// parseExternal reads bench/external's table: a case name in the first 16
// columns, then Mpps, cores, Mpps/core, p50, p99, the ratio and CPU ns/pkt.
func parseExternal(out []byte) ([]line, error) {
	var lines []line
	for _, text := range strings.Split(string(out), "\n") {
		if len(text) < 17 {
			continue
		}
		name, f := strings.TrimSpace(text[:16]), strings.Fields(text[16:])
		if name == "" || len(f) < 7 {
			continue
		}
		mpps, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		l := line{Name: externalName(name), Iters: 1, Metrics: []metric{{mpps, "Mpps"}}}
		if cpu, err := strconv.ParseFloat(f[6], 64); err == nil {
			l.Metrics = append(l.Metrics, metric{cpu, "cpu-ns/pkt"})
		}
		lines = append(lines, l)
	}
	if len(lines) == 0 {
		return nil, fmt.Errorf("no result rows in bench/external's output")
	}
	return lines, nil
}

var notNameChar = regexp.MustCompile(`[^a-zA-Z0-9%<>.=+-]+`)

// nameElem makes s a benchmark name element: no spaces, no slashes.
func nameElem(s string) string {
	return strings.Trim(notNameChar.ReplaceAllString(s, "-"), "-")
}
