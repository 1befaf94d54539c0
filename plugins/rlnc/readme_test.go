package rlnc

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

// TestReadme: README.md names every key, counter and drop reason the stages
// have.
func TestReadme(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	has := func(what, name string) {
		if !strings.Contains(doc, "`"+name+"`") && !strings.Contains(doc, "`"+name+"`,") {
			t.Errorf("README.md does not mention %s `%s`", what, name)
		}
	}
	var keys func(rt reflect.Type)
	keys = func(rt reflect.Type) {
		for i := 0; i < rt.NumField(); i++ {
			f := rt.Field(i)
			if f.Anonymous {
				keys(f.Type)
				continue
			}
			if tag, _, _ := strings.Cut(f.Tag.Get("toml"), ","); tag != "" {
				has("key", tag)
			}
		}
	}
	for _, v := range []any{encoderConfig{}, recoderConfig{}, decoderConfig{}, linkConfig{}, matchConfig{}} {
		keys(reflect.TypeOf(v))
	}
	h := newHarness(t)
	for _, kind := range []string{"rlnc.encoder", "rlnc.recoder", "rlnc.decoder"} {
		h.MustBuildNamed(kind, kind, "memory = \"1MiB\"\npool_buffers = 64\n")
		for _, name := range h.CounterNames(kind) {
			if strings.HasPrefix(name, "sent_") {
				name = "sent_<link>"
			}
			has(kind+" counter", name)
		}
	}
	for _, r := range []string{reasonTruncated.String(), reasonVersion.String(), reasonField.String(), reasonZeroK.String(),
		reasonLength.String(), reasonBlocksUsed.String(), reasonZeroVector.String(), reasonSystematic.String(),
		reasonStale.String(), reasonTooBig.String(), reasonNonInnov.String(), reasonLate.String(), reasonMismatch.String(),
		reasonNoMemory.String()} {
		has("drop reason", r)
	}
	if !strings.Contains(doc, "decode_latency") {
		t.Error("README.md does not mention the decode_latency histogram")
	}
}
