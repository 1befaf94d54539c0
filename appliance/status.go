package appliance

import (
	"net"

	"google.golang.org/grpc"

	"github.com/linerate/linerate/appliance/control"
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
		}
		pi := control.PortInfo{Name: pe.name, Driver: pe.driver, RxQueues: info.RxQueues, TxQueues: info.TxQueues,
			MTU: info.MTU, TimestampSource: info.TimestampSource, LinkUp: info.LinkUp}
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

// ServiceRegistrar is implemented by plugin packages (through their stages) that
// add their own gRPC services to the control API: STAMP, IOAM, RLNC.
type ServiceRegistrar interface {
	RegisterServices(s *grpc.Server, e *Engine)
}

// services are registered once per process by plugin packages.
var services []ServiceRegistrar

// AddService makes every engine register r's services on its control server.
func AddService(r ServiceRegistrar) { services = append(services, r) }

// RegisterServices registers the plugins' services on the control server. The
// Appliance service itself is registered by control.NewServer.
func (e *Engine) RegisterServices(s *grpc.Server) {
	for _, r := range services {
		r.RegisterServices(s, e)
	}
}

// Warnings are things validate reports without failing: a config that runs,
// but not as well as it could.
func (e *Engine) Warnings() []string {
	var w []string
	for _, c := range e.rt.lcoreCPUs {
		for _, k := range e.rt.controlCPUs {
			if c == k && e.rt.pin {
				w = append(w, "lcore CPUs and control CPUs overlap: the Go runtime's threads will share lcore CPUs")
				return w
			}
		}
	}
	return w
}
