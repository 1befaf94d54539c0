// Package config reads linerate's configuration: one TOML file with a schema
// version, decoded strictly. An unknown key, a value of the wrong type or an
// impossible value is an error naming the file, the line and the full key path
// ("lab.toml:31: pipelines[0].stages[1].delya: unknown key (did you mean
// \"delay\"?)"), and every such error in the file is reported at once.
//
// config knows the engine's own keys (engine, control, metrics, pools, ports,
// pipelines). A port's driver keys and a stage's keys are kept as a Table and
// decoded later, as strictly, by the driver or stage that owns them.
//
// The reference for every key is docs/config.md.
package config

import (
	_ "embed"
	"fmt"
	"os"
	"reflect"

	"github.com/BurntSushi/toml"
)

// Version is the schema version this package reads.
const Version = 1

// File is a parsed config file.
type File struct {
	Path      string     `toml:"-"`       // file name used in messages ("<embedded lab>" for the default)
	Version   int        `toml:"version"` // must be 1
	Engine    Engine     `toml:"engine"`
	Control   Control    `toml:"control"`
	Metrics   Metrics    `toml:"metrics"`
	Log       Log        `toml:"log"`
	Pools     []Pool     `toml:"pools"`
	Ports     []Port     `toml:"ports"`
	Pipelines []Pipeline `toml:"pipelines"`

	doc *document // nil for a File built in code
	// warnings are what Warnings says: keys under old names, say;
	// renameErrs are old names set beside their new ones.
	warnings   []string
	renameErrs []string
	// sections are the top-level keys that belong to drivers and plugins
	// ([dpdk], [[routes]] …): see Section.
	sections map[string]toml.Primitive
}

// Engine tunes the lcores and the Go runtime.
type Engine struct {
	Poll        string   `toml:"poll"`         // "busy" | "adaptive" (default "adaptive")
	Pin         *bool    `toml:"pin"`          // pin lcores to CPUs (default true); false for laptops/tests
	ControlCPUs []int    `toml:"control_cpus"` // CPUs for runtime threads; default: all CPUs not used by lcores, or all CPUs if none left
	GOGC        int      `toml:"gogc"`         // default 400; -1 turns the collector off
	MemoryLimit ByteSize `toml:"memory_limit"` // GOMEMLIMIT; default 0 = derive (engine decides)
	TxBuffer    int      `toml:"tx_buffer"`    // per-lcore per-port tx buffer, packets; default 256
	RingSize    int      `toml:"ring_size"`    // handoff ring size, a power of two; default 1024
}

// Control is the gRPC control API's address.
type Control struct {
	// Listen is "unix:/path" or a loopback "127.0.0.1:port"; "" disables the API.
	// Default "unix:/run/linerate/linerate.sock".
	Listen string `toml:"listen"`
}

// Metrics is the Prometheus endpoint.
type Metrics struct {
	Listen string `toml:"listen"` // e.g. "127.0.0.1:9087"; "" = off (default)
}

// Log is how linerate run logs.
type Log struct {
	Format string `toml:"format"` // "text" (default) or "json": the same records
	Level  string `toml:"level"`  // "debug", "info" (default), "warn" or "error"
}

// Pool is a packet buffer pool.
type Pool struct {
	Name     string `toml:"name"`
	Buffers  int    `toml:"buffers"`   // default 16384
	DataRoom int    `toml:"data_room"` // bytes after the headroom; default 2048
	Headroom int    `toml:"headroom"`  // default and minimum 320
	// Private keeps the buffers out of shared memory: an external stage then
	// copies each packet before lending it to its plugin. Default false.
	Private bool `toml:"private"`
	where
}

// Port is a datapath endpoint. Keys other than the common ones stay in Table for
// the driver: port.Decode(&driverConfig).
type Port struct {
	Name     string `toml:"name"`
	Driver   string `toml:"driver"`
	Pool     string `toml:"pool"`      // pool name, default "default"
	RxQueues int    `toml:"rx_queues"` // default 1
	TxQueues int    `toml:"tx_queues"` // default 0 = one per lcore (engine decides)
	MTU      int    `toml:"mtu"`       // default 1500 (68..9216); see MTUSet
	// Routed mode (docs/routing.md): the port's own Ethernet address (default:
	// the driver's), its IPv6 and IPv4 addresses with their on-link prefix
	// lengths, and its interface id (IOAM if_id; default its position + 1).
	MAC       MAC      `toml:"mac"`
	Addresses []IfAddr `toml:"addresses"`
	IfID      uint32   `toml:"ifid"`
	Table

	mtuDefault bool // Defaults filled MTU in
}

