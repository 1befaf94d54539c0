package route

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/linerate/linerate/appliance/control/host"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/plugins/route/api"
)

func init() {
	host.RegisterService("routing", func(s *grpc.Server, h host.Host) {
		api.RegisterRoutingServer(s, &service{host: h})
	})
}

// service is the Routing control service. It finds the engine's Routed through
// any running routed stage.
type service struct {
	api.UnimplementedRoutingServer
	host host.Host
}

type hasRouted interface{ routed() *Routed }

func (s *service) routed() (*Routed, error) {
	for _, ref := range s.host.Instances("") {
		if r, ok := ref.Stage.(hasRouted); ok {
			return r.routed(), nil
		}
	}
	return nil, status.Error(codes.Unavailable, "routed mode is off: the config runs no neighbor, route or icmp stage")
}

func (s *service) Interfaces(context.Context, *api.InterfacesRequest) (*api.InterfacesReply, error) {
	rt, err := s.routed()
	if err != nil {
		return nil, err
	}
	r := &api.InterfacesReply{}
	for _, p := range rt.Ports {
		if p == nil {
			continue
		}
		ri := &api.RoutedInterface{Port: p.Name, Mac: p.MAC.String(), Mtu: int32(p.MTU), Ifid: p.IfID}
		for _, a := range p.Addrs {
			ri.Addresses = append(ri.Addresses, a.String())
		}
		r.Interfaces = append(r.Interfaces, ri)
	}
	return r, nil
}

func (s *service) routeEntry(rt *Routed, r Route) *api.RouteEntry {
	e := &api.RouteEntry{Prefix: r.Prefix.String(), Kind: r.Label(), Static: r.Static}
	if p := rt.Port(r.Port); p != nil {
		e.Port = p.Name
	}
	if r.Kind == Gateway {
		e.Via = r.Via.Unmap().String()
	}
	return e
}

func (s *service) ListRoutes(context.Context, *api.ListRoutesRequest) (*api.ListRoutesReply, error) {
	rt, err := s.routed()
	if err != nil {
		return nil, err
	}
	r := &api.ListRoutesReply{}
	for _, x := range rt.FIB().Routes() {
		r.Routes = append(r.Routes, s.routeEntry(rt, x))
	}
	r.Added, r.Removed = rt.RouteStats()
	return r, nil
}

func parsePrefix(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		if a, aerr := netip.ParseAddr(s); aerr == nil {
			return netip.PrefixFrom(a, a.BitLen()), nil
		}
		return netip.Prefix{}, status.Errorf(codes.InvalidArgument, "prefix %q: want an address and a length such as 2001:db8::/32", s)
	}
	if p != p.Masked() {
		return netip.Prefix{}, status.Errorf(codes.InvalidArgument, "prefix %q has host bits set; did you mean %s?", s, p.Masked())
	}
	return p, nil
}

func parseAddr(what, s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.Addr{}, status.Errorf(codes.InvalidArgument, "%s %q is not an IP address", what, s)
	}
	return a.Unmap(), nil
}

// grpcError gives the table's errors their codes.
func grpcError(err error) error {
	code := codes.Internal
	var bad *BadInput
	switch {
	case errors.Is(err, ErrNoPort), errors.Is(err, ErrNotFound):
		code = codes.NotFound
	case errors.Is(err, ErrExists):
		code = codes.AlreadyExists
	case errors.As(err, &bad), errors.Is(err, ErrNotStatic):
		code = codes.InvalidArgument
	}
	return status.Error(code, err.Error())
}

func (s *service) AddRoute(_ context.Context, req *api.AddRouteRequest) (*api.AddRouteReply, error) {
	rt, err := s.routed()
	if err != nil {
		return nil, err
	}
	p, err := parsePrefix(req.Prefix)
	if err != nil {
		return nil, err
	}
	var via netip.Addr
	if req.Via != "" {
		if via, err = parseAddr("via", req.Via); err != nil {
			return nil, err
		}
	}
	r, replaced, err := rt.AddRoute(p, via, req.Port, req.Replace)
	if err != nil {
		return nil, grpcError(err)
	}
	s.host.Synchronize()
	return &api.AddRouteReply{Route: s.routeEntry(rt, r), Replaced: replaced}, nil
}

func (s *service) DeleteRoute(_ context.Context, req *api.DeleteRouteRequest) (*api.DeleteRouteReply, error) {
	rt, err := s.routed()
	if err != nil {
		return nil, err
	}
	p, err := parsePrefix(req.Prefix)
	if err != nil {
		return nil, err
	}
	if err := rt.DeleteRoute(p); err != nil {
		return nil, grpcError(err)
	}
	s.host.Synchronize()
	return &api.DeleteRouteReply{}, nil
}

func (s *service) neighborEntry(rt *Routed, e Entry, now int64) *api.NeighborEntry {
	a := netip.AddrFrom16(e.Addr).Unmap()
	n := &api.NeighborEntry{Address: a.String(), State: e.State.String(), Router: e.Router, Probes: int32(e.Probes),
		Age: durationpb.New(time.Duration(max(now-e.Updated, 0)))}
	if e.State.HasMAC() || e.State == Probe {
		n.Mac = e.MAC.String()
	}
	if p := rt.Port(e.Port); p != nil {
		n.Port = p.Name
	}
	return n
}

