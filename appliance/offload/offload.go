// Package offload is the contract between a stage that can run in the kernel
// and a port that can run it there: a stage whose table says offload = "xdp"
// (or "auto") gives an eBPF program and its map contents; the engine hands it
// to the stage's pipeline's rx ports; a port that hosts offloads (driver
// xdp) attaches it in its dispatcher, ahead of the redirect to its AF_XDP
// sockets, and what the program does not finish comes up to the Go stage as
// before.
//
// # Composition: one combined program
//
// The dispatcher (ports/xdp/bpf/dispatcher.c) has eight global functions,
// lr_slot0 … lr_slot7, that return LR_OFFLOAD_NEXT, and calls those in use
// in the chain's order. Link builds one program from the dispatcher and the
// stages' slot functions: each stage's function, with the functions it
// calls, replaces one slot's, and its maps are renamed apart ("s0.counters").
// The kernel's verifier then sees one XDP program, checks each global slot
// function on its own, and the port attaches that.
//
// Why not the alternatives:
//
//   - freplace (extension programs aimed at the slots) would let each stage's
//     program be loaded and replaced alone, but needs BPF trampolines: on
//     kernels built without them (this project's CI kernel among them) every
//     BPF_PROG_TYPE_EXT, fentry and LSM load fails with EPERM;
//   - tail calls cannot hold a device-bound program, and the dispatcher must
//     be device-bound to read the NIC's rx timestamp (the rx metadata
//     kfuncs).
//
// A stage's program keeps its own ELF, compiled alone with bpf2go; its maps
// are made once, by the Request, and shared by every port's dispatcher, so
// its sessions and counters are one set whatever the number of rx ports.
//
// The slot's C contract is include/lr_offload.h: the return codes, the rx
// stamp the dispatcher passes in front of the packet (struct lr_xdp_meta),
// and LR_OFFLOAD(fn), which builds the slot function and a plain XDP program
// from one body, for prog.Run on golden inputs.
package offload

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"

	"github.com/linerate/linerate/appliance/kernel"
)

// Return codes of a slot (lr_offload.h), beside the XDP actions.
const (
	// Next: not this program's packet, or done with it: on to the next slot,
	// then the port's match rules.
	Next = 16
	// User: up to the Go stages through the AF_XDP socket, whatever the match
	// rules say.
	User = 17
)

// Mode is a stage's offload key.
type Mode uint8

const (
	// Off: the stage runs in Go only (offload = "off", the default).
	Off Mode = iota
	// XDP: the stage runs in the kernel; the engine refuses to start when it
	// cannot (offload = "xdp").
	XDP
	// Auto: in the kernel where the stage's rx ports can host it, in Go
	// elsewhere (offload = "auto").
	Auto
)

func (m Mode) String() string {
	switch m {
	case XDP:
		return "xdp"
	case Auto:
		return "auto"
	}
	return "off"
}

// ParseMode reads the offload key: "", "off", "xdp" or "auto".
func ParseMode(s string) (Mode, error) {
	switch s {
	case "", "off":
		return Off, nil
	case "xdp":
		return XDP, nil
	case "auto":
		return Auto, nil
	}
	return Off, fmt.Errorf("offload %q is not off, xdp or auto", s)
}

// Program is a stage's in-kernel part.
type Program struct {
	// Spec is the program's collection (bpf2go's loadX()); it holds Slot and
	// the maps Slot uses, with its constants set.
	Spec *ebpf.CollectionSpec
	// Slot names the slot function's program in Spec: LR_OFFLOAD(fn)'s
	// fn_slot.
	Slot string
	// Prepare, when set, fills the program's maps (sessions, offsets,
	// limits), by their names in Spec, before any port runs it. A stage may
	// keep them to change them later (Reload); it must not close them.
	Prepare func(maps map[string]*ebpf.Map) error
}

// Needs are the kernel features the slot function needs, as appliance/kernel
// names them: the helpers it calls (its functions included), the kfuncs,
// and the types of the maps it uses. Read from the program itself, so a
// stage whose program starts calling another helper is checked for it
// without a list to keep. The dispatcher's own needs are the port's.
func (p Program) Needs() []kernel.Feature {
	ps := p.Spec.Programs[p.Slot]
	if ps == nil {
		return nil
	}
	fs := kernel.ProgramNeeds(ps.Instructions)
	add := func(f kernel.Feature) {
		if !slices.Contains(fs, f) {
			fs = append(fs, f)
		}
	}
	for _, ins := range ps.Instructions {
		if ins.IsKfuncCall() && ins.Reference() == "bpf_xdp_metadata_rx_timestamp" {
			add(kernel.RxTimestampKfunc)
			add(kernel.DevBound) // a kfunc of a device-bound program only
		}
		if ms := p.Spec.Maps[ins.Reference()]; ms != nil && ms.Type == ebpf.XSKMap {
			add(kernel.XSKMap)
		}
	}
	slices.Sort(fs)
	return fs
}

// Key is the key of a stage's Request among its pipeline's shared state
// (plugins.Setup.Shared): the engine finds the requests there.
const Key = "offload.request"

