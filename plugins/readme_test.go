package plugins

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/config"
)

// readmeSection is what README.md says about one stage kind.
type readmeSection struct {
	examples []string // TOML examples, kind and name lines removed
	keys     []string // first column of the Keys table
	counters []string // first column of the Counters table
	reasons  []string // first column of the Drop reasons table
}

var firstCell = regexp.MustCompile("^\\| `([a-z_0-9\\[\\].]+)`")

func readReadme(t *testing.T) map[string]*readmeSection {
	t.Helper()
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*readmeSection{}
	var cur *readmeSection
	var table *[]string
	var block []string
	inBlock := false
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case inBlock && line == "```":
			inBlock = false
			if cur != nil && len(block) > 0 && strings.HasPrefix(block[0], "kind = ") {
				cur.examples = append(cur.examples, strings.Join(block[1:], "\n"))
			}
		case inBlock:
			if !strings.HasPrefix(line, "name = ") {
				block = append(block, line)
			}
		case line == "```toml":
			inBlock, block = true, nil
		case strings.HasPrefix(line, "## "):
			cur = &readmeSection{}
			out[strings.TrimPrefix(line, "## ")] = cur
			table = nil
		case cur != nil && line == "### Keys":
			table = &cur.keys
		case cur != nil && line == "### Counters":
			table = &cur.counters
		case cur != nil && line == "### Drop reasons":
			table = &cur.reasons
		case table != nil:
			if m := firstCell.FindStringSubmatch(line); m != nil {
				*table = append(*table, m[1])
			}
		}
	}
	return out
}

// tomlKeys lists the toml tags of a config struct; nested struct slices add
// "name[].key" for their fields.
func tomlKeys(v any) []string {
	var out []string
	t := reflect.TypeOf(v)
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("toml")
		out = append(out, tag)
		if f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Struct {
			for _, k := range tomlKeys(reflect.Zero(f.Type.Elem()).Interface()) {
				out = append(out, tag+"[]."+k)
			}
		}
	}
	sort.Strings(out)
	return out
}

// TestReadme checks plugins/README.md against the code: every stage kind has a
// section, its examples build, and its key, counter and drop-reason tables name
// exactly what the stage has.
func TestReadme(t *testing.T) {
	doc := readReadme(t)
	configs := map[string]any{
		"forward": forwardConfig{}, "counter": struct{}{}, "classify": classifyConfig{},
		"generator": generatorConfig{}, "sink": sinkConfig{}, "link": linkConfig{},
	}
	// Drop reasons each stage gives, by name.
	reasons := map[string][]string{
		"forward":  {packet.ReasonMalformed.String()},
		"classify": {reasonClassified.String()},
		"link":     {reasonLinkLoss.String(), reasonLinkQueue.String(), packet.ReasonNoBuffer.String(), packet.ReasonTooBig.String()},
	}
	checked := 0
	for _, k := range Kinds() {
		cfg, builtin := configs[k.Name]
		if !builtin {
			continue // a kind from another package documents itself
		}
		checked++
		s := doc[k.Name]
		if s == nil {
			t.Errorf("README.md has no section for %q", k.Name)
			continue
		}
		if want := tomlKeys(cfg); !slices.Equal(sorted(s.keys), want) {
			t.Errorf("%s: README keys %v, code keys %v", k.Name, sorted(s.keys), want)
		}
		if want := sorted(reasons[k.Name]); !slices.Equal(sorted(s.reasons), want) {
			t.Errorf("%s: README drop reasons %v, code %v", k.Name, sorted(s.reasons), want)
		}
		if len(s.examples) == 0 {
			t.Errorf("%s: README has no example", k.Name)
		}
		for _, ex := range s.examples {
			h := newHarness(t)
			h.ports = append(h.ports, PortInfo{ID: 3, Name: "stamp-ring", Internal: true}, PortInfo{ID: 4, Name: "ioam-ring", Internal: true})
			st, err := h.build(k.Name, ex)
			if err != nil {
				t.Errorf("%s: README example does not build: %v\n%s", k.Name, err, ex)
				continue
			}
			// The counters the stage registers, against the README's table
			// (classify's per-rule counters are written rule0, rule1, …).
			var got []string
			for _, n := range h.CounterNames() {
				if k.Name == "classify" && strings.HasPrefix(n, "rule") {
					n = "rule0"
					if slices.Contains(got, n) {
						continue
					}
				}
				got = append(got, n)
			}
			var want []string
			for _, n := range s.counters {
				if n != "rule1" {
					want = append(want, n)
				}
			}
			if !slices.Equal(sorted(got), sorted(want)) {
				t.Errorf("%s: README counters %v, code %v", k.Name, sorted(want), sorted(got))
			}
			if st, ok := st.(Stopper); ok {
				st.Stop(&h.ctx)
			}
		}
	}
	if checked != len(configs) {
		t.Errorf("checked %d built-in kinds, want %d", checked, len(configs))
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	sort.Strings(s)
	if s == nil {
		s = []string{}
	}
	return s
}

// TestReadmeClassifyInConfigFile: classify rules written as the README says,
// [[pipelines.stages.rules]] in a config file, reach the stage.
func TestReadmeClassifyInConfigFile(t *testing.T) {
	f, err := config.Parse("test.toml", []byte(`version = 1
[[ports]]
name = "eth1"
driver = "null"

[[pipelines]]
name = "p"
rx = ["eth1"]

[[pipelines.stages]]
kind = "classify"
default = "drop"

[[pipelines.stages.rules]]
udp_dst_port = 862
port = "eth1"

[[pipelines.stages.rules]]
hop_by_hop = true
port = "continue"

[[pipelines.stages]]
kind = "forward"
port = "in"
`))
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t)
	s := h.setup("classify", "")
	s.Config = f.Pipelines[0].Stages[0].Table
	st, err := newClassify(s)
	if err != nil {
		t.Fatal(err)
	}
	k := st.(*classify)
	if len(k.rules) != 2 || k.rules[0].udpDst != 862 || k.rules[0].act.port != portEth1 || k.rules[1].hopByHop != 1 ||
		k.rules[1].act.kind != actContinue || k.defAct.kind != actDrop {
		t.Errorf("rules decoded as %+v, default %+v", k.rules, k.defAct)
	}
}
