package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"

	"github.com/linerate/linerate/appliance"
	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/internal/enginetest"
)

// repoRoot is the repository, from this package's directory.
const repoRoot = "../../.."

// mdBlock is a fenced code block of a markdown file.
type mdBlock struct {
	file string // relative to the repository
	line int    // of the block's first line
	lang string
	text string
	// mark is what an HTML comment right above the block says to the doc
	// tests ("<!-- doctest: invalid -->" gives "invalid"), or "".
	mark string
}

var doctestMark = regexp.MustCompile(`^<!-- doctest: (.*) -->$`)

// mdBlocks reads every fenced block of every markdown file in the repository.
func mdBlocks(t *testing.T) []mdBlock {
	t.Helper()
	var out []mdBlock
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "bin" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".md") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(repoRoot, path)
		lines := strings.Split(string(b), "\n")
		mark := ""
		for i := 0; i < len(lines); i++ {
			l := lines[i]
			if m := doctestMark.FindStringSubmatch(l); m != nil {
				mark = m[1]
				continue
			}
			lang, ok := strings.CutPrefix(l, "```")
			if !ok {
				if strings.TrimSpace(l) != "" {
					mark = ""
				}
				continue
			}
			blk := mdBlock{file: rel, line: i + 2, lang: strings.Fields(lang + " x")[0], mark: mark}
			var body []string
			for i++; i < len(lines) && !strings.HasPrefix(lines[i], "```"); i++ {
				body = append(body, lines[i])
			}
			blk.text = strings.Join(body, "\n") + "\n"
			if blk.lang == "x" {
				blk.lang = ""
			}
			out = append(out, blk)
			mark = ""
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDocsTOML validates every TOML example in README.md, docs/ and every
// package README as `linerate validate` would, offline (keys, types, values,
// every stage built; nothing of this host checked). A stage or port table
// alone is put in a config around it; a block marked
// "<!-- doctest: continue -->" continues the file's previous TOML block; one
// marked "<!-- doctest: invalid -->" is a counter-example and must fail; one
// marked "<!-- doctest: not a config: WHY -->" is another TOML file (a key
// file, say). Blocks for the dpdk build are left to ports/dpdk's TestDocs.
func TestDocsTOML(t *testing.T) {
	host := docHost(t)
	checked := 0
	var prev *mdBlock
	for _, b := range mdBlocks(t) {
		if b.lang != "toml" {
			continue
		}
		where := fmt.Sprintf("%s:%d", b.file, b.line)
		text := b.text
		switch {
		case strings.HasPrefix(b.mark, "not a config:"):
			prev = nil
			continue
		case b.mark == "continue":
			if prev == nil || prev.file != b.file {
				t.Errorf("%s: marked continue, but no TOML block comes before it in %s", where, b.file)
				continue
			}
			text = prev.text + text
			b.text = text
		case b.mark != "" && b.mark != "invalid":
			t.Errorf("%s: unknown doctest mark %q", where, b.mark)
		}
		bb := b
		prev = &bb
		if strings.Contains(text, `driver = "dpdk"`) || strings.Contains(text, "[dpdk]") {
			continue
		}
		err := validateDoc(where, host.Replace(text))
		// A block that the next one continues need not stand alone.
		switch {
		case b.mark == "invalid" && err == nil:
			t.Errorf("%s: a counter-example that validates:\n%s", where, text)
		case b.mark != "invalid" && err != nil && !continued(b, t):
			t.Errorf("%s: %v\n%s", where, err, text)
		}
		checked++
	}
	if checked < 30 {
		t.Errorf("only %d TOML examples found", checked)
	}
}

// docHost makes in a temporary directory the files the docs tell a user to
// make (POT keys, with the command they give), and maps the docs' paths there.
func docHost(t *testing.T) *strings.Replacer {
	t.Helper()
	pot := filepath.Join(t.TempDir(), "pot")
	if code := dispatch([]string{"ioam", "pot-keys", "--nodes", "4", "--dir", pot}); code != 0 {
		t.Fatalf("linerate ioam pot-keys: exit %d", code)
	}
	return strings.NewReplacer("/etc/linerate/pot/", pot+"/")
}

// continued reports whether the TOML block after b continues it.
func continued(b mdBlock, t *testing.T) bool {
	blocks := mdBlocks(t)
	for i, x := range blocks {
		if x.file == b.file && x.line == b.line {
			for _, y := range blocks[i+1:] {
				if y.file != b.file {
					return false
				}
				if y.lang == "toml" {
					return y.mark == "continue"
				}
			}
		}
	}
	return false
}

// validateDoc validates a documented config, or a stage or port table of one
// put in a config of its own.
func validateDoc(where, text string) error {
	if !regexp.MustCompile(`(?m)^version\s*=`).MatchString(text) {
		text = wrapFragment(text)
	}
	cfg, err := config.Parse(where, []byte(text))
	if err != nil {
		return err
	}
	e, err := appliance.New(cfg, appliance.Options{DryRun: true, Offline: true, Log: enginetest.Quiet})
	if err != nil {
		return err
	}
	return e.Close()
}

// wrapFragment makes a config of a stage or port table: version 1, a mem
// port for every port the fragment names, and a pipeline for its stage.
func wrapFragment(text string) string {
	var b strings.Builder
	b.WriteString("version = 1\n")
	trimmed := strings.TrimSpace(stripComments(text))
	isPort := strings.HasPrefix(trimmed, "[[ports]]")
	isPipeline := strings.HasPrefix(trimmed, "[[pipelines]]")
	var doc map[string]any
	body := text
	if !isPort && !isPipeline && !strings.HasPrefix(trimmed, "[[pipelines.stages]]") {
		// A stage's README table: its own tables ([[rules]]) are the
		// stage's, [[pipelines.stages.rules]] in a config file.
		body = "[[pipelines.stages]]\n" + subTable.ReplaceAllString(text, "[${1}pipelines.stages.")
	}
	_, _ = toml.Decode(body, &doc)
	declared := map[string]bool{}
	if isPort {
		for _, p := range asList(doc["ports"]) {
			if n, ok := p["name"].(string); ok {
				declared[n] = true
			}
		}
	}
	var names []string
	collectPorts(doc, &names)
	slices.Sort(names)
	for _, n := range slices.Compact(names) {
		if !declared[n] {
			fmt.Fprintf(&b, "[[ports]]\nname = %q\ndriver = \"mem\"\n", n)
		}
	}
	if isPort {
		b.WriteString(text)
		b.WriteString("\n[[pipelines]]\nname = \"doc\"\nlcores = [0]\n[[pipelines.stages]]\nkind = \"sink\"\n")
		return b.String()
	}
	if !isPipeline {
		b.WriteString("[[pipelines]]\nname = \"doc\"\nlcores = [0]\n")
	}
	b.WriteString(body)
	return b.String()
}

var subTable = regexp.MustCompile(`(?m)^\[(\[?)`)

// collectPorts gathers the port names a stage table refers to: the strings
// under keys that end in "port" or "ports".
func collectPorts(v any, out *[]string) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if strings.HasSuffix(k, "port") || strings.HasSuffix(k, "ports") || k == "rx" {
				switch x := x.(type) {
				case string:
					*out = append(*out, x)
				case []any:
					for _, s := range x {
						if s, ok := s.(string); ok {
							*out = append(*out, s)
						}
					}
				}
			}
			collectPorts(x, out)
		}
	case []map[string]any:
		for _, x := range v {
			collectPorts(x, out)
		}
	case []any:
		for _, x := range v {
			collectPorts(x, out)
		}
	}
}

func asList(v any) []map[string]any {
	switch v := v.(type) {
	case []map[string]any:
		return v
	case []any:
		var out []map[string]any
		for _, x := range v {
			if m, ok := x.(map[string]any); ok {
				out = append(out, m)
			}
		}
		return out
	}
	return nil
}

func stripComments(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
