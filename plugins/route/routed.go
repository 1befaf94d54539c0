package route

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/linerate/linerate/appliance/clock"
	"github.com/linerate/linerate/appliance/packet"
	"github.com/linerate/linerate/config"
	"github.com/linerate/linerate/plugins"
)

// Port is a port as routed mode sees it.
type Port struct {
	ID        uint16
	Name      string
	MAC       packet.MAC // linerate's own address on the link
	DriverMAC packet.MAC // the driver's: for a TAP, the host kernel's side
	MTU       int        // 0: unknown, not checked
	IfID      uint32
	Pool      packet.Pool
	Internal  bool
	// Addrs are the configured addresses and, for a port with IPv6 addresses,
	// a link-local one made from the MAC (RFC 4291 §2.5.1).
	Addrs []netip.Prefix
	v6    [][16]byte
	v4    [][4]byte
	ll    [16]byte
	hasLL bool
}

// Owns6 reports whether a is one of the port's IPv6 addresses.
func (p *Port) Owns6(a [16]byte) bool {
	for i := range p.v6 {
		if p.v6[i] == a {
			return true
		}
	}
	return false
}

// Owns4 reports whether a is one of the port's IPv4 addresses.
func (p *Port) Owns4(a [4]byte) bool {
	for i := range p.v4 {
		if p.v4[i] == a {
			return true
		}
	}
	return false
}

// Source6 is the address the port speaks from towards dst: its address on
// dst's prefix, else its link-local address for a link-local dst, else its
// first global address, else its link-local address.
func (p *Port) Source6(dst [16]byte) ([16]byte, bool) {
	d := netip.AddrFrom16(dst)
	if d.IsLinkLocalUnicast() || d.IsLinkLocalMulticast() {
		if p.hasLL {
			return p.ll, true
		}
	}
	var global [16]byte
	found := false
	for _, a := range p.Addrs {
		if !a.Addr().Is6() {
			continue
		}
		if a.Contains(d) {
			return a.Addr().As16(), true
		}
		if !found && !a.Addr().IsLinkLocalUnicast() {
			global, found = a.Addr().As16(), true
		}
	}
	if found {
		return global, true
	}
	return p.ll, p.hasLL
}

// Source4 is the port's IPv4 address on dst's prefix, else its first.
func (p *Port) Source4(dst [4]byte) ([4]byte, bool) {
	d := netip.AddrFrom4(dst)
	for _, a := range p.Addrs {
		if a.Addr().Is4() && a.Contains(d) {
			return a.Addr().As4(), true
		}
	}
	if len(p.v4) > 0 {
		return p.v4[0], true
	}
	return [4]byte{}, false
}

// linkLocal is the modified EUI-64 link-local address of m (RFC 4291 App. A).
func linkLocal(m packet.MAC) netip.Addr {
	return netip.AddrFrom16([16]byte{0xfe, 0x80, 8: m[0] ^ 2, 9: m[1], 10: m[2], 11: 0xff, 12: 0xfe, 13: m[3], 14: m[4], 15: m[5]})
}

// Routed is routed mode's state in one engine: its ports' addresses, the route
// table and the neighbour cache. Every routed stage of every pipeline shares it
// (plugins.Setup.Global), and the control service reaches it through them.
type Routed struct {
	Ports []*Port // by port id
	Clock clock.Clock

	fib atomic.Pointer[FIB]

	mu     sync.Mutex    // control-plane changes of the static routes
	conn   []Route       // local and connected routes, from the ports
	static []Route       // the file's static routes, until the FIB is built
	links  []config.Port // the ports' names and addresses, for config's route rules

	params               Params
	paramsFrom           string
	tableOnce            sync.Once
	table                *Table
	staticNeighbors      []StaticNeighbor
	routesAdd, routesDel atomic.Uint64
	ICMPErrors           *Limiter // every ICMP error any stage sends
	Learn                *Limiter // neighbour entries made from unsolicited packets
	errorRateFrom        string
	errorRate            uint64
	errorBurst           int
	reporters            map[string]bool
	err                  error
}

// Shared returns the engine's Routed, making it on first use from the setup's
// ports and static tables.
func Shared(s *plugins.Setup) (*Routed, error) {
	rt := s.Global("route", func() any { return newRouted(s) }).(*Routed)
	return rt, rt.err
}

// Errors of the route table's control.
var (
	ErrExists    = errors.New("prefix already routed")
	ErrNotFound  = errors.New("no such route")
	ErrNotStatic = errors.New("route is not static")
)

// BadInput is a route or neighbour that breaks routed mode's rules
// (config.CheckRoute, config.CheckNeighbor): the caller's fault.
type BadInput struct{ Err error }

func (e *BadInput) Error() string { return e.Err.Error() }
func (e *BadInput) Unwrap() error { return e.Err }