// Request is a stage's ask to run its Program in the kernel. Every instance of
// the stage gets the same one.
type Request struct {
	Stage   string // the stage's name
	Where   string // file:line of its table, for errors
	Mode    Mode
	Program Program

	mu     sync.Mutex
	maps   map[string]*ebpf.Map // made once, shared by every port
	ports  []string
	reason string // why it runs in Go, with Auto
	closed bool
}

// Ask registers the stage's request: call it from the factory, with the
// Setup's Shared, for every instance. A stage whose mode is Off asks
// nothing, and Ask returns nil.
func Ask(shared func(key string, mk func() any) any, stage, where string, mode Mode, p Program) (*Request, error) {
	if mode == Off {
		return nil, nil
	}
	if p.Spec == nil || p.Slot == "" {
		return nil, fmt.Errorf("offload %s: stage %q gave no program", mode, stage)
	}
	if ps := p.Spec.Programs[p.Slot]; ps == nil || ps.Type != ebpf.XDP {
		return nil, fmt.Errorf("offload %s: stage %q: %q is not an XDP program of its collection", mode, stage, p.Slot)
	}
	r := shared(Key, func() any { return &Request{Stage: stage, Where: where, Mode: mode, Program: p} }).(*Request)
	return r, nil
}

// InKernel reports whether the program runs on the rx ports of the stage's
// pipeline. Valid once the engine is built.
func (r *Request) InKernel() bool {
	if r == nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ports) > 0 && r.reason == ""
}

// Ports are the ports whose dispatcher runs the program.
func (r *Request) Ports() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.ports...)
}

// Reason says why an Auto request runs in Go ("" when it runs in the kernel).
func (r *Request) Reason() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reason
}

// Map is one of the program's maps by its name in Spec, nil before a port
// took the program: for a stage that updates its maps at run time.
func (r *Request) Map(name string) *ebpf.Map {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.maps[name]
}

// Decline records that the request cannot run in the kernel: with Auto the
// stage then runs in Go (Decline returns nil); with XDP it is an error that
// names the stage and its table.
func (r *Request) Decline(why string) error {
	// A reason is one line of a log or an error: never a verifier's log,
	// whose lines go to the debug log and a file (ports/xdp).
	if first, rest, ok := strings.Cut(strings.TrimSpace(why), "\n"); ok {
		why = fmt.Sprintf("%s (and %d more lines)", strings.TrimSpace(first), strings.Count(rest, "\n")+1)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ports = nil
	if r.reason == "" {
		r.reason = why
	}
	if r.Mode == XDP {
		return fmt.Errorf("%s: stage %q: offload = \"xdp\": %s", r.Where, r.Stage, why)
	}
	return nil
}

// RequireKernel declines the request when the kernel lacks a feature its
// program needs (Needs), before anything is loaded: with Auto the stage
// then runs in Go and RequireKernel returns nil; with XDP it is the error,
// naming the feature and the kernel that has it. A probe that cannot tell
// (no CAP_BPF) declines too: the load would fail.
func (r *Request) RequireKernel() error {
	if err := kernel.Require(r.Program.Needs()...); err != nil {
		return r.Decline(err.Error())
	}
	return nil
}

// Attached records that port's dispatcher runs the program: what a Host
// says once its combined program is loaded and attached.
func (r *Request) Attached(port string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ports = append(r.ports, port)
}

// loadMaps makes the program's maps once and runs Prepare.
func (r *Request) loadMaps() (map[string]*ebpf.Map, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, errors.New("offload: request closed")
	}
	if r.maps != nil {
		return r.maps, nil
	}
	// A collection of the maps alone: the loader writes the constants the
	// stage set into its data sections.
	spec := r.Program.Spec.Copy()
	used := r.usedMaps()
	for name := range spec.Programs {
		delete(spec.Programs, name)
	}
	for name := range spec.Maps {
		if !slices.Contains(used, name) {
			delete(spec.Maps, name)
		}
	}
	coll, err := ebpf.NewCollection(spec)
	if err != nil {
		return nil, fmt.Errorf("maps of %s: %w", r.Program.Slot, err)
	}
	maps := coll.Maps
	if r.Program.Prepare != nil {
		if err := r.Program.Prepare(maps); err != nil {
			for _, m := range maps {
				m.Close()
			}
			return nil, fmt.Errorf("prepare %s: %w", r.Program.Slot, err)
		}
	}
	r.maps = maps
	return maps, nil
}

// usedMaps are the maps of Spec the slot's instructions refer to.
func (r *Request) usedMaps() []string {
	var out []string
	for _, ins := range r.Program.Spec.Programs[r.Program.Slot].Instructions {
		ref := ins.Reference()
		if ref == "" || r.Program.Spec.Maps[ref] == nil || slices.Contains(out, ref) {
			continue
		}
		out = append(out, ref)
	}
	sort.Strings(out)
	return out
}

