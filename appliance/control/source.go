// Package control is the appliance's gRPC control plane: the server that the
// engine's services register on, the Appliance service (status and stats), and
// the client side's address handling.
//
// Addresses take two forms: "unix:/path/to/sock" and "host:port". A TCP
// listener must be on loopback unless TLS is configured.
package control

import (
	"time"

	"github.com/linerate/linerate/appliance/stats"
)

// Source is what the control plane asks the engine. Both methods are called from
// control goroutines, concurrently with the lcores.
type Source interface {
	// Snapshot is the engine's counters now; nil before the engine has any.
	Snapshot() *stats.Snapshot
	Status() Status
}

// Engine states, as Status.State.
const (
	StateStarting = "starting"
	StateRunning  = "running"
	StateDraining = "draining"
	StateStopped  = "stopped"
)

// Status is the engine's shape: what runs where.
type Status struct {
	Version    string
	ConfigPath string
	State      string // one of the State constants
	Started    time.Time
	Lcores     []LcoreInfo
	Ports      []PortInfo
	Pipelines  []PipelineInfo
}

// LcoreInfo is one lcore.
type LcoreInfo struct {
	ID        int // engine index
	CPU       int // -1 when not pinned
	Pipelines []string
}

// PortInfo is one port's configuration.
type PortInfo struct {
	Name, Driver       string
	RxQueues, TxQueues int
	MTU                int
	MAC                string
	TimestampSource    string
	LinkUp             bool
}

// PipelineInfo is one pipeline.
type PipelineInfo struct {
	Name   string
	Lcores []int    // engine indices
	Stages []string // kinds, in order
}
