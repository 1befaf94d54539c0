package metrics

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/linerate/linerate/appliance/stats"
)

// set gathers one scrape's series by family, summing series that come out
// twice, so that a scrape never fails on a duplicate.
type set struct {
	families map[string]*family
	order    []*family
}

type family struct {
	desc   *prometheus.Desc
	old    []*prometheus.Desc // the deprecated names it is also served under
	labels []string
	typ    prometheus.ValueType
	hist   bool
	min    *prometheus.Desc // a histogram's least value, a gauge
	scale  float64
	bounds []float64
	series map[string]*series
	order  []*series
	err    error // a later use disagreed with the first
}

type series struct {
	values []string
	v      float64
	h      *stats.HistSnapshot
}

func (s *set) family(name, help string, labels []string, typ prometheus.ValueType, hist bool) *family {
	if s.families == nil {
		s.families = map[string]*family{}
	}
	f := s.families[name]
	if f == nil {
		f = &family{
			desc:   prometheus.NewDesc(name, help, labels, nil),
			labels: labels, typ: typ, hist: hist,
			series: map[string]*series{},
		}
		for _, o := range renamed[name] {
			f.old = append(f.old, prometheus.NewDesc(o, "Deprecated: renamed to "+name+". "+help, labels, nil))
		}
		s.families[name] = f
		s.order = append(s.order, f)
		return f
	}
	if f.hist != hist || f.typ != typ || !slices.Equal(f.labels, labels) {
		f.err = fmt.Errorf("metric %s exported with two shapes", name)
		return nil
	}
	return f
}

func (f *family) at(values []string) *series {
	key := strings.Join(values, "\xff")
	sr := f.series[key]
	if sr == nil {
		sr = &series{values: values}
		f.series[key] = sr
		f.order = append(f.order, sr)
	}
	return sr
}

func (s *set) counter(name, help string, labels, values []string, v uint64) {
	s.value(name, help, prometheus.CounterValue, labels, values, float64(v))
}

func (s *set) value(name, help string, typ prometheus.ValueType, labels, values []string, v float64) {
	if f := s.family(name, help, labels, typ, false); f != nil {
		f.at(values).v += v
	}
}

// histogram adds h, whose values are multiplied by scale for export, and
// its minimum as minName.
func (s *set) histogram(name, minName, help string, labels, values []string, h *stats.HistSnapshot, scale float64,
	bounds []float64) {
	f := s.family(name, help, labels, prometheus.UntypedValue, true)
	if f == nil {
		return
	}
	f.scale, f.bounds = scale, bounds
	if f.min == nil {
		f.min = prometheus.NewDesc(minName, "Least value of "+name+", exactly.", labels, nil)
	}
	sr := f.at(values)
	if sr.h == nil {
		sr.h = stats.NewHistSnapshot()
	}
	sr.h.Add(h)
}

func (s *set) emit(ch chan<- prometheus.Metric) {
	for _, f := range s.order {
		if f.err != nil {
			ch <- prometheus.NewInvalidMetric(f.desc, f.err)
		}
		for _, d := range append([]*prometheus.Desc{f.desc}, f.old...) {
			for _, sr := range f.order {
				var m prometheus.Metric
				var err error
				if f.hist {
					m, err = constHistogram(d, f, sr)
				} else {
					m, err = prometheus.NewConstMetric(d, f.typ, sr.v, sr.values...)
				}
				if err != nil {
					m = prometheus.NewInvalidMetric(d, err)
				}
				ch <- m
			}
		}
		if f.min == nil {
			continue
		}
		for _, sr := range f.order {
			if sr.h.Count > 0 {
				ch <- prometheus.MustNewConstMetric(f.min, prometheus.GaugeValue, float64(sr.h.Min)*f.scale, sr.values...)
			}
		}
	}
}

// constHistogram turns a log-linear snapshot into Prometheus's cumulative
// buckets. The count is the buckets' own total, so +Inf never falls below a
// finite bucket even while an lcore publishes.
func constHistogram(d *prometheus.Desc, f *family, sr *series) (prometheus.Metric, error) {
	var total uint64
	for _, n := range sr.h.Buckets {
		total += n
	}
	raw := make([]float64, len(f.bounds))
	for i, b := range f.bounds {
		raw[i] = math.Round(b / f.scale) // 100e-9/1e-9 is 99.999…, which would miss the 100ns bucket
	}
	buckets := make(map[float64]uint64, len(f.bounds))
	i := 0
	sr.h.Cumulative(raw, func(_ float64, n uint64) {
		buckets[f.bounds[i]] = n
		i++
	})
	return prometheus.NewConstHistogram(d, total, float64(sr.h.Sum)*f.scale, buckets, sr.values...)
}
