// Package sdk runs a linerate stage out of process: a plugin is its own
// binary, built against this package and the stage contract (package plugins,
// appliance/packet), and linerate's external stage launches it. The stage is
// an ordinary plugins.Stage, tested with plugins/stagetest like any other;
// Serve is all its main needs:
//
//	func main() {
//		sdk.Serve(plugins.Kind{Name: "sampler", Summary: "…", New: newSampler})
//	}
//
// go-plugin carries the control: the handshake, Configure (one instance per
// lcore of linerate's pipeline, each from the stage's table), Start, Stop and
// Stats. Packets do not go through it: each instance is the memif server of
// its lcore's external stage and runs bursts of the packets lent to it on a
// thread of its own, pinned to the CPU linerate names. The packets' bytes are
// linerate's buffers, shared, never copied; their metadata is the plugin's
// own. What Process gives each packet goes back as its verdict
// (appliance/memif's descriptor extension): Continue, Forward, Drop with one
// of the plugin's reasons (packet.RegisterReason, as in process), or Consume.
// A stage makes packets as in process: Setup.Pool gives it a pool, whose
// buffers linerate lends (empty, shared, never copied), and Env.Emit sends
// one to a port, or its Produce to the stage after the external one. Handoff
// is refused.
package sdk

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/linerate/linerate/appliance/clock"
	"github.com/linerate/linerate/appliance/memif"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/appliance/stats"
	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/plugins"
	"github.com/linerate/linerate/plugins/external/api"
)

// Option adds to what Serve serves.
type Option func(*server)

// Service serves a gRPC service of the plugin's own (generated code's
// ServiceDesc, and its implementation) beside the stage, on a connection of
// go-plugin's GRPCBroker that linerate dials: linerate's control API
// forwards calls of it to the plugin there, so a client reaches it at
// linerate's address, as it reaches linerate's own services.
func Service(desc *grpc.ServiceDesc, impl any) Option {
	return func(s *server) { s.services = append(s.services, service{desc, impl}) }
}

type service struct {
	desc *grpc.ServiceDesc
	impl any
}

// Serve runs kind as a plugin until linerate stops it. It never returns.
func Serve(kind plugins.Kind, opts ...Option) {
	log := Logger()
	srv := &server{kind: kind, log: log}
	for _, o := range opts {
		o(srv)
	}
	var own func(*grpc.Server)
	if len(srv.services) > 0 {
		own = func(g *grpc.Server) {
			for _, s := range srv.services {
				g.RegisterService(s.desc, s.impl)
			}
		}
	}
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: api.Handshake,
		Plugins:         api.Plugins(srv, own, srv.brokerID.Store),
		GRPCServer:      plugin.DefaultGRPCServer,
		Logger:          hclog.New(&hclog.LoggerOptions{Output: os.Stderr, JSONFormat: true, Level: hclog.Info}),
	})
	os.Exit(0)
}

// Logger is the plugin's slog logger: JSON lines on stderr in hclog's keys,
// which go-plugin hands to linerate's log with their level and attributes.
func Logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 {
				switch a.Key {
				case slog.LevelKey:
					a.Key = "@level"
					a.Value = slog.StringValue(levelName(a.Value.Any()))
				case slog.MessageKey:
					a.Key = "@message"
				case slog.TimeKey:
					a.Key = "@timestamp"
				}
			}
			return a
		},
	}))
}

func levelName(v any) string {
	l, _ := v.(slog.Level)
	switch {
	case l >= slog.LevelError:
		return "error"
	case l >= slog.LevelWarn:
		return "warn"
	case l >= slog.LevelInfo:
		return "info"
	}
	return "debug"
}

type server struct {
	api.UnimplementedStagePluginServer
	kind     plugins.Kind
	log      *slog.Logger
	services []service
	brokerID atomic.Uint32 // where services are served: the broker's connection id

	mu        sync.Mutex
	instances []*instance
	ln        *memif.Listener
	wg        sync.WaitGroup
	clk       *clock.System
	pool      packet.Pool
}

