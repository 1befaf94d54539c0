package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/linerate/linerate/appliance"
	"github.com/linerate/linerate/appliance/cli/table"
	"github.com/linerate/linerate/internal/enginetest"
	"github.com/linerate/linerate/internal/testenv"
	"github.com/linerate/linerate/plugins/external/api"
)

// TestPluginsCommand: linerate plugins lists a running external stage's
// plugin, up, with its counters, in 100 columns and as JSON.
func TestPluginsCommand(t *testing.T) {
	goBin := testenv.RequireCmd(t, "go")
	bin := filepath.Join(t.TempDir(), "linerate-sampler")
	if out, err := exec.Command(goBin, "build", "-o", bin, "../../plugins/sdk/examples/sampler").CombinedOutput(); err != nil {
		t.Fatalf("build the sampler: %v\n%s", err, out)
	}
	e := enginetest.Start(t, fmt.Sprintf(`
version = 1
[engine]
pin = false
[control]
listen = ""
[[pipelines]]
name = "source"
lcores = [0]
[[pipelines.stages]]
kind = "generator"
ip_version = 4
src = "192.0.2.1"
dst = "198.51.100.1"
sizes = [64]
rate = "10kpps"
[[pipelines.stages]]
kind = "external"
name = "a-sampler-with-a-long-name"
plugin = %q
user = "root" # its directory is root's alone (t.TempDir)
config = { every = 10 }
[[pipelines.stages]]
kind = "sink"
`, bin), appliance.Options{})
	addr := "--control=" + enginetest.Serve(t, e)
	var out, errs bytes.Buffer
	deadline := time.Now().Add(time.Minute)
	for {
		out.Reset()
		if code := runPlugins([]string{addr}, &out, &errs); code != 0 {
			t.Fatalf("plugins: %d %s", code, errs.String())
		}
		if strings.Contains(out.String(), "sampled=") && !strings.Contains(out.String(), "returned=0") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no results listed:\n%s", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	text := out.String()
	for _, want := range []string{"STAGE", "a-sampler-with-a-long-name", " up ", "sampled="} {
		if !strings.Contains(text, want) {
			t.Errorf("no %q in:\n%s", want, text)
		}
	}
	for _, l := range strings.Split(text, "\n") {
		if len([]rune(l)) > table.Width {
			t.Errorf("line wider than %d: %q", table.Width, l)
		}
	}
	out.Reset()
	if code := runPlugins([]string{addr, "--json"}, &out, &errs); code != 0 {
		t.Fatalf("plugins --json: %d %s", code, errs.String())
	}
	var rep struct {
		Plugins []struct {
			Stage, State string
			Pid          int
		}
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || len(rep.Plugins) != 1 || rep.Plugins[0].State != "up" || rep.Plugins[0].Pid == 0 {
		t.Errorf("--json: %v %s", err, out.String())
	}
}

// TestPluginCountersApart: a plugin counter named as a stage counter
// (copies) is shown as the plugin's, plugin.copies, in every layout of
// linerate plugins; a bare copies= is the stage's alone.
func TestPluginCountersApart(t *testing.T) {
	rep := &api.ListPluginsReply{Plugins: []*api.PluginStatus{{Stage: "tap", Pipeline: "p", State: "up", Pid: 7,
		Plugin:        "/usr/lib/linerate/plugins/linerate-tap",
		StageCounters: map[string]uint64{"copies": 0, "lent": 1000, "returned": 1000},
		Counters:      map[string]uint64{"copies": 555, "plugin_bursts": 20}}}}
	for _, o := range []table.Options{{}, {Wide: true}} {
		var out bytes.Buffer
		printPlugins(&out, o, rep)
		text := out.String()
		if !strings.Contains(text, "plugin.copies=555") || !strings.Contains(text, "plugin.plugin_bursts=20") {
			t.Errorf("wide %v: the plugin's counters not as plugin.<name>:\n%s", o.Wide, text)
		}
		for _, f := range strings.Fields(text) {
			if strings.HasPrefix(f, "copies=") && f != "copies=0" {
				t.Errorf("wide %v: %q passes for the stage's copies:\n%s", o.Wide, f, text)
			}
		}
		if !strings.Contains(text, " copies=0") {
			t.Errorf("wide %v: the stage's copies missing:\n%s", o.Wide, text)
		}
	}
}
