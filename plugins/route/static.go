package route

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/linerate/linerate/config"
)

// Routed mode's static tables, [[routes]] and [[neighbors]], are sections of
// the config file this plugin owns (config.RegisterSection), and its rules for
// them: the file is checked against them when it is parsed, and what the
// control API adds is checked against the same ones, over the ports as routed
// mode sees them (the link-local address made from each MAC included).

func init() {
	config.RegisterSection(config.Section{Name: "routes", Check: checkRoutes})
	config.RegisterSection(config.Section{Name: "neighbors", Check: checkNeighbors})
}

// StaticRoute is a [[routes]] entry: packets to Prefix go to the next hop Via,
// out of Port. Without Via the prefix is on-link on Port; without Port, Via
// must be on a port's prefix.
type StaticRoute struct {
	Prefix config.Prefix `toml:"prefix"`
	Via    config.Addr   `toml:"via"`
	Port   string        `toml:"port"`
}

// StaticNeighbor is a [[neighbors]] entry: the Ethernet address of Address on
// Port, never resolved and never evicted.
type StaticNeighbor struct {
	Address config.Addr `toml:"address"`
	MAC     config.MAC  `toml:"mac"`
	Port    string      `toml:"port"`
}

// section is what staticRoutes and staticNeighbors decode: the file's
// section (a config.Table, or a stage's Setup.Section), or nil for none.
type section interface{ Decode(v any) error }

// staticRoutes decodes the [[routes]] of a section table.
func staticRoutes(t section) ([]StaticRoute, error) {
	if t == nil {
		return nil, nil
	}
	var s struct {
		Routes []StaticRoute `toml:"routes"`
	}
	err := t.Decode(&s)
	return s.Routes, err
}

// staticNeighbors decodes the [[neighbors]] of a section table.
func staticNeighbors(t section) ([]StaticNeighbor, error) {
	if t == nil {
		return nil, nil
	}
	var s struct {
		Neighbors []StaticNeighbor `toml:"neighbors"`
	}
	err := t.Decode(&s)
	return s.Neighbors, err
}

// checkRoutes holds the file's [[routes]] to the rules.
func checkRoutes(f *config.File, t config.Table) error {
	routes, err := staticRoutes(t)
	if err != nil {
		return err
	}
	var errs config.Errors
	seen := map[netip.Prefix]string{}
	for i, r := range routes {
		at := "routes[" + strconv.Itoa(i) + "]"
		if r.Prefix.IsValid() {
			if prev, dup := seen[r.Prefix.Prefix]; dup {
				errs = append(errs, t.Error(at+".prefix", fmt.Errorf("%s is already routed by %s", r.Prefix, prev)))
			}
			seen[r.Prefix.Prefix] = at
		}
		if key, err := CheckRoute(f.Ports, r.Prefix.Prefix, r.Via.Addr, r.Port); err != nil {
			errs = append(errs, t.Error(keyPath(at, key), err))
		}
	}
	return errs.Err()
}

func keyPath(at, key string) string {
	if key == "" {
		return at
	}
	return at + "." + key
}

// checkNeighbors holds the file's [[neighbors]] to the rules.
func checkNeighbors(f *config.File, t config.Table) error {
	neighbors, err := staticNeighbors(t)
	if err != nil {
		return err
	}
	var errs config.Errors
	fail := func(path string, format string, args ...any) {
		errs = append(errs, t.Error(path, fmt.Errorf(format, args...)))
	}
	type key struct {
		port string
		addr netip.Addr
	}
	seen := map[key]string{}
	for i, n := range neighbors {
		at := "neighbors[" + strconv.Itoa(i) + "]"
		a := n.Address.Addr
		switch {
		case !a.IsValid():
			fail(at+".address", `missing: the neighbour's IP address, e.g. address = "2001:db8:1::2"`)
		case a.IsUnspecified() || a.IsMulticast() || a.IsLoopback():
			fail(at+".address", "%s: a neighbour's address must be unicast", a)
		}
		switch {
		case n.MAC == config.MAC{}:
			fail(at+".mac", `missing: the neighbour's Ethernet address, e.g. mac = "02:00:00:00:00:02"`)
		case n.MAC[0]&1 != 0:
			fail(at+".mac", "%s is a multicast address; a neighbour's address must be unicast", n.MAC)
		}
		_, portOK := f.Port(n.Port)
		switch {
		case n.Port == "":
			fail(at+".port", "missing: the port the neighbour is on")
		case !portOK:
			fail(at+".port", "no port %q", n.Port)
		}
		k := key{n.Port, a}
		prev, dup := seen[k]
		if dup && a.IsValid() {
			fail(at+".address", "%s on port %q is already set by %s", a, n.Port, prev)
		}
		seen[k] = at
		if portOK && !dup && a.IsValid() && !a.IsUnspecified() && !a.IsMulticast() && !a.IsLoopback() {
			if key, err := CheckNeighbor(f.Ports, a, n.Port); err != nil && key != "port" {
				errs = append(errs, t.Error(keyPath(at, key), err))
			}
		}
	}
	return errs.Err()
}

// ErrNoPort is a route or neighbour naming a port that does not exist.
var ErrNoPort = errors.New("no port")

