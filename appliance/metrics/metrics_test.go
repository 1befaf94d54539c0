package metrics

import (
	"context"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/linerate/linerate/appliance/clock"
	"github.com/linerate/linerate/appliance/control/controltest"
	"github.com/linerate/linerate/appliance/stats"
)

type snapSource struct{ snap *stats.Snapshot }

func (s snapSource) Snapshot() *stats.Snapshot { return s.snap }

// scrape serves src with httptest and parses what comes back, as Prometheus
// would; the second scrape shows whether the first had gather errors.
func scrape(t *testing.T, src Source) map[string]*dto.MetricFamily {
	t.Helper()
	ts := httptest.NewServer(Handler(src))
	defer ts.Close()
	var fams map[string]*dto.MetricFamily
	for range 2 {
		resp, err := http.Get(ts.URL)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
			t.Fatalf("scrape: %s %q\n%s", resp.Status, resp.Header.Get("Content-Type"), body)
		}
		p := expfmt.NewTextParser(model.LegacyValidation)
		fams, err = p.TextToMetricFamilies(strings.NewReader(string(body)))
		if err != nil {
			t.Fatalf("exposition does not parse: %v\n%s", err, body)
		}
	}
	if v := value(t, fams, "promhttp_metric_handler_errors_total", "cause", "gathering"); v != 0 {
		t.Errorf("%v gather errors", v)
	}
	return fams
}

// find is the series of family name whose labels include the given pairs.
func find(t *testing.T, fams map[string]*dto.MetricFamily, name string, pairs ...string) *dto.Metric {
	t.Helper()
	f := fams[name]
	if f == nil {
		t.Fatalf("no family %s", name)
	}
next:
	for _, m := range f.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		for i := 0; i < len(pairs); i += 2 {
			if have[pairs[i]] != pairs[i+1] {
				continue next
			}
		}
		return m
	}
	t.Fatalf("no series %s%v", name, pairs)
	return nil
}

func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, pairs ...string) float64 {
	t.Helper()
	m := find(t, fams, name, pairs...)
	switch fams[name].GetType() {
	case dto.MetricType_COUNTER:
		return m.Counter.GetValue()
	case dto.MetricType_GAUGE:
		return m.Gauge.GetValue()
	default:
		return m.Untyped.GetValue()
	}
}