func newRouted(s *plugins.Setup) *Routed {
	rt := &Routed{Clock: s.Clock, params: DefaultParams, ICMPErrors: NewLimiter(1000, 50), Learn: NewLimiter(1000, 100),
		reporters: map[string]bool{}}
	all := s.Ports.All()
	maxID := -1
	for _, pi := range all {
		maxID = max(maxID, int(pi.ID))
	}
	rt.Ports = make([]*Port, maxID+1)
	for _, pi := range all {
		p := &Port{ID: pi.ID, Name: pi.Name, MAC: pi.MAC, DriverMAC: pi.DriverMAC, MTU: pi.MTU, IfID: pi.IfID, Pool: pi.Pool,
			Internal: pi.Internal, Addrs: slices.Clone(pi.Addrs)}
		has6 := false
		for _, a := range p.Addrs {
			if a.Addr().Is6() {
				has6 = true
				if a.Addr().IsLinkLocalUnicast() && !p.hasLL {
					p.ll, p.hasLL = a.Addr().As16(), true
				}
			}
		}
		if has6 && !p.hasLL && p.MAC != (packet.MAC{}) {
			ll := linkLocal(p.MAC)
			p.Addrs = append(p.Addrs, netip.PrefixFrom(ll, 64))
			p.ll, p.hasLL = ll.As16(), true
		}
		for _, a := range p.Addrs {
			if a.Addr().Is6() {
				p.v6 = append(p.v6, a.Addr().As16())
			} else {
				p.v4 = append(p.v4, a.Addr().As4())
			}
		}
		rt.Ports[pi.ID] = p
		link := config.Port{Name: p.Name}
		for _, a := range p.Addrs {
			link.Addresses = append(link.Addresses, config.IfAddr{Prefix: a})
		}
		rt.links = append(rt.links, link)
	}
	seen := map[netip.Prefix]bool{}
	for _, p := range rt.Ports {
		if p == nil {
			continue
		}
		for _, a := range p.Addrs {
			host := netip.PrefixFrom(a.Addr(), a.Addr().BitLen())
			if !seen[host] {
				seen[host] = true
				rt.conn = append(rt.conn, Route{Prefix: host, Kind: Local, Port: p.ID})
			}
			// Every port has fe80::/64: link-local destinations are never
			// routed, so that prefix is left out.
			if a.Addr().IsLinkLocalUnicast() || a.Bits() == a.Addr().BitLen() {
				continue
			}
			if net := a.Masked(); !seen[net] {
				seen[net] = true
				rt.conn = append(rt.conn, Route{Prefix: net, Kind: Connected, Port: p.ID})
			}
		}
	}
	// The file's static tables; config.Parse held them to the rules already.
	routes, err := staticRoutes(s.Section("routes"))
	if err != nil {
		rt.err = err
		return rt
	}
	for i, r := range routes {
		sr, err := rt.staticRoute(r.Prefix.Prefix, r.Via.Addr, r.Port)
		if err != nil {
			rt.err = fmt.Errorf("routes[%d]: route %s: %w", i, r.Prefix, err)
			return rt
		}
		rt.static = append(rt.static, sr)
	}
	if err := rt.publish(); err != nil {
		rt.err = err
		return rt
	}
	neighbors, err := staticNeighbors(s.Section("neighbors"))
	if err != nil {
		rt.err = err
		return rt
	}
	for i, n := range neighbors {
		if err := rt.CheckNeighbor(n.Address.Addr, n.Port); err != nil {
			rt.err = fmt.Errorf("neighbors[%d]: neighbour %s: %w", i, n.Address, err)
			return rt
		}
	}
	rt.staticNeighbors = neighbors
	return rt
}

// PortByName finds a port.
func (rt *Routed) PortByName(name string) *Port {
	for _, p := range rt.Ports {
		if p != nil && p.Name == name {
			return p
		}
	}
	return nil
}

// Port is the port with id, or nil.
func (rt *Routed) Port(id uint16) *Port {
	if int(id) < len(rt.Ports) {
		return rt.Ports[id]
	}
	return nil
}

// staticRoute checks a static route and finds its port.
func (rt *Routed) staticRoute(prefix netip.Prefix, via netip.Addr, port string) (Route, error) {
	if _, err := CheckRoute(rt.links, prefix, via, port); err != nil {
		if errors.Is(err, ErrNoPort) {
			return Route{}, err
		}
		return Route{}, &BadInput{err}
	}
	r := Route{Prefix: prefix.Masked(), Kind: Connected, Static: true}
	var p *Port
	if port != "" {
		p = rt.PortByName(port)
	}
	if via.IsValid() {
		r.Kind, r.Via = Gateway, via.Unmap()
		if p == nil {
			p = rt.linkOf(r.Via)
		}
	}
	if p == nil { // CheckRoute made sure there is one
		return Route{}, &BadInput{fmt.Errorf("no port for %s", prefix)}
	}
	r.Port = p.ID
	return r, nil
}

