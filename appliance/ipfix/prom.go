package ipfix

import "github.com/prometheus/client_golang/prometheus"

// Collector exports what the started exporters did, per collector:
//
//	linerate_ipfix_records_total{collector}        data records exported
//	linerate_ipfix_messages_total{collector}       messages sent
//	linerate_ipfix_send_errors_total{collector}    messages that could not be sent
//
// The sequence numbers count every record, sent or not, so a collector sees
// the loss too.
func Collector() prometheus.Collector { return collector{} }

type collector struct{}

var (
	collL     = []string{"collector"}
	descRecs  = prometheus.NewDesc("linerate_ipfix_records_total", "IPFIX data records exported to the collector.", collL, nil)
	descMsgs  = prometheus.NewDesc("linerate_ipfix_messages_total", "IPFIX messages sent to the collector.", collL, nil)
	descFails = prometheus.NewDesc("linerate_ipfix_send_errors_total", "IPFIX messages that could not be sent to the collector (no route, connection refused, not connected).", collL, nil)
)

func (collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descRecs
	ch <- descMsgs
	ch <- descFails
}

func (collector) Collect(ch chan<- prometheus.Metric) {
	live.Range(func(k, _ any) bool {
		e := k.(*Exporter)
		recs := float64(e.records.Load())
		for _, s := range e.sessions {
			name := s.network + ":" + s.addr
			ch <- prometheus.MustNewConstMetric(descRecs, prometheus.CounterValue, recs, name)
			ch <- prometheus.MustNewConstMetric(descMsgs, prometheus.CounterValue, float64(s.sentMsgs.Load()), name)
			ch <- prometheus.MustNewConstMetric(descFails, prometheus.CounterValue, float64(s.failed.Load()), name)
		}
		return true
	})
}