func TestExposition(t *testing.T) {
	fams := scrape(t, controltest.New())

	for _, c := range []struct {
		name  string
		typ   dto.MetricType
		pairs []string
		want  float64
	}{
		{"linerate_uptime_seconds", dto.MetricType_GAUGE, nil, 5400},
		{"linerate_port_rx_packets_total", dto.MetricType_COUNTER, []string{"port", "p0"}, 1000},
		{"linerate_port_rx_bytes_total", dto.MetricType_COUNTER, []string{"port", "p0"}, 64000},
		{"linerate_port_tx_packets_total", dto.MetricType_COUNTER, []string{"port", "p1"}, 400},
		{"linerate_port_tx_bytes_total", dto.MetricType_COUNTER, []string{"port", "p0"}, 63360},
		{"linerate_port_rx_dropped_total", dto.MetricType_COUNTER, []string{"port", "p0"}, 1},
		{"linerate_port_tx_dropped_total", dto.MetricType_COUNTER, []string{"port", "p0"}, 2},
		{"linerate_port_rx_errors_total", dto.MetricType_COUNTER, []string{"port", "p0"}, 3},
		{"linerate_port_link_up", dto.MetricType_GAUGE, []string{"port", "p0"}, 1},
		{"linerate_port_link_up", dto.MetricType_GAUGE, []string{"port", "p1"}, 0},
		{"linerate_port_info", dto.MetricType_GAUGE, []string{"port", "p1", "driver", "afpacket", "timestamp_source", "hardware"}, 1},
		{"linerate_port_afpacket_ring_full", dto.MetricType_UNTYPED, []string{"port", "p1"}, 7},
		{"linerate_stage_packets_total", dto.MetricType_COUNTER, []string{"pipeline", "edge", "stage", "classify", "kind", "classify", "lcore", "2"}, 600},
		{"linerate_stage_packets_total", dto.MetricType_COUNTER, []string{"pipeline", "edge", "stage", "classify", "lcore", "-1"}, 400},
		{"linerate_stage_classify_matched_total", dto.MetricType_COUNTER, []string{"pipeline", "edge", "lcore", "2"}, 550},
		{"linerate_stage_ioam_encap_encapsulated_total", dto.MetricType_COUNTER, []string{"stage", "encap", "kind", "ioam.encap"}, 540},
		{"linerate_stage_ioam_encap_too_big_total", dto.MetricType_COUNTER, []string{"stage", "encap"}, 10},
		{"linerate_stage_rlnc_encoder_generations_total", dto.MetricType_COUNTER, []string{"pipeline", "coded"}, 12},
		{"linerate_drops_total", dto.MetricType_COUNTER, []string{"pipeline", "edge", "stage", "classify", "reason", "malformed"}, 4},
		{"linerate_drops_total", dto.MetricType_COUNTER, []string{"pipeline", "coded", "stage", "encoder", "reason", "malformed"}, 1},
		{"linerate_drops_total", dto.MetricType_COUNTER, []string{"pipeline", "", "stage", "", "reason", "tx_full"}, 2},
		{"linerate_lcore_loops_total", dto.MetricType_COUNTER, []string{"lcore", "0", "cpu", "2"}, 100000},
		{"linerate_lcore_busy_loops_total", dto.MetricType_COUNTER, []string{"lcore", "1", "cpu", "-1"}, 1200},
		{"linerate_lcore_packets_total", dto.MetricType_COUNTER, []string{"lcore", "0"}, 1150},
		{"linerate_pool_size", dto.MetricType_GAUGE, []string{"pool", "p1"}, 8192},
		{"linerate_pool_in_use", dto.MetricType_GAUGE, []string{"pool", "p0"}, 128},
		{"linerate_pool_alloc_failures_total", dto.MetricType_COUNTER, []string{"pool", "p1"}, 2},
		{"linerate_pool_copies_total", dto.MetricType_COUNTER, []string{"pool", "p0"}, 3},
	} {
		if f := fams[c.name]; f == nil || f.GetType() != c.typ {
			t.Errorf("%s: family %v", c.name, f)
			continue
		}
		if got := value(t, fams, c.name, c.pairs...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.pairs, got, c.want)
		}
	}
	if h := fams["linerate_stage_ioam_encap_encapsulated_total"].GetHelp(); h != "Packets given an IOAM header." {
		t.Errorf("counter help %q", h)
	}

	// Drops by reason add up to the engine's totals.
	sum := map[string]float64{}
	for _, m := range fams["linerate_drops_total"].Metric {
		for _, l := range m.Label {
			if l.GetName() == "reason" {
				sum[l.GetValue()] += m.Counter.GetValue()
			}
		}
	}
	for _, d := range controltest.Snapshot().Drops {
		if sum[d.Reason] != float64(d.Count) {
			t.Errorf("drops %s sum to %v, want %d", d.Reason, sum[d.Reason], d.Count)
		}
	}

	if fams["go_goroutines"] == nil || fams["process_cpu_seconds_total"] == nil {
		t.Error("no Go runtime or process metrics")
	}
}

// checkBuckets compares a parsed histogram with wanted cumulative counts at some
// bounds, and checks the buckets climb to the count.
func checkBuckets(t *testing.T, name string, h *dto.Histogram, count uint64, sum float64, want map[float64]uint64) {
	t.Helper()
	if h.GetSampleCount() != count || math.Abs(h.GetSampleSum()-sum) > 1e-9*math.Max(1, sum) {
		t.Errorf("%s: count %d sum %v, want %d %v", name, h.GetSampleCount(), h.GetSampleSum(), count, sum)
	}
	var prev uint64
	seen := 0
	for _, b := range h.Bucket {
		if b.GetCumulativeCount() < prev || b.GetCumulativeCount() > count {
			t.Errorf("%s: bucket le=%v count %d after %d (total %d)", name, b.GetUpperBound(), b.GetCumulativeCount(), prev, count)
		}
		prev = b.GetCumulativeCount()
		if w, ok := want[b.GetUpperBound()]; ok {
			seen++
			if b.GetCumulativeCount() != w {
				t.Errorf("%s: le=%g has %d, want %d", name, b.GetUpperBound(), b.GetCumulativeCount(), w)
			}
		}
	}
	if seen != len(want) {
		t.Errorf("%s: %d of the %d bounds %v present in %v", name, seen, len(want), want, h.Bucket)
	}
}

