package otlp

import (
	"strings"
	"testing"
	"time"

	"github.com/linerate/linerate/config"
)

// The [otlp] table: defaults, and errors with file:line and key.
func TestConfig(t *testing.T) {
	base := "version = 1\n[[ports]]\nname = \"n\"\ndriver = \"null\"\n[[pipelines]]\nname = \"p\"\nstages = [{ kind = \"forward\", port = \"n\" }]\n[otlp]\n"
	f, err := config.Parse("t.toml", []byte(base+`endpoint = "127.0.0.1:4317"`+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := Decode(f)
	if err != nil || c == nil || time.Duration(c.Interval) != 10*time.Second || c.Appliance == "" {
		t.Fatalf("defaults: %+v %v", c, err)
	}
	for _, bad := range []struct{ body, want string }{
		{`endpoint = "collector"`, "t.toml:9: otlp.endpoint"},
		{`endpoint = "127.0.0.1:4317"` + "\ninterval = \"10ms\"", "otlp.interval: 10ms is below 1s"},
		{`endpoint = "127.0.0.1:4317"` + "\nendpiont = 1", "otlp.endpiont: unknown key"},
	} {
		if _, err := config.Parse("t.toml", []byte(base+bad.body+"\n")); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: %v, want %q", bad.body, err, bad.want)
		}
	}
	if f, _ := config.Parse("t.toml", []byte(strings.TrimSuffix(base, "[otlp]\n"))); f != nil {
		if c, err := Decode(f); c != nil || err != nil {
			t.Errorf("no [otlp]: %v %v", c, err)
		}
	}
}
