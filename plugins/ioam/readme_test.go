package ioam

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/linerate/linerate/internal/readmetest"
)

// TestReadme: README.md names every key, counter and drop reason the stages
// have, routed mode's included.
func TestReadme(t *testing.T) {
	has := readmetest.Mentions(t, "README.md")
	for _, v := range []any{encapConfig{}, profileConfig{}, transitConfig{}, decapConfig{}, namespaceConfig{}} {
		for _, k := range readmetest.FlatKeys(v) {
			has("key", k)
		}
	}
	h := newHarness(t)
	h.Ports[0].Addrs = []netip.Prefix{netip.MustParsePrefix("2001:db8:a::1/64")} // routed mode
	loop := "loopback = true\nexport = true\n"
	h.MustBuildNamed("ioam.encap", "ioam.encap", "export = true\n"+encapKeys(1, "encap", `{ namespace = 123, type = "0x800000", hops = 2, loopback = true }`))
	h.MustBuildNamed("ioam.transit", "ioam.transit", nodeKeys(2)+loop+"decrement_hop_limit = true\n")
	h.MustBuildNamed("ioam.decap", "ioam.decap", nodeKeys(3)+loop)
	for _, kind := range []string{"ioam.encap", "ioam.transit", "ioam.decap"} {
		for _, name := range h.CounterNames(kind) {
			if strings.HasPrefix(name, "profile_") {
				name = "profile_<name>"
			}
			has(kind+" counter", name)
		}
	}
	for _, r := range []string{reasonTruncated.String(), reasonBadLength.String(), reasonHbHTooLong.String(), reasonTooLong.String(),
		reasonMisaligned.String(), reasonHopLimit.String(), reasonOverrun.String()} {
		has("drop reason", r)
	}
}

// TestReadmeExamples: each stage example in README.md builds (its key files
// replaced by dealt ones), and the key file example loads.
func TestReadmeExamples(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	keys, err := DealPOT(2, 0xFFFFFFFFFFFFFFC5, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "key.toml")
	if err := WritePOTKey(keyFile, &keys[1]); err != nil {
		t.Fatal(err)
	}
	paths := regexp.MustCompile(`key_file = "[^"]*"`)
	built := 0
	for i, block := range strings.Split(string(b), "```toml\n")[1:] {
		block, _, _ = strings.Cut(block, "```")
		kind := regexp.MustCompile(`(?m)^kind = "([a-z.]+)"$`).FindStringSubmatch(block)
		if kind == nil {
			// The key file.
			f := filepath.Join(dir, fmt.Sprintf("example%d.toml", i))
			if err := os.WriteFile(f, []byte(block), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := LoadPOTKey(f); err != nil {
				t.Errorf("README key file example: %v", err)
			}
			continue
		}
		var keysOnly []string
		for _, l := range strings.Split(block, "\n") {
			switch {
			case l == "[[pipelines.stages]]", strings.HasPrefix(l, "kind = "), strings.HasPrefix(l, "name = "):
			case l == "[[pipelines.stages.profiles]]":
				keysOnly = append(keysOnly, "[[profiles]]")
			default:
				keysOnly = append(keysOnly, l)
			}
		}
		h := newHarness(t)
		if _, err := h.Build(kind[1], paths.ReplaceAllString(strings.Join(keysOnly, "\n"), fmt.Sprintf("key_file = %q", keyFile))); err != nil {
			t.Errorf("README example %s does not build: %v\n%s", kind[1], err, block)
		}
		built++
	}
	if built != 3 {
		t.Errorf("%d stage examples, want one per kind", built)
	}
}

// TestDocsRecordExample: the record in docs/ioam.md is a JSON line with the
// fields a record has, and nothing else.
func TestDocsRecordExample(t *testing.T) {
	b, err := os.ReadFile("../../docs/ioam.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(b), "```json\n")
	block, _, _ = strings.Cut(block, "```")
	if !ok {
		t.Fatal("docs/ioam.md has no JSON record")
	}
	dec := json.NewDecoder(strings.NewReader(block))
	dec.DisallowUnknownFields()
	var j RecordJSON
	if err := dec.Decode(&j); err != nil {
		t.Fatalf("docs/ioam.md's record: %v", err)
	}
	if j.Trace == nil || len(j.Trace.Hops) != 2 || j.InnerSrc == "" || len(j.Trace.Hops[1].Unknown) == 0 {
		t.Errorf("docs/ioam.md's record: %+v", j)
	}
}