// CheckRoute checks a static route to prefix through via (invalid: on-link)
// out of port (empty: the port whose prefix holds via). On a fault it returns
// the key at fault ("prefix", "via", "port", or "" for the route as a whole)
// and why.
func CheckRoute(ports []config.Port, prefix netip.Prefix, via netip.Addr, port string) (key string, err error) {
	if !prefix.IsValid() {
		return "prefix", errors.New(`missing: the destination, e.g. prefix = "2001:db8:2::/48"`)
	}
	if prefix.Addr().Is6() && prefix.Bits() >= 10 && linkLocal6.Contains(prefix.Addr()) {
		return "prefix", fmt.Errorf("%s is link-local: link-local destinations are never routed", prefix)
	}
	if p, a, ok := portWith(ports, func(a netip.Prefix) bool { return a.Addr() == prefix.Addr() && prefix.IsSingleIP() }); ok {
		return "prefix", fmt.Errorf("%s is port %q's own address (%s): local routes come from the ports' addresses", prefix, p.Name, a)
	}
	if p, a, ok := portWith(ports, func(a netip.Prefix) bool { return connected(a) && a.Masked() == prefix }); ok {
		return "prefix", fmt.Errorf("%s is connected: port %q has %s on it; connected routes come from the ports' addresses and cannot be added, replaced or deleted",
			prefix, p.Name, a)
	}
	var out *config.Port
	if port != "" {
		if out = findPort(ports, port); out == nil {
			return "port", fmt.Errorf("%w %q", ErrNoPort, port)
		}
	}
	if !via.IsValid() {
		if out == nil {
			return "", errors.New(`needs a next hop: via = "address", or port = "name" for an on-link prefix`)
		}
		return "", nil
	}
	via = via.Unmap()
	switch {
	case via.Is4() != prefix.Addr().Is4():
		return "via", fmt.Errorf("next hop %s is %s but prefix %s is %s: a next hop is of its prefix's family",
			via, family(via), prefix, family(prefix.Addr()))
	case via.IsUnspecified() || via.IsMulticast() || via.IsLoopback():
		return "via", fmt.Errorf("%s: a next hop must be a unicast address", via)
	}
	if p, _, ok := portWith(ports, func(a netip.Prefix) bool { return a.Addr() == via }); ok {
		return "via", fmt.Errorf("next hop %s is port %q's own address: a next hop is another node on the link", via, p.Name)
	}
	switch {
	case via.IsLinkLocalUnicast() && out == nil:
		return "via", fmt.Errorf("next hop %s is link-local: name the port it is on", via)
	case via.IsLinkLocalUnicast() && !hasFamily(out, false):
		return "via", fmt.Errorf("next hop %s is link-local, and port %q has no IPv6 address", via, out.Name)
	case out == nil && !onAnyLink(ports, via):
		return "via", fmt.Errorf("next hop %s is on no port's prefix: name the port, or give a port an address on its link", via)
	}
	return "", nil
}

// CheckNeighbor checks a static neighbour addr on port: it must be on one of
// the port's prefixes (or link-local, on a port with IPv6), and not one of
// linerate's own addresses. On a fault it returns the key at fault ("address"
// or "port") and why.
func CheckNeighbor(ports []config.Port, addr netip.Addr, port string) (key string, err error) {
	p := findPort(ports, port)
	if p == nil {
		return "port", fmt.Errorf("%w %q", ErrNoPort, port)
	}
	addr = addr.Unmap()
	if q, _, ok := portWith(ports, func(a netip.Prefix) bool { return a.Addr() == addr }); ok {
		return "address", fmt.Errorf("%s is port %q's own address, not a neighbour's", addr, q.Name)
	}
	if addr.IsLinkLocalUnicast() && addr.Is6() {
		if hasFamily(p, false) {
			return "", nil
		}
		return "address", fmt.Errorf("%s is link-local, and port %q has no IPv6 address", addr, p.Name)
	}
	var on []string
	for _, a := range p.Addresses {
		if a.Addr().IsLinkLocalUnicast() || a.Addr().Is4() != addr.Is4() {
			continue
		}
		if a.Masked().Contains(addr) {
			return "", nil
		}
		on = append(on, a.Masked().String())
	}
	if len(on) == 0 {
		return "address", fmt.Errorf("%s is on no prefix of port %q, which has no %s address: a neighbour is on the port's link",
			addr, p.Name, family(addr))
	}
	return "address", fmt.Errorf("%s is outside the %s prefixes of port %q (%s): a neighbour is on the port's link",
		addr, family(addr), p.Name, strings.Join(on, ", "))
}

var linkLocal6 = netip.MustParsePrefix("fe80::/10")

// connected reports whether a port address gives a connected route: not a
// link-local one (fe80::/64 is on every link and never routed), nor a host
// route.
func connected(a netip.Prefix) bool {
	return !a.Addr().IsLinkLocalUnicast() && a.Bits() < a.Addr().BitLen()
}

func findPort(ports []config.Port, name string) *config.Port {
	for i := range ports {
		if ports[i].Name == name {
			return &ports[i]
		}
	}
	return nil
}

// portWith finds the first port with an address that match says yes to.
func portWith(ports []config.Port, match func(netip.Prefix) bool) (*config.Port, netip.Prefix, bool) {
	for i := range ports {
		for _, a := range ports[i].Addresses {
			if match(a.Prefix) {
				return &ports[i], a.Prefix, true
			}
		}
	}
	return nil, netip.Prefix{}, false
}

func onAnyLink(ports []config.Port, a netip.Addr) bool {
	_, _, ok := portWith(ports, func(p netip.Prefix) bool { return !p.Addr().IsLinkLocalUnicast() && p.Masked().Contains(a) })
	return ok
}

func hasFamily(p *config.Port, v4 bool) bool {
	for _, a := range p.Addresses {
		if a.Addr().Is4() == v4 {
			return true
		}
	}
	return false
}

func family(a netip.Addr) string {
	if a.Is4() {
		return "IPv4"
	}
	return "IPv6"
}
