package control

import (
	"context"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/linerate/linerate/appliance"
	"github.com/linerate/linerate/appliance/api"
	"github.com/linerate/linerate/appliance/stats"
)

// applianceService is the Appliance service over a Source.
type applianceService struct {
	api.UnimplementedApplianceServer
	src Source
}

var states = map[string]api.State{
	appliance.StateStarting: api.State_STATE_STARTING,
	appliance.StateRunning:  api.State_STATE_RUNNING,
	appliance.StateDraining: api.State_STATE_DRAINING,
	appliance.StateStopped:  api.State_STATE_STOPPED,
}

func (a *applianceService) Status(context.Context, *api.StatusRequest) (*api.StatusReply, error) {
	st := a.src.Status()
	r := &api.StatusReply{
		Version:    st.Version,
		ConfigPath: st.ConfigPath,
		State:      states[st.State],
	}
	if !st.Started.IsZero() {
		r.Started = timestamppb.New(st.Started)
		r.Uptime = durationpb.New(time.Since(st.Started))
	}
	for _, l := range st.Lcores {
		r.Lcores = append(r.Lcores, &api.LcoreInfo{Id: int32(l.ID), Cpu: int32(l.CPU), Pipelines: l.Pipelines})
	}
	for _, p := range st.Ports {
		r.Ports = append(r.Ports, &api.PortInfo{
			Name: p.Name, Driver: p.Driver,
			RxQueues: int32(p.RxQueues), TxQueues: int32(p.TxQueues), Mtu: int32(p.MTU),
			Mac: p.MAC, TimestampSource: p.TimestampSource, LinkUp: p.LinkUp,
		})
	}
	for _, p := range st.Pipelines {
		pi := &api.PipelineInfo{Name: p.Name, Stages: p.Stages}
		for _, l := range p.Lcores {
			pi.Lcores = append(pi.Lcores, int32(l))
		}
		r.Pipelines = append(r.Pipelines, pi)
	}
	return r, nil
}

func (a *applianceService) Reload(_ context.Context, req *api.ReloadRequest) (*api.ReloadReply, error) {
	r, ok := a.src.(Reloader)
	if !ok {
		return nil, status.Error(codes.Unimplemented, "this appliance cannot reload its config")
	}
	path, res, err := r.ReloadConfig(req.GetCheck())
	if err != nil {
		// The file cannot be applied to the running engine as it is: a
		// precondition, not a bad request, since the request names no file.
		return nil, status.Errorf(codes.FailedPrecondition, "reload refused; nothing changed: %v", err)
	}
	return &api.ReloadReply{ConfigPath: path, Stages: res.Stages, Ports: res.Ports}, nil
}

func (a *applianceService) Stats(_ context.Context, req *api.StatsRequest) (*api.StatsReply, error) {
	snap := a.src.Snapshot()
	if snap == nil {
		return nil, fmt.Errorf("engine has no counters yet: %w", ErrUnavailable)
	}
	f, err := newFilter(req, snap, a.src)
	if err != nil {
		return nil, err
	}
	buckets := !req.GetOmitBuckets()
	r := &api.StatsReply{Uptime: durationpb.New(snap.Uptime)}
	if !snap.Time.IsZero() {
		r.Time = timestamppb.New(snap.Time)
	}
	for i := range snap.Ports {
		if p := &snap.Ports[i]; f.port(p.Name) {
			r.Ports = append(r.Ports, portStats(p))
		}
	}
	drops := newDropSum()
	for i := range snap.Stages {
		st := &snap.Stages[i]
		if !f.pipeline(st.Pipeline) {
			continue
		}
		s := &api.StageStats{
			Pipeline: st.Pipeline, Name: st.Name, Kind: st.Kind,
			Lcore: int32(st.Lcore), Packets: st.Packets,
			Drops: dropCounts(st.Drops),
		}
		for _, c := range st.Counters {
			s.Counters = append(s.Counters, &api.Counter{Name: c.Name, Help: c.Help, Value: c.Value})
		}
		r.Stages = append(r.Stages, s)
		drops.add(st.Drops)
	}
	if f.pipelines == nil {
		r.Drops = dropCounts(snap.Drops)
	} else {
		r.Drops = drops.list
	}
	for i := range snap.Lcores {
		l := &snap.Lcores[i]
		if !f.lcore(l.ID) {
			continue
		}
		r.Lcores = append(r.Lcores, &api.LcoreStats{
			Id: int32(l.ID), Cpu: int32(l.CPU),
			Loops: l.Loops, BusyLoops: l.BusyLoops, Packets: l.Packets,
			LoopGap: histogram(l.Gap, buckets),
		})
	}
	for _, p := range snap.Pools {
		r.Pools = append(r.Pools, &api.PoolStats{
			Name: p.Name, Size: int64(p.Size), InUse: int64(p.InUse),
			AllocFailures: p.AllocFail, Copies: p.Copies,
		})
	}
	for _, h := range snap.Histogram {
		pipeline, _, _ := strings.Cut(h.Owner, "/")
		if !f.pipeline(pipeline) {
			continue
		}
		r.Histograms = append(r.Histograms, &api.NamedHistogram{
			Owner: h.Owner, Name: h.Name, Help: h.Help, Unit: h.Unit,
			Histogram: histogram(h.Hist, buckets),
		})
	}
	return r, nil
}

