package config

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

// tomlBlocks returns the ```toml blocks of a markdown text.
func tomlBlocks(md string) []string {
	var out []string
	for {
		_, rest, ok := strings.Cut(md, "```toml\n")
		if !ok {
			return out
		}
		block, after, _ := strings.Cut(rest, "```")
		out = append(out, block)
		md = after
	}
}

// The examples in docs/config.md parse, and its walk-through of the lab config
// says what the lab config says.
func TestDocsExamples(t *testing.T) {
	b, err := os.ReadFile("../docs/config.md")
	if err != nil {
		t.Skipf("docs not found: %v", err)
	}
	doc := string(b)
	intro, walk, ok := strings.Cut(doc, "## The lab config, walked through")
	if !ok {
		t.Fatal("docs/config.md has no lab walk-through")
	}
	blocks := tomlBlocks(intro)
	if len(blocks) < 2 {
		t.Fatalf("%d toml examples before the walk-through", len(blocks))
	}
	if _, err := Parse("docs: file structure", []byte(blocks[0])); err != nil {
		t.Errorf("file structure example: %v", err)
	}
	inline := "version = 1\n[[ports]]\nname = \"eth0\"\ndriver = \"afpacket\"\n" + blocks[1]
	if _, err := Parse("docs: inline stages", []byte(inline)); err != nil {
		t.Errorf("inline stages example: %v", err)
	}

	got, err := Parse("docs: walk-through", []byte(strings.Join(tomlBlocks(walk), "")))
	if err != nil {
		t.Fatal(err)
	}
	want, err := LoadLab()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Engine, want.Engine) || got.Control != want.Control || got.Metrics != want.Metrics {
		t.Errorf("engine/control/metrics differ:\n%+v\n%+v", got.Engine, want.Engine)
	}
	keys := func(tb Table) map[string]any {
		m := map[string]any{}
		if err := tb.Decode(&m); err != nil {
			t.Error(err)
		}
		return m
	}
	type portView struct {
		Name, Driver, Pool string
		RxQueues, MTU      int
		Keys               map[string]any
	}
	var gotPorts, wantPorts []portView
	for _, p := range got.Ports {
		gotPorts = append(gotPorts, portView{p.Name, p.Driver, p.Pool, p.RxQueues, p.MTU, keys(p.Table)})
	}
	for _, p := range want.Ports {
		wantPorts = append(wantPorts, portView{p.Name, p.Driver, p.Pool, p.RxQueues, p.MTU, keys(p.Table)})
	}
	if !reflect.DeepEqual(gotPorts, wantPorts) {
		t.Errorf("ports differ:\n%+v\n%+v", gotPorts, wantPorts)
	}
	if len(got.Pipelines) != len(want.Pipelines) {
		t.Fatalf("%d pipelines, lab has %d", len(got.Pipelines), len(want.Pipelines))
	}
	for i, gp := range got.Pipelines {
		wp := want.Pipelines[i]
		if gp.Name != wp.Name || !reflect.DeepEqual(gp.CPUs, wp.CPUs) || !reflect.DeepEqual(gp.Rx, wp.Rx) || len(gp.Stages) != len(wp.Stages) {
			t.Errorf("pipeline %d differs: %+v vs %+v", i, gp, wp)
			continue
		}
		for j, gs := range gp.Stages {
			ws := wp.Stages[j]
			if gs.Kind != ws.Kind || gs.Name != ws.Name || !reflect.DeepEqual(keys(gs.Table), keys(ws.Table)) {
				t.Errorf("pipelines[%d].stages[%d] differs: %s %s %v vs %s %s %v", i, j, gs.Kind, gs.Name, keys(gs.Table), ws.Kind, ws.Name, keys(ws.Table))
			}
		}
	}
	if !reflect.DeepEqual(got.Pools, want.Pools) {
		// where differs (other file); compare the values.
		for i := range got.Pools {
			g, w := got.Pools[i], want.Pools[i]
			if g.Name != w.Name || g.Buffers != w.Buffers || g.DataRoom != w.DataRoom || g.Headroom != w.Headroom {
				t.Errorf("pools differ: %+v vs %+v", g, w)
			}
		}
	}
}