// Link builds one program from the dispatcher's entry program in spec and
// the requests' slot functions: request i's function replaces the function
// lr_slot<i>, what it calls comes along under names of its own, and its maps
// are renamed "s<i>.<name>". It returns the combined collection and the
// requests' maps, made once per request, to load it with
// (ebpf.CollectionOptions.MapReplacements).
func Link(spec *ebpf.CollectionSpec, entry string, reqs []*Request) (*ebpf.CollectionSpec, map[string]*ebpf.Map, error) {
	out := spec.Copy()
	ps := out.Programs[entry]
	if ps == nil {
		return nil, nil, fmt.Errorf("offload: no program %q in the dispatcher", entry)
	}
	repl := map[string]*ebpf.Map{}
	insns := ps.Instructions
	for i, r := range reqs {
		slot := fmt.Sprintf("lr_slot%d", i)
		var err error
		if insns, err = dropFunction(insns, slot); err != nil {
			return nil, nil, err
		}
		maps, err := r.loadMaps()
		if err != nil {
			return nil, nil, fmt.Errorf("stage %q: %w", r.Stage, err)
		}
		prefix := fmt.Sprintf("s%d.", i)
		own := slices.Clone(r.Program.Spec.Programs[r.Program.Slot].Instructions)
		funcs := map[string]bool{}
		for _, ins := range own {
			if sym := ins.Symbol(); sym != "" {
				funcs[sym] = true
			}
		}
		for k, ins := range own {
			switch sym := ins.Symbol(); {
			case k == 0:
				ins = ins.WithSymbol(slot)
			case sym != "":
				ins = ins.WithSymbol(prefix + sym)
			}
			if ref := ins.Reference(); ref != "" {
				switch {
				case ref == own[0].Symbol():
					ins = ins.WithReference(slot)
				case funcs[ref]:
					ins = ins.WithReference(prefix + ref)
				case maps[ref] != nil:
					ins = ins.WithReference(prefix + ref)
				}
			}
			own[k] = ins
		}
		for name, m := range maps {
			ms := r.Program.Spec.Maps[name].Copy()
			ms.Name = prefix + name
			ms.Flags = m.Flags() // the loader made data sections mmapable
			out.Maps[prefix+name] = ms
			repl[prefix+name] = m
		}
		insns = append(insns, own...)
	}
	ps.Instructions = insns
	// Only the entry program: the others would be loaded for nothing.
	for name := range out.Programs {
		if name != entry {
			delete(out.Programs, name)
		}
	}
	return out, repl, nil
}

// dropFunction removes function name's instructions from insns.
func dropFunction(insns asm.Instructions, name string) (asm.Instructions, error) {
	start := -1
	for i, ins := range insns {
		sym := ins.Symbol()
		if sym == "" {
			continue
		}
		if start >= 0 {
			return append(insns[:start:start], insns[i:]...), nil
		}
		if sym == name {
			start = i
		}
	}
	if start < 0 {
		return nil, fmt.Errorf("offload: the dispatcher has no function %s", name)
	}
	return insns[:start:start], nil
}

// Counters sums a per-CPU array map of u64 counters of the program, by
// index: how a stage reads its program's counters.
func (r *Request) Counters(mapName string) ([]uint64, error) {
	m := r.Map(mapName)
	if m == nil {
		return nil, errors.New("offload: not loaded")
	}
	return SumPerCPU(m)
}

// SumPerCPU sums each entry of a per-CPU array map of u64 values.
func SumPerCPU(m *ebpf.Map) ([]uint64, error) {
	if m == nil {
		return nil, errors.New("offload: no such map")
	}
	out := make([]uint64, m.MaxEntries())
	var per []uint64
	for i := range out {
		if err := m.Lookup(uint32(i), &per); err != nil {
			return nil, fmt.Errorf("%s[%d]: %w", m.String(), i, err)
		}
		for _, v := range per {
			out[i] += v
		}
	}
	return out, nil
}

// Close unloads the program's maps: the engine calls it once its ports,
// whose dispatchers hold references of their own, are closed.
func (r *Request) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	for _, m := range r.maps {
		m.Close()
	}
	r.maps, r.ports = nil, nil
	return nil
}

// Host is a port that runs offloads in the kernel ahead of its redirect.
type Host interface {
	// Compose runs the requests, in the chain's order, ahead of the port's
	// redirect, from before the first burst (Link, then Attached). A request
	// the port cannot run it Declines (an error for XDP, Go for Auto);
	// Compose returns the first error.
	Compose(reqs []*Request) error
}

var (
	hostsMu sync.RWMutex
	hosts   = map[string]bool{}
)

// RegisterHostDriver names a driver whose ports are Hosts, for checks that
// open no port (linerate validate). Drivers call it from init.
func RegisterHostDriver(driver string) {
	hostsMu.Lock()
	defer hostsMu.Unlock()
	hosts[driver] = true
}

// HostDriver reports whether driver's ports host offloads.
func HostDriver(driver string) bool {
	hostsMu.RLock()
	defer hostsMu.RUnlock()
	return hosts[driver]
}

// HostDrivers lists them, for messages.
func HostDrivers() []string {
	hostsMu.RLock()
	defer hostsMu.RUnlock()
	var out []string
	for d := range hosts {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}
