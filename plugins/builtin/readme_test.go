package builtin

import (
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/internal/readmetest"
	"github.com/linerate/linerate/plugins"
)

// TestReadme checks plugins/README.md against the code: every stage kind has a
// section, its examples build, and its key, counter and drop-reason tables name
// exactly what the stage has.
func TestReadme(t *testing.T) {
	doc := readmetest.Sections(t, "README.md")
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
	for _, k := range plugins.Kinds() {
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
		if want := readmetest.TOMLKeys(cfg); !slices.Equal(sorted(s.Keys), want) {
			t.Errorf("%s: README keys %v, code keys %v", k.Name, sorted(s.Keys), want)
		}
		if want := sorted(reasons[k.Name]); !slices.Equal(sorted(s.Reasons), want) {
			t.Errorf("%s: README drop reasons %v, code %v", k.Name, sorted(s.Reasons), want)
		}
		if len(s.Examples) == 0 {
			t.Errorf("%s: README has no example", k.Name)
		}
		for _, ex := range s.Examples {
			h := newHarness(t)
			h.Ports = append(h.Ports, plugins.PortInfo{ID: 3, Name: "stamp-ring", Internal: true}, plugins.PortInfo{ID: 4, Name: "ioam-ring", Internal: true})
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
			for _, n := range s.Counters {
				if n != "rule1" {
					want = append(want, n)
				}
			}
			if !slices.Equal(sorted(got), sorted(want)) {
				t.Errorf("%s: README counters %v, code %v", k.Name, sorted(want), sorted(got))
			}
			if st, ok := st.(plugins.Stopper); ok {
				st.Stop(&h.Ctx)
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
	s := h.Setup("classify", "")
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
