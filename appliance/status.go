package appliance

import (
	"log/slog"
	"net"
	"strings"

	"google.golang.org/grpc"

	"github.com/linerate/linerate/appliance/control"
	"github.com/linerate/linerate/appliance/control/host"
	"github.com/linerate/linerate/config"
)

// Status describes what runs where, for the control API.
func (e *Engine) Status() control.Status {
	st := control.Status{Version: e.opt.Version, ConfigPath: e.cfg.Path, Started: e.started}
	switch e.phase.Load() {
	case phaseNew:
		st.State = control.StateStarting
	case phaseRun:
		st.State = control.StateRunning
	case phaseDrain:
		st.State = control.StateDraining
	default:
		st.State = control.StateStopped
	}
	for _, lc := range e.lcores {
		li := control.LcoreInfo{ID: lc.id, CPU: lc.cpu}
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
		pi := control.PortInfo{Name: pe.name, Driver: pe.driver, RxQueues: info.RxQueues, TxQueues: info.TxQueues,
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
		pi := control.PipelineInfo{Name: pl.name}
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

// RegisterServices registers every plugin's control services on the control
// server. The Appliance service itself is registered by control.NewServer.
func (e *Engine) RegisterServices(s *grpc.Server) {
	for _, f := range host.Services() {
		f(s, e)
	}
}

// Instances lists the running instances of a stage kind ("" for all).
func (e *Engine) Instances(kind string) []host.StageRef {
	var out []host.StageRef
	for _, pl := range e.pipelines {
		for _, in := range pl.instances {
			for _, s := range in.stages {
				if kind == "" || s.kind == kind {
					out = append(out, host.StageRef{Pipeline: pl.name, Name: s.name, Kind: s.kind, Lcore: in.lc.id, Stage: s.st})
				}
			}
		}
	}
	return out
}

// Logger is the engine's logger.
func (e *Engine) Logger() *slog.Logger { return e.log }

var _ host.Host = (*Engine)(nil)

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
