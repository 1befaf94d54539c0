package config

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/linerate/linerate/appliance/packet"
)

// Limits Validate enforces.
const (
	minMTU        = 68   // IPv4's minimum
	maxMTU        = 9216 // the usual jumbo-frame ceiling of switches and NICs
	frameOverhead = 22   // Ethernet header, two VLAN tags and FCS around an MTU-sized payload
	maxQueues     = 1024 // RTE_MAX_QUEUES_PER_PORT
	maxDataRoom   = 65535
	minDataRoom   = 64
	maxRingSize   = 1 << 24
	maxTxBuffer   = 1 << 20
	maxNameLen    = 64
)

// Validate checks what config itself can know: the schema version, the engine
// settings, unique names, references between pools, ports and pipelines, and
// value ranges. Driver and stage keys are checked when their owners decode them.
// It expects Defaults to have run. The error is Errors, sorted by line.
func (f *File) Validate() error { return f.validate().Err() }

type validator struct {
	f    *File
	errs Errors
}

func (v *validator) errorf(path, format string, args ...any) {
	line := 0
	if v.f.doc != nil {
		line = v.f.doc.ix.line(path)
	}
	v.errs = append(v.errs, &Error{File: v.f.Path, Line: line, Key: path, Err: fmt.Errorf(format, args...)})
}

func (f *File) validate() Errors {
	v := &validator{f: f}
	switch {
	case f.Version == 0 && (f.doc == nil || !f.doc.ix.has("version")):
		v.errorf("version", "missing: the file must say version = %d", Version)
	case f.Version != Version:
		v.errorf("version", "version %d is not supported; this linerate reads version %d", f.Version, Version)
	}
	v.engine()
	for _, key := range f.renameErrs {
		v.errorf(key, "the old name of cpus, which is set too: keep cpus")
	}
	if err := checkListen(f.Control.Listen, true); err != nil {
		v.errorf("control.listen", "%v", err)
	}
	if err := checkListen(f.Metrics.Listen, false); err != nil {
		v.errorf("metrics.listen", "%v", err)
	}
	if f.Log.Format != "text" && f.Log.Format != "json" {
		v.errorf("log.format", `must be "text" or "json", not %q`, f.Log.Format)
	}
	switch f.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		v.errorf("log.level", `must be "debug", "info", "warn" or "error", not %q`, f.Log.Level)
	}
	v.pools()
	v.ports()
	v.pipelines()
	return v.errs
}

func (v *validator) engine() {
	e := &v.f.Engine
	if e.Poll != "busy" && e.Poll != "adaptive" {
		v.errorf("engine.poll", `must be "busy" or "adaptive", not %q`, e.Poll)
	}
	seen := map[int]bool{}
	for i, cpu := range e.ControlCPUs {
		at := "engine.control_cpus[" + strconv.Itoa(i) + "]"
		switch {
		case cpu < 0:
			v.errorf(at, "CPU %d is negative", cpu)
		case seen[cpu]:
			v.errorf(at, "CPU %d is listed twice", cpu)
		}
		seen[cpu] = true
	}
	if e.GOGC == 0 || e.GOGC < -1 {
		v.errorf("engine.gogc", "%d: want a percentage above 0, or -1 to turn the collector off", e.GOGC)
	}
	if e.MemoryLimit < 0 {
		v.errorf("engine.memory_limit", "%d is negative", e.MemoryLimit)
	}
	if e.TxBuffer < packet.MaxBurst || e.TxBuffer > maxTxBuffer {
		v.errorf("engine.tx_buffer", "%d packets: want %d (a burst) to %d", e.TxBuffer, packet.MaxBurst, maxTxBuffer)
	}
	if e.RingSize < packet.MaxBurst || e.RingSize > maxRingSize || e.RingSize&(e.RingSize-1) != 0 {
		v.errorf("engine.ring_size", "%d: want a power of two from %d to %d", e.RingSize, packet.MaxBurst, maxRingSize)
	}
}

// checkListen accepts "unix:/path" and "host:port"; for the control API, only a
// loopback host, since the API has no authentication of its own.
func checkListen(s string, loopbackOnly bool) error {
	if s == "" {
		return nil
	}
	if path, ok := strings.CutPrefix(s, "unix:"); ok {
		if path == "" {
			return fmt.Errorf(`%q has no socket path, e.g. "unix:/run/linerate/linerate.sock"`, s)
		}
		return nil
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf(`%q is neither "unix:/path" nor "host:port"`, s)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("%q: port %q is not a number from 0 to 65535", s, port)
	}
	if loopbackOnly && host != "localhost" {
		if a, err := netip.ParseAddr(host); err != nil || !a.IsLoopback() {
			return fmt.Errorf("%q: the control API listens only on a unix socket or a loopback address, as it has no authentication", s)
		}
	}
	return nil
}

