package appliance

import (
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/plugins"
)

// The engine's life cycle, as Status.State.
const (
	StateStarting = "starting"
	StateRunning  = "running"
	StateDraining = "draining"
	StateStopped  = "stopped"
)

// Status is the engine's shape, what runs where: plain data that the control
// plane (appliance/control) serves.
type Status struct {
	Version    string
	ConfigPath string
	State      string // one of the State constants
	Started    time.Time
	Lcores     []LcoreInfo
	Ports      []PortInfo
	Pipelines  []PipelineInfo
}

// LcoreInfo is one lcore.
type LcoreInfo struct {
	ID        int // the engine's lcore index
	CPU       int // the CPU it is pinned to; -1 when not pinned
	Pipelines []string
}

// PortInfo is one port's configuration.
type PortInfo struct {
	Name, Driver       string
	RxQueues, TxQueues int
	MTU                int
	MAC                string
	TimestampSource    string
	LinkUp             bool
}

// PipelineInfo is one pipeline.
type PipelineInfo struct {
	Name   string
	Lcores []int    // the engine's lcore indices, one per instance
	Stages []string // kinds, in order
}

// Status describes what runs where. It is safe to call from any goroutine.
func (e *Engine) Status() Status {
	st := Status{Version: e.opt.Version, ConfigPath: e.cfg.Path, Started: e.started}
	switch e.phase.Load() {
	case phaseNew:
		st.State = StateStarting
	case phaseRun:
		st.State = StateRunning
	case phaseDrain:
		st.State = StateDraining
	default:
		st.State = StateStopped
	}
	for _, lc := range e.lcores {
		li := LcoreInfo{ID: lc.id, CPU: lc.cpu}
		if !e.rt.pin {
			li.CPU = -1
		}
		for _, in := range lc.instances {
			li.Pipelines = append(li.Pipelines, in.pipe.name)
		}
		st.Lcores = append(st.Lcores, li)
	}
	for _, pe := range e.ports {
		info := pe.info
		if pe.port != nil {
			info = pe.port.Info()
			if info.MTU == 0 {
				info.MTU = pe.info.MTU // the config's, for drivers that do not know one
			}
		}
		pi := PortInfo{Name: pe.name, Driver: pe.driver, RxQueues: info.RxQueues, TxQueues: info.TxQueues,
			MTU: info.MTU, TimestampSource: info.TimestampSource, LinkUp: info.LinkUp}
		if m := pe.cfgPort.MAC; m != (config.MAC{}) {
			info.MAC = m // routed mode: the port's own address
		}
		if info.MAC != ([6]byte{}) {
			pi.MAC = net.HardwareAddr(info.MAC[:]).String()
		}
		st.Ports = append(st.Ports, pi)
	}
	for _, pl := range e.pipelines {
		pi := PipelineInfo{Name: pl.name}
		for _, in := range pl.instances {
			pi.Lcores = append(pi.Lcores, in.lc.id)
		}
		if len(pl.instances) > 0 {
			for _, s := range pl.instances[0].stages {
				pi.Stages = append(pi.Stages, s.kind)
			}
		}
		st.Pipelines = append(st.Pipelines, pi)
	}
	return st
}

// StageInstance is one running instance of a stage: the stage on one of its
// pipeline's lcores.
type StageInstance struct {
	Pipeline string
	Name     string
	Kind     string
	Lcore    int // the engine's lcore index: pass it to Do
	Stage    plugins.Stage
}

// StageInstances lists the running instances of a stage kind ("" for every
// kind), pipeline by pipeline. Reaching a stage's lcore-owned state from
// another goroutine goes through Do.
func (e *Engine) StageInstances(kind string) []StageInstance {
	var out []StageInstance
	for _, pl := range e.pipelines {
		for _, in := range pl.instances {
			for _, s := range in.stages {
				if kind == "" || s.kind == kind {
					out = append(out, StageInstance{Pipeline: pl.name, Name: s.name, Kind: s.kind, Lcore: in.lc.id, Stage: s.st})
				}
			}
		}
	}
	return out
}

// Logger is the engine's logger.
func (e *Engine) Logger() *slog.Logger { return e.log }

// Warnings are things validate reports without failing: a config that runs,
// but not as well as it could.
func (e *Engine) Warnings() []string {
	w := append([]string(nil), e.cfg.Warnings()...)
overlap:
	for _, c := range e.rt.lcoreCPUs {
		for _, k := range e.rt.controlCPUs {
			if c == k && e.rt.pin {
				w = append(w, "lcore CPUs and control CPUs overlap: the Go runtime's threads will share lcore CPUs")
				break overlap
			}
		}
	}
	// Drivers warn per port; a host-wide warning (no hugepages) is said once.
	seen := map[string]bool{}
	for _, d := range e.driverWarnings {
		msg := d
		if _, rest, ok := strings.Cut(d, ": "); ok && strings.HasPrefix(d, "port ") {
			msg = rest
		}
		if !seen[msg] {
			seen[msg] = true
			w = append(w, d)
		}
	}
	return w
}
