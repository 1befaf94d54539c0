package tester

import (
	"os"
	"strings"
	"testing"

	_ "github.com/linerate/linerate/appliance/all" // every driver's section, [dpdk] included
)

// TestDocsProfiles loads every TOML block of docs/test.md as a test profile,
// and the wire example: a block that is a section alone is loaded in the
// whole profile before it.
func TestDocsProfiles(t *testing.T) {
	b, err := os.ReadFile("../docs/test.md")
	if err != nil {
		t.Fatal(err)
	}
	var whole string
	n := 0
	for i, blk := range strings.Split(string(b), "```toml\n")[1:] {
		text, _, _ := strings.Cut(blk, "```")
		switch {
		case strings.HasPrefix(text, "[[test.streams]]"):
			// A stream of its own: in place of the profile's, with the
			// DUT a collector stream needs.
			before, _, _ := strings.Cut(whole, "\n[[test.streams]]")
			text = before + "\n[test.dut]\ncontrol = \"unix:/run/dut.sock\"\nconsumed = [\"collector\"]\n" + text
		case !strings.HasPrefix(text, "version"):
			text = strings.Replace(whole, "\n[[test.streams]]", text+"\n[[test.streams]]", 1)
		default:
			whole = text
		}
		if _, err := Parse("docs/test.md", []byte(text)); err != nil {
			t.Errorf("block %d: %v", i, err)
		}
		n++
	}
	if n < 3 {
		t.Errorf("only %d TOML blocks in docs/test.md", n)
	}
	for _, f := range []string{"wire.toml", "dpdk-ring.toml"} {
		if _, err := Load("../docs/examples/test/" + f); err != nil {
			t.Error(err)
		}
	}
}

// FuzzParse: any profile text gives a profile or an error, never a panic.
func FuzzParse(f *testing.F) {
	wire, err := os.ReadFile("../docs/examples/test/wire.toml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(wire)
	f.Add([]byte("version = 1\n[test]\nframe_sizes = [64]\n[[test.streams]]\ntx = \"a\"\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse("fuzz.toml", data)
		if err == nil && len(p.Test.Streams) == 0 {
			t.Fatal("a profile without streams was accepted")
		}
	})
}
