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
// serves Impl; linerate's side gets a Client.
type GRPCPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	Impl StagePluginServer
	// Own registers the plugin's own services, nil when it has none. They are
	// served apart from StagePlugin, on a connection of go-plugin's
	// GRPCBroker: Brokered gets its id, which the plugin announces in
	// CapabilitiesReply.broker_id.
	Own      func(*grpc.Server)
	Brokered func(id uint32)
}

// GRPCServer registers StagePlugin, and serves the plugin's own services
// through the broker.
func (p *GRPCPlugin) GRPCServer(broker *plugin.GRPCBroker, s *grpc.Server) error {
	RegisterStagePluginServer(s, p.Impl)
	if p.Own != nil {
		id := broker.NextId()
		go broker.AcceptAndServe(id, func(opts []grpc.ServerOption) *grpc.Server {
			g := grpc.NewServer(opts...)
			p.Own(g)
			return g
		})
		if p.Brokered != nil {
			p.Brokered(id)
		}
	}
	return nil
}

// Client is linerate's side: StagePlugin, and the broker that reaches the
// plugin's own services (Dial with the id Capabilities announced).
type Client struct {
	StagePluginClient
	Broker *plugin.GRPCBroker
}

// GRPCClient is linerate's client of the service.
func (p *GRPCPlugin) GRPCClient(_ context.Context, broker *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return &Client{StagePluginClient: NewStagePluginClient(c), Broker: broker}, nil
}

// Plugins is the plugin set both sides name: impl, own and brokered are the
// plugin's (nil on linerate's side).
func Plugins(impl StagePluginServer, own func(*grpc.Server), brokered func(uint32)) map[string]plugin.Plugin {
	return map[string]plugin.Plugin{PluginName: &GRPCPlugin{Impl: impl, Own: own, Brokered: brokered}}
}
