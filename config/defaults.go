package config

import (
	"errors"
	"strconv"

	"github.com/linerate/linerate/appliance/packet"
)

// DefaultPool is the pool a port uses when it names none. Defaults declares it
// when the file does not.
const DefaultPool = "default"

// Defaults, as docs/config.md lists them.
const (
	defaultPoll          = "adaptive"
	defaultGOGC          = 400
	defaultTxBuffer      = 256
	defaultRingSize      = 1024
	defaultControlListen = "unix:/run/linerate/linerate.sock"
	defaultLogFormat     = "text"
	defaultLogLevel      = "info"
	defaultBuffers       = 16384
	defaultDataRoom      = 2048
	defaultHeadroom      = packet.MinHeadroom
	defaultRxQueues      = 1
	defaultMTU           = 1500
)

// Defaults fills in what the file leaves out. Parse calls it before Validate.
//
//	engine.poll         "adaptive"
//	engine.pin          true
//	engine.gogc         400
//	engine.tx_buffer    256
//	engine.ring_size    1024
//	control.listen      "unix:/run/linerate/linerate.sock"  (listen = "" in the file disables the API)
//	log.format          "text"
//	log.level           "info"
//	pools               a pool "default" is added unless one is declared
//	pools[].buffers     16384
//	pools[].data_room   2048
//	pools[].headroom    320
//	ports[].pool        "default"
//	ports[].rx_queues   1
//	ports[].mtu         1500 (Port.MTUSet says it was left out)
//	ports[].ifid        the port's position in [[ports]] + 1
//	stages[].name       "kind#i", i the stage's position in its pipeline
//
// engine.control_cpus, engine.memory_limit, ports[].tx_queues and
// pipelines[].lcores stay empty or zero: the engine decides them at start.
//
// A key is left out when the file does not have it; a key the file sets, even to
// zero, is kept for Validate to judge (buffers = 0 is an error, not a default).
// In a File built in code, a zero value counts as left out. Defaults is
// idempotent.
func (f *File) Defaults() {
	f.renamed()
	e := &f.Engine
	if f.unset("engine.poll", e.Poll == "") {
		e.Poll = defaultPoll
	}
	if e.Pin == nil {
		t := true
		e.Pin = &t
	}
	if f.unset("engine.gogc", e.GOGC == 0) {
		e.GOGC = defaultGOGC
	}
	if f.unset("engine.tx_buffer", e.TxBuffer == 0) {
		e.TxBuffer = defaultTxBuffer
	}
	if f.unset("engine.ring_size", e.RingSize == 0) {
		e.RingSize = defaultRingSize
	}
	if f.unset("control.listen", f.Control.Listen == "") {
		f.Control.Listen = defaultControlListen
	}
	if f.Log.Format == "" {
		f.Log.Format = defaultLogFormat
	}
	if f.Log.Level == "" {
		f.Log.Level = defaultLogLevel
	}

	for i := range f.Pools {
		p := &f.Pools[i]
		at := "pools[" + strconv.Itoa(i) + "]."
		if f.unset(at+"buffers", p.Buffers == 0) {
			p.Buffers = defaultBuffers
		}
		if f.unset(at+"data_room", p.DataRoom == 0) {
			p.DataRoom = defaultDataRoom
		}
		if f.unset(at+"headroom", p.Headroom == 0) {
			p.Headroom = defaultHeadroom
		}
	}
	if _, ok := f.Pool(DefaultPool); !ok {
		f.Pools = append(f.Pools, Pool{Name: DefaultPool, Buffers: defaultBuffers, DataRoom: defaultDataRoom, Headroom: defaultHeadroom})
	}

	for i := range f.Ports {
		p := &f.Ports[i]
		at := "ports[" + strconv.Itoa(i) + "]."
		if f.unset(at+"pool", p.Pool == "") {
			p.Pool = DefaultPool
		}
		if f.unset(at+"rx_queues", p.RxQueues == 0) {
			p.RxQueues = defaultRxQueues
		}
		if f.unset(at+"mtu", p.MTU == 0) {
			p.MTU, p.mtuDefault = defaultMTU, true
		}
		if f.unset(at+"ifid", p.IfID == 0) {
			p.IfID = uint32(i + 1)
		}
	}

	for i := range f.Pipelines {
		for j := range f.Pipelines[i].Stages {
			s := &f.Pipelines[i].Stages[j]
			at := "pipelines[" + strconv.Itoa(i) + "].stages[" + strconv.Itoa(j) + "]."
			if s.Kind != "" && f.unset(at+"name", s.Name == "") {
				s.Name = s.Kind + "#" + strconv.Itoa(j)
			}
		}
	}
}

// unset reports whether a key counts as left out: zero, and not in the file.
func (f *File) unset(path string, zero bool) bool {
	return zero && (f.doc == nil || !f.doc.ix.has(path))
}

// renamed moves keys set under their old names to the new ones, with a
// warning; both names set is an error (Validate).
func (f *File) renamed() {
	for i := range f.Pipelines {
		p := &f.Pipelines[i]
		if len(p.Lcores) == 0 {
			continue
		}
		at := "pipelines[" + strconv.Itoa(i) + "]"
		if len(p.CPUs) > 0 {
			f.renameErrs = append(f.renameErrs, at+".lcores")
			continue
		}
		p.CPUs, p.Lcores, p.cpusKey = p.Lcores, nil, "lcores"
		f.warn(at+".lcores", "renamed cpus (CPU ids); lcores still works, and will for as long as version = 1")
	}
}

// warn records a warning about key.
func (f *File) warn(key, msg string) {
	line := 0
	if f.doc != nil {
		line = f.doc.ix.line(key)
	}
	f.warnings = append(f.warnings, (&Error{File: f.Path, Line: line, Key: key, Err: errors.New(msg)}).Error())
}