// filter is a StatsRequest's selection; a nil set selects everything.
type filter struct {
	pipelines, ports map[string]bool
	lcores           map[int]bool
}

func newFilter(req *api.StatsRequest, snap *stats.Snapshot, src Source) (*filter, error) {
	f := &filter{}
	if names := req.GetPorts(); len(names) > 0 {
		known := map[string]bool{}
		for _, p := range snap.Ports {
			known[p.Name] = true
		}
		f.ports = map[string]bool{}
		for _, n := range names {
			if !known[n] {
				return nil, fmt.Errorf("port %q: %w", n, ErrNotFound)
			}
			f.ports[n] = true
		}
	}
	if names := req.GetPipelines(); len(names) > 0 {
		st := src.Status()
		known := map[string]bool{}
		for _, p := range st.Pipelines {
			known[p.Name] = true
		}
		for _, s := range snap.Stages {
			known[s.Pipeline] = true
		}
		f.pipelines = map[string]bool{}
		for _, n := range names {
			if !known[n] {
				return nil, fmt.Errorf("pipeline %q: %w", n, ErrNotFound)
			}
			f.pipelines[n] = true
		}
		// The lcores that run a selected pipeline, as either side tells it.
		f.lcores = map[int]bool{}
		for _, p := range st.Pipelines {
			if f.pipelines[p.Name] {
				for _, l := range p.Lcores {
					f.lcores[l] = true
				}
			}
		}
		for _, l := range st.Lcores {
			for _, p := range l.Pipelines {
				if f.pipelines[p] {
					f.lcores[l.ID] = true
				}
			}
		}
	}
	return f, nil
}

func (f *filter) port(name string) bool     { return f.ports == nil || f.ports[name] }
func (f *filter) pipeline(name string) bool { return f.pipelines == nil || f.pipelines[name] }
func (f *filter) lcore(id int) bool         { return f.lcores == nil || f.lcores[id] }

func portStats(p *stats.PortSnapshot) *api.PortStats {
	return &api.PortStats{
		Name: p.Name, Driver: p.Driver,
		RxPackets: p.RxPackets, RxBytes: p.RxBytes,
		TxPackets: p.TxPackets, TxBytes: p.TxBytes,
		RxDropped: p.RxDropped, TxDropped: p.TxDropped, RxErrors: p.RxErrors,
		TimestampSource: p.TimestampSource, LinkUp: p.LinkUp,
		Extra: p.Extra,
	}
}

func dropCounts(d []stats.DropCount) []*api.DropCount {
	out := make([]*api.DropCount, 0, len(d))
	for _, c := range d {
		out = append(out, &api.DropCount{Reason: c.Reason, Count: c.Count})
	}
	return out
}

// dropSum adds drops by reason, keeping the order reasons first appear in.
type dropSum struct {
	byReason map[string]*api.DropCount
	list     []*api.DropCount
}

func newDropSum() *dropSum { return &dropSum{byReason: map[string]*api.DropCount{}} }

func (d *dropSum) add(drops []stats.DropCount) {
	for _, c := range drops {
		dc := d.byReason[c.Reason]
		if dc == nil {
			dc = &api.DropCount{Reason: c.Reason}
			d.byReason[c.Reason] = dc
			d.list = append(d.list, dc)
		}
		dc.Count += c.Count
	}
}

// histogram converts a snapshot; nil stays nil.
func histogram(h *stats.HistSnapshot, buckets bool) *api.Histogram {
	if h == nil {
		return nil
	}
	r := &api.Histogram{
		Count: h.Count, Sum: h.Sum, Min: h.Min, Max: h.Max, Mean: h.Mean(),
		P50: h.Quantile(0.50), P90: h.Quantile(0.90), P99: h.Quantile(0.99), P999: h.Quantile(0.999),
	}
	if buckets {
		h.EachBucket(func(_, hi, n uint64) {
			r.Buckets = append(r.Buckets, &api.Bucket{Le: hi, Count: n})
		})
	}
	return r
}
