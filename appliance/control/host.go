package control

import (
	"github.com/linerate/linerate/appliance"
	"github.com/linerate/linerate/appliance/control/host"
)

// Host adapts the engine to what plugins' control services and collectors see
// of it (host.Host).
func Host(e *appliance.Engine) host.Host { return engineHost{e} }

// engineHost is the engine with its stage instances as host.StageRefs.
type engineHost struct{ *appliance.Engine }

func (h engineHost) Instances(kind string) []host.StageRef {
	in := h.StageInstances(kind)
	out := make([]host.StageRef, len(in))
	for i, s := range in {
		out[i] = host.StageRef{Pipeline: s.Pipeline, Name: s.Name, Kind: s.Kind, Lcore: s.Lcore, Stage: s.Stage}
	}
	return out
}

// RegisterServices registers every plugin's control service (host.Services)
// on the server, each reaching the engine through h. Call it before the
// first Serve or Start.
func (s *Server) RegisterServices(h host.Host) {
	for _, f := range host.Services() {
		f(s.grpc, h)
	}
}