// checkName accepts names that are safe in rx entries ("port:queue"), metric
// labels and file names.
func checkName(s string, extra string) error {
	if s == "" {
		return fmt.Errorf("missing")
	}
	if len(s) > maxNameLen {
		return fmt.Errorf("%q is longer than %d characters", s, maxNameLen)
	}
	for _, c := range s {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '_' || c == '-' || c == '.' || strings.ContainsRune(extra, c)
		if !ok {
			return fmt.Errorf("%q: use letters, digits, '_', '-' and '.'%s only", s, extraNote(extra))
		}
	}
	return nil
}

func extraNote(extra string) string {
	if extra == "" {
		return ""
	}
	return fmt.Sprintf(" (and %q)", extra)
}

// names checks a name for syntax and uniqueness within its list.
func (v *validator) name(path, name, extra string, seen map[string]string) {
	if err := checkName(name, extra); err != nil {
		v.errorf(path, "%v", err)
		return
	}
	if prev, dup := seen[name]; dup {
		v.errorf(path, "%q is already used by %s", name, prev)
		return
	}
	seen[name] = strings.TrimSuffix(path, ".name")
}

func (v *validator) pools() {
	seen := map[string]string{}
	for i, p := range v.f.Pools {
		at := "pools[" + strconv.Itoa(i) + "]"
		v.name(at+".name", p.Name, "", seen)
		if p.Buffers < 1 {
			v.errorf(at+".buffers", "%d: a pool needs at least one buffer", p.Buffers)
		}
		if p.DataRoom < minDataRoom || p.DataRoom > maxDataRoom {
			v.errorf(at+".data_room", "%d bytes: want %d to %d", p.DataRoom, minDataRoom, maxDataRoom)
		}
		if p.Headroom < packet.MinHeadroom || p.Headroom > maxDataRoom {
			v.errorf(at+".headroom", "%d bytes: want at least %d, the room IOAM needs to grow a packet in place", p.Headroom, packet.MinHeadroom)
		}
	}
}

func (v *validator) ports() {
	seen := map[string]string{}
	ifids := map[uint32]string{}
	addrs := map[netip.Addr]string{}
	nets := map[netip.Prefix]string{}
	for i, p := range v.f.Ports {
		at := "ports[" + strconv.Itoa(i) + "]"
		v.name(at+".name", p.Name, "", seen)
		if p.Driver == "" {
			v.errorf(at+".driver", "missing: name the datapath, e.g. driver = \"afpacket\"")
		}
		if p.RxQueues < 1 || p.RxQueues > maxQueues {
			v.errorf(at+".rx_queues", "%d: want 1 to %d", p.RxQueues, maxQueues)
		}
		if p.TxQueues < 0 || p.TxQueues > maxQueues {
			v.errorf(at+".tx_queues", "%d: want 0 (one per lcore) to %d", p.TxQueues, maxQueues)
		}
		mtuOK := p.MTU >= minMTU && p.MTU <= maxMTU
		if !mtuOK {
			v.errorf(at+".mtu", "%d: want %d to %d", p.MTU, minMTU, maxMTU)
		}
		pool, ok := v.f.Pool(p.Pool)
		switch {
		case !ok:
			v.errorf(at+".pool", "no pool %q (declared: %s)", p.Pool, v.poolNames())
		case mtuOK && pool.DataRoom < p.MTU+frameOverhead:
			v.errorf(at+".mtu", "%d needs data_room ≥ %d (MTU + %d for Ethernet, VLAN tags and FCS); pool %q has %d",
				p.MTU, p.MTU+frameOverhead, frameOverhead, pool.Name, pool.DataRoom)
		}
		v.routedPort(at, p, ifids, addrs, nets)
	}
}

// routedPort checks a port's routed-mode keys: a unicast MAC, unicast
// addresses that no other port has, and an interface id no other port has.
func (v *validator) routedPort(at string, p Port, ifids map[uint32]string, addrs map[netip.Addr]string, nets map[netip.Prefix]string) {
	if p.MAC[0]&1 != 0 {
		v.errorf(at+".mac", "%s is a multicast address; a port's own address must be unicast", p.MAC)
	}
	if p.IfID != 0 {
		if prev, dup := ifids[p.IfID]; dup {
			v.errorf(at+".ifid", "%d is already the ifid of %s", p.IfID, prev)
		}
		ifids[p.IfID] = at
	}
	for j, a := range p.Addresses {
		aat := at + ".addresses[" + strconv.Itoa(j) + "]"
		ip := a.Addr()
		switch {
		case ip.IsUnspecified() || ip.IsMulticast() || ip.IsLoopback():
			v.errorf(aat, "%s: a port's address must be unicast, not unspecified, multicast or loopback", a)
			continue
		case ip.Is4() && a.Bits() < 31 && ip == a.Masked().Addr():
			v.errorf(aat, "%s is the network address of its prefix; give the port one of its hosts", a)
			continue
		}
		if prev, dup := addrs[ip]; dup {
			v.errorf(aat, "%s is already an address of %s", ip, prev)
			continue
		}
		addrs[ip] = at
		// A prefix is one link: on two ports, the connected route would
		// send its hosts out of one of them only.
		if connected(a.Prefix) {
			if prev, dup := nets[a.Masked()]; dup && prev != at {
				v.errorf(aat, "%s: prefix %s is already on %s; a prefix belongs to one port's link", a, a.Masked(), prev)
			}
			nets[a.Masked()] = at
		}
	}
}

