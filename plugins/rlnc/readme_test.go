package rlnc

import (
	"strings"
	"testing"

	"github.com/linerate/linerate/internal/readmetest"
)

// TestReadme: README.md names every key, counter and drop reason the stages
// have.
func TestReadme(t *testing.T) {
	has := readmetest.Mentions(t, "README.md")
	for _, v := range []any{encoderConfig{}, recoderConfig{}, decoderConfig{}, linkConfig{}, matchConfig{}} {
		for _, k := range readmetest.FlatKeys(v) {
			has("key", k)
		}
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
		reasonLength.String(), reasonSmallN.String(), reasonBlocksUsed.String(), reasonZeroVector.String(), reasonSystematic.String(),
		reasonStale.String(), reasonTooBig.String(), reasonNonInnov.String(), reasonLate.String(), reasonMismatch.String(),
		reasonNoMemory.String()} {
		has("drop reason", r)
	}
	has("histogram", "decode_latency")
}
