package api

import (
	"context"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
)

// Handshake is what linerate and a plugin check before anything else: a
// binary that is not a linerate plugin, or speaks another protocol version,
// is refused by go-plugin with a message that says so.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  1,
	MagicCookieKey:   "LINERATE_PLUGIN",
	MagicCookieValue: "stage-v1",
}

// PluginName is the one plugin a binary serves.
const PluginName = "stage"

// GRPCPlugin carries StagePlugin over go-plugin's gRPC: the plugin's side
// serves Impl; linerate's side gets a StagePluginClient.
type GRPCPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	Impl StagePluginServer
	// Extra registers the plugin's own services beside StagePlugin.
	Extra func(*grpc.Server)
}

// GRPCServer registers the plugin's services.
func (p *GRPCPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	RegisterStagePluginServer(s, p.Impl)
	if p.Extra != nil {
		p.Extra(s)
	}
	return nil
}

// GRPCClient is linerate's client of the service.
func (p *GRPCPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return NewStagePluginClient(c), nil
}

// Plugins is the plugin set both sides name; extra registers the plugin's
// own services (nil on linerate's side).
func Plugins(impl StagePluginServer, extra func(*grpc.Server)) map[string]plugin.Plugin {
	return map[string]plugin.Plugin{PluginName: &GRPCPlugin{Impl: impl, Extra: extra}}
}
