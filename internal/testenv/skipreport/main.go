// Command skipreport prints the table of tests that skipped for a kernel
// feature (internal/testenv.RequireKernel), from the file make test gave them:
// the end of every make test, so a green run says what it did not cover.
package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: skipreport FILE")
		os.Exit(2)
	}
	b, err := os.ReadFile(os.Args[1])
	if err != nil && !os.IsNotExist(err) {
		fmt.Fprintln(os.Stderr, "skipreport:", err)
		os.Exit(1)
	}
	report(os.Stdout, string(b))
}

// report writes the skips in lines (package, test, feature, option, tab
// separated), each once (the race and the checked suite both skip it), by
// feature, within 100 columns.
func report(w io.Writer, lines string) {
	type skip struct{ feature, option, test string }
	seen := map[skip]bool{}
	var skips []skip
	for _, l := range strings.Split(lines, "\n") {
		f := strings.Split(l, "\t")
		if len(f) != 4 {
			continue
		}
		s := skip{feature: f[2], option: f[3], test: strings.TrimPrefix(f[0], "./") + " " + f[1]}
		if !seen[s] {
			seen[s] = true
			skips = append(skips, s)
		}
	}
	if len(skips) == 0 {
		fmt.Fprintln(w, "kernel features: every test ran; none skipped for a feature this kernel lacks")
		return
	}
	sort.Slice(skips, func(i, j int) bool {
		if skips[i].feature != skips[j].feature {
			return skips[i].feature < skips[j].feature
		}
		return skips[i].test < skips[j].test
	})
	fmt.Fprintf(w, "kernel features: %d tests skipped for what this kernel lacks (not run, not failed):\n", len(skips))
	last := ""
	for _, s := range skips {
		if s.feature != last {
			fmt.Fprintln(w, clip("  "+s.feature+" ("+s.option+")"))
			last = s.feature
		}
		fmt.Fprintln(w, clip("    "+s.test))
	}
}

// clip keeps a line within 100 columns.
func clip(s string) string {
	if r := []rune(s); len(r) > 100 {
		return string(r[:97]) + "..."
	}
	return s
}
