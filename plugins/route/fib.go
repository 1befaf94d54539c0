package route

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"net/netip"
	"runtime"
	"slices"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/linerate/linerate/appliance/lpm"
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

// FIB is the longest-prefix-match table over IPv6 and IPv4: a DIR-24-8 table
// for IPv4 and a multibit trie for IPv6 (package appliance/lpm), changed in
// place. Lookups take no lock and never block, from any lcore, while Add,
// Replace and Delete run one at a time; each touches only the entries its
// prefix covers, never the whole table.
//
// The tables hold next-hop ids. A next hop (with whether its routes are
// static) gets its id the first time a route uses it and keeps it for the
// FIB's life, so a reader holding an id always reads the next hop it named.
// The id table is one mapping made with the FIB, room for every id a table
// can hold (lpm.MaxNextHop), costing memory only where written: it never
// moves, so a lookup indexes it with no length to load or check, and a
// Reader's copy of its base is never stale. A table has few distinct next
// hops (its neighbours), so the ids stay few however many routes share them.
//
// Why a reader sees a whole next hop: the writer writes an id's slot before
// any entry naming the id is stored (lpm's atomic store), and never writes
// it again; a reader reads the slot only after loading (atomically) an entry
// that named the id, so the slot's write happens before the read (the Go
// memory model's synchronisation by atomics).
type FIB struct {
	v4    *lpm.Table4
	v6    *lpm.Table6
	hops  *hopTable // by id, at id+1; slots [1, nhops] written
	nhops uint32    // under mu

	mu    sync.Mutex // one writer
	hopID map[hop]uint32
}

// hop is a next hop as the id table keeps it, 32 bytes, so that a lookup
// finds it with a shift, not a multiply by its 22 bytes.
type hop struct {
	NextHop
	static bool
	_      [11]byte
}

// hopTable has a slot for every id, at id+1 (lpm.Reader4.Slot), and slot 0
// for none, never written: indexed by a Slot (at most lpm.MaxNextHop+1) it
// needs no bounds check.
type hopTable [lpm.MaxNextHop + 2]hop

// newHopTable maps the id table: 128 MiB of address space, MAP_NORESERVE,
// costing a 4 KiB page per 128 ids written. hop holds no pointers, so the
// garbage collector need not see it.
func newHopTable() (*hopTable, []byte, error) {
	size := int(unsafe.Sizeof(hopTable{}))
	m, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return nil, nil, fmt.Errorf("map the next-hop table (%d MiB): %w", size>>20, err)
	}
	return (*hopTable)(unsafe.Pointer(&m[0])), m, nil
}

// The group pools' sizes: a DIR-24-8 group for each /24 holding a longer
// prefix (64 MiB of address space, 1 KiB of memory per group used), and for
// IPv6 one per 8 bits past /24 per subtree (1 GiB of address space). Both are
// mappings written only where used.
const (
	groups4 = 1 << 16
	groups6 = 1 << 20
)

// NewFIB makes an empty FIB.
func NewFIB() (*FIB, error) {
	v4, err := lpm.New4(groups4)
	if err != nil {
		return nil, err
	}
	v6, err := lpm.New6(groups6)
	if err != nil {
		return nil, err
	}
	hops, m, err := newHopTable()
	if err != nil {
		return nil, err
	}
	f := &FIB{v4: v4, v6: v6, hops: hops, hopID: map[hop]uint32{}}
	runtime.AddCleanup(f, func(m []byte) { _ = unix.Munmap(m) }, m)
	return f, nil
}

