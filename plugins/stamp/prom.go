package stamp

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/linerate/linerate/appliance/control/host"
)

// Per-session metrics for Prometheus: one series set per Session-Sender
// session (label ssid), read at scrape time as GetStampSessionResults reads
// them, on the collector's lcore. Sessions are bounded by max_sessions, so the
// label's cardinality is too. Counts are of the session's current run (they
// restart with it), hence gauges.

func init() {
	host.RegisterCollector("stamp", func(h host.Host) prometheus.Collector {
		return &promSessions{sv: &service{h: h}}
	})
}

type promSessions struct{ sv *service }

var (
	ssidL     = []string{"ssid"}
	ssidDirL  = []string{"ssid", "direction"}
	promDescs = struct {
		sent, received, dups, reordered, unsync, lost, inFlight, delay, delayMin, delayMax, ipdv, jitter *prometheus.Desc
	}{
		sent:      prometheus.NewDesc("linerate_stamp_session_sent", "Test packets the session sent in its current run.", ssidL, nil),
		received:  prometheus.NewDesc("linerate_stamp_session_received", "Distinct replies the session received in its current run.", ssidL, nil),
		dups:      prometheus.NewDesc("linerate_stamp_session_duplicates", "Replies with a sequence number seen before.", ssidL, nil),
		reordered: prometheus.NewDesc("linerate_stamp_session_reordered", "Replies that came after a later sequence number.", ssidL, nil),
		unsync:    prometheus.NewDesc("linerate_stamp_session_unsynchronized", "Replies with an S bit of 0: their one-way delays are only indicative.", ssidL, nil),
		lost: prometheus.NewDesc("linerate_stamp_session_lost",
			"Test packets lost: round_trip, and forward and backward with a stateful reflector.", ssidDirL, nil),
		inFlight: prometheus.NewDesc("linerate_stamp_session_in_flight", "Test packets sent after the highest one answered.", ssidL, nil),
		delay: prometheus.NewDesc("linerate_stamp_session_delay_seconds",
			"Delay by direction (round_trip without the reflector's residence time, forward, backward), quantiles from a histogram within 0.8%; the mean is _sum / _count.", ssidDirL, nil),
		delayMin: prometheus.NewDesc("linerate_stamp_session_delay_min_seconds", "Least delay by direction.", ssidDirL, nil),
		delayMax: prometheus.NewDesc("linerate_stamp_session_delay_max_seconds", "Largest delay by direction.", ssidDirL, nil),
		ipdv:     prometheus.NewDesc("linerate_stamp_session_ipdv_mean_abs_seconds", "Mean absolute IP packet delay variation, by sequence number (RFC 5481), per direction.", ssidDirL, nil),
		jitter:   prometheus.NewDesc("linerate_stamp_session_jitter_seconds", "Interarrival jitter (RFC 3550 §6.4.1), per direction.", ssidDirL, nil),
	}
)

// Describe sends nothing: the series follow the sessions, so the collector is
// unchecked.
func (*promSessions) Describe(chan<- *prometheus.Desc) {}

func (c *promSessions) Collect(ch chan<- prometheus.Metric) {
	r, err := c.sv.registry()
	if err != nil {
		return // no STAMP stage in this engine
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for _, s := range r.txSessions() {
		m := metricsAt(c.sv.h, s)
		id := strconv.Itoa(int(s.id))
		gauge(promDescs.sent, float64(m.Sent), id)
		gauge(promDescs.received, float64(m.Received), id)
		gauge(promDescs.dups, float64(m.Duplicates), id)
		gauge(promDescs.reordered, float64(m.Reordered), id)
		gauge(promDescs.unsync, float64(m.Unsynchronized), id)
		gauge(promDescs.inFlight, float64(m.InFlight), id)
		gauge(promDescs.lost, float64(m.LostRoundTrip), id, "round_trip")
		if m.Split {
			gauge(promDescs.lost, float64(m.LostForward), id, "forward")
			gauge(promDescs.lost, float64(m.LostBackward), id, "backward")
		}
		for _, d := range []struct {
			dir string
			st  *DelayStats
			jit *JitterStats
		}{{"round_trip", &m.RTT, &m.JitterRTT}, {"forward", &m.Forward, &m.JitterForward}, {"backward", &m.Backward, &m.JitterBack}} {
			if d.st.N == 0 {
				continue
			}
			ch <- prometheus.MustNewConstSummary(promDescs.delay, d.st.N, seconds(d.st.Mean)*float64(d.st.N),
				map[float64]float64{0.5: seconds(d.st.P50), 0.9: seconds(d.st.P90), 0.99: seconds(d.st.P99)}, id, d.dir)
			gauge(promDescs.delayMin, seconds(d.st.Min), id, d.dir)
			gauge(promDescs.delayMax, seconds(d.st.Max), id, d.dir)
			if d.jit.N > 0 {
				gauge(promDescs.ipdv, seconds(d.jit.MeanAbs), id, d.dir)
				gauge(promDescs.jitter, d.jit.Smoothed/1e9, id, d.dir)
			}
		}
	}
}

func seconds(ns int64) float64 { return float64(ns) / 1e9 }
