// Package readmetest reads what a plugin README says about each stage kind,
// so that tests can hold it to the code: its TOML examples and the first
// column of its Keys, Counters and Drop reasons tables.
package readmetest

import (
	"os"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// Section is what the README says about one stage kind: the "## kind"
// section.
type Section struct {
	Examples []string // TOML examples, their kind and name lines removed
	Keys     []string // first column of the Keys table
	Counters []string // first column of the Counters table
	Reasons  []string // first column of the Drop reasons table
}

var firstCell = regexp.MustCompile("^\\| `([a-z_0-9\\[\\].]+)`")

// Sections reads the README at path, by section title.
func Sections(t testing.TB, path string) map[string]*Section {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*Section{}
	var cur *Section
	var table *[]string
	var block []string
	inBlock := false
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case inBlock && line == "```":
			inBlock = false
			if cur != nil && len(block) > 0 && strings.HasPrefix(block[0], "kind = ") {
				cur.Examples = append(cur.Examples, strings.Join(block[1:], "\n"))
			}
		case inBlock:
			if !strings.HasPrefix(line, "name = ") {
				block = append(block, line)
			}
		case line == "```toml":
			inBlock, block = true, nil
		case strings.HasPrefix(line, "## "):
			cur = &Section{}
			out[strings.TrimPrefix(line, "## ")] = cur
			table = nil
		case cur != nil && line == "### Keys":
			table = &cur.Keys
		case cur != nil && line == "### Counters":
			table = &cur.Counters
		case cur != nil && line == "### Drop reasons":
			table = &cur.Reasons
		case table != nil:
			if m := firstCell.FindStringSubmatch(line); m != nil {
				*table = append(*table, m[1])
			}
		}
	}
	return out
}

// TOMLKeys lists, sorted, the toml tags of the config struct v; a slice of
// structs adds "name[].key" for their fields.
func TOMLKeys(v any) []string {
	var out []string
	t := reflect.TypeOf(v)
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("toml")
		out = append(out, tag)
		if f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Struct {
			for _, k := range TOMLKeys(reflect.Zero(f.Type.Elem()).Interface()) {
				out = append(out, tag+"[]."+k)
			}
		}
	}
	sort.Strings(out)
	return out
}

// Mentions reads the README at path and returns a check that it names name
// in backquotes, reporting what it is when it does not.
func Mentions(t testing.TB, path string) func(what, name string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	return func(what, name string) {
		t.Helper()
		if !strings.Contains(doc, "`"+name+"`") {
			t.Errorf("%s does not mention %s `%s`", path, what, name)
		}
	}
}

// FlatKeys lists the toml keys of the config struct v, with those of the
// structs it embeds, in field order.
func FlatKeys(v any) []string {
	var out []string
	var walk func(rt reflect.Type)
	walk = func(rt reflect.Type) {
		for i := 0; i < rt.NumField(); i++ {
			f := rt.Field(i)
			if f.Anonymous {
				walk(f.Type)
				continue
			}
			if tag, _, _ := strings.Cut(f.Tag.Get("toml"), ","); tag != "" && tag != "-" {
				out = append(out, tag)
			}
		}
	}
	walk(reflect.TypeOf(v))
	return out
}

// TableKeys is the first column of the table under heading (a whole line,
// "### The `memif` driver") in the markdown file at path, up to the next
// heading, sorted: the keys a reference section documents.
func TableKeys(t testing.TB, path, heading string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("%s has no %q", path, heading)
	}
	var keys []string
	for _, line := range strings.Split(rest, "\n") {
		if strings.HasPrefix(line, "#") {
			break
		}
		if m := firstCell.FindStringSubmatch(line); m != nil {
			keys = append(keys, m[1])
		}
	}
	sort.Strings(keys)
	return keys
}
