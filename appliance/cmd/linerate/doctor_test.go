//go:build linux

package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/linerate/linerate/appliance"
	"github.com/linerate/linerate/appliance/kernel"
	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/internal/enginetest"
	"github.com/linerate/linerate/internal/netns"
)

// doctorConfig is an xdp port on xda, as an edge box's, and a sink.
const doctorConfig = `version = 1
[engine]
pin = false
[control]
listen = ""
[[ports]]
name = "x0"
driver = "xdp"
interface = "xda"
[[ports.match]]
next_header = 17
udp_dst_port = 862
[[pipelines]]
name = "p"
rx = ["x0"]
[[pipelines.stages]]
kind = "sink"
`

// TestDoctorConfigAgreesWithThePort: what linerate doctor -c says of an xdp
// port on a veth, before anything opens, is what the port reports once it
// opens: the rx timestamps finding's first word is Info's TimestampSource,
// and the XDP attach and AF_XDP findings name the modes Info's detail
// names. Once as the kernel is, and once with bpf_ktime_get_ns turned off
// (LINERATE_KERNEL_DISABLE, which doctor inherits), where the port falls
// back to the engine's clock.
func TestDoctorConfigAgreesWithThePort(t *testing.T) {
	ns := netns.New(t)
	netns.Veth(t, ns, "xda", ns, "xdb")
	path := filepath.Join(t.TempDir(), "doctor.toml")
	if err := os.WriteFile(path, []byte(doctorConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, disable := range []string{"", "bpf_ktime_get_ns"} {
		t.Run("disable="+disable, func(t *testing.T) {
			t.Setenv(kernel.DisableEnv, disable)
			cmd := exec.Command("ip", "netns", "exec", ns.Name(), linerateBin, "doctor", "-c", path, "--json")
			var errb strings.Builder
			cmd.Stderr = &errb
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("doctor -c: %v\n%s%s", err, out, errb.String())
			}
			var r struct {
				Config struct {
					Findings []struct{ Subject, Need, Outcome, Detail string }
					Error    string
				}
			}
			if err := json.Unmarshal(out, &r); err != nil {
				t.Fatalf("doctor -c --json: %v\n%s", err, out)
			}
			if r.Config.Error != "" {
				t.Fatalf("doctor -c: the config does not build: %s", r.Config.Error)
			}
			said := map[string]string{}
			for _, f := range r.Config.Findings {
				t.Logf("%s %s: %s: %s", f.Subject, f.Need, f.Outcome, f.Detail)
				if f.Subject == `port "x0"` {
					said[f.Need] = f.Detail
				}
			}

			cfg, err := config.Parse(path, []byte(doctorConfig))
			if err != nil {
				t.Fatal(err)
			}
			var info struct{ source, detail string }
			if err := ns.Do(func() error {
				e, err := appliance.New(cfg, appliance.Options{Log: enginetest.Quiet})
				if err != nil {
					return err
				}
				defer e.Close()
				p, _ := e.Port("x0")
				info.source, info.detail = p.Info().TimestampSource, p.Info().TimestampDetail
				return nil
			}); err != nil {
				t.Fatalf("open the port: %v", err)
			}
			t.Logf("the port: %s: %s", info.source, info.detail)

			rx, ok := said["rx timestamps"]
			if !ok {
				t.Fatalf("doctor -c says nothing of the port's rx timestamps; the port's are %s", info.source)
			}
			if w := firstWord(rx); w != info.source {
				t.Errorf("doctor -c says rx timestamps %q, the port's are %s (%s)", rx, info.source, info.detail)
			}
			if attach, ok := said["XDP attach"]; !ok || !strings.Contains(info.detail, "XDP "+firstWord(attach)+" mode") {
				t.Errorf("doctor -c says XDP attach %q; the port: %s", attach, info.detail)
			}
			if xsk, ok := said["AF_XDP"]; !ok || !strings.Contains(info.detail, "AF_XDP "+firstWord(xsk)) {
				t.Errorf("doctor -c says AF_XDP %q; the port: %s", xsk, info.detail)
			}
		})
	}
}

// firstWord is s up to its first space, comma or colon.
func firstWord(s string) string {
	if i := strings.IndexAny(s, " ,:"); i >= 0 {
		return s[:i]
	}
	return s
}
