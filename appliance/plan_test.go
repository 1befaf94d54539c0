package appliance_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/linerate/linerate/appliance"
	"github.com/linerate/linerate/appliance/kernel"
	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/internal/enginetest"
	"github.com/linerate/linerate/internal/testenv"
	stampbpf "github.com/linerate/linerate/plugins/stamp/bpf"
	"github.com/linerate/linerate/ports"
)

// planConfig: a STAMP reflector with the offload key on a port of driver.
func planConfig(driver, port, mode string) string {
	return fmt.Sprintf(`version = 1
[engine]
pin = false
[control]
listen = ""
[[ports]]
name = "p0"
driver = %q
%s
[[pipelines]]
name = "swap"
lcores = [0]
rx = ["p0"]
[[pipelines.stages]]
name = "swap"
kind = "stamp.reflector"
forward = "in"
offload = %q
`, driver, port, mode)
}

// plan runs a dry run that checks this host and returns what Plan heard,
// and New's error.
func plan(t *testing.T, toml string) ([]ports.Finding, error) {
	t.Helper()
	cfg, err := config.Parse("plan.toml", []byte(toml))
	if err != nil {
		t.Fatal(err)
	}
	var fs []ports.Finding
	e, err := appliance.New(cfg, appliance.Options{DryRun: true, Log: enginetest.Quiet,
		Plan: func(f ports.Finding) { fs = append(fs, f) }})
	if err == nil {
		e.Close()
	}
	return fs, err
}

// offloadFinding is the one finding about stage "swap".
func offloadFinding(t *testing.T, fs []ports.Finding) ports.Finding {
	t.Helper()
	var out []ports.Finding
	for _, f := range fs {
		if f.Subject == `stage "swap"` {
			out = append(out, f)
		}
	}
	if len(out) != 1 {
		t.Fatalf("%d findings about stage swap, want 1: %+v", len(out), fs)
	}
	return out[0]
}

// TestDoctorPlanOffloads: a dry run that checks the host tells Plan, for a
// stage that asked for an XDP offload, whether it runs there: on a port
// whose driver cannot host it, "fallback" with auto and "fail" (and New's
// error) with xdp; on an xdp port of a kernel that lacks a feature the
// program needs (LINERATE_KERNEL_DISABLE), the same, naming it; else
// "ok" with the port. Offline, Plan hears nothing.
func TestDoctorPlanOffloads(t *testing.T) {
	fs, err := plan(t, planConfig("mem", "", "auto"))
	if err != nil {
		t.Fatal(err)
	}
	if f := offloadFinding(t, fs); f.Outcome != ports.FallsBack || !strings.Contains(f.Detail, `driver "mem"`) {
		t.Errorf("auto on a mem port: %+v", f)
	}
	fs, err = plan(t, planConfig("mem", "", "xdp"))
	if err == nil || !strings.Contains(err.Error(), `offload = "xdp"`) {
		t.Errorf("xdp on a mem port: New says %v", err)
	}
	if f := offloadFinding(t, fs); f.Outcome != ports.Fails || !strings.Contains(f.Detail, `driver "mem"`) {
		t.Errorf("xdp on a mem port: %+v", f)
	}

	// The reflector needs CLOCK_TAI in XDP; the port does not.
	xdpPort := "interface = \"lo\"\n[[ports.match]]\nnext_header = 17\nudp_dst_port = 862"
	t.Setenv(kernel.DisableEnv, "bpf_ktime_get_tai_ns")
	fs, err = plan(t, planConfig("xdp", xdpPort, "auto"))
	if err != nil {
		t.Fatal(err)
	}
	if f := offloadFinding(t, fs); f.Outcome != ports.FallsBack || !strings.Contains(f.Detail, "bpf_ktime_get_tai_ns") {
		t.Errorf("auto on a kernel without bpf_ktime_get_tai_ns: %+v", f)
	}
	fs, err = plan(t, planConfig("xdp", xdpPort, "xdp"))
	if err == nil || !strings.Contains(err.Error(), "bpf_ktime_get_tai_ns") {
		t.Errorf("xdp on a kernel without bpf_ktime_get_tai_ns: New says %v", err)
	}
	if f := offloadFinding(t, fs); f.Outcome != ports.Fails || !strings.Contains(f.Detail, "bpf_ktime_get_tai_ns") {
		t.Errorf("xdp on a kernel without bpf_ktime_get_tai_ns: %+v", f)
	}

	t.Setenv(kernel.DisableEnv, "")
	needs, err := stampbpf.ReflectorNeeds(0)
	if err != nil {
		t.Fatal(err)
	}
	testenv.RequireKernel(t, append([]kernel.Feature{kernel.XSKMap, kernel.Loop}, needs...)...)
	fs, err = plan(t, planConfig("xdp", xdpPort, "xdp"))
	if err != nil {
		t.Fatal(err)
	}
	if f := offloadFinding(t, fs); f.Outcome != ports.AsAsked || !strings.Contains(f.Detail, `"p0"`) {
		t.Errorf("xdp on an xdp port: %+v", f)
	}

	cfg, err := config.Parse("plan.toml", []byte(planConfig("mem", "", "auto")))
	if err != nil {
		t.Fatal(err)
	}
	heard := 0
	e, err := appliance.New(cfg, appliance.Options{DryRun: true, Offline: true, Log: enginetest.Quiet,
		Plan: func(ports.Finding) { heard++ }})
	if err != nil {
		t.Fatal(err)
	}
	e.Close()
	if heard != 0 {
		t.Errorf("an offline dry run told Plan %d things of this host", heard)
	}
}