func (v *validator) poolNames() string {
	var names []string
	for _, p := range v.f.Pools {
		names = append(names, strconv.Quote(p.Name))
	}
	return strings.Join(names, ", ")
}

// RxRef is one entry of Pipeline.Rx.
type RxRef struct {
	Port  string
	Queue int // -1: every rx queue of the port
}

// ParseRx reads an rx entry: "port" (every queue) or "port:queue".
func ParseRx(s string) (RxRef, error) {
	name, q, hasQueue := strings.Cut(s, ":")
	if name == "" {
		return RxRef{}, fmt.Errorf("%q has no port name; write \"port\" or \"port:queue\"", s)
	}
	if !hasQueue {
		return RxRef{Port: name, Queue: -1}, nil
	}
	n, err := strconv.Atoi(q)
	if err != nil || n < 0 {
		return RxRef{}, fmt.Errorf("%q: queue %q is not a number ≥ 0", s, q)
	}
	return RxRef{Port: name, Queue: n}, nil
}

func (r RxRef) String() string {
	if r.Queue < 0 {
		return r.Port
	}
	return r.Port + ":" + strconv.Itoa(r.Queue)
}

func (v *validator) pipelines() {
	if len(v.f.Pipelines) == 0 {
		v.errorf("pipelines", "none declared: add a [[pipelines]] table with its [[pipelines.stages]]")
		return
	}
	seen := map[string]string{}
	polled := map[RxRef]string{} // rx queue → the rx entry that polls it
	for i, pl := range v.f.Pipelines {
		at := "pipelines[" + strconv.Itoa(i) + "]"
		v.name(at+".name", pl.Name, "", seen)
		key := ".cpus["
		if pl.cpusKey != "" {
			key = "." + pl.cpusKey + "["
		}
		cpus := map[int]bool{}
		for j, c := range pl.CPUs {
			cat := at + key + strconv.Itoa(j) + "]"
			switch {
			case c < 0:
				v.errorf(cat, "CPU %d is negative", c)
			case cpus[c]:
				v.errorf(cat, "CPU %d is listed twice; each entry runs one instance of the chain", c)
			}
			cpus[c] = true
		}
		for j, s := range pl.Rx {
			v.rx(at+".rx["+strconv.Itoa(j)+"]", s, polled)
		}
		if len(pl.Stages) == 0 {
			v.errorf(at, "has no stages: add [[pipelines.stages]] tables, each with a kind")
		}
		stageNames := map[string]string{}
		for j, st := range pl.Stages {
			sat := at + ".stages[" + strconv.Itoa(j) + "]"
			if st.Kind == "" {
				v.errorf(sat+".kind", `missing: every stage needs a kind, e.g. kind = "forward"`)
				continue
			}
			v.name(sat+".name", st.Name, "#", stageNames)
		}
	}
}

// rx checks one rx entry; every rx queue is polled by one entry only.
func (v *validator) rx(at, s string, polled map[RxRef]string) {
	ref, err := ParseRx(s)
	if err != nil {
		v.errorf(at, "%v", err)
		return
	}
	port, ok := v.f.Port(ref.Port)
	if !ok {
		v.errorf(at, "no port %q", ref.Port)
		return
	}
	first, last := ref.Queue, ref.Queue
	if ref.Queue < 0 {
		first, last = 0, port.RxQueues-1
	} else if ref.Queue >= port.RxQueues {
		v.errorf(at, "port %q has %d rx queue(s), numbered from 0; there is no queue %d", ref.Port, port.RxQueues, ref.Queue)
		return
	}
	for q := first; q <= last; q++ {
		key := RxRef{Port: ref.Port, Queue: q}
		if prev, dup := polled[key]; dup {
			v.errorf(at, "rx queue %s is already polled by %s; a queue belongs to one pipeline", key, prev)
			return
		}
		polled[key] = at
	}
}

// connected reports whether a port address gives a connected route: not a
// link-local one (fe80::/64 is on every link and never routed), nor a host
// route.
func connected(a netip.Prefix) bool {
	return !a.Addr().IsLinkLocalUnicast() && a.Bits() < a.Addr().BitLen()
}
