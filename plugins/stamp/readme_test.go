package stamp

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

// TestReadme keeps README.md in step with the code: every config key,
// counter, histogram and drop reason is mentioned.
func TestReadme(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	has := func(what, name string) {
		t.Helper()
		if !strings.Contains(doc, "`"+name+"`") {
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
			if tag, _, _ := strings.Cut(f.Tag.Get("toml"), ","); tag != "" && tag != "-" {
				has("key", tag)
			}
		}
	}
	for _, v := range []any{senderConfig{}, senderSessionConfig{}, reflectorConfig{}, reflectorSessionConfig{}, collectorConfig{}} {
		keys(reflect.TypeOf(v))
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
