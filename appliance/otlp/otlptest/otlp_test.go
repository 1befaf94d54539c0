package otlptest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/receiver/receivertest"
)

// TestOTLPExport runs the lab with an [otlp] table pointed at the
// OpenTelemetry collector's own OTLP receiver: it receives the counters and
// histograms /metrics serves, under a resource that names the appliance.
func TestOTLPExport(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "linerate")
	root, _ := filepath.Abs("../../..")
	if out, err := exec.Command("go", "build", "-C", root, "-o", bin, "./appliance/cmd/linerate").CombinedOutput(); err != nil {
		t.Fatalf("build linerate: %v\n%s", err, out)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	endpoint := l.Addr().String()
	l.Close()
	f := otlpreceiver.NewFactory()
	cfg := f.CreateDefaultConfig().(*otlpreceiver.Config)
	cfg.Protocols.GRPC.GetOrInsertDefault().NetAddr.Endpoint = endpoint
	cfg.Protocols.HTTP.GetOrInsertDefault().ServerConfig.NetAddr.Endpoint = "127.0.0.1:0"
	sink := new(consumertest.MetricsSink)
	rcv, err := f.CreateMetrics(context.Background(), receivertest.NewNopSettings(f.Type()), cfg, sink)
	if err != nil {
		t.Fatal(err)
	}
	if err := rcv.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	defer rcv.Shutdown(context.Background())

	lab, err := exec.Command(bin, "config", "default").Output()
	if err != nil {
		t.Fatal(err)
	}
	conf := string(lab) + fmt.Sprintf("\n[otlp]\nendpoint = %q\ninsecure = true\ninterval = \"1s\"\nappliance = \"lab-1\"\nattributes = { site = \"test\" }\n", endpoint)
	path := filepath.Join(dir, "lab.toml")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	run := exec.Command(bin, "run", "-c", path, "--live=false", "--log-level", "warn")
	run.Env = append(os.Environ(), "LINERATE_CONTROL=unix:"+filepath.Join(dir, "ctl.sock"))
	var logs strings.Builder
	run.Stdout, run.Stderr = &logs, &logs
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = run.Process.Kill()
		_ = run.Wait()
	}()

	type seen struct {
		resource map[string]any
		counter  float64
		hist     uint64
		min      float64 // the loop gaps' least, a gauge beside the histogram
	}
	look := func() seen {
		var s seen
		for _, md := range sink.AllMetrics() {
			rms := md.ResourceMetrics()
			for i := range rms.Len() {
				rm := rms.At(i)
				res := rm.Resource().Attributes().AsRaw()
				sms := rm.ScopeMetrics()
				for j := range sms.Len() {
					ms := sms.At(j).Metrics()
					for k := range ms.Len() {
						m := ms.At(k)
						switch {
						case m.Name() == "linerate_port_tx_packets_total" && m.Type() == pmetric.MetricTypeSum:
							dps := m.Sum().DataPoints()
							var sum float64
							for d := range dps.Len() {
								sum += dps.At(d).DoubleValue()
							}
							if sum > s.counter {
								s.counter, s.resource = sum, res
							}
						case m.Name() == "linerate_lcore_loop_gap_seconds" && m.Type() == pmetric.MetricTypeHistogram:
							dps := m.Histogram().DataPoints()
							for d := range dps.Len() {
								s.hist = max(s.hist, dps.At(d).Count())
							}
						case m.Name() == "linerate_lcore_loop_gap_min_seconds" && m.Type() == pmetric.MetricTypeGauge:
							dps := m.Gauge().DataPoints()
							for d := range dps.Len() {
								s.min = max(s.min, dps.At(d).DoubleValue())
							}
						}
					}
				}
			}
		}
		return s
	}
	var s seen
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if s = look(); s.counter > 0 && s.hist > 0 && s.min > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no linerate_port_tx_packets_total, loop-gap histogram and its minimum within 90 s (%+v)\n%s", s, logs.String())
		}
	}
	for k, v := range map[string]string{"service.name": "linerate", "service.instance.id": "lab-1", "site": "test"} {
		if fmt.Sprint(s.resource[k]) != v {
			t.Errorf("resource attribute %s = %v, want %s (%v)", k, s.resource[k], v, s.resource)
		}
	}
	if v, _ := s.resource["service.version"].(string); v == "" {
		t.Errorf("no service.version: %v", s.resource)
	}
}