func (s *server) Capabilities(context.Context, *api.CapabilitiesRequest) (*api.CapabilitiesReply, error) {
	r := &api.CapabilitiesReply{Kind: s.kind.Name, Summary: s.kind.Summary, ExtVersion: memif.ExtVersion,
		BrokerId: s.brokerID.Load()}
	for _, sv := range s.services {
		r.Services = append(r.Services, sv.desc.ServiceName)
	}
	for i := 0; i < packet.NumReasons(); i++ {
		r.Reasons = append(r.Reasons, packet.Reason(i).String())
	}
	return r, nil
}

type portTable []plugins.PortInfo

func (ps portTable) Port(name string) (plugins.PortInfo, bool) {
	for _, p := range ps {
		if p.Name == name {
			return p, true
		}
	}
	return plugins.PortInfo{}, false
}
func (ps portTable) All() []plugins.PortInfo { return append([]plugins.PortInfo(nil), ps...) }

type emptyConfig struct{ where string }

func (c emptyConfig) Decode(any) error { return nil }
func (c emptyConfig) Where() string    { return c.where }

// Configure builds the instances from the stage's table. Errors name the
// table's place in linerate's config file.
func (s *server) Configure(_ context.Context, r *api.ConfigureRequest) (*api.ConfigureReply, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.instances) > 0 {
		return nil, fmt.Errorf("configured already")
	}
	if r.Instances == 0 || r.Instances > 256 {
		return nil, fmt.Errorf("instances %d: outside 1..256", r.Instances)
	}
	var ports portTable
	for _, p := range r.Ports {
		pi := plugins.PortInfo{ID: uint16(p.Id), Name: p.Name, MTU: int(p.Mtu)}
		copy(pi.MAC[:], p.Mac)
		ports = append(ports, pi)
	}
	if s.clk == nil {
		s.clk = clock.NewSystem()
	}
	if s.pool == nil {
		p, err := packet.RegisterPool(func(id uint16) packet.Pool { return &lentPool{id: id} })
		if err != nil {
			return nil, err
		}
		s.pool = p
	}
	shared := map[string]any{}
	var sharedMu sync.Mutex
	get := func(key string, mk func() any) any {
		sharedMu.Lock()
		defer sharedMu.Unlock()
		if v, ok := shared[key]; ok {
			return v
		}
		v := mk()
		shared[key] = v
		return v
	}
	var insts []*instance
	reply := &api.ConfigureReply{}
	for i := 0; i < int(r.Instances); i++ {
		var ep *emitPool
		tab, err := config.ParseTable(r.Where, []byte(r.ConfigToml))
		if err != nil {
			return nil, err
		}
		counters := &stats.Set{}
		set := &plugins.Setup{Kind: s.kind.Name, Name: r.Name, Config: tab, Ports: ports, Instance: i,
			NumInstances: int(r.Instances), Clock: s.clk, Log: s.log.With("stage", r.Name, "instance", i),
			Counters:   counters,
			Histograms: func(name, help, unit string) *stats.Histogram { return stats.NewHistogram() },
			// The instance's one pool, whatever its name: the buffers
			// linerate lends it to make packets in.
			Pool: func(_ string, buffers, dataRoom int) (packet.Pool, error) {
				if ep != nil {
					return ep, nil
				}
				if buffers <= 0 || dataRoom < 64 || dataRoom > 9216 {
					return nil, fmt.Errorf("a pool of %d buffers of %d bytes: at least 1 buffer, of 64..9216 bytes", buffers, dataRoom)
				}
				var err error
				ep, err = newEmitPool(buffers, dataRoom)
				return ep, err
			},
			Shared: get, Global: get, Section: func(name string) plugins.Config { return emptyConfig{r.Where} }}
		st, err := s.kind.New(set)
		if err != nil {
			return nil, err
		}
		inst, err := newInstance(i, st, counters, s.pool, s.clk, set.Log)
		if err != nil {
			return nil, err
		}
		if ep != nil {
			inst.useEmitPool(ep)
			reply.EmitBuffers = max(reply.EmitBuffers, uint32(len(ep.bufs)))
			reply.EmitDataRoom = max(reply.EmitDataRoom, uint32(ep.dataRoom))
		}
		insts = append(insts, inst)
	}
	s.instances = insts
	return reply, nil
}

