package offloadtest_test

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/linerate/linerate/appliance"
	"github.com/linerate/linerate/appliance/offload"
	"github.com/linerate/linerate/appliance/offload/offloadtest"
	"github.com/linerate/linerate/config"
	_ "github.com/linerate/linerate/ports/mem"
)

func lab(mode string) string {
	return `version = 1
[engine]
pin = false
[control]
listen = ""
[[ports]]
name = "m0"
driver = "mem"
[[pipelines]]
name = "swap"
cpus = [0]
rx = ["m0"]
[[pipelines.stages]]
kind = "test.macswap"
name = "swap"
offload = "` + mode + `"
`
}

func build(t *testing.T, doc string, dry bool) (*appliance.Engine, error) {
	t.Helper()
	cfg, err := config.Parse("lab.toml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return appliance.New(cfg, appliance.Options{DryRun: dry, Offline: dry, Log: slog.New(slog.DiscardHandler)})
}

// TestModes: offload = "xdp" on a port that cannot host it is refused, in
// validate as at start, naming the stage's table and the port's driver;
// "auto" runs the stage in Go and says why; a bad value is a config error.
func TestModes(t *testing.T) {
	for _, dry := range []bool{true, false} {
		_, err := build(t, lab("xdp"), dry)
		if err == nil || !strings.Contains(err.Error(), `lab.toml:13: stage "swap": offload = "xdp": rx port "m0" has driver "mem"`) {
			t.Errorf("dry=%v: xdp on mem: %v", dry, err)
		}
		e, err := build(t, lab("auto"), dry)
		if err != nil {
			t.Fatalf("dry=%v: auto: %v", dry, err)
		}
		st := e.Stages("swap")[0].(*offloadtest.Stage)
		if st.Request().InKernel() || !strings.Contains(st.Request().Reason(), `driver "mem"`) {
			t.Errorf("dry=%v: auto on mem: in kernel %v, reason %q", dry, st.Request().InKernel(), st.Request().Reason())
		}
		_ = e.Close()
	}
	_, err := build(t, lab("maybe"), true)
	if err == nil || !strings.Contains(err.Error(), `offload "maybe" is not off, xdp or auto`) {
		t.Errorf("bad mode: %v", err)
	}
	e, err := build(t, lab("off"), true)
	if err != nil {
		t.Fatal(err)
	}
	if e.Stages("swap")[0].(*offloadtest.Stage).Request() != nil {
		t.Error("off asked for an offload")
	}
	_ = e.Close()
}

func TestParseMode(t *testing.T) {
	for s, want := range map[string]offload.Mode{"": offload.Off, "off": offload.Off, "xdp": offload.XDP, "auto": offload.Auto} {
		if m, err := offload.ParseMode(s); err != nil || m != want {
			t.Errorf("%q: %v %v", s, m, err)
		}
	}
}