func TestHistograms(t *testing.T) {
	fams := scrape(t, controltest.New())

	gap := fams["linerate_lcore_loop_gap_seconds"]
	if gap.GetType() != dto.MetricType_HISTOGRAM || len(gap.Metric) != 2 {
		t.Fatalf("loop gap family = %v", gap)
	}
	if n := len(gap.Metric[0].Histogram.Bucket); n != len(secondsBuckets) && n != len(secondsBuckets)+1 {
		t.Errorf("%d loop gap buckets, want %d", n, len(secondsBuckets))
	}
	// 900 × 200ns, 90 × 2µs, 9 × 50µs, 1 × 3ms. A value sitting on a bound
	// whose internal bucket reaches past it is counted in the next bound up.
	checkBuckets(t, "loop gap", find(t, fams, "linerate_lcore_loop_gap_seconds", "lcore", "1", "cpu", "-1").Histogram,
		1000, (900*200+90*2000+9*50_000+3_000_000)*1e-9,
		map[float64]uint64{1e-7: 0, 2e-7: 900, 1e-6: 900, 5e-6: 990, 1e-4: 999, 2e-3: 999, 5e-3: 1000, 10: 1000})

	checkBuckets(t, "latency", find(t, fams, "linerate_stage_latency_seconds", "pipeline", "edge", "stage", "encap").Histogram,
		100, (50*10_000+40*20_000+10*1_000_000)*1e-9,
		map[float64]uint64{5e-6: 0, 2e-5: 50, 5e-5: 90, 5e-4: 90, 2e-3: 100})
	if h := fams["linerate_stage_latency_seconds"].GetHelp(); h != "Time from rx to the end of the stage." {
		t.Errorf("latency help %q", h)
	}

	checkBuckets(t, "generation size", find(t, fams, "linerate_stage_generation_size_bytes", "pipeline", "coded", "stage", "encoder").Histogram,
		12, 3*1500+9*6000, map[float64]uint64{1024: 0, 2048: 3, 4096: 3, 8192: 12, 1 << 20: 12})
}

// TestHistogramMin: beside each histogram, its least value as a gauge, in
// the histogram's unit; the mean is _sum / _count.
func TestHistogramMin(t *testing.T) {
	fams := scrape(t, controltest.New())
	for _, c := range []struct {
		name  string
		pairs []string
		want  float64
	}{
		{"linerate_lcore_loop_gap_min_seconds", []string{"lcore", "1", "cpu", "-1"}, 200e-9},
		{"linerate_stage_latency_min_seconds", []string{"pipeline", "edge", "stage", "encap"}, 10e-6},
		{"linerate_stage_generation_size_min_bytes", []string{"pipeline", "coded", "stage", "encoder"}, 1500},
	} {
		if fams[c.name].GetType() != dto.MetricType_GAUGE {
			t.Errorf("%s is a %v", c.name, fams[c.name].GetType())
			continue
		}
		if got := value(t, fams, c.name, c.pairs...); math.Abs(got-c.want) > 1e-9*c.want {
			t.Errorf("%s = %g, want %g", c.name, got, c.want)
		}
	}
	h := find(t, fams, "linerate_stage_latency_seconds", "pipeline", "edge", "stage", "encap").Histogram
	if mean := h.GetSampleSum() / float64(h.GetSampleCount()); math.Abs(mean-113e-6) > 1e-9 {
		t.Errorf("latency mean %g, want 113µs", mean)
	}
	// An empty histogram has no minimum.
	snap := controltest.Snapshot()
	snap.Histogram[0].Hist = stats.NewHistSnapshot()
	if f := scrape(t, snapSource{snap})["linerate_stage_latency_min_seconds"]; f != nil && len(f.Metric) > 0 {
		t.Errorf("an empty histogram's minimum: %v", f)
	}
}

func TestDuplicateSeriesAreSummed(t *testing.T) {
	snap := controltest.Snapshot()
	// Two unpinned instances of one stage report the same labels.
	dup := snap.Stages[1]
	dup.Packets = 5
	snap.Stages = append(snap.Stages, dup)
	snap.Lcores = append(snap.Lcores, snap.Lcores[1])
	fams := scrape(t, snapSource{snap})
	if v := value(t, fams, "linerate_stage_packets_total", "pipeline", "edge", "stage", "classify", "lcore", "-1"); v != 405 {
		t.Errorf("summed packets = %v, want 405", v)
	}
	if n := find(t, fams, "linerate_lcore_loop_gap_seconds", "lcore", "1").Histogram.GetSampleCount(); n != 2000 {
		t.Errorf("merged loop gaps count %d, want 2000", n)
	}
	if v := value(t, fams, "linerate_lcore_loop_gap_min_seconds", "lcore", "1"); math.Abs(v-200e-9) > 1e-15 {
		t.Errorf("merged loop gaps' minimum %g, want 200ns: the least, not the sum", v)
	}
}

