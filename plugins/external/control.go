package external

import (
	"context"
	"sort"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/linerate/linerate/appliance/control/host"
	"github.com/linerate/linerate/plugins/external/api"
)

// The control side: the External service (linerate plugins) and the
// plugins' series on /metrics. Both read what the supervisor and the
// instances publish atomically.

func init() {
	host.RegisterService("external", func(s *grpc.Server, h host.Host) {
		api.RegisterExternalServer(s, &service{h: h})
	})
	host.RegisterCollector("external", func(h host.Host) prometheus.Collector { return &collector{h: h} })
	host.RegisterProxy("external", func(service string) grpc.ClientConnInterface {
		registryMu.Lock()
		defer registryMu.Unlock()
		for _, sv := range supervisors {
			if cc := sv.serves(service); cc != nil {
				return cc
			}
		}
		return nil
	})
}

type service struct {
	api.UnimplementedExternalServer
	h host.Host
}

func (s *service) ListPlugins(context.Context, *api.ListPluginsRequest) (*api.ListPluginsReply, error) {
	return &api.ListPluginsReply{Plugins: list(s.h)}, nil
}

// list is every external stage's plugin, with the stage's counters summed over
// its instances.
func list(h host.Host) []*api.PluginStatus {
	var out []*api.PluginStatus
	index := map[*supervisor]*api.PluginStatus{}
	for _, ref := range h.Instances("external") {
		in, ok := ref.Stage.(*instance)
		if !ok {
			continue
		}
		ps := index[in.sv]
		if ps == nil {
			st := in.sv.status()
			ps = &api.PluginStatus{Stage: ref.Name, Pipeline: ref.Pipeline, Plugin: st.Plugin, State: st.State,
				Pid: int32(st.PID), Lost: st.Lost, Restarts: st.Restarts, Counters: st.Counters,
				StageCounters: map[string]uint64{}}
			if ps.State != StateUp {
				ps.Pid = 0
			}
			index[in.sv] = ps
			out = append(out, ps)
		}
		for name, c := range in.published() {
			ps.StageCounters[name] += c
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Stage < out[j].Stage })
	return out
}

// published is the instance's counters as the engine last published them.
func (in *instance) published() map[string]uint64 {
	c := &in.c
	m := map[string]uint64{"lent": c.lent.Load(), "returned": c.returned.Load(), "forwarded": c.forwarded.Load(),
		"dropped": c.dropped.Load(), "consumed": c.consumed.Load(), "marked": c.marked.Load(),
		"copies": c.copies.Load(), "bad_window": c.badWindow.Load(), "bad_result": c.badResult.Load(),
		"reclaimed": c.reclaimed.Load(), "plugin_bypassed": c.bypassed.Load()}
	if c.emitted != nil { // a plugin that makes packets
		m["emitted"], m["bad_emit"] = c.emitted.Load(), c.badEmit.Load()
	}
	return m
}

type collector struct{ h host.Host }

var (
	stageL   = []string{"stage"}
	upDesc   = prometheus.NewDesc("linerate_external_plugin_up", "1 while the external stage's plugin process runs and answers, 0 otherwise.", stageL, nil)
	lostDesc = prometheus.NewDesc("linerate_external_plugin_lost_total", "Times the plugin died or hung and was killed.", stageL, nil)
	restDesc = prometheus.NewDesc("linerate_external_plugin_restarts_total", "Times the plugin was started again after a loss.", stageL, nil)
	ownDesc  = prometheus.NewDesc("linerate_external_plugin_counter", "The plugin's own counters, by name, from its Stats.", []string{"stage", "counter"}, nil)
)

// Describe sends nothing: the series follow the stages.
func (*collector) Describe(chan<- *prometheus.Desc) {}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	for _, p := range list(c.h) {
		up := 0.0
		if p.State == StateUp {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(upDesc, prometheus.GaugeValue, up, p.Stage)
		ch <- prometheus.MustNewConstMetric(lostDesc, prometheus.CounterValue, float64(p.Lost), p.Stage)
		ch <- prometheus.MustNewConstMetric(restDesc, prometheus.CounterValue, float64(p.Restarts), p.Stage)
		for name, v := range p.Counters {
			ch <- prometheus.MustNewConstMetric(ownDesc, prometheus.CounterValue, float64(v), p.Stage, name)
		}
	}
}
