// Package metrics exports the engine's snapshot in the Prometheus text format.
//
// Every scrape takes one stats.Snapshot and turns it into metrics; nothing is
// registered globally and nothing is kept between scrapes. Names:
//
//	linerate_uptime_seconds
//	linerate_port_{rx,tx}_{packets,bytes}_total{port}
//	linerate_port_{rx_dropped,tx_dropped,rx_errors}_total{port}
//	linerate_port_link_up{port}
//	linerate_port_info{port,driver,timestamp_source}                 always 1
//	linerate_port_<driver>_<name>{port}                              driver extras, untyped
//	linerate_stage_packets_total{pipeline,stage,kind,lcore}
//	linerate_stage_<kind>_<counter>_total{pipeline,stage,kind,lcore} (metricKind)
//	linerate_drops_total{pipeline,stage,reason}
//	linerate_lcore_{loops,busy_loops,packets}_total{lcore,cpu}
//	linerate_lcore_loop_gap_seconds{lcore,cpu}                       histogram, and its _min_ gauge
//	linerate_pool_{size,in_use}{pool}
//	linerate_pool_{alloc_failures,copies}_total{pool}
//	linerate_clock_{synchronized,error_seconds,tai_offset_seconds}     the host clock's sync state
//	linerate_stage_<name>_<unit>{pipeline,stage}                     stage histograms
//	linerate_stage_<name>_min_<unit>{pipeline,stage}                 their least value, a gauge
//
// A stage's own counters get one metric per kind and counter name rather than a
// single metric with a "counter" label: Prometheus wants one meaning per metric
// name, so that sum() over any label means something, and each counter keeps its
// own HELP. The kind in the name keeps two plugins' "sent" apart.
//
// Drops a stage did not count itself (tx_full on transmit, for instance) appear
// in linerate_drops_total with empty pipeline and stage, so that
// sum by (reason) gives the engine's totals. Series that come out twice (two
// unpinned instances of one stage) are summed, not rejected.
//
// A renamed metric keeps its old name, deprecated, for at least one release
// (renamed, docs/compatibility.md).
//
// Histograms in ns are exported in seconds on 1-2-5 buckets from 100ns to 10s;
// in bytes, on powers of two from 64 B to 1 MiB. A bucket's count includes
// every internal bucket wholly at or below its bound, so it is low by at most
// one internal bucket (under 0.8% of the bound). A delay's first figures are
// its minimum and its mean: the mean is _sum / _count, as Prometheus has it,
// and the minimum, exact, a gauge beside the histogram with _min before its
// unit (linerate_stage_latency_min_seconds), absent until a value is
// recorded.
package metrics

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/linerate/linerate/appliance/clock"
	"github.com/linerate/linerate/appliance/stats"
)

// Source gives the snapshot to export; control.Source satisfies it.
type Source interface {
	Snapshot() *stats.Snapshot // nil before the engine has counters
}

// Registry is a registry of src's metrics, with the Go runtime's, the
// process's and those of extra (the plugins' collectors): what Handler
// serves, and what the OTLP export (appliance/otlp) sends.
func Registry(src Source, extra ...prometheus.Collector) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		&collector{src: src},
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	reg.MustRegister(extra...)
	return reg
}

// Handler serves src's metrics and those of extra.
func Handler(src Source, extra ...prometheus.Collector) http.Handler {
	return RegistryHandler(Registry(src, extra...))
}

// RegistryHandler serves the metrics of reg (Registry).
func RegistryHandler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorHandling:       promhttp.ContinueOnError,
		Registry:            reg,
		MaxRequestsInFlight: 4,
		Timeout:             10 * time.Second,
	})
}

// renamed maps a metric's name to the names it had before. Each old name is
// still served, beside the new one, with the same series and a HELP that says
// it is deprecated and names the new one, for at least one release after the
// rename (docs/compatibility.md); then its entry goes. An old name must pass
// promtool check metrics too: one that fails it is not served at all (the
// counter stage's linerate_stage_counter_*, removed in 0.1.0).
var renamed = map[string][]string{}

