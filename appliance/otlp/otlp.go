// Package otlp exports the appliance's metrics to an OpenTelemetry
// collector over OTLP/gRPC: the same counters, gauges and histograms as
// /metrics, read from the same Prometheus registry (metrics.Registry)
// through OpenTelemetry's Prometheus bridge, with resource attributes that
// name the appliance. The config's [otlp] table turns it on.
package otlp

import (
	"context"
	"fmt"
	"net"
	"os"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promb "go.opentelemetry.io/contrib/bridges/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"

	"github.com/linerate/linerate/config"
)

// Config is the config file's [otlp] table.
type Config struct {
	// Endpoint is the collector's OTLP/gRPC "host:port" (4317 by custom).
	Endpoint string `toml:"endpoint"`
	// Interval is how often the metrics are sent (default 10s).
	Interval config.Duration `toml:"interval"`
	// Insecure sends without TLS (default false: TLS with the host's CAs).
	Insecure bool `toml:"insecure"`
	// Appliance names this appliance: the service.instance.id attribute
	// (default: the host name).
	Appliance string `toml:"appliance"`
	// Attributes are more resource attributes (site, rack …).
	Attributes map[string]string `toml:"attributes"`
}

// SectionName is the config file's table.
const SectionName = "otlp"

const defaultInterval = 10 * time.Second

func init() {
	config.RegisterSection(config.Section{Name: SectionName, Check: func(_ *config.File, t config.Table) error {
		_, err := decode(t)
		return err
	}})
}

// Decode reads the [otlp] table of f, or nil when there is none.
func Decode(f *config.File) (*Config, error) { return decode(f.Section(SectionName)) }

func decode(t config.Table) (*Config, error) {
	var s struct {
		OTLP *Config `toml:"otlp"`
	}
	if err := t.Decode(&s); err != nil {
		return nil, err
	}
	c := s.OTLP
	if c == nil {
		return nil, nil
	}
	if _, port, err := net.SplitHostPort(c.Endpoint); err != nil || port == "" {
		return nil, t.Error(SectionName+".endpoint", fmt.Errorf(`%q: use "host:port", e.g. "otel-collector.example.net:4317"`, c.Endpoint))
	}
	if c.Interval != 0 && time.Duration(c.Interval) < time.Second {
		return nil, t.Error(SectionName+".interval", fmt.Errorf("%v is below 1s", time.Duration(c.Interval)))
	}
	if c.Interval == 0 {
		c.Interval = config.Duration(defaultInterval)
	}
	if c.Appliance == "" {
		c.Appliance, _ = os.Hostname()
	}
	return c, nil
}

// Exporter sends the metrics until Shutdown.
type Exporter struct {
	mp *sdkmetric.MeterProvider
}

// Start sends reg's metrics to c's collector every c.Interval; version is
// the service.version attribute.
func Start(c *Config, reg *prometheus.Registry, version string) (*Exporter, error) {
	ctx := context.Background()
	opts := []otlpmetricgrpc.Option{otlpmetricgrpc.WithEndpoint(c.Endpoint)}
	if c.Insecure {
		opts = append(opts, otlpmetricgrpc.WithInsecure())
	}
	exp, err := otlpmetricgrpc.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("otlp: %w", err)
	}
	attrs := []attribute.KeyValue{
		attribute.String("service.name", "linerate"),
		attribute.String("service.version", version),
		attribute.String("service.instance.id", c.Appliance),
	}
	if h, err := os.Hostname(); err == nil {
		attrs = append(attrs, attribute.String("host.name", h))
	}
	keys := make([]string, 0, len(c.Attributes))
	for k := range c.Attributes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		attrs = append(attrs, attribute.String(k, c.Attributes[k]))
	}
	reader := sdkmetric.NewPeriodicReader(exp, sdkmetric.WithInterval(time.Duration(c.Interval)),
		sdkmetric.WithProducer(promb.NewMetricProducer(promb.WithGatherer(reg))))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader),
		sdkmetric.WithResource(resource.NewWithAttributes("", attrs...)))
	return &Exporter{mp: mp}, nil
}

// Shutdown sends the metrics a last time and stops.
func (e *Exporter) Shutdown() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return e.mp.Shutdown(ctx)
}
