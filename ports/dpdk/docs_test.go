//go:build dpdk

package dpdk

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/linerate/linerate/appliance"
)

// TestDocs: every config in docs/dpdk.md passes `linerate validate` (a dry-run
// engine, strict keys), and its key tables name every key the driver reads.
func TestDocs(t *testing.T) {
	b, err := os.ReadFile("../../docs/dpdk.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	blocks := 0
	for rest := doc; ; {
		_, after, ok := strings.Cut(rest, "```toml\n")
		if !ok {
			break
		}
		block, tail, _ := strings.Cut(after, "```")
		rest = tail
		blocks++
		e, err := newEngine(block, appliance.Options{DryRun: true})
		if err != nil {
			t.Errorf("docs/dpdk.md config %d: %v", blocks, err)
			continue
		}
		_ = e.Close()
	}
	if blocks < 2 {
		t.Fatalf("%d toml blocks in docs/dpdk.md", blocks)
	}
	for _, v := range []any{EAL{}, portConfig{}} {
		rt := reflect.TypeOf(v)
		for i := 0; i < rt.NumField(); i++ {
			key := rt.Field(i).Tag.Get("toml")
			if !strings.Contains(doc, "| `"+key+"` |") {
				t.Errorf("docs/dpdk.md has no row for %s key %q", rt.Name(), key)
			}
		}
	}
	ex, err := os.ReadFile("../../docs/examples/dpdk-null.toml")
	if err != nil {
		t.Fatal(err)
	}
	e, err := newEngine(string(ex), appliance.Options{DryRun: true})
	if err != nil {
		t.Fatalf("docs/examples/dpdk-null.toml: %v", err)
	}
	for _, w := range e.Warnings() {
		if strings.Contains(w, "dpdk:") {
			t.Errorf("the lab example draws a DPDK warning: %q", w)
		}
	}
	_ = e.Close()
}
