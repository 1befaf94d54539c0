package route

import (
	"log/slog"
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/linerate/linerate/appliance"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/plugins"
	_ "github.com/linerate/linerate/ports/afpacket"
	_ "github.com/linerate/linerate/ports/tap"
)

// The routed stages' sections of plugins/README.md name exactly their keys,
// counters and drop reasons, and their examples build.

var firstCell = regexp.MustCompile("^\\| `([a-z_0-9\\[\\].]+)`")

type readmeSection struct {
	examples                []string
	keys, counters, reasons []string
}

func readReadme(t *testing.T) map[string]*readmeSection {
	t.Helper()
	b, err := os.ReadFile("../README.md")
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
			block = append(block, line)
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

func sorted(s []string) []string {
	s = slices.Clone(s)
	sort.Strings(s)
	if s == nil {
		s = []string{}
	}
	return s
}

func tomlKeys(v any) []string {
	var out []string
	t := reflect.TypeOf(v)
	for i := 0; i < t.NumField(); i++ {
		out = append(out, t.Field(i).Tag.Get("toml"))
	}
	return sorted(out)
}

func TestReadme(t *testing.T) {
	doc := readReadme(t)
	for _, c := range []struct {
		kind    string
		cfg     any
		reasons []packet.Reason
	}{
		{"neighbor", neighborConfig{}, []packet.Reason{reasonNDInvalid, reasonNDNotOurs, reasonNDRateLimit}},
		{"route", routeConfig{}, []packet.Reason{reasonNoRoute, reasonHopLimit, reasonUnresolved, reasonTooBig, reasonNotForUs,
			reasonScope, reasonBadChecksum, packet.ReasonMalformed, packet.ReasonNoBuffer, packet.ReasonTooBig, packet.ReasonNoPort}},
		{"icmp", icmpConfig{}, []packet.Reason{reasonEchoRateLimit}},
		{"punt", puntConfig{}, []packet.Reason{reasonPuntNoPort, reasonPuntLoop}},
	} {
		t.Run(c.kind, func(t *testing.T) {
			s := doc[c.kind]
			if s == nil {
				t.Fatalf("README.md has no section for %q", c.kind)
			}
			if _, ok := plugins.Lookup(c.kind); !ok {
				t.Fatalf("%s is not registered", c.kind)
			}
			if got, want := sorted(s.keys), tomlKeys(c.cfg); !slices.Equal(got, want) {
				t.Errorf("README keys %v, code %v", got, want)
			}
			var reasons []string
			for _, r := range c.reasons {
				reasons = append(reasons, r.String())
			}
			if got, want := sorted(s.reasons), sorted(reasons); !slices.Equal(got, want) {
				t.Errorf("README drop reasons %v, code %v", got, want)
			}
			if len(s.examples) == 0 {
				t.Fatal("no example")
			}
			for _, ex := range s.examples {
				h := newHarness(t)
				h.build(c.kind, ex)
				got := h.CounterNames()
				if !slices.Equal(got, sorted(s.counters)) {
					t.Errorf("README counters %v, code %v", sorted(s.counters), sorted(got))
				}
			}
		})
	}
}

// TestRoutingDoc: the router config of docs/routing.md parses, and every stage
// of it builds, without opening anything (what linerate validate does).
func TestRoutingDoc(t *testing.T) {
	b, err := os.ReadFile("../../docs/routing.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "```toml\n")
	if !ok {
		t.Fatal("docs/routing.md has no toml example")
	}
	doc, _, _ := strings.Cut(rest, "```")
	cfg, err := config.Parse("routing.md", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	e, err := appliance.New(cfg, appliance.Options{DryRun: true, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	_ = e.Close()
	if len(cfg.Routes) != 3 || len(cfg.Neighbors) != 1 || len(cfg.Pipelines[0].Stages) != 4 {
		t.Errorf("routes %d, neighbours %d", len(cfg.Routes), len(cfg.Neighbors))
	}
}