// BuildFIB makes a FIB from routes. Two routes with the same prefix are an
// error.
func BuildFIB(routes []Route) (*FIB, error) {
	f, err := NewFIB()
	if err != nil {
		return nil, err
	}
	for _, r := range routes {
		if err := f.Add(r); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// id is h's next-hop id, made on first use.
func (f *FIB) id(h hop) (uint32, error) {
	if id, ok := f.hopID[h]; ok {
		return id, nil
	}
	id := f.nhops
	if id > lpm.MaxNextHop {
		return 0, fmt.Errorf("%d distinct next hops: the table holds no more", id)
	}
	// Written before any entry names id (see FIB), and never again.
	f.hops[id+1] = h
	f.nhops++
	f.hopID[h] = id
	return id, nil
}

func (f *FIB) hop(id uint32) hop { return f.hops[id+1] }

func hopOf(r Route) hop {
	h := hop{NextHop: NextHop{Kind: r.Kind, Port: r.Port}, static: r.Static}
	if r.Kind == Gateway {
		h.Via = r.Via.As16()
	}
	return h
}

// Add adds r; a route for the same prefix is an error.
func (f *FIB) Add(r Route) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := r.Prefix.Masked()
	if _, ok := f.get(p); ok {
		return fmt.Errorf("route %s: prefix already in the table", p)
	}
	_, err := f.set(p, r)
	return err
}

// Replace adds r or replaces the route for its prefix, and says which.
func (f *FIB) Replace(r Route) (replaced bool, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.set(r.Prefix.Masked(), r)
}

func (f *FIB) set(p netip.Prefix, r Route) (bool, error) {
	if !p.IsValid() {
		return false, fmt.Errorf("route %s: not a prefix", r.Prefix)
	}
	id, err := f.id(hopOf(r))
	if err != nil {
		return false, fmt.Errorf("route %s: %w", p, err)
	}
	var replaced bool
	if p.Addr().Is4() {
		replaced, err = f.v4.Insert(binary.BigEndian.Uint32(p.Addr().AsSlice()), p.Bits(), id)
	} else {
		replaced, err = f.v6.Insert(p.Addr().As16(), p.Bits(), id)
	}
	if err != nil {
		return false, fmt.Errorf("route %s: %w", p, err)
	}
	return replaced, nil
}

// Delete removes the route for p and returns it.
func (f *FIB) Delete(p netip.Prefix) (Route, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p = p.Masked()
	r, ok := f.get(p)
	if !ok {
		return Route{}, fmt.Errorf("route %s: not in the table", p)
	}
	var err error
	if p.Addr().Is4() {
		err = f.v4.Delete(binary.BigEndian.Uint32(p.Addr().AsSlice()), p.Bits())
	} else {
		err = f.v6.Delete(p.Addr().As16(), p.Bits())
	}
	return r, err
}

// Get is the route for exactly p.
func (f *FIB) Get(p netip.Prefix) (Route, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.get(p.Masked())
}

func (f *FIB) get(p netip.Prefix) (Route, bool) {
	if !p.IsValid() {
		return Route{}, false
	}
	var id uint32
	var ok bool
	if p.Addr().Is4() {
		id, ok = f.v4.Get(binary.BigEndian.Uint32(p.Addr().AsSlice()), p.Bits())
	} else {
		id, ok = f.v6.Get(p.Addr().As16(), p.Bits())
	}
	if !ok {
		return Route{}, false
	}
	return f.route(p, f.hop(id)), true
}

func (f *FIB) route(p netip.Prefix, h hop) Route {
	r := Route{Prefix: p, Kind: h.Kind, Port: h.Port, Static: h.static}
	if h.Kind == Gateway {
		r.Via = netip.AddrFrom16(h.Via).Unmap()
	}
	return r
}

// Lookup6 finds the longest prefix holding dst. The next hop is the FIB's
// own, shared and never changed: read it, do not write it. (A pointer, as a
// 20-byte struct returned by value cost more than the lookup: the copies
// through the stack stalled store forwarding.) It points into the FIB's
// mapped id table, which the garbage collector does not see: it is valid
// while f is reachable, so a caller that may hold the only reference to f
// keeps f alive (runtime.KeepAlive) until it is done with the next hop. The
// stages need not: their Routed holds the FIB for as long as they run.
func (f *FIB) Lookup6(dst [16]byte) (*NextHop, bool) {
	id := f.v6.NextHop(&dst)
	if id == lpm.NoNextHop {
		return nil, false
	}
	return &f.hops[id+1].NextHop, true
}

// Lookup4 finds the longest prefix holding dst, as Lookup6. It is small
// enough for the compiler to inline (TestLookupInlined): a call, with the
// caller's registers saved around it, cost more than the lookup. For a run
// of lookups, Reader.Lookup4 is cheaper.
func (f *FIB) Lookup4(dst [4]byte) (*NextHop, bool) {
	s := f.v4.Reader().Slot(binary.BigEndian.Uint32(dst[:]))
	if s == 0 {
		return nil, false
	}
	return &f.hops[s].NextHop, true
}

// Reader is a FIB's lookup state loaded once for a run of lookups (a burst),
// used while the FIB is reachable (see Lookup6):
// the IPv4 table's bases (lpm.Reader4) and the next-hop table's. Three
// words, so that a local one stays in registers across the run, where a
// lookup through the *FIB loads them again each time (an atomic load orders
// every memory access around it for the compiler). Nothing it holds ever
// moves, so it sees every change to the FIB as FIB.Lookup4 does and stays
// valid for the FIB's life.
type Reader struct {
	v4   lpm.Reader4
	hops *hopTable
}

// Reader is f's Reader.
func (f *FIB) Reader() Reader { return Reader{v4: f.v4.Reader(), hops: f.hops} }

// Lookup4 is FIB.Lookup4, and as small (TestLookupInlined).
func (r Reader) Lookup4(dst [4]byte) (*NextHop, bool) {
	s := r.v4.Slot(binary.BigEndian.Uint32(dst[:]))
	if s == 0 {
		return nil, false
	}
	return &r.hops[s].NextHop, true
}

// Lookup4Burst looks up every destination of dst (IPv4 addresses as
// big-endian integers) into nh, as long, nil for no route. It reads every
// destination's tbl24 entry before any group or next hop, so that a burst's
// cache misses overlap instead of queueing behind each lookup's branches.
func (f *FIB) Lookup4Burst(dst []uint32, nh []*NextHop) {
	var ids [burstChunk]uint32
	for len(dst) > 0 {
		n := min(len(dst), burstChunk)
		f.v4.LookupBurst(dst[:n], ids[:n])
		f.hopsOf(ids[:n], nh[:n])
		dst, nh = dst[n:], nh[n:]
	}
}

// Lookup6Burst is Lookup4Burst for IPv6.
func (f *FIB) Lookup6Burst(dst [][16]byte, nh []*NextHop) {
	var ids [burstChunk]uint32
	for len(dst) > 0 {
		n := min(len(dst), burstChunk)
		f.v6.LookupBurst(dst[:n], ids[:n])
		f.hopsOf(ids[:n], nh[:n])
		dst, nh = dst[n:], nh[n:]
	}
}

const burstChunk = 64

// hopsOf turns ids into next hops.
func (f *FIB) hopsOf(ids []uint32, nh []*NextHop) {
	hops := f.hops[:] // a slice: its nil check once, not one a lookup
	nh = nh[:len(ids)]
	for i, id := range ids {
		var h *NextHop            // one store (and write-barrier check) per slot
		if id <= lpm.MaxNextHop { // NoNextHop is not
			h = &hops[id+1].NextHop
		}
		nh[i] = h
	}
}

// Lookup finds the route for any address, as Lookup6.
func (f *FIB) Lookup(a netip.Addr) (*NextHop, bool) {
	if a.Is4() || a.Is4In6() {
		return f.Lookup4(a.Unmap().As4())
	}
	return f.Lookup6(a.As16())
}

// Routes lists the table, IPv4 first, by address, then by length.
func (f *FIB) Routes() []Route {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Route, 0, f.v4.Len()+f.v6.Len())
	f.v4.Walk(func(a uint32, bits int, id uint32) bool {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], a)
		out = append(out, f.route(netip.PrefixFrom(netip.AddrFrom4(b), bits), f.hop(id)))
		return true
	})
	f.v6.Walk(func(a [16]byte, bits int, id uint32) bool {
		out = append(out, f.route(netip.PrefixFrom(netip.AddrFrom16(a), bits), f.hop(id)))
		return true
	})
	slices.SortFunc(out, func(a, b Route) int {
		return cmp.Or(cmp.Compare(b32(a.Prefix.Addr().Is6()), b32(b.Prefix.Addr().Is6())), a.Prefix.Addr().Compare(b.Prefix.Addr()),
			cmp.Compare(a.Prefix.Bits(), b.Prefix.Bits()))
	})
	return out
}

// Len is the number of routes.
func (f *FIB) Len() int { return f.v4.Len() + f.v6.Len() }

// MemStats say what the FIB's tables hold and cost.
func (f *FIB) MemStats() (v4, v6 lpm.Stats) { return f.v4.Stats(), f.v6.Stats() }

func b32(b bool) int {
	if b {
		return 1
	}
	return 0
}