func (s *service) ListNeighbors(_ context.Context, req *api.ListNeighborsRequest) (*api.ListNeighborsReply, error) {
	rt, err := s.routed()
	if err != nil {
		return nil, err
	}
	var only *Port
	if req.Port != "" {
		if only = rt.PortByName(req.Port); only == nil {
			return nil, status.Errorf(codes.NotFound, "no port %q", req.Port)
		}
	}
	t := rt.Neighbors()
	now := rt.Clock.Now()
	es := t.Entries(now)
	slices.SortFunc(es, func(a, b Entry) int {
		if a.Port != b.Port {
			return int(a.Port) - int(b.Port)
		}
		return netip.AddrFrom16(a.Addr).Unmap().Compare(netip.AddrFrom16(b.Addr).Unmap())
	})
	st := t.Stats()
	r := &api.ListNeighborsReply{Capacity: int32(t.Capacity()), Created: st.Created, Removed: st.Removed, Evicted: st.Evicted, Failed: st.Failed}
	for _, e := range es {
		if only == nil || e.Port == only.ID {
			r.Neighbors = append(r.Neighbors, s.neighborEntry(rt, e, now))
		}
	}
	return r, nil
}

func (s *service) neighborKey(rt *Routed, address, port string) (*Port, [16]byte, error) {
	a, err := parseAddr("address", address)
	if err != nil {
		return nil, [16]byte{}, err
	}
	if a.IsMulticast() || a.IsUnspecified() {
		return nil, [16]byte{}, status.Errorf(codes.InvalidArgument, "address %s is not unicast", a)
	}
	p := rt.PortByName(port)
	if p == nil {
		return nil, [16]byte{}, status.Errorf(codes.NotFound, "no port %q", port)
	}
	return p, a.As16(), nil
}

func (s *service) AddNeighbor(_ context.Context, req *api.AddNeighborRequest) (*api.AddNeighborReply, error) {
	rt, err := s.routed()
	if err != nil {
		return nil, err
	}
	p, a, err := s.neighborKey(rt, req.Address, req.Port)
	if err != nil {
		return nil, err
	}
	hw, err := net.ParseMAC(req.Mac)
	if err != nil || len(hw) != 6 || hw[0]&1 != 0 {
		return nil, status.Errorf(codes.InvalidArgument, "mac %q: want a unicast Ethernet address such as 02:00:00:00:00:01", req.Mac)
	}
	if err := rt.CheckNeighbor(netip.AddrFrom16(a).Unmap(), p.Name); err != nil {
		return nil, grpcError(err)
	}
	if !rt.Neighbors().SetStatic(p.ID, a, packet.MAC(hw), rt.Clock.Now()) {
		return nil, status.Errorf(codes.ResourceExhausted, "no room for %s: its bucket holds only static entries", req.Address)
	}
	return &api.AddNeighborReply{}, nil
}

func (s *service) DeleteNeighbor(_ context.Context, req *api.DeleteNeighborRequest) (*api.DeleteNeighborReply, error) {
	rt, err := s.routed()
	if err != nil {
		return nil, err
	}
	p, a, err := s.neighborKey(rt, req.Address, req.Port)
	if err != nil {
		return nil, err
	}
	if !rt.Neighbors().Delete(p.ID, a) {
		return nil, status.Errorf(codes.NotFound, "no neighbour %s on port %q", req.Address, req.Port)
	}
	return &api.DeleteNeighborReply{}, nil
}

func (s *service) Lookup(_ context.Context, req *api.LookupRequest) (*api.LookupReply, error) {
	rt, err := s.routed()
	if err != nil {
		return nil, err
	}
	a, err := parseAddr("address", strings.TrimSpace(req.Address))
	if err != nil {
		return nil, err
	}
	f := rt.FIB()
	nh, ok := f.Lookup(a)
	if !ok {
		return nil, status.Errorf(codes.NotFound, "no route to %s", a)
	}
	r := &api.LookupReply{}
	// The matching route, for its prefix.
	best := -1
	for _, x := range f.Routes() {
		if x.Prefix.Contains(a) && x.Prefix.Bits() > best {
			best = x.Prefix.Bits()
			r.Route = s.routeEntry(rt, x)
		}
	}
	if nh.Kind == Local {
		return r, nil
	}
	next := a.As16()
	if nh.Kind == Gateway {
		next = nh.Via
	}
	r.NextHop = netip.AddrFrom16(next).Unmap().String()
	now := rt.Clock.Now()
	for _, e := range rt.Neighbors().Entries(now) {
		if e.Port == nh.Port && e.Addr == next {
			r.Neighbor = s.neighborEntry(rt, e, now)
		}
	}
	// nh is in f's mapped memory: a reload that drops rt while this call
	// runs must not let f (and its mapping) go before nh's last use.
	runtime.KeepAlive(f)
	return r, nil
}