// linkOf is the port with the longest prefix holding a.
func (rt *Routed) linkOf(a netip.Addr) *Port {
	var p *Port
	best := -1
	for _, q := range rt.Ports {
		if q == nil {
			continue
		}
		for _, pa := range q.Addrs {
			if !pa.Addr().IsLinkLocalUnicast() && pa.Masked().Contains(a) && pa.Bits() > best {
				p, best = q, pa.Bits()
			}
		}
	}
	return p
}

// CheckNeighbor checks a static neighbour: on a port's link, not one of
// linerate's own addresses.
func (rt *Routed) CheckNeighbor(addr netip.Addr, port string) error {
	if _, err := CheckNeighbor(rt.links, addr, port); err != nil {
		if errors.Is(err, ErrNoPort) {
			return err
		}
		return &BadInput{err}
	}
	return nil
}

// publish builds the FIB from the connected and static routes and publishes
// it, once: every later change is made in place (AddRoute, DeleteRoute).
func (rt *Routed) publish() error {
	f, err := BuildFIB(append(slices.Clone(rt.conn), rt.static...))
	if err != nil {
		return err
	}
	rt.static = nil // the FIB holds them from now on
	rt.fib.Store(f)
	return nil
}

// FIB is the route table. It changes in place; lookups never block.
func (rt *Routed) FIB() *FIB { return rt.fib.Load() }

// AddRoute adds a static route (replacing a static one for the same prefix
// when replace, and saying so). Lcores see it at once: only the table's
// entries under the prefix change, and no packet is dropped for it.
func (rt *Routed) AddRoute(prefix netip.Prefix, via netip.Addr, port string, replace bool) (r Route, replaced bool, err error) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if r, err = rt.staticRoute(prefix, via, port); err != nil {
		return Route{}, false, err
	}
	f := rt.fib.Load()
	old, ok := f.Get(r.Prefix)
	switch {
	case ok && !old.Static:
		return Route{}, false, fmt.Errorf("route %s: prefix already in the table", r.Prefix)
	case ok && !replace:
		return Route{}, false, fmt.Errorf("%s: %w; replace it to change it", r.Prefix, ErrExists)
	}
	if _, err := f.Replace(r); err != nil {
		return Route{}, false, err
	}
	rt.routesAdd.Add(1)
	if ok {
		rt.routesDel.Add(1)
	}
	return r, ok, nil
}

// DeleteRoute removes a static route from the table.
func (rt *Routed) DeleteRoute(prefix netip.Prefix) error {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	prefix = prefix.Masked()
	f := rt.fib.Load()
	switch r, ok := f.Get(prefix); {
	case !ok:
		return fmt.Errorf("%s: %w", prefix, ErrNotFound)
	case !r.Static:
		return fmt.Errorf("%s: %w: it comes from a port's address", prefix, ErrNotStatic)
	}
	if _, err := f.Delete(prefix); err != nil {
		return err
	}
	rt.routesDel.Add(1)
	return nil
}

// RouteStats are the lifetime counts of static route changes.
func (rt *Routed) RouteStats() (added, removed uint64) {
	return rt.routesAdd.Load(), rt.routesDel.Load()
}

// configure sets the neighbour cache's parameters from a neighbor stage; two
// stages must agree.
func (rt *Routed) configure(p Params, where string) error {
	if rt.paramsFrom != "" && rt.params != p {
		return fmt.Errorf("neighbour cache settings differ from those of %s; set them the same in every neighbor stage", rt.paramsFrom)
	}
	rt.params, rt.paramsFrom = p, where
	return nil
}

// Neighbors is the neighbour cache. It is made on first use, after every stage
// was set up, with the static neighbours in it.
func (rt *Routed) Neighbors() *Table {
	rt.tableOnce.Do(func() {
		t := NewTable(rt.params)
		now := rt.Clock.Now()
		for _, n := range rt.staticNeighbors {
			t.SetStatic(rt.PortByName(n.Port).ID, n.Address.Addr.As16(), packet.MAC(n.MAC), now)
		}
		rt.table = t
	})
	return rt.table
}

// reporter elects one instance of a kind to publish the shared tables'
// counters, so that they are not summed once per lcore.
func (rt *Routed) reporter(kind string) bool {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.reporters[kind] {
		return false
	}
	rt.reporters[kind] = true
	return true
}

// Addr16 maps any address into 16 bytes, as the neighbour cache keys them.
func Addr16(a netip.Addr) [16]byte { return a.As16() }

// mapped4 is the IPv4-mapped form of a.
func mapped4(a [4]byte) [16]byte {
	return [16]byte{10: 0xff, 11: 0xff, 12: a[0], 13: a[1], 14: a[2], 15: a[3]}
}
