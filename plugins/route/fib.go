package route

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
)

// Kind says what a route does with a packet.
type Kind uint8

const (
	// Local: the destination is one of linerate's own addresses; the packet
	// goes on to the stages after route (icmp, punt).
	Local Kind = iota + 1
	// Connected: the destination is on the link of Port; it is its own next hop.
	Connected
	// Gateway: the next hop is Via, on the link of Port.
	Gateway
)

func (k Kind) String() string {
	switch k {
	case Local:
		return "local"
	case Connected:
		return "connected"
	case Gateway:
		return "static"
	}
	return "invalid"
}

// Route is one entry of the table, as the control plane sees it.
type Route struct {
	Prefix netip.Prefix
	Kind   Kind
	Port   uint16
	Via    netip.Addr // Gateway only
	Static bool       // from [[routes]] or the API, so it can be deleted
}

// Label is what the control plane calls the route: "local", "connected"
// (from a port's address) or "static" (from [[routes]] or the API, on-link
// ones included: they can be deleted, connected ones cannot).
func (r Route) Label() string {
	if r.Static {
		return "static"
	}
	return r.Kind.String()
}

// NextHop is what a lookup gives: where to send and whom to resolve.
type NextHop struct {
	Kind Kind
	Port uint16
	Via  [16]byte // Gateway: the next hop's address (IPv4 mapped into IPv6)
}

// FIB is an immutable longest-prefix-match table over IPv6 and IPv4, published
// as a snapshot behind an atomic pointer and read once per burst.
//
// Each family keeps one hash table per prefix length present, and the lengths
// in decreasing order: a lookup masks the address to each length in turn and
// stops at the first hit. Tables rarely hold more than a handful of distinct
// lengths (host routes, connected /64s and /24s, a few aggregates and a
// default), so that is a handful of map probes, allocation-free.
type FIB struct {
	v6Lens []uint8
	v6     []map[[2]uint64]int32 // by length: masked address → hops index
	v4Lens []uint8
	v4     []map[uint32]int32
	hops   []NextHop
	routes []Route
}

// BuildFIB makes a FIB from routes. Two routes with the same prefix are an
// error.
func BuildFIB(routes []Route) (*FIB, error) {
	f := &FIB{v6: make([]map[[2]uint64]int32, 129), v4: make([]map[uint32]int32, 33)}
	for _, r := range routes {
		p := r.Prefix.Masked()
		h := NextHop{Kind: r.Kind, Port: r.Port}
		if r.Kind == Gateway {
			h.Via = r.Via.As16()
		}
		idx := int32(len(f.hops))
		f.hops = append(f.hops, h)
		bits := p.Bits()
		if p.Addr().Is4() {
			if f.v4[bits] == nil {
				f.v4[bits] = map[uint32]int32{}
				f.v4Lens = append(f.v4Lens, uint8(bits))
			}
			k := binary.BigEndian.Uint32(p.Addr().AsSlice())
			if _, dup := f.v4[bits][k]; dup {
				return nil, fmt.Errorf("route %s: prefix already in the table", p)
			}
			f.v4[bits][k] = idx
		} else {
			if f.v6[bits] == nil {
				f.v6[bits] = map[[2]uint64]int32{}
				f.v6Lens = append(f.v6Lens, uint8(bits))
			}
			k := key6(p.Addr().As16())
			if _, dup := f.v6[bits][k]; dup {
				return nil, fmt.Errorf("route %s: prefix already in the table", p)
			}
			f.v6[bits][k] = idx
		}
		r.Prefix = p
		f.routes = append(f.routes, r)
	}
	desc := func(a, b uint8) int { return cmp.Compare(b, a) }
	slices.SortFunc(f.v6Lens, desc)
	slices.SortFunc(f.v4Lens, desc)
	slices.SortFunc(f.routes, func(a, b Route) int {
		return cmp.Or(cmp.Compare(b32(a.Prefix.Addr().Is6()), b32(b.Prefix.Addr().Is6())), a.Prefix.Addr().Compare(b.Prefix.Addr()),
			cmp.Compare(a.Prefix.Bits(), b.Prefix.Bits()))
	})
	return f, nil
}

func b32(b bool) int {
	if b {
		return 1
	}
	return 0
}

func key6(a [16]byte) [2]uint64 {
	return [2]uint64{binary.BigEndian.Uint64(a[:8]), binary.BigEndian.Uint64(a[8:])}
}

// mask6 keeps the first bits of k.
func mask6(k [2]uint64, bits uint8) [2]uint64 {
	switch {
	case bits == 0:
		return [2]uint64{}
	case bits < 64:
		return [2]uint64{k[0] &^ (1<<(64-bits) - 1), 0}
	case bits == 64:
		return [2]uint64{k[0], 0}
	case bits < 128:
		return [2]uint64{k[0], k[1] &^ (1<<(128-bits) - 1)}
	}
	return k
}

// Lookup6 finds the longest prefix holding dst.
func (f *FIB) Lookup6(dst [16]byte) (NextHop, bool) {
	k := key6(dst)
	for _, l := range f.v6Lens {
		if i, ok := f.v6[l][mask6(k, l)]; ok {
			return f.hops[i], true
		}
	}
	return NextHop{}, false
}

// Lookup4 finds the longest prefix holding dst.
func (f *FIB) Lookup4(dst [4]byte) (NextHop, bool) {
	k := binary.BigEndian.Uint32(dst[:])
	for _, l := range f.v4Lens {
		m := uint32(0)
		if l > 0 {
			m = ^uint32(0) << (32 - l)
		}
		if i, ok := f.v4[l][k&m]; ok {
			return f.hops[i], true
		}
	}
	return NextHop{}, false
}

// Lookup finds the route for any address.
func (f *FIB) Lookup(a netip.Addr) (NextHop, bool) {
	if a.Is4() || a.Is4In6() {
		return f.Lookup4(a.Unmap().As4())
	}
	return f.Lookup6(a.As16())
}

// Routes lists the table, IPv4 first, by address.
func (f *FIB) Routes() []Route { return slices.Clone(f.routes) }

// Len is the number of routes.
func (f *FIB) Len() int { return len(f.routes) }
