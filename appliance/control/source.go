// Package control is the appliance's gRPC control plane. It adapts the engine,
// which knows nothing of gRPC: the Appliance service serves the engine's
// Status and Snapshot; Host gives plugins' services (package host) the engine's
// stage instances and lcores, and RegisterServices puts every one of them on
// the server. It also holds the client side's address handling.
//
// Addresses take two forms: "unix:/path/to/sock" and "host:port". A TCP
// listener must be on loopback unless TLS is configured.
package control

import (
	"github.com/linerate/linerate/appliance"
	"github.com/linerate/linerate/appliance/stats"
)

// Source is what the control plane asks the engine; *appliance.Engine is one.
// Both methods are called from control goroutines, concurrently with the
// lcores.
type Source interface {
	// Snapshot is the engine's counters now; nil before the engine has any.
	Snapshot() *stats.Snapshot
	Status() appliance.Status
}

// Reloader is a Source that can read its config file again and apply it, as
// `linerate run` does on SIGHUP. With check, it applies nothing and says what
// would change. The Appliance service's Reload calls it; a Source that is not
// one answers Reload with UNIMPLEMENTED.
type Reloader interface {
	ReloadConfig(check bool) (path string, res appliance.ReloadResult, err error)
}