// Bucket bounds, in the exported unit.
var (
	secondsBuckets = oneTwoFive(100e-9, 10)
	bytesBuckets   = prometheus.ExponentialBuckets(64, 2, 15)
	plainBuckets   = oneTwoFive(1, 1e9)
)

// oneTwoFive is 1, 2, 5, 10, 20, 50 … times lo, up to hi.
func oneTwoFive(lo, hi float64) []float64 {
	var b []float64
	for d := lo; d <= hi*1.0001; d *= 10 {
		for _, m := range []float64{1, 2, 5} {
			// Round away float drift: 1e-7*2 should print as 2e-07.
			v, _ := strconv.ParseFloat(strconv.FormatFloat(d*m, 'g', 6, 64), 64)
			if v <= hi*1.0001 {
				b = append(b, v)
			}
		}
	}
	return b
}

// collector is an unchecked collector: the set of series follows the config.
type collector struct{ src Source }

func (*collector) Describe(chan<- *prometheus.Desc) {}

var (
	stageLabels = []string{"pipeline", "stage", "kind", "lcore"}
	lcoreLabels = []string{"lcore", "cpu"}
)

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	snap := c.src.Snapshot()
	if snap == nil {
		return
	}
	var s set
	s.value("linerate_uptime_seconds", "Time since the engine started.", prometheus.GaugeValue, nil, nil, snap.Uptime.Seconds())

	portL := []string{"port"}
	for _, p := range snap.Ports {
		lv := []string{p.Name}
		s.counter("linerate_port_rx_packets_total", "Packets received.", portL, lv, p.RxPackets)
		s.counter("linerate_port_rx_bytes_total", "Bytes received.", portL, lv, p.RxBytes)
		s.counter("linerate_port_tx_packets_total", "Packets transmitted.", portL, lv, p.TxPackets)
		s.counter("linerate_port_tx_bytes_total", "Bytes transmitted.", portL, lv, p.TxBytes)
		s.counter("linerate_port_rx_dropped_total", "Packets the port dropped on receive.", portL, lv, p.RxDropped)
		s.counter("linerate_port_tx_dropped_total", "Packets the port dropped on transmit.", portL, lv, p.TxDropped)
		s.counter("linerate_port_rx_errors_total", "Receive errors.", portL, lv, p.RxErrors)
		s.value("linerate_port_link_up", "1 when the link is up.", prometheus.GaugeValue, portL, lv, boolf(p.LinkUp))
		s.value("linerate_port_info", "The port's driver and timestamp source; always 1.", prometheus.GaugeValue,
			[]string{"port", "driver", "timestamp_source"}, []string{p.Name, p.Driver, p.TimestampSource}, 1)
		for name, v := range p.Extra {
			s.value("linerate_port_"+metricName(p.Driver)+"_"+metricName(name),
				"Driver-specific port counter.", prometheus.UntypedValue, portL, lv, float64(v))
		}
	}

	dropL := []string{"pipeline", "stage", "reason"}
	byReason := map[string]uint64{}
	for _, st := range snap.Stages {
		lv := []string{st.Pipeline, st.Name, st.Kind, strconv.Itoa(st.Lcore)}
		s.counter("linerate_stage_packets_total", "Packets the stage processed.", stageLabels, lv, st.Packets)
		kind := metricKind(st.Kind)
		for _, cv := range st.Counters {
			name := "linerate_stage_" + kind + "_" + metricName(cv.Name)
			if !strings.HasSuffix(name, "_total") {
				name += "_total"
			}
			help := cv.Help
			if help == "" {
				help = st.Kind + " counter " + cv.Name + "."
			}
			s.counter(name, help, stageLabels, lv, cv.Value)
		}
		for _, d := range st.Drops {
			s.counter("linerate_drops_total", "Packets dropped, by stage and reason.", dropL,
				[]string{st.Pipeline, st.Name, d.Reason}, d.Count)
			byReason[d.Reason] += d.Count
		}
	}
	for _, d := range snap.Drops {
		if d.Count > byReason[d.Reason] {
			s.counter("linerate_drops_total", "Packets dropped, by stage and reason.", dropL,
				[]string{"", "", d.Reason}, d.Count-byReason[d.Reason])
		}
	}

	for _, l := range snap.Lcores {
		lv := []string{strconv.Itoa(l.ID), strconv.Itoa(l.CPU)}
		s.counter("linerate_lcore_loops_total", "Poll loops run.", lcoreLabels, lv, l.Loops)
		s.counter("linerate_lcore_busy_loops_total", "Poll loops that moved at least one packet.", lcoreLabels, lv, l.BusyLoops)
		s.counter("linerate_lcore_packets_total", "Packets the lcore received.", lcoreLabels, lv, l.Packets)
		if l.Gap != nil {
			s.histogram("linerate_lcore_loop_gap_seconds", "linerate_lcore_loop_gap_min_seconds", "Time between successive polls.",
				lcoreLabels, lv, l.Gap, 1e-9, secondsBuckets)
		}
	}

	poolL := []string{"pool"}
	for _, p := range snap.Pools {
		lv := []string{p.Name}
		s.value("linerate_pool_size", "Buffers in the pool.", prometheus.GaugeValue, poolL, lv, float64(p.Size))
		s.value("linerate_pool_in_use", "Buffers allocated from the pool.", prometheus.GaugeValue, poolL, lv, float64(p.InUse))
		s.counter("linerate_pool_alloc_failures_total", "Allocations the pool could not satisfy.", poolL, lv, p.AllocFail)
		s.counter("linerate_pool_copies_total", "Packets copied into the pool to leave through its port.", poolL, lv, p.Copies)
	}

	if ck, ok := c.src.(interface{ Clock() clock.Clock }); ok && ck.Clock() != nil {
		// The clock-sync state STAMP's Error Estimate and IOAM's timestamps
		// rest on, as the kernel's clock discipline (adjtimex) reports it.
		st := ck.Clock().Sync()
		sync := 0.0
		if st.Synchronized {
			sync = 1
		}
		s.value("linerate_clock_synchronized", "1 when the kernel says the clock is synchronised (adjtimex: STA_UNSYNC clear), else 0.",
			prometheus.GaugeValue, nil, nil, sync)
		s.value("linerate_clock_error_seconds", "The kernel's estimate of the clock's error (adjtimex esterror).",
			prometheus.GaugeValue, nil, nil, float64(st.ErrorNs)/1e9)
		s.value("linerate_clock_tai_offset_seconds", "TAI minus UTC as the kernel knows it (adjtimex tai).",
			prometheus.GaugeValue, nil, nil, float64(st.TAIOffset))
	}

	histL := []string{"pipeline", "stage"}
	for _, h := range snap.Histogram {
		if h.Hist == nil {
			continue
		}
		pipeline, stage, _ := strings.Cut(h.Owner, "/")
		base, unit, scale, bounds := "linerate_stage_"+metricName(h.Name), "", 1.0, plainBuckets
		switch h.Unit {
		case "ns":
			unit, scale, bounds = "_seconds", 1e-9, secondsBuckets
		case "bytes":
			unit, bounds = "_bytes", bytesBuckets
		case "":
		default:
			unit = "_" + metricName(h.Unit)
		}
		s.histogram(base+unit, base+"_min"+unit, h.Help, histL, []string{pipeline, stage}, h.Hist, scale, bounds)
	}
	s.emit(ch)
}

func boolf(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// metricName maps s onto [a-zA-Z0-9_]: "ioam.encap" → "ioam_encap".
// metricKind is a stage kind as it goes into a metric name. A counter's name
// must not hold the word "counter" (Prometheus's lint, promtool check
// metrics), so the built-in counter stage's counters are
// linerate_stage_count_packets_total and linerate_stage_count_bytes_total.
func metricKind(kind string) string {
	if kind == "counter" {
		return "count"
	}
	return metricName(kind)
}

func metricName(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			b[i] = '_'
		}
	}
	return string(b)
}
