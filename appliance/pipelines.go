package appliance

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/linerate/linerate/appliance/cpuset"
	"github.com/linerate/linerate/appliance/ring"
	"github.com/linerate/linerate/appliance/stats"
	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/plugins"
)

type pipeline struct {
	name      string
	instances []*instance
	handoff   [][]*ring.Handles // [from][to]
	shared    map[string]any
	rxPorts   []*portEntry // the ports it receives from, each once: where its stages' offloads run
}

func (e *Engine) buildPipeline(pc config.Pipeline) error {
	pl := &pipeline{name: pc.Name, shared: map[string]any{}}
	cpus := pc.CPUs
	if len(cpus) == 0 {
		cpus = []int{e.lcores[len(e.lcores)-1].cpu}
		if all := cpuset.Allowed(); len(all) > 0 {
			cpus = []int{all[len(all)-1]}
		}
	}
	for i, cpu := range cpus {
		lc := e.lcoreByCPU(cpu)
		in := &instance{pipe: pl, idx: i, lc: lc}
		in.ctx = plugins.Context{Instance: i, Clock: e.clock, Log: rateLimited(e.log.With("pipeline", pc.Name, "lcore", cpu)),
			Out: &e.opt.Output}
		in.ctx.Env = env{in}
		pl.instances = append(pl.instances, in)
		lc.instances = append(lc.instances, in)
	}
	// Rx queues are spread round-robin over the instances.
	var rxs []rxQueue
	for _, r := range pc.Rx {
		name, q := r, -1
		if k := strings.LastIndexByte(r, ':'); k > 0 {
			n, err := strconv.Atoi(r[k+1:])
			if err != nil {
				return fmt.Errorf("%s: pipeline %q: rx %q: bad queue", pc.Where(), pc.Name, r)
			}
			name, q = r[:k], n
		}
		pe := e.portIndex[name]
		if pe == nil {
			return fmt.Errorf("%s: pipeline %q: rx port %q does not exist", pc.Where(), pc.Name, name)
		}
		if !slices.Contains(pl.rxPorts, pe) {
			pl.rxPorts = append(pl.rxPorts, pe)
		}
		if q >= pe.info.RxQueues && !e.opt.DryRun {
			return fmt.Errorf("%s: pipeline %q: port %q has no rx queue %d", pc.Where(), pc.Name, name, q)
		}
		if q >= 0 {
			rxs = append(rxs, rxQueue{port: pe, queue: q, internal: pe.internal})
			continue
		}
		for k := 0; k < max(pe.info.RxQueues, 1); k++ {
			rxs = append(rxs, rxQueue{port: pe, queue: k, internal: pe.internal})
		}
	}
	if !e.opt.DryRun {
		for i, rq := range rxs {
			in := pl.instances[i%len(pl.instances)]
			in.rx = append(in.rx, rq)
		}
	}
	if len(pc.Stages) == 0 {
		return fmt.Errorf("%s: pipeline %q has no stages", pc.Where(), pc.Name)
	}
	for _, in := range pl.instances {
		for k, sc := range pc.Stages {
			si, err := e.buildStage(pl, in, k, sc)
			if err != nil {
				return err
			}
			in.stages = append(in.stages, si)
			if si.producer != nil {
				in.producers = append(in.producers, k)
			}
			if _, ok := si.st.(plugins.Ticker); ok {
				in.tickers = append(in.tickers, k)
			}
		}
		in.unclaimed = in.stages[len(in.stages)-1]
	}
	n := len(pl.instances)
	pl.handoff = make([][]*ring.Handles, n)
	for i := range pl.handoff {
		pl.handoff[i] = make([]*ring.Handles, n)
		for j := range pl.handoff[i] {
			if i != j {
				size := e.cfg.Engine.RingSize
				if size <= 0 {
					size = 1024
				}
				r := ring.NewHandles(size)
				pl.handoff[i][j] = r
				pl.instances[j].handoffIn = append(pl.instances[j].handoffIn, r)
			}
		}
	}
	e.pipelines = append(e.pipelines, pl)
	return nil
}

func (e *Engine) buildStage(pl *pipeline, in *instance, k int, sc config.Stage) (*stageInst, error) {
	kind, ok := plugins.Lookup(sc.Kind)
	if !ok {
		var names []string
		for _, k := range plugins.Kinds() {
			names = append(names, k.Name)
		}
		msg := fmt.Sprintf("stage kind %q is unknown", sc.Kind)
		if best := config.Suggest(sc.Kind, names); best != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", best)
		}
		return nil, fmt.Errorf("%s: %s; 'linerate stages' lists the %d kinds this binary has", sc.Where(), msg, len(names))
	}
	name := sc.Name
	if name == "" {
		name = fmt.Sprintf("%s#%d", sc.Kind, k)
	}
	si := &stageInst{kind: sc.Kind, name: name, counters: &stats.Set{}}
	s := &plugins.Setup{
		Kind: sc.Kind, Name: name, Config: sc.Table, Ports: portResolver{e}, Instance: in.idx,
		NumInstances: len(pl.instances), Clock: e.clock, Log: e.log.With("stage", name, "pipeline", pl.name),
		Counters: si.counters,
		Histograms: func(hname, help, unit string) *stats.Histogram {
			h := stats.NewHistogram()
			si.hists = append(si.hists, namedHist{name: hname, help: help, unit: unit, h: h})
			return h
		},
		Pool: e.stagePool,
		Global: func(key string, mk func() any) any {
			if e.global == nil {
				e.global = map[string]any{}
			}
			if v, ok := e.global[key]; ok {
				return v
			}
			v := mk()
			e.global[key] = v
			return v
		},
		Section: func(name string) plugins.Config { return e.cfg.Section(name) },
		Shared: func(key string, mk func() any) any {
			key = name + "/" + key
			if v, ok := pl.shared[key]; ok {
				return v
			}
			v := mk()
			pl.shared[key] = v
			return v
		},
	}
	st, err := kind.New(s)
	if err != nil {
		return nil, located(err, sc.Where(), fmt.Sprintf("stage %q (%s)", name, sc.Kind))
	}
	si.st = st
	si.producer, _ = st.(plugins.Producer)
	si.holder, _ = st.(plugins.Holder)
	si.finite, _ = st.(plugins.Finite)
	return si, nil
}