func TestNoSnapshot(t *testing.T) {
	fams := scrape(t, snapSource{})
	for name := range fams {
		if strings.HasPrefix(name, "linerate_") {
			t.Errorf("%s exported with no snapshot", name)
		}
	}
}

func TestLint(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(&collector{src: controltest.New()})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		// Extras are the drivers' own names; nothing else may be flagged.
		if !strings.HasPrefix(p.Metric, "linerate_port_afpacket_") {
			t.Errorf("lint: %s: %s", p.Metric, p.Text)
		}
	}
}

func TestOneTwoFive(t *testing.T) {
	got := oneTwoFive(100e-9, 10)
	if len(got) != 25 || got[0] != 1e-7 || got[1] != 2e-7 || got[2] != 5e-7 || got[3] != 1e-6 || got[24] != 10 {
		t.Errorf("oneTwoFive = %v", got)
	}
}

func TestServe(t *testing.T) {
	srv, err := Serve("127.0.0.1:0", Handler(controltest.New()))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(context.Background())
	for path, want := range map[string]int{"/metrics": 200, "/": 200, "/nope": 404} {
		resp, err := http.Get("http://" + srv.Addr + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s = %d, want %d", path, resp.StatusCode, want)
		}
		if path == "/metrics" && !strings.Contains(string(body), `linerate_port_rx_packets_total{port="p0"} 1000`) {
			t.Errorf("GET /metrics lacks the port series:\n%.500s", body)
		}
	}
	if _, err := Serve("127.0.0.1:99999", nil); err == nil {
		t.Error("Serve on a bad port succeeded")
	}
}

// A renamed metric is served under its old name too, deprecated: the same
// series, and a HELP that says so and names the new one.
func TestRenamedKeepOldNames(t *testing.T) {
	saved := renamed
	t.Cleanup(func() { renamed = saved })
	renamed = map[string][]string{
		"linerate_pool_copies_total":      {"linerate_pool_copied_total"},
		"linerate_lcore_loop_gap_seconds": {"linerate_lcore_gap_seconds"},
	}
	fams := scrape(t, controltest.New())
	for _, c := range []struct{ now, old string }{
		{"linerate_pool_copies_total", "linerate_pool_copied_total"},
		{"linerate_lcore_loop_gap_seconds", "linerate_lcore_gap_seconds"},
	} {
		now, old := fams[c.now], fams[c.old]
		if now == nil || old == nil {
			t.Fatalf("%s %v, %s %v", c.now, now, c.old, old)
		}
		if want := "Deprecated: renamed to " + c.now + ". " + now.GetHelp(); old.GetHelp() != want {
			t.Errorf("%s HELP %q, want %q", c.old, old.GetHelp(), want)
		}
		if old.GetType() != now.GetType() || len(old.Metric) != len(now.Metric) {
			t.Errorf("%s: %v %d series; %s: %v %d", c.old, old.GetType(), len(old.Metric), c.now, now.GetType(), len(now.Metric))
		}
	}
	if v := value(t, fams, "linerate_pool_copied_total", "pool", "p0"); v != 3 {
		t.Errorf("old name's value %v, want 3", v)
	}
	if n := find(t, fams, "linerate_lcore_gap_seconds", "lcore", "0").Histogram.GetSampleCount(); n != 1000 {
		t.Errorf("old name's histogram count %d, want 1000", n)
	}
	if fams["linerate_pool_size"].GetHelp() != "Buffers in the pool." {
		t.Error("a metric that was not renamed changed its HELP")
	}
}

type clockSource struct {
	snapSource
	clk clock.Clock
}

func (c clockSource) Clock() clock.Clock { return c.clk }

// A source with a clock exports the sync state the kernel reports.
func TestClockSync(t *testing.T) {
	clk := clock.NewSystem()
	defer clk.Close()
	fams := scrape(t, clockSource{snapSource{&stats.Snapshot{}}, clk})
	st := clk.Sync()
	want := 0.0
	if st.Synchronized {
		want = 1
	}
	if v := value(t, fams, "linerate_clock_synchronized"); v != want {
		t.Errorf("linerate_clock_synchronized %v, adjtimex says %v", v, want)
	}
	if v := value(t, fams, "linerate_clock_tai_offset_seconds"); v != float64(st.TAIOffset) {
		t.Errorf("linerate_clock_tai_offset_seconds %v, want %d", v, st.TAIOffset)
	}
	// The kernel's error estimate moves from second to second.
	if v := value(t, fams, "linerate_clock_error_seconds"); v < 0 {
		t.Errorf("linerate_clock_error_seconds %v", v)
	}
}
