package route

import (
	"log/slog"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/linerate/linerate/appliance"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/internal/readmetest"
	"github.com/linerate/linerate/plugins"
	_ "github.com/linerate/linerate/ports/afpacket"
	_ "github.com/linerate/linerate/ports/tap"
)

// The routed stages' sections of plugins/README.md name exactly their keys,
// counters and drop reasons, and their examples build.

func sorted(s []string) []string {
	s = slices.Clone(s)
	sort.Strings(s)
	if s == nil {
		s = []string{}
	}
	return s
}

func TestReadme(t *testing.T) {
	doc := readmetest.Sections(t, "README.md")
	for _, c := range []struct {
		kind    string
		cfg     any
		reasons []packet.Reason
	}{
		{"neighbor", neighborConfig{}, []packet.Reason{reasonNDInvalid, reasonNDNotOurs, reasonNDRateLimit, reasonNDBadLLAddr, reasonNotForUs}},
		{"route", routeConfig{}, []packet.Reason{reasonNoRoute, reasonHopLimit, reasonUnresolved, reasonTooBig, reasonNotForUs,
			reasonScope, reasonBadChecksum, reasonSourceRoute, packet.ReasonMalformed, packet.ReasonNoBuffer, packet.ReasonTooBig, packet.ReasonNoPort}},
		{"icmp", icmpConfig{}, []packet.Reason{reasonEchoRateLimit, reasonNotForUs}},
		{"punt", puntConfig{}, []packet.Reason{reasonPuntNoPort, reasonPuntLoop, reasonNotForUs}},
	} {
		t.Run(c.kind, func(t *testing.T) {
			s := doc[c.kind]
			if s == nil {
				t.Fatalf("README.md has no section for %q", c.kind)
			}
			if _, ok := plugins.Lookup(c.kind); !ok {
				t.Fatalf("%s is not registered", c.kind)
			}
			if got, want := sorted(s.Keys), readmetest.TOMLKeys(c.cfg); !slices.Equal(got, want) {
				t.Errorf("README keys %v, code %v", got, want)
			}
			var reasons []string
			for _, r := range c.reasons {
				reasons = append(reasons, r.String())
			}
			if got, want := sorted(s.Reasons), sorted(reasons); !slices.Equal(got, want) {
				t.Errorf("README drop reasons %v, code %v", got, want)
			}
			if len(s.Examples) == 0 {
				t.Fatal("no example")
			}
			for _, ex := range s.Examples {
				h := newHarness(t)
				h.build(c.kind, ex)
				got := h.CounterNames()
				if !slices.Equal(got, sorted(s.Counters)) {
					t.Errorf("README counters %v, code %v", sorted(s.Counters), sorted(got))
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
	e, err := appliance.New(cfg, appliance.Options{DryRun: true, Offline: true, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	_ = e.Close()
	routes, _ := staticRoutes(cfg.Section("routes"))
	neighbors, _ := staticNeighbors(cfg.Section("neighbors"))
	if len(routes) != 3 || len(neighbors) != 1 || len(cfg.Pipelines[0].Stages) != 4 {
		t.Errorf("routes %d, neighbours %d", len(routes), len(neighbors))
	}
}
