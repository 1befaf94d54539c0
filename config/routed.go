package config

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// Routed mode's rules for static routes and neighbours. Validate applies them
// to [[routes]] and [[neighbors]]; the route plugin applies the same ones to
// what the control API adds, over the ports as routed mode sees them (the
// link-local address made from each MAC included).

// ErrNoPort is a route or neighbour naming a port that does not exist.
var ErrNoPort = errors.New("no port")

// CheckRoute checks a static route to prefix through via (invalid: on-link)
// out of port (empty: the port whose prefix holds via). On a fault it returns
// the key at fault ("prefix", "via", "port", or "" for the route as a whole)
// and why.
func CheckRoute(ports []Port, prefix netip.Prefix, via netip.Addr, port string) (key string, err error) {
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
	var out *Port
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
func CheckNeighbor(ports []Port, addr netip.Addr, port string) (key string, err error) {
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

func findPort(ports []Port, name string) *Port {
	for i := range ports {
		if ports[i].Name == name {
			return &ports[i]
		}
	}
	return nil
}

// portWith finds the first port with an address that match says yes to.
func portWith(ports []Port, match func(netip.Prefix) bool) (*Port, netip.Prefix, bool) {
	for i := range ports {
		for _, a := range ports[i].Addresses {
			if match(a.Prefix) {
				return &ports[i], a.Prefix, true
			}
		}
	}
	return nil, netip.Prefix{}, false
}

func onAnyLink(ports []Port, a netip.Addr) bool {
	_, _, ok := portWith(ports, func(p netip.Prefix) bool { return !p.Addr().IsLinkLocalUnicast() && p.Masked().Contains(a) })
	return ok
}

func hasFamily(p *Port, v4 bool) bool {
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