// MTUSet reports whether the file sets mtu. A driver with a device of its own
// (afpacket, tap, dpdk) applies a set MTU to the device, and otherwise keeps
// the device's.
func (p Port) MTUSet() bool { return !p.mtuDefault }

// Route is a static route: packets to Prefix go to the next hop Via, out of
// Port. Without Via the prefix is on-link on Port; without Port, Via must be on
// a port's prefix.
type Route struct {
	Prefix Prefix `toml:"prefix"`
	Via    Addr   `toml:"via"`
	Port   string `toml:"port"`
	where
}

// Neighbor is a static neighbour: the Ethernet address of Address on Port,
// never resolved and never evicted.
type Neighbor struct {
	Address Addr   `toml:"address"`
	MAC     MAC    `toml:"mac"`
	Port    string `toml:"port"`
	where
}

// Pipeline is a chain of stages run on a set of lcores.
type Pipeline struct {
	Name string `toml:"name"`
	// CPUs are CPU ids: one lcore on each runs an instance of the chain;
	// default [] = the engine picks.
	CPUs []int `toml:"cpus"`
	// Lcores is the old name of cpus; Defaults moves it there, with a warning.
	Lcores  []int    `toml:"lcores"`
	cpusKey string   // "lcores" when the file says lcores
	Rx      []string `toml:"rx"` // "port" (all queues) or "port:queue"; see ParseRx
	Stages  []Stage  `toml:"stages"`
	where
}

// Stage is one step of a pipeline. Keys other than kind and name stay in Table
// for the stage: stage.Decode(&stageConfig).
type Stage struct {
	Kind string `toml:"kind"` // registered kind: "forward", "ioam.encap" …
	Name string `toml:"name"` // instance name; default "kind#i", i its position in the chain
	Table
}

// Load reads and parses the file at path. Parse documents the result.
func Load(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return Parse(path, data)
}

// Parse decodes data, applies Defaults and runs Validate. name is the file name
// for messages. On failure the error is Errors (every problem found, sorted by
// line) and the File is nil.
func Parse(name string, data []byte) (*File, error) {
	var top map[string]toml.Primitive
	md, err := toml.Decode(string(data), &top)
	if err != nil {
		return nil, syntaxError(name, data, err)
	}
	doc := &document{name: name, md: md, ix: buildIndex(data)}
	// The keys File has no field for are the sections' (or unknown).
	var w struct {
		File
		Table
	}
	d := &decoder{doc: doc}
	d.fields(top, "", reflect.ValueOf(&w).Elem())
	f := &w.File
	f.Path, f.doc = name, doc
	f.Defaults()
	serrs := f.checkSections(d, w.Table.keys)
	errs := d.errs
	if verr := append(f.validate(), serrs...); verr != nil {
		for _, e := range verr {
			// A key that failed to decode holds its zero or default value;
			// saying it is also invalid would only repeat the first error.
			if !d.failed[e.Key] {
				errs = append(errs, e)
			}
		}
	}
	if err := errs.Err(); err != nil {
		return nil, err
	}
	return f, nil
}

//go:embed lab.toml
var lab []byte

// Lab is the embedded lab config: what `linerate config default` prints and what
// `linerate run` uses when given no file. The caller owns the returned copy.
func Lab() []byte { return append([]byte(nil), lab...) }

// LabName is the file name of the embedded lab config in messages.
const LabName = "<embedded lab>"

// LoadLab parses the embedded lab config.
func LoadLab() (*File, error) { return Parse(LabName, lab) }

//go:embed service.toml
var service []byte

// Service is the service's default config, inert (no traffic): what the
// package installs as /etc/linerate/linerate.toml and `linerate config
// service` prints. The caller owns the returned copy.
func Service() []byte { return append([]byte(nil), service...) }

// Pool returns the pool called name.
func (f *File) Pool(name string) (Pool, bool) {
	for _, p := range f.Pools {
		if p.Name == name {
			return p, true
		}
	}
	return Pool{}, false
}

// Port returns the port called name.
func (f *File) Port(name string) (Port, bool) {
	for _, p := range f.Ports {
		if p.Name == name {
			return p, true
		}
	}
	return Port{}, false
}

// Warnings are what the file does that works but should change: keys under
// their old names (docs/compatibility.md). Each names the file, line and key.
func (f *File) Warnings() []string { return f.warnings }

// PinLcores reports engine.pin, true unless set false.
func (e Engine) PinLcores() bool { return e.Pin == nil || *e.Pin }