// Start listens for the instances' memif connections: the client with
// interface id i is instance i's lcore.
func (s *server) Start(_ context.Context, r *api.StartRequest) (*api.StartReply, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln != nil {
		return nil, fmt.Errorf("started already")
	}
	if len(s.instances) == 0 {
		return nil, fmt.Errorf("not configured")
	}
	ln, err := memif.Listen(r.Socket)
	if err != nil {
		return nil, err
	}
	// linerate may reach its plugin's sockets by their group alone (its
	// directory gives them linerate's), as go-plugin's are.
	if err := os.Chmod(r.Socket, 0o660); err != nil && !strings.HasPrefix(r.Socket, "@") {
		ln.Close()
		return nil, err
	}
	s.ln = ln
	for _, in := range s.instances {
		in.cpu = int(r.Cpu)
	}
	s.wg.Add(1)
	go s.accept(ln)
	return &api.StartReply{}, nil
}

// accept takes each instance's connection (by its interface id) and runs the
// instance on it; a client that comes back replaces its old connection.
func (s *server) accept(ln *memif.Listener) {
	defer s.wg.Done()
	for {
		c, err := ln.Accept(memif.ServerConfig{Name: s.kind.Name, IDs: uint32(len(s.instances)), MaxC2S: 2, MaxS2C: 2, PollC2S: true})
		if err != nil {
			if ln.Closed() {
				return
			}
			s.log.Warn("plugin: a memif client failed to connect", "err", err)
			continue
		}
		s.instances[c.ID].serve(c, &s.wg)
	}
}

func (s *server) Stop(context.Context, *api.StopRequest) (*api.StopReply, error) {
	s.mu.Lock()
	ln := s.ln
	s.ln = nil
	s.mu.Unlock()
	if ln != nil {
		ln.Close()
	}
	for _, in := range s.instances {
		in.stop()
	}
	s.wg.Wait()
	return &api.StopReply{}, nil
}

func (s *server) Stats(context.Context, *api.StatsRequest) (*api.StatsReply, error) {
	r := &api.StatsReply{Counters: map[string]uint64{}}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, in := range s.instances {
		in.counters.Each(func(name, _ string, v uint64) { r.Counters[name] += v })
		r.Counters["plugin_bursts"] += in.bursts.Load()
		r.Counters["plugin_packets"] += in.packets.Load()
		r.Counters["plugin_kicked"] += in.kicked.Load()
		if in.emit != nil {
			r.Counters["plugin_alloc_failed"] += in.emit.allocFail.Load()
			r.Counters["plugin_bad_spare"] += in.emit.badSpare.Load()
			r.Counters["plugin_bad_free"] += in.emit.badFree.Load()
		}
		r.Counters["plugin_refused"] += in.env.refused.Load()
	}
	return r, nil
}

// lentPool is the pool the plugin's packet metadata names: the buffers are
// linerate's, lent, so it hands out none and takes none back.
type lentPool struct{ id uint16 }

func (p *lentPool) ID() uint16                      { return p.id }
func (p *lentPool) Name() string                    { return "lent" }
func (p *lentPool) Alloc(*packet.Burst, int) int    { return 0 }
func (p *lentPool) Free(b *packet.Burst)            { b.N = 0 }
func (p *lentPool) FreeHandles([]packet.Handle)     {}
func (p *lentPool) AllocOne() (packet.Handle, bool) { return 0, false }
func (p *lentPool) FreeOne(packet.Handle)           {}
func (p *lentPool) Headroom() int                   { return 0 }
func (p *lentPool) DataRoom() int                   { return 0 }
func (p *lentPool) Stats() packet.PoolStats         { return packet.PoolStats{Name: "lent"} }
