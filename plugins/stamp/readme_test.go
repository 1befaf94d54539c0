package stamp

import (
	"testing"

	"github.com/linerate/linerate/internal/readmetest"
)

// TestReadme keeps README.md in step with the code: every config key,
// counter, histogram and drop reason is mentioned.
func TestReadme(t *testing.T) {
	has := readmetest.Mentions(t, "README.md")
	for _, v := range []any{senderConfig{}, senderSessionConfig{}, reflectorConfig{}, reflectorSessionConfig{}, collectorConfig{}} {
		for _, k := range readmetest.FlatKeys(v) {
			has("key", k)
		}
	}
	h := newHarness(t)
	for _, kind := range []string{"stamp.sender", "stamp.reflector", "stamp.collector"} {
		keys := ""
		if kind == "stamp.sender" {
			keys = "src = \"2001:db8::1\"\n"
		}
		h.MustBuildNamed(kind, kind, keys)
		for _, name := range h.CounterNames(kind) {
			has(kind+" counter", name)
		}
	}
	for _, n := range h.HistNames() {
		has("histogram", n)
	}
	for _, r := range []interface{ String() string }{reasonShort, reasonUnknown, reasonBadHMAC, reasonTLVOverrun,
		reasonWrongSource, reasonNotAllowed, reasonRateLimited, reasonReplyTooBig, reasonNotRunning, reasonNoReply,
		reasonBadPath, reasonWrongCollecto} {
		has("drop reason", r.String())
	}
	for _, tlv := range tlvNames {
		has("TLV name", tlv)
	}
}
